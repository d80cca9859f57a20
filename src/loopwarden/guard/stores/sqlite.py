"""``SQLiteStore``: embedded, persistent session state plus a run record of every loop event.

One file serves many threads and processes: WAL mode lets readers run beside the writer, and
every transaction starts with ``BEGIN IMMEDIATE`` so two processes checking the same session
serialise on SQLite's write lock instead of both reading the old state (a lost update).

Text is stored losslessly: a string SQLite's UTF-8 cannot hold (one with a lone surrogate) is
bound as its surrogate-preserving bytes cast to TEXT. Those bytes are never valid UTF-8, so such
a key cannot collide with an ordinary one, and the connection reads them back as the same string.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ...engine.history import SessionState
from ..events import LoopEvent
from ._codec import EVENT_FIELDS, StateDecoder, dumps, encode_state, event_from_values, loads
from .base import CircuitBreaker, StoreError

__all__ = ["RunSummary", "SQLiteStore"]

T = TypeVar("T")

SCHEMA_VERSION = 1
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS sessions (
        session TEXT PRIMARY KEY,
        state BLOB NOT NULL,
        updated_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS sessions_updated_at ON sessions (updated_at)",
    """CREATE TABLE IF NOT EXISTS events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session TEXT NOT NULL,
        run TEXT,
        agent TEXT,
        call_id TEXT,
        tool TEXT NOT NULL,
        level TEXT NOT NULL,
        action TEXT NOT NULL,
        detector TEXT NOT NULL,
        count INTEGER NOT NULL,
        message TEXT NOT NULL,
        paired_tool TEXT,
        timestamp INTEGER NOT NULL,
        type TEXT NOT NULL,
        extra TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS events_session_run ON events (session, run)",
)
_EVENT_COLUMNS = ("session", "run", "agent", "call_id", "tool", "level", "action", "detector",
                  "count", "message", "paired_tool", "timestamp", "type")
# Event fields without a column of their own (added to LoopEvent later) go to ``extra`` (JSON).
_EXTRA_FIELDS = tuple(name for name in EVENT_FIELDS if name not in _EVENT_COLUMNS)
_INT_COLUMNS = frozenset({"count", "timestamp"})
_SELECT_EVENT = f"SELECT {', '.join(_EVENT_COLUMNS)}, extra FROM events"
# Every text parameter goes through CAST(? AS TEXT), so _text_param's bytes are stored as text.
_TEXT = "CAST(? AS TEXT)"
_INSERT_EVENT = (
    f"INSERT INTO events ({', '.join(_EVENT_COLUMNS)}, extra) "
    f"VALUES ({', '.join('?' if c in _INT_COLUMNS else _TEXT for c in _EVENT_COLUMNS)}, {_TEXT})"
)
_SELECT_SESSION = f"SELECT state, updated_at FROM sessions WHERE session = {_TEXT}"
_UPSERT_SESSION = (
    f"INSERT INTO sessions (session, state, updated_at) VALUES ({_TEXT}, ?, ?) "
    "ON CONFLICT (session) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at"
)
_RUNS_QUERY = """
    SELECT session, run, MIN(timestamp), MAX(timestamp), COUNT(*),
           SUM(action = 'warn'), SUM(action = 'block'), SUM(action = 'abort'),
           json_group_array(DISTINCT agent), json_group_array(DISTINCT detector), MAX(id) AS last_id,
           SUM(action = 'ask'), SUM(action = 'continue')
    FROM events
    WHERE ?1 IS NULL OR session = CAST(?1 AS TEXT)
    GROUP BY session, run
    ORDER BY last_id DESC
    LIMIT ?2
"""


if TYPE_CHECKING:
    from ._runs import RunSummary


