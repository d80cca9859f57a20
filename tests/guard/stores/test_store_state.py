"""Store reliability: lossless encoding (lone surrogates), corrupt stored states, bounded learned
state, bounded post-compaction guards, and the circuit breaker that spares the agent a hung store.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from typer.testing import CliRunner

from loopwarden import LoopDetectionConfig, LoopEvent, LoopGuard, MemoryStore
from loopwarden.cli import app
from loopwarden.fingerprint.leaves import MAX_PATH, leaves_of
from loopwarden.guard.learning import DIGITS, LEARN_AFTER, MAX_DIFFERING, learn
from loopwarden.guard.policy import STORE_DOWN_MESSAGE
from loopwarden.guard.stores._codec import encode_state
from loopwarden.guard.stores.base import CircuitBreaker, StoreError
from loopwarden.guard.stores.redis import RedisStore
from loopwarden.guard.stores.sqlite import SQLiteStore
from redis_server import RedisServer
from store_scenarios import (
    ENABLED,
    SURROGATE,
    SURROGATE_RUN,
    SURROGATE_SESSION,
    drive,
    history_view,
    surrogate_script,
)

EARLY = LoopDetectionConfig(enabled=True, preset="early")
CORRUPT = "cannot be read"
FAILED = "state store failed"


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def call(guard: LoopGuard, i: int, session: str = "s", run: str | None = None,
         result: Any = "same", args: Any = None) -> str:
    """One agent step: ask, run unless blocked, report the outcome; the verdict's action."""
    args = {"path": "a"} if args is None else args
    verdict = guard.before_tool_call("read", args, session=session, run_id=run, call_id=f"c{i}")
    if verdict.action != "block":
        guard.after_tool_call("read", args, session=session, result=result, run_id=run,
                              call_id=f"c{i}")
    return verdict.action


