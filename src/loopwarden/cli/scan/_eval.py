"""The ``eval`` command: labelled transcripts replayed, and recall and false alarms reported."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ...config import LoopDetectionConfig
from ...offline.evaluation import (
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
from ...offline.report._text import json_text, printable
from .._common import fail, note
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