def __getattr__(name: str) -> Any:
    # RunSummary lives in its own module, loaded by `runs` only: creating the dataclass costs
    # a millisecond, which the Claude Code hook (a process per tool call) would pay for nothing.
    if name == "RunSummary":
        from ._runs import RunSummary

        return RunSummary
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class SQLiteStore:
    """Session states and the run record in one SQLite file.

    ``idle_ttl`` (seconds, ``None`` = keep forever) expires sessions unused for that long;
    expired rows are pruned as the store is used. ``timeout`` is how long a transaction waits
    for another process's write lock before failing. The file is opened lazily and reopened
    after an error, so a store that was unreachable recovers by itself.

    ``cooldown``: after a failure that took a while (a lock wait that timed out), the store is
    skipped for that many seconds (see :class:`~loopwarden.guard.stores.base.CircuitBreaker`; 0 turns
    it off). A session row that cannot be decoded is logged once, counted in
    :attr:`corrupt_states` and replaced by a fresh state.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        idle_ttl: float | None = None,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
        cooldown: float = 5.0,
    ) -> None:
        self.path = Path(path).expanduser()
        self.idle_ttl = idle_ttl
        self.timeout = timeout
        self._clock = clock
        self._where = f"SQLite store {self.path}"
        self.breaker = CircuitBreaker(cooldown)
        self._decode = StateDecoder(self._where)
        # One connection behind a lock: SQLite allows one writer at a time anyway, and a
        # single connection keeps resource use bounded however many threads call in.
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._next_prune = 0.0

    @property
    def corrupt_states(self) -> int:
        """Session rows found undecodable (each was replaced by a fresh state)."""
        return self._decode.corrupt

    @property
    def failures(self) -> int:
        """Operations that reached the database and failed."""
        return self.breaker.failures

    # -- the Store protocol ------------------------------------------------------------------

    def transact(self, session: str, fn: Callable[[SessionState], T]) -> T:
        """Run ``fn`` on the session's state in one ``BEGIN IMMEDIATE`` transaction, so threads
        and processes sharing the file take turns (expired rows are pruned on the way)."""
        key = _text_param(session)
        with self._lock, self._errors():
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                now = self._clock()
                self._maybe_prune(conn, now)
                row = conn.execute(_SELECT_SESSION, (key,)).fetchone()
                state = self._decode_row(row, now, session) or SessionState()
                result = fn(state)
                conn.execute(_UPSERT_SESSION, (key, encode_state(state), now))
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
            return result

    async def atransact(self, session: str, fn: Callable[[SessionState], T]) -> T:
        """Like :meth:`transact`, in a worker thread, without blocking the event loop."""
        import asyncio  # on first use: the sync-only Claude Code hook does not pay for it

        return await asyncio.to_thread(self.transact, session, fn)

    def load(self, session: str) -> SessionState | None:
        """The session's stored state, or None if it has none (expired, or undecodable)."""
        with self._lock, self._errors():
            row = self._connection().execute(_SELECT_SESSION, (_text_param(session),)).fetchone()
            return self._decode_row(row, self._clock(), session)

    def record_events(self, events: Sequence[LoopEvent]) -> None:
        """Append events to the run record in one transaction."""
        if not events:
            return
        rows = [_event_row(e) for e in events]
        with self._lock, self._errors():
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(_INSERT_EVENT, rows)
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise

    async def arecord_events(self, events: Sequence[LoopEvent]) -> None:
        """Like :meth:`record_events`, in a worker thread, without blocking the event loop."""
        import asyncio

        await asyncio.to_thread(self.record_events, events)

    def close(self) -> None:
        """Close the database connection; the next operation opens it again."""
        with self._lock:
            self._drop_connection()

    def reset_health(self) -> None:
        """Forget past failures (the circuit breaker's cool-down and counts) and which corrupt
        states were reported, keeping the connection: a store kept open across the hooks of a
        resident server (:mod:`loopwarden.cli._hook_keep`) then treats each hook as the hook's
        own process would, with a fresh store."""
        with self._lock:
            self.breaker = CircuitBreaker(self.breaker.cooldown)
            self._decode = StateDecoder(self._where)

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the run record ----------------------------------------------------------------------

    def events(
        self, session: str | None = None, run: str | None = None, *, limit: int | None = None
    ) -> list[LoopEvent]:
        """Recorded events, oldest first, optionally of one session and/or run (``limit``:
        only the newest ``limit``)."""
        clauses, params = _filters(session=session, run=run)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        sql = f"{_SELECT_EVENT} {where} ORDER BY id DESC LIMIT ?"
        with self._lock, self._errors():
            rows = self._connection().execute(sql, (*params, _sql_limit(limit))).fetchall()
        return [_row_event(row) for row in reversed(rows)]

    def runs(self, session: str | None = None, *, limit: int | None = None) -> list[RunSummary]:
        """Runs that have loop events, oldest first (``limit``: only the newest ``limit``)."""
        with self._lock, self._errors():
            key = None if session is None else _text_param(session)
            rows = self._connection().execute(_RUNS_QUERY, (key, _sql_limit(limit))).fetchall()
        return [_run_summary(row) for row in reversed(rows)]

    def sessions(self) -> list[str]:
        """Sessions with live (unexpired) state."""
        with self._lock, self._errors():
            rows = self._connection().execute(
                "SELECT session FROM sessions WHERE updated_at >= ? ORDER BY session",
                (self._cutoff(self._clock()),),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def prune(self) -> int:
        """Delete expired session states now; returns how many were deleted."""
        with self._lock, self._errors():
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                deleted = self._prune(conn, self._clock())
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
            return deleted

    # -- internals ---------------------------------------------------------------------------

    @contextmanager
    def _errors(self) -> Iterator[None]:
        with self.breaker.attempt(self._where, (StoreError,)):
            try:
                yield
            except (sqlite3.Error, OSError) as exc:
                # Reopen on next use: the file may have moved, become writable again, etc.
                self._drop_connection()
                raise StoreError(f"{self._where}: {exc}") from exc

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid != os.getpid():
            # A connection must not cross fork(); the child opens its own and leaves the
            # parent's untouched (closing it here could release the parent's locks).
            self._conn = None
        if self._conn is None:
            self._pid = os.getpid()
            self._conn = self._open()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                               check_same_thread=False)
        conn.text_factory = _read_text
        _keep_wal_on_close(conn)
        try:
            _init_schema(conn, self.timeout)
        except BaseException:
            conn.close()
            raise
        return conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and self._pid == os.getpid():
            with suppress(sqlite3.Error):
                conn.close()

    def _decode_row(
        self, row: tuple[Any, ...] | None, now: float, session: str
    ) -> SessionState | None:
        if row is None or float(row[1]) < self._cutoff(now):
            return None
        return self._decode(row[0], session)

    def _cutoff(self, now: float) -> float:
        return float("-inf") if self.idle_ttl is None else now - self.idle_ttl

    def _maybe_prune(self, conn: sqlite3.Connection, now: float) -> None:
        if self.idle_ttl is None or now < self._next_prune:
            return
        self._prune(conn, now)
        # Pruning is a cheap indexed delete, but once per call would still double the writes.
        self._next_prune = now + min(self.idle_ttl, 60.0)

    def _prune(self, conn: sqlite3.Connection, now: float) -> int:
        if self.idle_ttl is None:
            return 0
        cursor = conn.execute("DELETE FROM sessions WHERE updated_at < ?", (self._cutoff(now),))
        return cursor.rowcount