def log_count(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(1 for r in caplog.records if text in r.getMessage())


StoreFactory = Callable[[], Any]


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Builds stores of one kind that share their medium (one file, one key prefix)."""
    made: list[Any] = []
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        prefix = request.getfixturevalue("redis_prefix")

        def factory() -> Any:
            made.append(RedisStore(url, prefix=prefix))
            return made[-1]
    elif request.param == "sqlite":
        def factory() -> Any:
            made.append(SQLiteStore(tmp_path / "state.db"))
            return made[-1]
    else:
        shared = MemoryStore()

        def factory() -> Any:
            return shared
    yield factory
    for store in made:
        store.close()


# -- 8. lone surrogates: every store encodes losslessly, so all give the same verdicts ----------


@pytest.mark.parametrize("config", [ENABLED, EARLY], ids=["openclaw", "early"])
@pytest.mark.parametrize("fail_closed", [False, True])
def test_surrogate_ids_and_results_give_every_store_the_memory_verdicts(
    make_store: StoreFactory, config: LoopDetectionConfig, fail_closed: bool
) -> None:
    reference = LoopGuard(config, store=MemoryStore())
    expected = drive(reference, surrogate_script(), session=SURROGATE_SESSION,
                     run_id=SURROGATE_RUN, prefix=f"c{SURROGATE}")
    assert {"warn", "block"} <= set(expected)
    store = make_store()
    guard = LoopGuard(config, store=store, fail_closed=fail_closed)
    actions = drive(guard, surrogate_script(), session=SURROGATE_SESSION, run_id=SURROGATE_RUN,
                    prefix=f"c{SURROGATE}")
    assert actions == expected
    assert guard.stats.store_failures == 0 and guard.stats.internal_errors == 0
    assert guard.stats.warnings == reference.stats.warnings
    state, want = store.load(SURROGATE_SESSION), reference.store.load(SURROGATE_SESSION)
    assert history_view(state) == history_view(want)
    assert state is not None and want is not None
    assert state.history[0].run_id == SURROGATE_RUN  # the ids came back as they went in
    assert state.learned == want.learned


def test_surrogate_state_reads_back_through_a_second_store_object(
    make_store: StoreFactory,
) -> None:
    first = make_store()
    guard = LoopGuard(ENABLED, store=first)
    drive(guard, surrogate_script()[:8], session=SURROGATE_SESSION, run_id=SURROGATE_RUN)
    again = make_store().load(SURROGATE_SESSION)
    assert again is not None
    assert history_view(again) == history_view(first.load(SURROGATE_SESSION))
    assert {r.tool_name for r in again.history} == {f"read{SURROGATE}", f"process{SURROGATE}"}


def test_surrogate_ids_never_collide_with_their_look_alikes(make_store: StoreFactory) -> None:
    store = make_store()
    look_alikes = ["s\ud800", "s\\ud800", "s\ufffd", "s?", "s\udcff", "s\xed\xa0\x80", "s"]
    for n, session in enumerate(look_alikes, start=1):
        store.transact(session, lambda state, n=n: state.warning_buckets.update(n=n))
    for n, session in enumerate(look_alikes, start=1):
        state = store.load(session)
        assert state is not None and state.warning_buckets == {"n": n}, repr(session)
    if isinstance(store, SQLiteStore):
        assert sorted(store.sessions()) == sorted(look_alikes)


def test_surrogate_events_round_trip_in_the_sqlite_run_record(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "events.db")
    event = LoopEvent(session=SURROGATE_SESSION, run=SURROGATE_RUN, agent=f"a{SURROGATE}",
                      call_id=f"c{SURROGATE}", tool=f"read{SURROGATE}", level="warning",
                      action="warn", detector="generic_repeat", count=10,
                      message=f"m{SURROGATE}", learned=(f"$.x{SURROGATE}",), timestamp=5)
    store.record_events([event, LoopEvent(session="plain", tool="t", level="warning",
                                          action="warn", detector="d", count=1, message="m")])
    assert store.events(session=SURROGATE_SESSION) == [event]
    assert store.events(run=SURROGATE_RUN) == [event]
    (run,) = store.runs(session=SURROGATE_SESSION)
    assert run.run == SURROGATE_RUN and run.agents == (f"a{SURROGATE}",)
    assert len(store.runs()) == 2
    store.close()


@pytest.mark.redis
def test_surrogate_events_round_trip_in_the_redis_stream(redis_url: str,
                                                         redis_prefix: str) -> None:
    store = RedisStore(redis_url, prefix=redis_prefix)
    event = LoopEvent(session=SURROGATE_SESSION, run=SURROGATE_RUN, tool=f"read{SURROGATE}",
                      level="warning", action="warn", detector="generic_repeat", count=10,
                      message=f"m{SURROGATE}", learned=(f"$.x{SURROGATE}",), timestamp=5)
    store.record_events([event])
    assert store.events(session=SURROGATE_SESSION) == [event]
    store.close()


# -- 9. a corrupt stored state: logged once, counted, reset; detection goes on -----------------

CORRUPTIONS = {
    "garbage bytes": b"\x00\xff\xfe not json",
    "truncated json": b'{"history": [{"tool_name": "read"',
    "json list": b"[1, 2, 3]",
    "history not a list": b'{"history": 5}',
    "record without tool": b'{"history": [{"args_hash": "h"}]}',
    "record of wrong types": b'{"history": [{"tool_name": 7, "args_hash": "h"}]}',
    "unhashable run id": b'{"history": [{"tool_name": "t", "args_hash": "h", "run_id": []}]}',
    "bucket not a number": b'{"warning_buckets": {"k": "x"}}',
    "learned of wrong shape": b'{"learned": {"volatile": {"read": 5}}}',
    "compaction of wrong shape": b'{"compaction": {"r": {"window": [1]}}}',
}


def assert_detection_from_scratch(guard: LoopGuard, session: str, start: int) -> None:
    actions = [call(guard, start + i, session) for i in range(11)]
    assert actions == ["allow"] * 10 + ["warn"]


@pytest.mark.parametrize("raw", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_corrupt_sqlite_row_is_reported_once_reset_and_detection_resumes(
    tmp_path: Path, raw: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="loopwarden")
    path = tmp_path / "state.db"
    store = SQLiteStore(path)
    guard = LoopGuard(ENABLED, store=store)
    assert [call(guard, i) for i in range(3)] == ["allow"] * 3
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE sessions SET state = ? WHERE session = 's'", (raw,))
    assert store.load("s") is None and store.load("s") is None  # read-only: reported once
    assert_detection_from_scratch(guard, "s", 100)
    assert [call(guard, 200 + i) for i in range(10)][-1] == "block"  # and on to a block
    assert store.corrupt_states == 3  # two loads, then the first call, whose write replaced it
    assert log_count(caplog, CORRUPT) == 1
    assert guard.stats.store_failures == 0 and guard.stats.internal_errors == 0
    store.close()


@pytest.mark.redis
@pytest.mark.parametrize("raw", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_corrupt_redis_value_is_reported_once_reset_and_detection_resumes(
    redis_url: str, redis_prefix: str, raw: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="loopwarden")
    store = RedisStore(redis_url, prefix=redis_prefix)
    guard = LoopGuard(ENABLED, store=store)
    assert [call(guard, i) for i in range(3)] == ["allow"] * 3
    store.client.set(store.session_key("s"), raw)
    assert_detection_from_scratch(guard, "s", 100)
    assert store.corrupt_states == 1
    assert log_count(caplog, CORRUPT) == 1
    assert guard.stats.store_failures == 0 and guard.stats.internal_errors == 0
    store.close()


def test_each_corrupt_session_is_reported_once(tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="loopwarden")
    path = tmp_path / "state.db"
    store = SQLiteStore(path)
    for session in ("a", "b"):
        store.transact(session, lambda s: None)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE sessions SET state = x'00'")
    for _ in range(3):
        assert store.load("a") is None and store.load("b") is None
    assert store.corrupt_states == 6
    assert log_count(caplog, CORRUPT) == 2
    store.close()


def _hook(db: Path, event: str, i: int, **extra: Any) -> Any:
    payload = {"hook_event_name": event, "session_id": "claude-s", "tool_name": "Bash",
               "tool_input": {"command": "make test"}, "tool_use_id": f"t{i}", **extra}
    result = CliRunner().invoke(app, ["claude-hook", "--db", str(db)], input=json.dumps(payload))
    assert result.exit_code == 0, result.output
    return result


def test_claude_hook_survives_a_corrupt_session_row(tmp_path: Path) -> None:
    db = tmp_path / "hook.db"
    for i in range(3):
        _hook(db, "PreToolUse", i)
        _hook(db, "PostToolUse", i, tool_response={"stdout": "1 failed"})
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sessions SET state = x'7b2268' WHERE session = 'claude-s'")
    contexts, stderr = [], []
    for i in range(100, 111):
        pre = _hook(db, "PreToolUse", i)
        stderr.append(pre.stderr)
        contexts.append(pre.stdout.strip())
        _hook(db, "PostToolUse", i, tool_response={"stdout": "1 failed"})
    assert contexts[:10] == [""] * 10
    assert "additionalContext" in contexts[10]  # detection started afresh and warned at 11
    assert CORRUPT in stderr[0] and CORRUPT not in "".join(stderr[1:])


# -- 12. learning keeps digests, never whole results --------------------------------------------


def _reference_volatile_change(old: str, new: str) -> str | None:
    """The early preset's rule on whole texts: only ids/nonces and measurements may be learned."""
    numbers = re.compile(r"\d+(?:[.,]\d+)?")
    measured = re.compile(r"(\d+(?:[.,]\d+)?)\s?(%|[kmgtp]i?b\b|b\b|[kmg]\b)?", re.IGNORECASE)
    token = re.compile(r"(?=[^\s]*\d)[\w.:+/=#-]{1,128}")
    if numbers.sub("#", old) == numbers.sub("#", new):
        changed = [(a, b) for a, b in zip(measured.findall(old), measured.findall(new),
                                          strict=False) if a != b]
        if changed and all(ua and ub for (_, ua), (_, ub) in changed):
            return "digits"
        return None
    if token.fullmatch(old.strip()) and token.fullmatch(new.strip()):
        return "whole"
    return None


def _reference_learn(learned: dict[str, Any], tool: str, key: str,
                     leaves: dict[str, str]) -> tuple[str, ...]:
    """Learning as it was when whole results were kept (the behaviour digests must match)."""
    last = learned.setdefault("last", {})
    previous = last.pop(key, None)
    last[key] = leaves
    while len(last) > 32:
        del last[next(iter(last))]
    volatile = learned.setdefault("volatile", {})
    text_scope = f"{tool}|{key.rsplit('|', 1)[-1]}" if leaves.keys() == {"$"} else None
    known = set(volatile.get(tool, ()))
    if text_scope is not None:
        known.update(volatile.get(text_scope, ()))
    if previous is None or previous.keys() != leaves.keys():
        return tuple(sorted(known))
    differing = [p for p in leaves if previous[p] != leaves[p] and p not in known
                 and f"{p}{DIGITS}" not in known]
    if not differing or len(differing) > MAX_DIFFERING:
        return tuple(sorted(known))
    scope = text_scope or tool
    scores = learned.setdefault("scores", {}).setdefault(scope, {})
    own = set(volatile.get(scope, ()))
    for path in differing:
        change = _reference_volatile_change(previous[path], leaves[path])
        if change is None:
            continue
        marker = f"{path}{DIGITS}" if change == "digits" else path
        scores[marker] = scores.get(marker, 0) + 1
        if scores[marker] >= LEARN_AFTER:
            known.add(marker)
            own.add(marker)
    if own:
        volatile[scope] = sorted(own)
    return tuple(sorted(known))


def _random_result(rng: random.Random) -> Any:
    def text() -> str:
        return rng.choice([
            "running", "stopped", f"cpu {rng.randint(0, 9)}.{rng.randint(0, 9)}%",
            f"{rng.randint(0, 3)},{rng.randint(0, 9)}.{rng.randint(0, 9)}", "1.2,3" if rng.random() < .5 else "1,2.3",
            f"tok-{rng.choice('abc')}{rng.randint(0, 2)}", f"٣{rng.randint(0, 2)} items",
            f"line {rng.randint(0, 2)}\n" * rng.randint(1, 3), "x" * rng.randint(0, 3),
            f"{SURROGATE}{rng.randint(0, 1)}",
        ])
    fields = {name: text() for name in rng.sample(["a", "b", "c", "d", "e"], rng.randint(1, 5))}
    if rng.random() < 0.3:
        fields["n"] = rng.randint(0, 2)  # type: ignore[assignment]
    if rng.random() < 0.3:
        fields["list"] = [text() for _ in range(rng.randint(0, 2))]  # type: ignore[assignment]
    return fields


@pytest.mark.slow
def test_digest_learning_decides_as_whole_result_learning() -> None:
    rng = random.Random(20251201)
    for _ in range(300):
        mine: dict[str, Any] = {}
        reference: dict[str, Any] = {}
        for _ in range(rng.randint(2, 40)):
            tool = rng.choice(["status", "poll"])
            key = f"run|{rng.randint(0, 2)}"
            leaves = leaves_of(_random_result(rng))
            assert learn(mine, tool, key, leaves) == _reference_learn(reference, tool, key,
                                                                      dict(leaves))
            assert mine.get("volatile") == reference.get("volatile")
            assert mine.get("scores") == reference.get("scores")


@pytest.mark.slow
def test_learned_state_stays_small_with_large_results() -> None:
    guard = LoopGuard(EARLY, store=MemoryStore())
    big = "".join(f"line {i}: some file content here\n" for i in range(3000))  # ~100 KB
    for i in range(40):
        args = {"path": f"f{i}"}
        guard.before_tool_call("read", args, session="s", call_id=f"c{i}")
        guard.after_tool_call("read", args, session="s", call_id=f"c{i}",
                              result={"content": [{"type": "text", "text": big}],
                                      "details": {"path": f"f{i}"}})
    state = guard.store.load("s")
    assert state is not None
    encoded = encode_state(state)
    # Whole results would be 32 x 100 KB; each record's digests (the failure identity's among
    # them) keep it near 20 KB.
    assert len(encoded) < 24_000
    assert b"some file content" not in encoded


def test_huge_keys_are_bounded_in_learned_paths() -> None:
    guard = LoopGuard(EARLY, store=MemoryStore())
    key = "k" * 50_000
    for i in range(8):
        guard.before_tool_call("probe", {}, session="s", call_id=f"c{i}")
        guard.after_tool_call("probe", {}, session="s", call_id=f"c{i}",
                              result={key: f"load {i}%", "state": "waiting"})
    state = guard.store.load("s")
    assert state is not None
    (learned,) = state.learned["volatile"]["probe"]
    assert learned.endswith(DIGITS) and len(learned) <= MAX_PATH + len(DIGITS)
    assert len(encode_state(state)) < 5_000


def test_a_state_written_with_whole_results_keeps_learning() -> None:
    learned: dict[str, Any] = {"last": {"run|h": {"$.cpu": "cpu 0.3%", "$.state": "up"}}}
    # The old whole result is compared with: one observation learns (LEARN_AFTER = 1).
    assert learn(learned, "status", "run|h", {"$.cpu": "cpu 0.5%", "$.state": "up"}) == (
        "$.cpu#digits",)
    assert "last" not in learned  # converted to digests
    assert learned["scores"] == {"status": {"$.cpu#digits": 1}}


# -- 13. post-compaction guards go with their runs ----------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind,runs", [("memory", 1000), ("sqlite", 200)])
def test_post_compaction_guards_do_not_pile_up_per_run(tmp_path: Path, kind: str,
                                                       runs: int) -> None:
    store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "runs.db")
    guard = LoopGuard(ENABLED, store=store)
    for r in range(runs):
        guard.compaction_retried(session="s", run_id=f"run-{r}")
        for i in range(4):
            call(guard, r * 10 + i, run=f"run-{r}", args={"i": i}, result=f"r{i}")
    state = store.load("s")
    assert state is not None
    assert len(state.compaction) <= 1  # only the newest run's (its window has closed)
    assert guard.stats.aborts == 0


