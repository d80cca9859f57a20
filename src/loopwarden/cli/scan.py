"""``loopwarden scan`` and ``loopwarden eval``: replay saved transcripts through the guard.

``scan``'s table is laid out by :mod:`loopwarden.report.table`; ``--only-findings`` and
``--sort`` apply to the table and to the ``--json`` file list alike (its totals always count
every scanned transcript), while the clean-file count line (``--all``) is the table's only.

matplotlib is imported only for ``scan --html``, so this module loads without the ``report``
extra.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from ..config import PRESETS, ConfigError, LoopDetectionConfig
from ..evaluation import (
    GROUPINGS,
    EvalReport,
    GroupMetrics,
    LabelError,
    evaluate,
    fraction,
    group_by,
    groups_table,
    held_out_table,
    leave_one_out,
    load_labels,
    markdown_table,
)
from ..report._text import json_text, printable
from ..report.table import (
    CLEAN_LIST_LIMIT,
    SORTS,
    STDIN,
    Row,
    ShownNames,
    print_scan_table,
    sort_rows,
)
from ..scan import FileScan, scanning
from ..transcripts import FORMATS, ReadProblem, iter_transcript_files
from ._common import check_paths_exist, fail, note, resolve_config, stderr

if TYPE_CHECKING:
    from ..report.html import HtmlReport

__all__ = ["register"]

#: Below this many files a progress bar would only flicker.
PROGRESS_MIN_FILES = 10

#: Without ``--jobs``, less transcript data than this is scanned in one process: starting
#: workers would cost more than they save.
PARALLEL_MIN_BYTES = 4_000_000


def _one_of(choices: Sequence[str]) -> Callable[[str | None], str | None]:
    """A Typer callback accepting only ``choices`` (Typer 0.29 has no plain choice type)."""

    def check(value: str | None) -> str | None:
        if value is not None and value not in choices:
            raise typer.BadParameter(f"expected one of: {', '.join(choices)}")
        return value

    return check


_ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", help="OpenClaw config (JSON5) whose tools.loopDetection to use."),
]
_AgentOption = Annotated[
    str | None, typer.Option("--agent", help="Agent id whose override to apply (with --config).")
]
_PresetOption = Annotated[
    str | None,
    typer.Option("--preset", callback=_one_of(sorted(PRESETS)),
                 help=f"Detection preset, overriding the config's: {' | '.join(sorted(PRESETS))}."),
]


def register(app: typer.Typer) -> None:
    """Add ``scan`` and ``eval`` to the ``loopwarden`` app."""
    app.command("scan")(scan)
    app.command("eval")(eval_)


# -- configuration -------------------------------------------------------------------------------


def _config_or_exit(config_path: Path | None, agent: str | None,
                    preset: str | None) -> LoopDetectionConfig:
    if agent is not None and config_path is None:
        fail("--agent needs --config")
    try:
        config = resolve_config(config_path, agent, preset)
    except ConfigError as exc:
        fail(str(exc))
    if config.enabled is False:
        note("the config sets enabled: false, so the rolling detectors report nothing")
    return config


def _settings(config: LoopDetectionConfig) -> dict[str, object]:
    return {
        "preset": config.preset,
        "enabled": config.enabled,
        "warningThreshold": config.warning_threshold,
        "criticalThreshold": config.critical_threshold,
        "globalCircuitBreakerThreshold": config.global_circuit_breaker_threshold,
    }


@contextmanager
def _progress(total: int, label: str) -> Iterator[Callable[[str], None]]:
    """``advance(name)``; a live bar on stderr only for many files on a terminal."""
    console = stderr()
    if total < PROGRESS_MIN_FILES or not console.is_terminal:
        yield lambda name: None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeRemainingColumn(), TextColumn("[dim]{task.fields[name]}"))
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(label, total=total, name="")
        yield lambda name: bar.update(task, advance=1, name=name[-40:])


# -- scan ----------------------------------------------------------------------------------------


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
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (DESIGN §5 shape).")] = False,
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
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", min=1,
                                 help="Worker processes (default: the number of CPU cores; "
                                      f"one for less than {PARALLEL_MIN_BYTES // 10**6} MB "
                                      "of transcripts). The output does not depend on it.")
    ] = None,
) -> None:
    """Replay transcripts through the loop guard and show where it would warn or block.

    Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it, 2 usage or input
    errors (a missing path, a bad config, no argument that could be scanned).
    """
    config = _config_or_exit(config_path, agent, preset)
    check_paths_exist([path for path in paths if str(path) != STDIN])
    report = _html_report(config, tokenizer, price_per_mtok) if html is not None else None
    if html is None and (tokenizer != "chars" or price_per_mtok is not None):
        note("--tokenizer and --price-per-mtok only change the --html report")
    with _stdin_copy(paths) as stdin_file:
        outcome = _scan_all(paths, config, format, report, jobs, stdin_file)
    if report is not None and html is not None:
        _write_html(report, html)
    rows = sort_rows([row for row in outcome.rows if row.scan.findings or not only_findings],
                     sort)
    if as_json:
        typer.echo(json_text(_scan_json(outcome, [row.scan for row in rows], config), indent=2))
        _print_skipped([skip for skip in outcome.skipped if _loud(skip)], summary=False)
    else:
        _print_scan(paths, outcome, rows, list_all)
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
                 price_per_mtok: float | None) -> HtmlReport:
    import importlib.util

    # matplotlib (the optional "report" extra) is imported only when a plot is drawn; check
    # now that it is there, so that a long scan does not end in this error.
    if importlib.util.find_spec("matplotlib") is None:
        fail("--html needs matplotlib; install the 'report' extra (pip install '.[report]' in a "
             "clone, pip install 'loopwarden[report]' after a release)")
    from ..report.html import HtmlReport
    from ..report.tokens import TokenizerError, token_estimator

    try:
        tokens = token_estimator(tokenizer)
    except TokenizerError as exc:  # before the scan: a long scan must not end in this error
        fail(str(exc))
    return HtmlReport(settings=_settings(config), tokens=tokens, price_per_mtok=price_per_mtok,
                      background=True)


@dataclass(frozen=True, slots=True)
class Skipped:
    """A path that was not scanned, and why (from ``scan``'s point of view)."""

    path: str
    reason: str
    explicit: bool  # named on the command line, not found by walking a folder


# Reasons a file found in a folder is passed over without a note of its own: folders hold
# READMEs and configs next to transcripts.
_QUIET_REASONS = frozenset({"not a recognised transcript format", "empty file"})


@dataclass(frozen=True, slots=True)
class ScanOutcome:
    rows: list[Row]  # every scanned transcript, in the order scanned, with its shown name
    skipped: list[Skipped]
    nothing_usable: bool  # no argument was a folder that could be listed or a transcript

    @property
    def scans(self) -> list[FileScan]:
        return [row.scan for row in self.rows]


@contextmanager
def _stdin_copy(paths: Sequence[Path]) -> Iterator[Path | None]:
    """Standard input copied to a temporary file when ``-`` is an argument: the readers and
    the format sniffer take files, and a pipe can be read only once."""
    if not any(str(path) == STDIN for path in paths):
        yield None
        return
    handle, name = tempfile.mkstemp(prefix="loopwarden-stdin-")
    try:
        with os.fdopen(handle, "wb") as copy:
            if sys.stdin is not None:
                shutil.copyfileobj(sys.stdin.buffer, copy)
        yield Path(name)
    finally:
        os.unlink(name)


def _scan_all(paths: Sequence[Path], config: LoopDetectionConfig, format: str,
              report: HtmlReport | None, jobs: int | None = None,
              stdin_file: Path | None = None) -> ScanOutcome:
    """Scan file by file; only each file's summary outlives its scan (bounded memory)."""
    arguments = [stdin_file if stdin_file is not None and str(path) == STDIN else path
                 for path in paths]
    folders = [path for path in arguments if os.path.isdir(path.expanduser())]
    named = {_real(path) for path in arguments if path not in folders}
    skipped: list[Skipped] = []
    listable = [folder for folder in folders if _listable(folder, skipped)]
    walked: list[ReadProblem] = []
    files = _walk([p if p not in folders or p in listable else None for p in arguments],
                  walked.append)
    skipped.extend(Skipped(problem.path, problem.message, False) for problem in walked)
    names = ShownNames([str(path) for path in paths])
    rows: list[Row] = []
    workers = jobs if jobs is not None else _default_jobs([path for path, _ in files])
    with scanning([path for path, _ in files], config, format=format, jobs=workers,
                  keep_traces=report is not None) as results, \
            _progress(len(files), "scanning") as advance:
        for (path, argument), result in zip(files, results, strict=True):
            advance(path.name)
            if stdin_file is not None and path == stdin_file:
                result = _from_stdin(result)
            if result.format is None:
                reason = result.problems[0].message if result.problems else "not read"
                skipped.append(Skipped(result.path, reason, _real(path) in named))
                continue
            if report is not None:
                report.add(result)
            rows.append(Row(names.name(result.path, argument), result.without_trace()))
    return ScanOutcome(rows, skipped, nothing_usable=not listable and not rows)


def _walk(arguments: Sequence[Path | None],
          on_problem: Callable[[ReadProblem], None]) -> list[tuple[Path, int]]:
    """The files to scan, each with the index of the argument it was found under (None: an
    argument not to walk); a file found twice is scanned once, as by iter_transcript_files."""
    seen: set[str] = set()
    files: list[tuple[Path, int]] = []
    for index, argument in enumerate(arguments):
        if argument is None:
            continue
        for path in iter_transcript_files([argument], on_problem=on_problem):
            key = os.path.realpath(path)
            if key not in seen:
                seen.add(key)
                files.append((path, index))
    return files


def _default_jobs(files: Sequence[Path]) -> int:
    """The number of cores, for scans big enough to gain from more than one process."""
    cores = os.cpu_count() or 1
    if cores == 1 or len(files) < 2:
        return 1
    total = 0
    for path in files:
        try:
            total += os.stat(path).st_size
        except OSError:
            continue  # scanning reports it
        if total >= PARALLEL_MIN_BYTES:
            return cores
    return 1


def _from_stdin(result: FileScan) -> FileScan:
    """The scan of standard input's copy, named ``-`` as on the command line."""
    result.path = STDIN
    result.problems = [dataclasses.replace(problem, path=STDIN) for problem in result.problems]
    return result


def _real(path: Path) -> str:
    return os.path.realpath(path.expanduser())  # unlike Path.resolve, never raises (loops)


def _listable(folder: Path, skipped: list[Skipped]) -> bool:
    try:
        with os.scandir(folder.expanduser()):
            return True
    except OSError as exc:
        skipped.append(Skipped(str(folder), f"cannot list folder: {exc.strerror or exc}", True))
        return False


def _failed(scans: Sequence[FileScan], fail_on: str) -> bool:
    if fail_on == "block":
        return any(scan.first("block") is not None for scan in scans)
    return fail_on == "warn" and any(scan.findings for scan in scans)


def _scan_json(outcome: ScanOutcome, listed: Sequence[FileScan],
               config: LoopDetectionConfig) -> dict[str, Any]:
    """``listed`` are the files to show (``--only-findings``, ``--sort``); totals count all."""
    skipped = outcome.skipped
    return {
        "files": [scan.to_json() for scan in listed],
        "skipped": [skip.path for skip in skipped],
        "skip_reasons": [{"path": skip.path, "reason": skip.reason, "explicit": skip.explicit}
                         for skip in skipped],
        "config": _settings(config),
        "totals": _totals(outcome.scans),
    }


def _totals(scans: Sequence[FileScan]) -> dict[str, int]:
    return {
        "files": len(scans),
        "calls": sum(scan.calls for scan in scans),
        "files_with_findings": sum(1 for scan in scans if scan.findings),
        "files_blocked": sum(1 for scan in scans if scan.first("block") is not None),
        "findings": sum(len(scan.findings) for scan in scans),
        "loop_calls": sum(scan.loop_calls for scan in scans),
        "loop_chars": sum(scan.loop_chars for scan in scans),
    }


def _print_scan(paths: Sequence[Path], outcome: ScanOutcome, rows: Sequence[Row],
                list_all: bool) -> None:
    console = Console()
    title = "loopwarden scan: " + ", ".join(str(path) for path in paths)
    print_scan_table(console, title, rows, list_clean=list_all)
    totals = _totals(outcome.scans)
    console.print(Text(
        f"{totals['files']} transcripts, {totals['calls']} calls: "
        f"{totals['files_with_findings']} with findings ({totals['files_blocked']} blocked); "
        f"{totals['loop_calls']} calls and {totals['loop_chars']:,} characters of tool output "
        "inside loops."))
    _print_problems(outcome.scans, outcome.skipped)


def _print_problems(scans: Sequence[FileScan], skipped: Sequence[Skipped]) -> None:
    problems = [problem for scan in scans for problem in scan.problems]
    for problem in problems[:10]:
        note(str(problem))
    if len(problems) > 10:
        note(f"{len(problems) - 10} more read problems (see --json)")
    _print_skipped(skipped)


def _loud(skip: Skipped) -> bool:
    """Worth a note of its own: named on the command line, or a special or unreadable file."""
    return skip.explicit or skip.reason not in _QUIET_REASONS


def _print_skipped(skipped: Sequence[Skipped], *, summary: bool = True) -> None:
    """One note per skipped path that deserves one; a count for the ordinary non-transcripts."""
    loud = [skip for skip in skipped if _loud(skip)]
    for skip in loud[:10]:
        note(f"skipped {skip.path}: {skip.reason}")
    if len(loud) > 10:
        note(f"skipped {len(loud) - 10} more files" + (" (see --json)" if summary else ""))
    quiet = len(skipped) - len(loud)
    if quiet and summary:
        note(f"skipped {quiet} files that are not recognised transcripts")


# -- eval ----------------------------------------------------------------------------------------


def eval_(
    labels: Annotated[Path, typer.Argument(help="Labels JSON (the corpus' labels-dev.json format).")],
    root: Annotated[
        Path | None,
        typer.Option("--root", help="Folder the labels' file paths are relative to "
                                    "(default: the labels file's folder)."),
    ] = None,
    config_path: _ConfigOption = None,
    agent: _AgentOption = None,
    preset: _PresetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the metrics as one Markdown table.")
    ] = False,
    by: Annotated[
        str | None,
        typer.Option("--by", callback=_one_of(sorted(GROUPINGS)),
                     help="Also report per source and per repository, and hold each source "
                          "(or repository) out against the others: source | repository."),
    ] = None,
) -> None:
    """Replay labelled transcripts and report recall and false alarms."""
    config = _config_or_exit(config_path, agent, preset)
    try:
        entries = load_labels(labels)
    except LabelError as exc:
        fail(str(exc))
    base = root if root is not None else labels.parent
    with _progress(len(entries), "evaluating") as advance:
        report = evaluate(entries, base, config, on_scanned=lambda label, _: advance(label.file))
    if not report.outcomes:
        fail(f"none of the {len(entries)} labelled files was found under {base}")
    if as_json:
        data = {"labels": str(labels), "root": str(base), "config": _settings(config),
                **report.to_json()}
        if by is not None:
            data.update(_grouped_json(report, by))
        typer.echo(json_text(data, indent=2))
    elif markdown:
        typer.echo(markdown_table(report.summary))
        if by is not None:
            for name in ("source", "repository"):
                typer.echo("\n" + groups_table(group_by(report.outcomes, name), name))
            typer.echo("\n" + held_out_table(leave_one_out(report.outcomes, by), by))
    else:
        _print_eval(report, config)
        if by is not None:
            _print_grouped(report, by)


