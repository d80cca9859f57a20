"""``loopwarden runs``: the runs recorded in a ``SQLiteStore`` file and their loop events.

The tables fit the console (80 columns when piped): long session and run ids lose their middle
(``--json`` has them whole), and each event's message goes on the lines under its row.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.cells import cell_len
from rich.console import Console, JustifyMethod
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..base.paths import default_db_path
from ..guard.events import LoopEvent
from ..guard.stores.base import StoreError
from ..guard.stores.sqlite import SCHEMA_VERSION, RunSummary, SQLiteStore
from ..offline.efficacy import DEFAULT_WITHIN, NudgeOutcome, efficacy, live_outcomes
from ..offline.report.table import fit_widths, middle_ellipsis, one_line, wrap_names
from ._common import NudgeWithinOption
from ._exits import write_out


def register(app: typer.Typer) -> None:
    """Add the ``runs`` command to the ``loopwarden`` app."""
    app.command("runs")(runs)


def runs(
    db: Annotated[
        Path | None,
        typer.Option("--db", help="SQLiteStore file (default: $LOOPWARDEN_DB or "
                     "~/.loopwarden/loopwarden.db)."),
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", help="Only runs of this session.")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, help="Show the newest N runs.")
    ] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    nudge_within: NudgeWithinOption = DEFAULT_WITHIN,
) -> None:
    """List recorded runs and their loop events (warnings, blocks, aborts).

    The file is only read: opened read-only, never created, migrated or switched to WAL.
    """
    path = db if db is not None else default_db_path()
    problem = _not_a_run_record(path)
    if problem:
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)
    try:
        with _ReadOnlyStore(path) as store:
            summaries = store.runs(session, limit=limit)
            events = _events_by_run(store, summaries)
            nudges = _nudges_by_run(store, events, nudge_within)
    except StoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        write_out(json.dumps(_as_json(path, summaries, events, nudges, nudge_within), indent=2))
    else:
        _print_tables(path, summaries, events)
        _print_efficacy(nudges, nudge_within)


class _ReadOnlyStore(SQLiteStore):
    """A SQLiteStore whose connection is read-only and skips the schema set-up (WAL switch,
    indexes, ``user_version``): listing must leave the file byte for byte as it was."""

    def _open(self) -> sqlite3.Connection:
        return sqlite3.connect(_read_only_uri(self.path), uri=True, timeout=self.timeout,
                               isolation_level=None, check_same_thread=False)


def _read_only_uri(path: Path) -> str:
    return f"{path.resolve().as_uri()}?mode=ro"


RunKey = tuple[str, str | None]

_SQLITE_MAGIC = b"SQLite format 3\x00"
# Columns `runs` reads from the events table; a table lacking one is someone else's.
_EVENT_COLUMNS = frozenset({"id", "session", "run", "agent", "call_id", "tool", "level",
                            "action", "detector", "count", "message", "paired_tool",
                            "timestamp", "type", "extra"})


def _not_a_run_record(path: Path) -> str | None:
    """Why ``path`` is not a loopwarden database, checked read-only: opening it as a store
    would create the file, or add loopwarden's tables to someone else's database."""
    if not path.is_file():
        return f"no run record at {path} (use --db or set $LOOPWARDEN_DB)"
    try:
        with path.open("rb") as fh:
            header = fh.read(100)
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    if not header.startswith(_SQLITE_MAGIC):
        return f"{path} is not a loopwarden database (not an SQLite file)"
    version = int.from_bytes(header[60:64], "big")  # PRAGMA user_version, as stored
    if version != SCHEMA_VERSION and not Path(f"{path}-wal").exists():
        # Without a write-ahead log the header is the whole truth: refuse without even
        # connecting (a reader of a WAL-mode file would leave -wal/-shm files behind).
        return _wrong_version(path, version)
    try:
        conn = sqlite3.connect(_read_only_uri(path), uri=True)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {row[0] for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            columns = {row[1] for row in conn.execute("PRAGMA table_info(events)")}
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return f"cannot read {path}: {exc}"
    if not {"events", "sessions"} <= tables or not columns >= _EVENT_COLUMNS:
        return f"{path} is not a loopwarden database (no loopwarden events table)"
    if version != SCHEMA_VERSION:
        return _wrong_version(path, version)
    return None


def _wrong_version(path: Path, version: int) -> str:
    newer = " (a newer loopwarden's?)" if version > SCHEMA_VERSION else ""
    return (f"{path} is not a loopwarden database{newer}: its user_version is {version}, "
            f"loopwarden's is {SCHEMA_VERSION}")


def _events_by_run(
    store: SQLiteStore, summaries: list[RunSummary]
) -> dict[RunKey, list[LoopEvent]]:
    grouped: dict[RunKey, list[LoopEvent]] = {(s.session, s.run): [] for s in summaries}
    # One query per session: a ``None`` run cannot be selected by equality in SQL.
    for name in dict.fromkeys(s.session for s in summaries):
        for event in store.events(session=name):
            bucket = grouped.get((event.session, event.run))
            if bucket is not None:
                bucket.append(event)
    return grouped


def _nudges_by_run(store: SQLiteStore, events: dict[RunKey, list[LoopEvent]],
                   within: int) -> dict[RunKey, list[NudgeOutcome]]:
    """Did each run's warnings, blocks and asks work, judged on its session's call history."""
    nudges: dict[RunKey, list[NudgeOutcome]] = {}
    for name in dict.fromkeys(session for session, _ in events):
        state = store.load(name)
        history = state.history if state is not None else []
        for key in [key for key in events if key[0] == name]:
            nudges[key] = live_outcomes(events[key], history, within)
    return nudges


def _as_json(
    path: Path, summaries: list[RunSummary], events: dict[RunKey, list[LoopEvent]],
    nudges: dict[RunKey, list[NudgeOutcome]], within: int,
) -> dict[str, Any]:
    return {
        "db": str(path),
        "runs": [
            {**s.to_dict(), "loop_events": [e.to_dict() for e in events[(s.session, s.run)]],
             "nudges": [n.to_json() for n in nudges[(s.session, s.run)]]}
            for s in summaries
        ],
        "nudge_efficacy": efficacy([n for run in nudges.values() for n in run], within),
    }


_EFFICACY_TABLE: list[tuple[str, JustifyMethod]] = [
    ("stage / detector", "left"), ("nudges", "right"), ("heeded", "right"),
    ("ignored", "right"), ("ended", "right"), ("unknown", "right"), ("rate", "right")]


def _print_efficacy(nudges: dict[RunKey, list[NudgeOutcome]], within: int) -> None:
    """Did the nudges work: heeded / ignored per stage and per detector, over the runs shown."""
    figures = efficacy([n for run in nudges.values() for n in run], within)
    if not figures["all"]["nudges"]:
        return
    console = Console()
    console.print()
    _print_title(console, f"Nudge efficacy: did the model change course within {within} "
                          "calls of its run?")
    cells = [(name, figures["by_stage"][name]) for name in figures["by_stage"]]
    cells += [(name, figures["by_detector"][name]) for name in figures["by_detector"]]
    rows = [[one_line(name), *(str(cell[key]) for key in
                               ("nudges", "heeded", "ignored", "ended", "unknown")),
             "-" if cell["rate"] is None else f"{cell['rate']:.0%}"] for name, cell in cells]
    natural = _natural(_EFFICACY_TABLE, rows)
    gap = _gap(natural, console.width)
    widths = fit_widths(natural, console.width - gap * (len(_EFFICACY_TABLE) - 1),
                        [(0, 12), (0, 1)])
    table = _table(_EFFICACY_TABLE, widths, gap)
    for row in rows:
        table.add_row(*(Text(middle_ellipsis(cell, widths[column]))
                        for column, cell in enumerate(row)))
    console.print(table)


def _print_tables(
    path: Path, summaries: list[RunSummary], events: dict[RunKey, list[LoopEvent]]
) -> None:
    console = Console()
    if not summaries:
        console.print(Text(f"No loop events recorded in {one_line(str(path))}."))
        return
    _print_title(console, f"Runs in {path}")
    console.print(_runs_table(summaries, events, console.width))
    for summary in summaries:
        console.print()
        _print_events(console, summary, events[(summary.session, summary.run)])


def _print_title(console: Console, title: str) -> None:
    console.print(Text(middle_ellipsis(one_line(title), console.width), style="bold"),
                  no_wrap=True, overflow="crop")


def _gap(natural: list[int], width: int) -> int:
    """Cells between two columns: 2, or 1 when the columns do not fit at their widths."""
    return 2 if sum(natural) + 2 * (len(natural) - 1) <= width else 1


def _table(headers: list[tuple[str, JustifyMethod]], widths: list[int], gap: int) -> Table:
    """A borderless table of ``(header, justify)`` columns at exactly ``widths``."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  padding=(0, gap - 1), collapse_padding=True)
    for (header, justify), width in zip(headers, widths, strict=True):
        table.add_column(header, justify=justify, width=width, no_wrap=True, overflow="crop")
    return table