def _keep_wal_on_close(conn: sqlite3.Connection) -> None:
    """Leave the WAL file as it is when this connection closes (Python 3.12+).

    The last connection to close checkpoints the WAL into the database and deletes it, and the
    next process to open the file creates it again: two fsyncs per process, 10-20 ms on an
    ordinary disk, which the Claude Code hook (one process per hook event) would pay on every
    call. Committed transactions are in the WAL either way, so nothing is less durable; SQLite
    still checkpoints as the WAL grows (every 1000 pages), and the ``-wal`` and ``-shm`` files
    stay beside the database."""
    setconfig = getattr(conn, "setconfig", None)
    option = getattr(sqlite3, "SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE", None)
    if setconfig is not None and option is not None:
        with suppress(sqlite3.Error):  # an SQLite build without the option: only slower
            setconfig(option, True)


def _init_schema(conn: sqlite3.Connection, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            # Switching to WAL takes an exclusive lock and does not wait on the busy handler,
            # so several processes opening a new file at once retry here.
            conn.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    conn.execute("PRAGMA synchronous=NORMAL")
    if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _text_param(text: str) -> str | bytes:
    """``text`` as a parameter for ``CAST(? AS TEXT)``: itself, or — when UTF-8 cannot hold it
    (a lone surrogate) — its surrogate-preserving bytes, which :func:`_read_text` reverses."""
    if type(text) is not str or text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
    return text


def _read_text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # not written by loopwarden: readable beats exact
        return raw.decode("utf-8", "replace")


def _event_row(event: LoopEvent) -> tuple[Any, ...]:
    extra = {name: value for name in _EXTRA_FIELDS
             if (value := getattr(event, name)) not in (None, (), [], {})
             and value is not False}  # a flag left at its default takes no room
    encoded = dumps(extra).decode() if extra else None
    values = (getattr(event, c) for c in _EVENT_COLUMNS)
    return (*(_text_param(v) if isinstance(v, str) else v for v in values), encoded)


def _row_event(row: tuple[Any, ...]) -> LoopEvent:
    values = dict(zip(_EVENT_COLUMNS, row[:-1], strict=True))
    if row[-1]:
        values.update(loads(row[-1]))
    return event_from_values(values)


def _filters(**values: str | None) -> tuple[list[str], list[str | bytes]]:
    clauses = [f"{name} = {_TEXT}" for name, value in values.items() if value is not None]
    params = [_text_param(value) for value in values.values() if value is not None]
    return clauses, params


def _sql_limit(limit: int | None) -> int:
    return -1 if limit is None else max(limit, 0)  # SQLite: a negative LIMIT means none


def _run_summary(row: tuple[Any, ...]) -> RunSummary:
    from ._runs import RunSummary

    session, run, first, last, count, warns, blocks, aborts, agents, detectors, _, asks, \
        grants = row
    return RunSummary(
        session=session, run=run, first=int(first), last=int(last), events=int(count),
        warnings=int(warns or 0), blocks=int(blocks or 0), aborts=int(aborts or 0),
        agents=_names(agents), detectors=_names(detectors), asks=int(asks or 0),
        grants=int(grants or 0),
    )


def _names(json_array: str | None) -> tuple[str, ...]:
    values = loads(json_array) if json_array else []
    return tuple(sorted(str(v) for v in values if v is not None))
