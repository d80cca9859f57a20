"""A resident hook server keeps the SQLite store and the validated config between hooks
(:mod:`loopwarden.cli._hook_keep`); nothing a hook can see may change for it.

Each hook here goes through what the resident servers run per request
(:func:`loopwarden.cli._resident_server.answer_payload` over :func:`loopwarden.cli.claude_hook.run`),
inside :func:`~loopwarden.cli._hook_keep.keeping` as the servers run it. "Another process" is
another SQLite connection to the same file, which is what SQLite sees of another process.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from loopwarden.cli import _hook_keep
from loopwarden.cli._hook_keep import keeping
from loopwarden.cli._resident_server import answer_payload
from loopwarden.cli.claude_hook import run
from loopwarden.guard.stores.sqlite import SQLiteStore

SESSION = "keep-session"


def hook(db: Path, n: int, *extra: str) -> tuple[int, str, str]:
    """One PreToolUse hook (a distinct call ``n``): exit code, stdout, stderr."""
    payload = {"hook_event_name": "PreToolUse", "session_id": SESSION, "prompt_id": "p",
               "tool_name": "Bash", "tool_input": {"command": f"echo {n}"},
               "tool_use_id": f"t{n}"}
    reply = answer_payload(["--db", str(db), *extra], json.dumps(payload).encode(), run)
    head, n_out, n_err, rest = reply.split(b"\n", 3)
    out, err = rest[: int(n_out)], rest[int(n_out): int(n_out) + int(n_err)]
    return int(head), out.decode(), err.decode()


def calls(db: Path) -> int:
    """How many calls the session's stored state holds, read through a connection of its own."""
    with SQLiteStore(db) as store:
        state = store.load(SESSION)
    return 0 if state is None else len(state.history)


def kept_store(db: Path) -> SQLiteStore:
    assert _hook_keep._kept is not None
    return _hook_keep._kept.stores[db][0]


def test_the_store_stays_open_between_hooks_and_closes_with_the_server(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    with keeping():
        assert hook(db, 1)[0] == 0
        store = kept_store(db)
        assert store._conn is not None  # not closed after the hook
        assert hook(db, 2)[0] == 0
        assert kept_store(db) is store
    assert store._conn is None  # the server's end closes it
    assert calls(db) == 2


def test_a_hook_in_its_own_process_still_closes_its_store(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    assert hook(db, 1)[0] == 0
    assert _hook_keep._kept is None


def test_each_hook_reads_what_other_processes_wrote(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    with keeping():
        hook(db, 1)
        with SQLiteStore(db) as other:  # another process records a call in between
            other.transact(SESSION, lambda state: state.history.append(state.history[-1]))
        assert calls(db) == 2
        hook(db, 2)
        assert calls(db) == 3  # the kept connection read the other's write, not a stale state
        with sqlite3.connect(db) as conn:  # and another process clears the session
            conn.execute("DELETE FROM sessions")
        hook(db, 3)
        assert calls(db) == 1


def test_a_deleted_database_is_opened_anew(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    with keeping():
        hook(db, 1)
        first = kept_store(db)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        hook(db, 2)
        assert kept_store(db) is not first
        assert first._conn is None
        assert db.exists()  # the old connection would have written to the unlinked file
        assert calls(db) == 1


def test_a_replaced_database_is_opened_anew(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    other = tmp_path / "other.db"
    with keeping():
        hook(db, 1)
        hook(other, 1)
        hook(other, 2)
        first = kept_store(db)
        copy = tmp_path / "copy.db"
        with sqlite3.connect(other) as conn:  # a whole database in one file, WAL included
            conn.execute("VACUUM INTO ?", (str(copy),))
        for suffix in ("-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        os.replace(copy, db)  # another file at the path (a restore, a copy tool)
        hook(db, 3)
        assert kept_store(db) is not first
        assert calls(db) == 3


def test_a_failing_store_fails_open_with_the_same_message_on_every_hook(
        tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    with keeping():
        hook(db, 1)
        # Another process holds the write lock past the hook's busy timeout: a slow failure,
        # which would open the store's circuit breaker if it carried over to the next hook.
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            first = hook(db, 2)
            second = hook(db, 3)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert first[0] == second[0] == 0  # allowed: failed open
        assert "database is locked" in first[2]
        assert second[2] == first[2]  # not "skipped ... circuit breaker open"
        hook(db, 4)
    assert calls(db) == 2


def test_an_edited_config_is_validated_again(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps({"tools": {"loopDetection": {"historySize": 30}}}))
    with keeping():
        assert hook(db, 1, "--config", str(config))[0] == 0
        config.write_text(json.dumps({"tools": {"loopDetection": {"historySize": "many"}}}))
        code, _, err = hook(db, 2, "--config", str(config))
        assert code == 1
        assert "historySize" in err
