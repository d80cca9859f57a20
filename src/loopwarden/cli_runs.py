"""``loopwarden runs``: the runs recorded in a ``SQLiteStore`` file and their loop events."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ._paths import default_db_path
from .events import LoopEvent
from .stores.base import StoreError
from .stores.sqlite import SCHEMA_VERSION, RunSummary, SQLiteStore

__all__ = ["default_db_path", "register", "runs"]


def register(app: typer.Typer) -> None:
    """Add the ``runs`` command to the ``loopwarden`` app."""
    app.command("runs")(runs)


def runs(
    db: Annotated[
        Path | None,
        typer.Option("--db", help="SQLiteStore file [default: $LOOPWARDEN_DB or "
                     "~/.loopwarden/loopwarden.db]."),
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", help="Only runs of this session.")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, help="Show the newest N runs.")
    ] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
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
    except StoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps(_as_json(path, summaries, events), indent=2))
    else:
        _print_tables(path, summaries, events)


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


def _as_json(
    path: Path, summaries: list[RunSummary], events: dict[RunKey, list[LoopEvent]]
) -> dict[str, Any]:
    return {
        "db": str(path),
        "runs": [
            {**s.to_dict(), "loop_events": [e.to_dict() for e in events[(s.session, s.run)]]}
            for s in summaries
        ],
    }


def _print_tables(
    path: Path, summaries: list[RunSummary], events: dict[RunKey, list[LoopEvent]]
) -> None:
    console = Console()
    if not summaries:
        console.print(Text(f"No loop events recorded in {path}."))
        return
    console.print(_runs_table(path, summaries))
    for summary in summaries:
        console.print(_events_table(summary, events[(summary.session, summary.run)]))


def _runs_table(path: Path, summaries: list[RunSummary]) -> Table:
    table = Table(title=Text(f"Runs in {path}"), title_justify="left")
    table.add_column("session", overflow="fold")
    table.add_column("run", overflow="fold")
    table.add_column("agent", overflow="fold")
    table.add_column("started", no_wrap=True)
    for column in ("warn", "block", "abort"):
        table.add_column(column, justify="right")
    table.add_column("detectors", overflow="fold")
    for s in summaries:
        table.add_row(Text(s.session), Text(s.run or "-"), Text(", ".join(s.agents) or "-"),
                      Text(_time(s.first, "%Y-%m-%d %H:%M:%S")), Text(str(s.warnings)),
                      Text(str(s.blocks)), Text(str(s.aborts)), Text(", ".join(s.detectors)))
    return table


def _events_table(summary: RunSummary, events: list[LoopEvent]) -> Table:
    title = f"session {summary.session} run {summary.run or '-'}: {len(events)} loop events"
    table = Table(title=Text(title), title_justify="left")
    table.add_column("time", no_wrap=True)
    table.add_column("tool", overflow="fold")
    table.add_column("action", no_wrap=True)
    table.add_column("detector", overflow="fold")
    table.add_column("count", justify="right")
    table.add_column("message", ratio=1)
    for e in events:
        table.add_row(Text(_time(e.timestamp, "%H:%M:%S")), Text(e.tool), Text(e.action),
                      Text(e.detector), Text(str(e.count)), Text(e.message))
    return table


def _time(epoch_ms: int, fmt: str) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000).strftime(fmt)
