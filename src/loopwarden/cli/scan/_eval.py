"""The ``eval`` command: labelled transcripts replayed, and recall and false alarms reported."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.cells import cell_len
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from ...config import LoopDetectionConfig
from ...offline.evaluation import (
    GROUPINGS,
    EvalReport,
    GroupMetrics,
    Label,
    LabelError,
    evaluate,
    fraction,
    group_by,
    groups_table,
    held_out_table,
    leave_one_out,
    load_labels,
    markdown_table,
    parse_labels,
)
from ...offline.report._text import json_text, printable
from ...offline.report.table import fit_widths, one_line, unique_ellipses, wrap_names
from .._common import STDIN, fail, note, read_stdin
from .._exits import write_out
from ._options import (
    _AgentOption,
    _config_or_exit,
    _ConfigOption,
    _one_of,
    _PresetOption,
    _progress,
    _settings,
)


def eval_(
    labels: Annotated[Path, typer.Argument(
        help="Labels JSON (the corpus' labels-dev.json format); - reads it from stdin.")],
    root: Annotated[
        Path | None,
        typer.Option("--root", help="Folder the labels' file paths are relative to "
                                    "(default: the labels file's folder; with -, the "
                                    "current folder)."),
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
        entries = _stdin_labels() if str(labels) == STDIN else load_labels(labels)
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
        write_out(json_text(data, indent=2))
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


def _stdin_labels() -> list[Label]:
    try:
        data = json.loads(read_stdin())
    except json.JSONDecodeError as exc:
        raise LabelError(f"<stdin>: invalid JSON ({exc})") from None
    return parse_labels(data, source="<stdin>")


def _grouped_json(report: EvalReport, by: str) -> dict[str, Any]:
    return {
        "by_repository": {k: v.to_json() for k, v in group_by(report.outcomes, "repository").items()},
        "leave_one_out": {"by": by, "groups": [h.to_json() for h in leave_one_out(report.outcomes, by)]},
    }


def _print_grouped(report: EvalReport, by: str) -> None:
    console = Console()
    console.print(_metrics_table("per repository",
                                 list(group_by(report.outcomes, "repository").items()),
                                 console.width))
    held = leave_one_out(report.outcomes, by)
    rows = [[printable(h.group), str(h.loops), str(h.timely), f"{h.expected_timely:g}",
             f"{h.loops_lost:g}", str(h.healthy), str(h.false_warnings),
             f"{h.expected_false_warnings:g}", str(h.false_blocks)] for h in held]
    headers: list[tuple[str, JustifyMethod]] = [
        (by, "left"), ("loops", "right"), ("timely", "right"), ("expected", "right"),
        ("loops\nlost", "right"), ("healthy", "right"), ("false\nwarnings", "right"),
        ("expected", "right"), ("false\nblocks", "right")]
    table, widths = _fitted(f"leave one {by} out (against the rates of the others)", headers,
                            rows, console.width)
    names = unique_ellipses([row[0] for row in rows], widths[0])
    for h, row, name in zip(held, rows, names, strict=True):
        table.add_row(Text(name), *row[1:], style="red" if h.loops_lost > 1 else None)
    console.print(table)


def _metrics_table(title: str, groups: Sequence[tuple[str, GroupMetrics]],
                   width: int) -> Table:
    rows = [[printable(name), str(m.transcripts), fraction(m.detected, m.loops),
             fraction(m.timely, m.loops), fraction(m.blocked, m.loops),
             fraction(m.false_warnings, m.healthy), fraction(m.false_blocks, m.healthy)]
            for name, m in groups]
    headers: list[tuple[str, JustifyMethod]] = [
        ("group", "left"), ("files", "right"), ("recall", "right"),
        ("timely\nrecall", "right"), ("block\nrecall", "right"),
        ("false\nwarnings", "right"), ("false\nblocks", "right")]
    table, widths = _fitted(title, headers, rows, width)
    for row, name in zip(rows, unique_ellipses([row[0] for row in rows], widths[0]),
                         strict=True):
        table.add_row(Text(name), *row[1:])
    return table


def _fitted(title: str, headers: Sequence[tuple[str, JustifyMethod]],
            rows: Sequence[Sequence[str]], width: int) -> tuple[Table, list[int]]:
    """A table of ``width`` cells at most whose first column (names) gives way; no cell
    wraps, so a name loses its middle (never folded character by character)."""
    natural = [max([cell_len(line) for line in header.split("\n")]
                   + [max((cell_len(line) for line in row[i].split("\n")), default=0)
                      for row in rows])
               for i, (header, _) in enumerate(headers)]
    gap = 2 if sum(natural) + 2 * (len(natural) - 1) <= width else 1
    widths = fit_widths(natural, width - gap * (len(natural) - 1), [(0, 12), (0, 1)])
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False, padding=(0, gap - 1), collapse_padding=True)
    for (header, justify), cells in zip(headers, widths, strict=True):
        table.add_column(header, justify=justify, width=cells, no_wrap=True, overflow="crop")
    return table, widths


def _print_eval(report: EvalReport, config: LoopDetectionConfig) -> None:
    console = Console()
    summary = report.summary
    by_source = [("all", summary.overall), *sorted(summary.by_source.items()),
                 ("hard negatives", summary.hard_negatives)]
    width = console.width
    console.print(_metrics_table(f"eval (preset {config.preset}): per source", by_source, width))
    console.print(_metrics_table("per loop type", sorted(summary.by_type.items()), width))
    console.print(_loops_table(report, width))
    alarms = [o for o in report.outcomes if o.false_warning]
    for outcome in alarms:
        level = "block" if outcome.false_block else "warning"
        console.print(Text(printable(f"false {level}: {outcome.file} (first at "
                                     f"#{_number(outcome.first_finding)}, "
                                     f"{', '.join(outcome.detectors)})")),
                      soft_wrap=True)
    if report.missing:
        note(f"{len(report.missing)} labelled files not found, left out: "
              + ", ".join(report.missing[:5]))


def _number(index: int | None) -> str:
    """A 0-based call index as the call's number, counted from 1 (``""`` for none)."""
    return "" if index is None else str(index + 1)


def _loops_table(report: EvalReport, width: int) -> Table:
    """The labelled loops: each transcript on one line (never wrapped), its loop type and
    detectors on the indented lines under it; call numbers counted from 1."""
    loops = [o for o in report.outcomes if o.loop]
    verdicts = ["timely" if o.timely else ("late" if o.detected else "missed") for o in loops]
    rows = [[one_line(o.file),
             f"{_number(o.loop_start)}–{_number(o.loop_end)}", _number(o.warn_by),
             _number(o.first_in_loop), verdict] for o, verdict in zip(loops, verdicts, strict=True)]
    headers: list[tuple[str, JustifyMethod]] = [
        ("transcript\n  type: detectors", "left"), ("loop\ncalls", "right"),
        ("warn\nby", "right"), ("first\nin loop", "right"), ("verdict", "left")]
    table, widths = _fitted("labelled loops (calls numbered from 1)", headers, rows, width)
    names = unique_ellipses([row[0] for row in rows], widths[0])
    for o, row, name, verdict in zip(loops, rows, names, verdicts, strict=True):
        found = " ".join(o.detectors) or "(nothing found)"
        under = wrap_names(f"{o.type or '?'}: {found}", max(widths[0] - 2, 1))
        cell = Text(name)
        cell.append("".join(f"\n  {line}" for line in under.split("\n")), style="dim")
        table.add_row(cell, *row[1:],
                      style={"timely": "green", "late": "yellow"}.get(verdict, "red"))
    return table