def test_an_armed_guard_outlives_other_runs_and_still_aborts() -> None:
    guard = LoopGuard(ENABLED, store=MemoryStore())
    call(guard, 0, run="a", result="x")
    guard.compaction_retried(session="s", run_id="a")
    for r in range(40):  # other runs start (each one prunes finished guards) and fill the window
        call(guard, 100 + r, run=f"other-{r}", args={"r": r})
    for i in range(2):
        assert call(guard, 200 + i, run="a", result="x") == "allow"
    with pytest.raises(Exception, match="compaction did not break the loop"):
        call(guard, 300, run="a", result="x")


def test_armed_guards_are_capped() -> None:
    guard = LoopGuard(ENABLED, store=MemoryStore())
    for r in range(400):
        guard.compaction_retried(session="s", run_id=f"idle-{r}")  # armed, never used
    call(guard, 0, run="fresh")
    state = guard.store.load("s")
    assert state is not None and 0 < len(state.compaction) <= 256
    assert "idle-399" in state.compaction  # the newest are kept


# -- 14. a hung store costs one timeout per cool-down ---------------------------------------------


def test_breaker_opens_on_slow_failures_only_and_probes_after_the_cool_down() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(5.0, slow_failure=0.25, clock=clock)
    started = breaker.enter("s")
    breaker.failed(started)  # fast: a refused connection
    assert not breaker.open
    started = breaker.enter("s")
    clock.now += 1.0
    breaker.failed(started)  # slow: a timeout
    assert breaker.open
    for _ in range(3):
        with pytest.raises(StoreError, match="circuit breaker"):
            breaker.enter("s")
    clock.now += 5.0
    started = breaker.enter("s")  # the probe
    with pytest.raises(StoreError):
        breaker.enter("s")  # others keep skipping while it runs
    breaker.succeeded()
    breaker.enter("s")
    assert (breaker.failures, breaker.skipped) == (2, 4)