def _grouped_json(report: EvalReport, by: str) -> dict[str, Any]:
    return {
        "by_repository": {k: v.to_json() for k, v in group_by(report.outcomes, "repository").items()},
        "leave_one_out": {"by": by, "groups": [h.to_json() for h in leave_one_out(report.outcomes, by)]},
    }


def _print_grouped(report: EvalReport, by: str) -> None:
    console = Console()
    console.print(_metrics_table("per repository",
                                 list(group_by(report.outcomes, "repository").items())))
    table = Table(title=f"leave one {by} out (against the rates of the others)",
                  title_justify="left")
    for name in (by, "loops", "timely", "expected", "loops lost", "healthy", "false warnings",
                 "expected", "false blocks"):
        table.add_column(name, justify="left" if name == by else "right")
    for h in leave_one_out(report.outcomes, by):
        table.add_row(h.group, str(h.loops), str(h.timely), f"{h.expected_timely:g}",
                      f"{h.loops_lost:g}", str(h.healthy), str(h.false_warnings),
                      f"{h.expected_false_warnings:g}", str(h.false_blocks),
                      style="red" if h.loops_lost > 1 else None)
    console.print(table)


def _metrics_table(title: str, groups: Sequence[tuple[str, GroupMetrics]]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("group")
    for name in ("transcripts", "recall", "timely recall", "block recall", "false warnings",
                 "false blocks"):
        table.add_column(name, justify="right")
    for name, m in groups:
        table.add_row(Text(printable(name)), str(m.transcripts), fraction(m.detected, m.loops),
                      fraction(m.timely, m.loops), fraction(m.blocked, m.loops),
                      fraction(m.false_warnings, m.healthy), fraction(m.false_blocks, m.healthy))
    return table


def _print_eval(report: EvalReport, config: LoopDetectionConfig) -> None:
    console = Console()
    summary = report.summary
    by_source = [("all", summary.overall), *sorted(summary.by_source.items()),
                 ("hard negatives", summary.hard_negatives)]
    console.print(_metrics_table(f"eval (preset {config.preset}): per source", by_source))
    console.print(_metrics_table("per loop type", sorted(summary.by_type.items())))
    console.print(_loops_table(report))
    alarms = [o for o in report.outcomes if o.false_warning]
    for outcome in alarms:
        level = "block" if outcome.false_block else "warning"
        console.print(Text(printable(f"false {level}: {outcome.file} (first at "
                                     f"#{outcome.first_finding}, {', '.join(outcome.detectors)})")),
                      soft_wrap=True)
    if report.missing:
        note(f"{len(report.missing)} labelled files not found, left out: "
              + ", ".join(report.missing[:5]))


def _loops_table(report: EvalReport) -> Table:
    table = Table(title="labelled loops", title_justify="left")
    for name in ("transcript", "type", "loop", "warn by", "first finding in loop",
                 "detectors", "verdict"):
        table.add_column(name, overflow="fold")
    for o in (o for o in report.outcomes if o.loop):
        verdict = "timely" if o.timely else ("late" if o.detected else "missed")
        table.add_row(Text(printable(o.file)), Text(printable(o.type or "")), f"{o.loop_start}–{o.loop_end}", str(o.warn_by),
                      "" if o.first_in_loop is None else str(o.first_in_loop),
                      ", ".join(o.detectors), verdict,
                      style={"timely": "green", "late": "yellow"}.get(verdict, "red"))
    return table

