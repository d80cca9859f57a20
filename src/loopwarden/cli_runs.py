"""``loopwarden runs``: the runs recorded in a ``SQLiteStore`` file and their loop events."""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .events import LoopEvent
from .stores.base import StoreError
from .stores.sqlite import RunSummary, SQLiteStore

__all__ = ["default_db_path", "register", "runs"]


def default_db_path() -> Path:
    """``$LOOPWARDEN_DB``, else ``~/.loopwarden/loopwarden.db``."""
    env = os.environ.get("LOOPWARDEN_DB")
    return Path(env) if env else Path.home() / ".loopwarden" / "loopwarden.db"


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
    """List recorded runs and their loop events (warnings, blocks, aborts)."""
    path = db if db is not None else default_db_path()
    problem = _not_a_run_record(path)
    if problem:
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(1)
    try:
        with SQLiteStore(path) as store:
            summaries = store.runs(session, limit=limit)
            events = _events_by_run(store, summaries)
    except StoreError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(_as_json(path, summaries, events), indent=2))
    else:
        _print_tables(path, summaries, events)


RunKey = tuple[str, str | None]


def _not_a_run_record(path: Path) -> str | None:
    """Why ``path`` is not a loopwarden database, checked read-only: opening it as a store
    would create the file, or add loopwarden's tables to someone else's database."""
    if not path.is_file():
        return f"no run record at {path} (use --db or set $LOOPWARDEN_DB)"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return f"cannot read {path}: {exc}"
    if not {"events", "sessions"} <= tables:
        return f"{path} is not a loopwarden database (no events table)"
    return None


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