@pytest.fixture
def stopped_redis(own_redis: RedisServer) -> Iterator[RedisServer]:
    """A private redis-server; the test SIGSTOPs it (it is always continued afterwards)."""
    try:
        yield own_redis
    finally:
        assert own_redis.proc is not None
        os.kill(own_redis.proc.pid, signal.SIGCONT)


def _freeze(server: RedisServer) -> None:
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGSTOP)


def _thaw(server: RedisServer) -> None:
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGCONT)


@pytest.mark.integration
@pytest.mark.redis
@pytest.mark.parametrize("fail_closed", [False, True])
def test_hung_redis_is_tried_once_per_cool_down(stopped_redis: RedisServer,
                                                fail_closed: bool) -> None:
    store = RedisStore(stopped_redis.url, prefix="hung:", socket_timeout=0.5, cooldown=3600)
    guard = LoopGuard(ENABLED, store=store, fail_closed=fail_closed)
    assert call(guard, 0) == "allow"
    _freeze(stopped_redis)
    actions = [call(guard, i) for i in range(1, 7)]
    assert actions == ["block" if fail_closed else "allow"] * 6
    hooks = 6 if fail_closed else 12  # a blocked call runs no after hook
    assert store.failures == 1  # the first hook timed out; the others never touched Redis
    assert store.breaker.skipped == hooks - 1
    assert guard.stats.store_failures == hooks
    store.close()