def _natural(headers: list[tuple[str, JustifyMethod]], rows: list[list[str]]) -> list[int]:
    return [max([cell_len(header)] + [cell_len(row[column]) for row in rows])
            for column, (header, _) in enumerate(headers)]


_RUN_TABLE: list[tuple[str, JustifyMethod]] = [
    ("session", "left"), ("run", "left"), ("agent", "left"), ("started", "left"),
    ("warn", "right"), ("block", "right"), ("abort", "right"), ("detectors", "left"),
    ("ask", "right"), ("stop", "left")]
_SESSION, _RUN, _AGENT, _DETECTORS = 0, 1, 2, 7


def _runs_table(summaries: list[RunSummary], events: dict[RunKey, list[LoopEvent]],
                width: int) -> Table:
    rows = [[one_line(s.session), one_line(s.run or "-"), one_line(", ".join(s.agents) or "-"),
             _time(s.first, "%Y-%m-%d %H:%M"), str(s.warnings), str(s.blocks), str(s.aborts),
             one_line(" ".join(s.detectors)), _asked(s), _stopped(events[(s.session, s.run)])]
            for s in summaries]
    headers = list(_RUN_TABLE)
    # Columns only some runs fill: none stopped, none asked a human: no column for it.
    for column in (len(headers) - 1, len(headers) - 2):
        if not any(row[column] for row in rows):
            del headers[column]
            for row in rows:
                del row[column]
    natural = _natural(headers, rows)
    gap = _gap(natural, width)
    room = width - gap * (len(headers) - 1)
    # Detectors wrap (one name a line, then at underscores); ids and agents lose their middle.
    widths = fit_widths(natural, room, [
        (_DETECTORS, 15), (_RUN, 12), (_AGENT, 11), (_SESSION, 12),
        (_RUN, 8), (_SESSION, 8), (_DETECTORS, 11), (_AGENT, 6),
        (_DETECTORS, 1), (_RUN, 1), (_AGENT, 1), (_SESSION, 1)])
    table = _table(headers, widths, gap)
    for row in rows:
        cells = [middle_ellipsis(cell, widths[column]) for column, cell in enumerate(row)]
        cells[_DETECTORS] = wrap_names(row[_DETECTORS], widths[_DETECTORS])
        table.add_row(*(Text(cell) for cell in cells))
    return table


