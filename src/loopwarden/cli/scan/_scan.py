"""The ``scan`` command: its options, and the optional HTML report it writes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from ...config import LoopDetectionConfig
from ...offline.efficacy import DEFAULT_WITHIN
from ...offline.report._text import json_text, printable
from ...offline.report.table import CLEAN_LIST_LIMIT, SORTS, STDIN, sort_rows
from ...offline.transcripts import FORMATS
from .._common import NudgeWithinOption, check_paths_exist, fail, note, stderr, stdin_copy
from .._exits import write_out
from ._files import PARALLEL_MIN_BYTES, _scan_all
from ._options import (
    _AgentOption,
    _config_or_exit,
    _ConfigOption,
    _one_of,
    _PresetOption,
    _settings,
)
from ._output import _failed, _loud, _print_scan, _print_skipped, _scan_json

if TYPE_CHECKING:
    from ...offline.report.html import HtmlReport


def scan(
    paths: Annotated[list[Path], typer.Argument(
        help="Transcript files or folders (recursive); - reads one transcript from stdin.")],
    config_path: _ConfigOption = None,
    agent: _AgentOption = None,
    preset: _PresetOption = None,
    format: Annotated[
        str, typer.Option("--format", callback=_one_of(["auto", *FORMATS]),
                          help=f"Transcript format: auto (recognised per file) | {' | '.join(FORMATS)}.")
    ] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object (its fields: docs/scan.md).")] = False,
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write a self-contained HTML report here.")
    ] = None,
    tokenizer: Annotated[
        str, typer.Option("--tokenizer",
                          help="HTML report: estimate tokens of tool output inside loops as "
                               "chars (characters / 4) | tiktoken | tiktoken:ENCODING.")
    ] = "chars",
    price_per_mtok: Annotated[
        float | None, typer.Option("--price-per-mtok", min=0.0,
                                   help="HTML report: price per million tokens, to show the "
                                        "loops' estimated cost.")
    ] = None,
    fail_on: Annotated[
        str, typer.Option("--fail-on", callback=_one_of(["never", "warn", "block"]),
                          help="never | warn | block: exit 1 when a transcript has a finding/block.")
    ] = "never",
    only_findings: Annotated[
        bool, typer.Option("--only-findings", help="List only transcripts with findings.")
    ] = False,
    sort: Annotated[
        str, typer.Option("--sort", callback=_one_of(SORTS),
                          help="name (the order scanned: arguments as given, files by path) | "
                               "waste (most calls inside loops first) | calls (longest first).")
    ] = "name",
    list_all: Annotated[
        bool, typer.Option("--all", help="List every clean transcript (without it, more than "
                                         f"{CLEAN_LIST_LIMIT} are one count line).")
    ] = False,
    nudge_within: NudgeWithinOption = DEFAULT_WITHIN,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", min=1,
                                 help="Worker processes (default: the number of CPU cores; "
                                      f"one for less than {PARALLEL_MIN_BYTES // 10**6} MB "
                                      "of transcripts). The output does not depend on it.")
    ] = None,
) -> None:
    """Replay transcripts through the loop guard and show where it would warn or block.

    Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it, 2 usage or input
    errors (a missing path, a bad config, no argument that could be scanned, a transcript that
    does not parse as the forced --format: the other files are still scanned and shown).
    """
    config = _config_or_exit(config_path, agent, preset)
    check_paths_exist([path for path in paths if str(path) != STDIN])
    report = (_html_report(config, tokenizer, price_per_mtok, nudge_within)
              if html is not None else None)
    if html is None and (tokenizer != "chars" or price_per_mtok is not None):
        note("--tokenizer and --price-per-mtok only change the --html report")
    with stdin_copy(paths) as stdin_file:
        outcome = _scan_all(paths, config, format, report, jobs, stdin_file, nudge_within)
    if report is not None and html is not None:
        _write_html(report, html)
    rows = sort_rows([row for row in outcome.rows if row.scan.findings or not only_findings],
                     sort)
    if as_json:
        write_out(json_text(_scan_json(outcome, [row.scan for row in rows], config,
                                       nudge_within), indent=2))
        _print_skipped([skip for skip in outcome.skipped if _loud(skip)], summary=False)
    else:
        _print_scan(paths, outcome, rows, list_all, nudge_within)
    unparsed = sum(skip.error for skip in outcome.skipped)
    if unparsed:
        # An input error outranks findings: a gate cannot vouch for a file it could not read.
        fail(f"{unparsed} transcript(s) did not parse as --format {format}")
    if outcome.nothing_usable:
        fail("nothing to scan: no argument is a transcript or a folder that can be listed")
    if _failed(outcome.scans, fail_on):
        raise typer.Exit(1)


def _write_html(report: HtmlReport, path: Path) -> None:
    try:
        report.write(path)
    except OSError as exc:
        fail(f"cannot write the HTML report to {path}: {exc.strerror or exc}")
    stderr().print(Text(f"wrote {printable(str(path))}"), soft_wrap=True)


def _html_report(config: LoopDetectionConfig, tokenizer: str,
                 price_per_mtok: float | None, nudge_within: int) -> HtmlReport:
    import importlib.util

    # matplotlib (the optional "report" extra) is imported only when a plot is drawn; check
    # now that it is there, so that a long scan does not end in this error.
    if importlib.util.find_spec("matplotlib") is None:
        fail("--html needs matplotlib; install the 'report' extra (pip install '.[report]' in a "
             "clone, pip install 'loopwarden[report]' after a release)")
    from ...offline.report.html import HtmlReport
    from ...offline.report.tokens import TokenizerError, token_estimator

    try:
        tokens = token_estimator(tokenizer)
    except TokenizerError as exc:  # before the scan: a long scan must not end in this error
        fail(str(exc))
    return HtmlReport(settings=_settings(config), tokens=tokens, price_per_mtok=price_per_mtok,
                      background=True, nudge_within=nudge_within)