@pytest.mark.integration
@pytest.mark.redis
async def test_hung_redis_async_hooks_skip_during_the_cool_down(
    stopped_redis: RedisServer,
) -> None:
    store = RedisStore(stopped_redis.url, prefix="hung:", socket_timeout=0.5, cooldown=3600)
    guard = LoopGuard(ENABLED, store=store)
    await guard.abefore_tool_call("read", {}, session="s", call_id="c0")
    _freeze(stopped_redis)
    for i in range(1, 5):
        verdict = await guard.abefore_tool_call("read", {}, session="s", call_id=f"c{i}")
        await guard.aafter_tool_call("read", {}, session="s", result="x", call_id=f"c{i}")
        assert verdict.action == "allow"
    assert store.failures == 1 and store.breaker.skipped == 7
    await store.aclose()
    store.close()


@pytest.mark.integration
@pytest.mark.redis
def test_hung_redis_probe_after_real_cool_down(stopped_redis: RedisServer) -> None:
    store = RedisStore(stopped_redis.url, prefix="probe:", socket_timeout=0.3, cooldown=0.5)
    guard = LoopGuard(ENABLED, store=store)
    _freeze(stopped_redis)
    call(guard, 0)
    assert store.failures == 1
    time.sleep(0.6)
    call(guard, 1)  # one probe (it times out again), then the after hook skips
    assert store.failures == 2
    _thaw(stopped_redis)
    time.sleep(0.6)
    assert_detection_from_scratch(guard, "fresh", 100)
    assert store.failures == 2