_EVENT_TABLE: list[tuple[str, JustifyMethod]] = [
    ("time", "left"), ("action", "left"), ("count", "right"), ("detector", "left"),
    ("tool", "left")]
_EVENT_DETECTOR, _TOOL = 3, 4


def _stopped(events: list[LoopEvent]) -> str:
    """``yes`` for a run that reached the terminal stop (a second critical loop ended it) and
    was not let go on by a human's "continue" since (``exit_behavior="ask"``)."""
    stopped = False
    for event in events:
        if event.action == "continue":
            stopped = False
        elif event.terminal:
            stopped = True
    return "yes" if stopped else ""


def _asked(summary: RunSummary) -> str:
    """``asks/continued`` for a run whose stops were put before a human, else empty."""
    return f"{summary.asks}/{summary.grants}" if summary.asks else ""


def _print_events(console: Console, summary: RunSummary, events: list[LoopEvent]) -> None:
    """The run's events as a table whose rows each carry their message on the lines below."""
    _print_title(console, f"session {summary.session} run {summary.run or '-'}: "
                          f"{len(events)} loop events")
    # The terminal stop is a block that ended the run: shown as "stop" (as is a human's "stop").
    rows = [[_time(e.timestamp, "%H:%M:%S"), "stop" if e.terminal else one_line(e.action),
             str(e.count),
             one_line(e.detector), one_line(e.tool)] for e in events]
    natural = _natural(_EVENT_TABLE, rows)
    gap = _gap(natural, console.width)
    room = console.width - gap * (len(_EVENT_TABLE) - 1)
    widths = fit_widths(natural, room,
                        [(_TOOL, 12), (_EVENT_DETECTOR, 12), (_TOOL, 1), (_EVENT_DETECTOR, 1)])
    console.print(_table(_EVENT_TABLE, widths, gap))  # the header; then a table per event
    for event, row in zip(events, rows, strict=True):
        table = _table(_EVENT_TABLE, widths, gap)
        table.show_header = False
        table.add_row(*(Text(middle_ellipsis(cell, widths[column]))
                        for column, cell in enumerate(row)))
        console.print(table)
        console.print(Padding(Text(one_line(event.message), style="dim"), (0, 0, 0, 2)))


def _time(epoch_ms: int, fmt: str) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000).strftime(fmt)
