"""Real store failures: the guard never raises into the agent, counts the failure, logs once per
outage, and resumes detection when the store is back; ``fail_closed=True`` blocks instead."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwarden import LoopGuard, Verdict
from loopwarden.guard.policy import STORE_DOWN_MESSAGE
from loopwarden.guard.stores.redis import RedisStore
from loopwarden.guard.stores.sqlite import SQLiteStore
from redis_server import RedisServer
from store_scenarios import ENABLED

FAILED = "state store failed"
RECOVERED = "state store recovered"


def call(guard: LoopGuard, i: int, session: str = "s", tool: str = "read") -> Verdict:
    """One agent step: ask, run unless blocked, report the outcome."""
    verdict = guard.before_tool_call(tool, {"path": "a"}, session=session, call_id=f"c{i}")
    if verdict.action != "block":
        guard.after_tool_call(tool, {"path": "a"}, session=session, result="same",
                              call_id=f"c{i}")
    return verdict


def log_count(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(1 for r in caplog.records if r.name == "loopwarden" and text in r.getMessage())


def assert_detection_resumes(guard: LoopGuard, session: str, start: int) -> None:
    actions = [call(guard, start + i, session).action for i in range(11)]
    assert actions == ["allow"] * 10 + ["warn"]


@pytest.fixture
def redis_guard(own_redis: RedisServer) -> Iterator[tuple[LoopGuard, RedisServer]]:
    store = RedisStore(own_redis.url, prefix="faults:", socket_timeout=1, connect_timeout=1)
    yield LoopGuard(ENABLED, store=store), own_redis
    store.close()


# -- Redis ----------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.redis
def test_redis_stopped_mid_run_fails_open_and_detection_resumes(
    redis_guard: tuple[LoopGuard, RedisServer], caplog: pytest.LogCaptureFixture
) -> None:
    guard, server = redis_guard
    caplog.set_level(logging.WARNING, logger="loopwarden")
    assert [call(guard, i).action for i in range(5)] == ["allow"] * 5
    assert guard.stats.store_failures == 0

    server.stop()
    outage = [call(guard, 100 + i) for i in range(6)]
    assert [v.action for v in outage] == ["allow"] * 6
    assert guard.stats.store_failures == 12  # every before and after hook
    assert log_count(caplog, FAILED) == 1

    server.start()  # same port, empty: the server kept nothing
    assert_detection_resumes(guard, "s", 200)
    assert guard.stats.store_failures == 12
    assert log_count(caplog, RECOVERED) == 1
    assert guard.stats.warnings == 1

    server.stop()  # a second outage is logged again, once
    call(guard, 300)
    assert log_count(caplog, FAILED) == 2


@pytest.mark.integration
@pytest.mark.redis
def test_redis_killed_under_a_running_agent(redis_guard: tuple[LoopGuard, RedisServer]) -> None:
    guard, server = redis_guard
    errors: list[BaseException] = []
    stop = threading.Event()
    steps = 0

    def agent() -> None:
        nonlocal steps
        try:
            while not stop.is_set():
                call(guard, steps, session=f"agent-{steps // 5}")
                steps += 1
        except BaseException as exc:  # anything here would have crashed the host agent
            errors.append(exc)

    thread = threading.Thread(target=agent)
    thread.start()
    try:
        time.sleep(0.3)
        server.stop()
        time.sleep(0.3)
        server.start()
        time.sleep(0.3)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert errors == []
    failures = guard.stats.store_failures
    assert failures > 0
    assert_detection_resumes(guard, "after-restart", 10_000)
    assert guard.stats.store_failures == failures


@pytest.mark.integration
@pytest.mark.redis
async def test_async_hooks_fail_open_and_recover(
    redis_guard: tuple[LoopGuard, RedisServer],
) -> None:
    guard, server = redis_guard
    server.stop()
    verdict = await guard.abefore_tool_call("read", {"p": 1}, session="s", call_id="c1")
    await guard.aafter_tool_call("read", {"p": 1}, session="s", result="x", call_id="c1")
    assert verdict.action == "allow"
    assert guard.stats.store_failures == 2
    server.start()
    actions = []
    for i in range(11):
        verdict = await guard.abefore_tool_call("read", {"p": 1}, session="s", call_id=f"d{i}")
        await guard.aafter_tool_call("read", {"p": 1}, session="s", result="x", call_id=f"d{i}")
        actions.append(verdict.action)
    assert actions == ["allow"] * 10 + ["warn"]
    assert guard.stats.store_failures == 2


@pytest.mark.integration
@pytest.mark.redis
def test_redis_fail_closed_blocks_while_down(own_redis: RedisServer) -> None:
    store = RedisStore(own_redis.url, prefix="closed:")
    guard = LoopGuard(ENABLED, store=store, fail_closed=True)
    assert call(guard, 0).action == "allow"
    own_redis.stop()
    verdict = call(guard, 1)
    assert verdict.action == "block"
    assert verdict.message == STORE_DOWN_MESSAGE
    assert verdict.blocked_result()["details"]["status"] == "blocked"
    assert guard.stats.store_failures == 1  # blocked, so no after hook ran
    own_redis.start()
    assert call(guard, 2).action == "allow"
    store.close()


# -- SQLite ---------------------------------------------------------------------------------


def test_sqlite_path_unusable_then_fixed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="loopwarden")
    parent = tmp_path / "state"
    parent.write_text("a file where the directory should be")
    store = SQLiteStore(parent / "loopwarden.db")
    guard = LoopGuard(ENABLED, store=store)
    assert [call(guard, i).action for i in range(3)] == ["allow"] * 3
    assert guard.stats.store_failures == 6
    assert log_count(caplog, FAILED) == 1

    parent.unlink()
    parent.mkdir()
    assert_detection_resumes(guard, "s", 100)
    assert guard.stats.store_failures == 6
    assert log_count(caplog, RECOVERED) == 1
    assert (parent / "loopwarden.db").is_file()
    store.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_sqlite_read_only_directory(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        store = SQLiteStore(folder / "loopwarden.db")
        guard = LoopGuard(ENABLED, store=store)
        assert call(guard, 0).action == "allow"
        assert guard.stats.store_failures == 2
        folder.chmod(0o755)
        assert_detection_resumes(guard, "s", 100)
        store.close()
    finally:
        folder.chmod(0o755)


@pytest.fixture
def locked_db(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection]]:
    path = tmp_path / "locked.db"
    SQLiteStore(path).transact("warm-up", lambda s: None)  # create file and schema
    holder = sqlite3.connect(path, isolation_level=None)
    yield path, holder
    holder.close()


def test_sqlite_locked_database_fails_open_then_recovers(
    locked_db: tuple[Path, sqlite3.Connection], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="loopwarden")
    path, holder = locked_db
    store = SQLiteStore(path, timeout=0.05)
    guard = LoopGuard(ENABLED, store=store)
    assert call(guard, 0).action == "allow"

    holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock too long
    started = time.monotonic()
    assert [call(guard, i).action for i in range(1, 4)] == ["allow"] * 3
    assert time.monotonic() - started < 5
    assert guard.stats.store_failures == 6
    assert log_count(caplog, FAILED) == 1
    holder.execute("COMMIT")

    assert_detection_resumes(guard, "fresh", 100)
    assert guard.stats.store_failures == 6
    assert log_count(caplog, RECOVERED) == 1
    state = store.load("s")
    assert state is not None and len(state.history) == 1  # only the call before the lock
    store.close()


def test_sqlite_fail_closed_blocks_while_locked(
    locked_db: tuple[Path, sqlite3.Connection],
) -> None:
    path, holder = locked_db
    store = SQLiteStore(path, timeout=0.05)
    guard = LoopGuard(ENABLED, store=store, fail_closed=True)
    holder.execute("BEGIN EXCLUSIVE")
    verdict = call(guard, 0)
    assert verdict.action == "block" and verdict.message == STORE_DOWN_MESSAGE
    holder.execute("COMMIT")
    assert call(guard, 1).action == "allow"
    store.close()


async def test_sqlite_async_hooks_fail_open(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    guard = LoopGuard(ENABLED, store=SQLiteStore(blocker / "x.db"))
    verdict = await guard.abefore_tool_call("read", {"p": 1}, session="s")
    await guard.aafter_tool_call("read", {"p": 1}, session="s", result="x")
    assert verdict.action == "allow"
    assert guard.stats.store_failures == 2