def test_locked_sqlite_is_tried_once_per_cool_down(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    SQLiteStore(path).transact("warm-up", lambda s: None)
    holder = sqlite3.connect(path, isolation_level=None)
    store = SQLiteStore(path, timeout=0.3, cooldown=3600)
    guard = LoopGuard(ENABLED, store=store)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert [call(guard, i) for i in range(5)] == ["allow"] * 5
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert store.failures == 1 and store.breaker.skipped == 9
    assert guard.stats.store_failures == 10
    store.close()


@pytest.mark.integration
def test_claude_hook_on_a_locked_database_fails_open_quickly_with_a_log_line(
    tmp_path: Path,
) -> None:
    db = tmp_path / "hook.db"
    SQLiteStore(db).transact("warm-up", lambda s: None)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    payload = {"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash",
               "tool_input": {"command": "ls"}, "tool_use_id": "t1"}
    try:
        # Generous bound for a hang: the old hook waited 10 s for the lock on each call.
        proc = subprocess.run(
            [sys.executable, "-m", "loopwarden.cli", "claude-hook", "--db", str(db)],
            input=json.dumps(payload), capture_output=True, text=True, timeout=8,
        )
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert proc.returncode == 0 and proc.stdout == ""
    assert FAILED in proc.stderr and "database is locked" in proc.stderr
    assert STORE_DOWN_MESSAGE not in proc.stdout


def test_redis_timeouts_are_not_retried_by_default() -> None:
    store = RedisStore("redis://127.0.0.1:1/0")
    retry = store.client.get_connection_kwargs()["retry"]
    assert redis.exceptions.TimeoutError not in retry._supported_errors
    assert store.client.get_connection_kwargs()["socket_timeout"] == 1.0
    store.close()
