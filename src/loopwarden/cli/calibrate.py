"""``loopwarden calibrate``: thresholds from transcripts of good runs, with a false-alarm bound."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from ..config import PRESETS, ConfigError
from ..offline.calibration import CalibrationError, calibrate, score_run
from ..offline.report._text import printable
from ..offline.transcripts import ReadProblem, iter_transcript_files, read_transcript
from ._common import STDIN, check_paths_exist, resolve_config, stdin_copy
from ._exits import write_out


def register(app: typer.Typer) -> None:
    """Add the ``calibrate`` command to the ``loopwarden`` app."""
    app.command("calibrate")(calibrate_command)


#: How many times the runs are measured again with a longer history before the bound is
#: reported for the shorter one (each pass can only raise the thresholds).
_REMEASURES = 3


def calibrate_command(
    paths: Annotated[list[Path], typer.Argument(
        help="Transcripts (files or folders) of GOOD runs; - reads one transcript from stdin.")],
    alpha: Annotated[float, typer.Option(help="Largest share of good runs that may get a warning.")] = 0.05,
    block_alpha: Annotated[float | None, typer.Option(
        "--block-alpha", help="Largest share of good runs that may get a block (default alpha/5).")] = None,
    config_path: Annotated[Path | None, typer.Option(
        "--config", help="OpenClaw config whose tools.loopDetection is the starting point.")] = None,
    agent: Annotated[str | None, typer.Option(help="Agent override to apply (with --config).")] = None,
    preset: Annotated[str | None, typer.Option(
        help=f"Preset whose normalisation to measure with: {' | '.join(sorted(PRESETS))}.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Choose thresholds by split-conformal calibration on good runs (one transcript = one run)."""
    err = Console(stderr=True)
    if preset is not None and preset not in PRESETS:
        raise typer.BadParameter(f"expected one of: {', '.join(sorted(PRESETS))}", param_hint="--preset")
    try:
        base = resolve_config(config_path, agent, preset)
    except ConfigError as exc:
        err.print(Text.assemble(("error:", "red"), f" {printable(str(exc))}"), soft_wrap=True)
        raise typer.Exit(2) from None  # an input error, not a finding
    check_paths_exist(paths)
    problems: list[ReadProblem] = []
    runs = []
    with stdin_copy(paths) as stdin_file:
        files = [stdin_file if stdin_file is not None and str(p) == STDIN else p for p in paths]
        for path in iter_transcript_files(files, on_problem=problems.append):
            calls = list(read_transcript(path, on_problem=problems.append))
            if calls:
                runs.append(calls)
    scores = [score_run(calls, base) for calls in runs]
    for problem in problems[:20]:
        where = f"{problem.path}:{problem.line or '-'}: {problem.message}"
        err.print(Text.assemble(("skipped", "yellow"), f" {printable(where)}"))
    try:
        result = calibrate(scores, alpha=alpha, block_alpha=block_alpha, base=base)
        for _ in range(_REMEASURES):
            if result.history_size <= result.measured_history_size:
                break
            # The good runs filled the history: thresholds past it could never fire. Measure
            # again with a history that holds them, so the bound is about the config written.
            base = base.with_overrides(historySize=result.history_size)
            scores = [score_run(calls, base) for calls in runs]
            result = calibrate(scores, alpha=alpha, block_alpha=block_alpha, base=base)
    except CalibrationError as exc:
        err.print(Text.assemble(("error:", "red"), f" {exc}"), soft_wrap=True)
        raise typer.Exit(2) from None
    block = {"tools": {"loopDetection": {**result.config_block(), "preset": base.preset}}}
    if as_json:
        write_out(json.dumps({"runs": result.runs, "alpha": result.alpha,
                               "blockAlpha": result.block_alpha, "budgets": result.budgets,
                               "bounded": list(result.bounded), "note": result.note,
                               "config": block, "guarantee": result.guarantee}, indent=2))
        return
    out = Console()
    out.print(f"Calibrated on {result.runs} good runs.", highlight=False)
    out.print(json.dumps(block, indent=2), highlight=False)
    out.print(result.guarantee, highlight=False)
