"""LoopGuard beyond the spec scenarios: async twins (each running the same transaction as its
sync hook, the kill switch included), threads, the decorator door, store failures,
the memory store's bounds, and the early preset's post-outcome warnings."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from loopwarden import (
    LoopBlockedError,
    LoopDetectionConfig,
    LoopEvent,
    LoopGuard,
    MemoryStore,
    SessionState,
    StoreError,
    ToolCall,
)

T = TypeVar("T")
ON = LoopDetectionConfig(enabled=True)
SAME = {"content": [{"type": "text", "text": "same"}], "details": {}}


def _pair(guard: LoopGuard, i: int, session: str = "s", args: Any = None) -> str:
    args = {"q": 1} if args is None else args
    v = guard.before_tool_call("probe", args, session=session, run_id="r", call_id=f"c{i}")
    if v.action != "block":
        guard.after_tool_call("probe", args, session=session, run_id="r", call_id=f"c{i}",
                              result=SAME)
    return v.action


async def test_async_twins_match_sync() -> None:
    sync_guard, async_guard = LoopGuard(ON), LoopGuard(ON)
    sync_actions = [_pair(sync_guard, i) for i in range(22)]
    async_actions = []
    for i in range(22):
        v = await async_guard.abefore_tool_call("probe", {"q": 1}, session="s", run_id="r",
                                                call_id=f"c{i}")
        if v.action != "block":
            await async_guard.aafter_tool_call("probe", {"q": 1}, session="s", run_id="r",
                                               call_id=f"c{i}", result=SAME)
        async_actions.append(v.action)
    assert sync_actions == async_actions
    assert async_actions[10] == "warn" and async_actions[20] == "block"


async def test_async_batch_and_compaction() -> None:
    guard = LoopGuard(ON)
    await guard.acompaction_retried(session="s", run_id="r")
    from loopwarden import ToolCall

    admission = await guard.aadmit_batch([ToolCall("a", {}), ToolCall("b", {})], session="s",
                                         run_id="r")
    assert [v.action for v in admission.verdicts] == ["allow", "allow"]


def test_threads_share_one_session_without_losing_records() -> None:
    guard = LoopGuard(LoopDetectionConfig(enabled=True, history_size=1000,
                                          warning_threshold=5000, critical_threshold=6000,
                                          global_circuit_breaker_threshold=7000))

    def worker(t: int) -> None:
        for i in range(100):
            _pair(guard, t * 1000 + i, args={"t": t, "i": i})

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    history = guard.history("s")
    assert len(history) == 800
    assert all(r.result_hash is not None for r in history)


# -- decorator door -------------------------------------------------------------------------------


def test_decorator_raises_on_block_and_counts_outcomes() -> None:
    guard = LoopGuard(ON)
    ran = []

    @guard.tool
    def check_job(job_id: str, verbose: bool = False) -> str:
        ran.append(job_id)
        return "still running"

    for i in range(20):
        # positional and keyword calls bind to the same arguments, so they hash alike
        result = check_job("j1") if i % 2 else check_job(job_id="j1")
        # the 11th result carries the warning note the model must see (issue 13)
        assert result.startswith("still running") and ("[System note:" in result) == (i == 10)
    with pytest.raises(LoopBlockedError) as info:
        check_job("j1")
    assert len(ran) == 20
    assert "CRITICAL" in str(info.value)
    assert info.value.blocked_result["details"]["deniedReason"] == "tool-loop"


def test_decorator_return_mode_and_session_callable() -> None:
    guard = LoopGuard(ON)
    current = {"session": "a"}

    @guard.tool(name="poll", session=lambda: current["session"], on_block="return")
    def poll() -> str:
        return "same"

    for _ in range(20):
        poll()
    blocked = poll()
    assert isinstance(blocked, dict) and blocked["details"]["status"] == "blocked"
    current["session"] = "b"
    assert poll() == "same"


async def test_decorator_async_and_errors() -> None:
    guard = LoopGuard(ON)
    calls = 0

    @guard.tool
    async def flaky(path: str) -> str:
        nonlocal calls
        calls += 1
        raise FileNotFoundError(f"no such file: {path}")

    for _ in range(20):
        with pytest.raises(FileNotFoundError):
            await flaky("/x")
    with pytest.raises(LoopBlockedError):
        await flaky("/x")
    assert calls == 20


def test_wrap_keeps_metadata() -> None:
    guard = LoopGuard(ON)

    def tool_fn(x: int) -> int:
        """Docs."""
        return x

    wrapped = guard.wrap(tool_fn)
    assert wrapped.__name__ == "tool_fn" and wrapped.__doc__ == "Docs." and wrapped(3) == 3


# -- failure policy -------------------------------------------------------------------------------


class FlakyStore(MemoryStore):
    """A real MemoryStore that can be switched to failing, like a store whose server went away."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def transact(self, session: str, fn: Callable[[SessionState], T]) -> T:
        if self.down:
            raise StoreError("connection refused")
        return super().transact(session, fn)


def test_store_outage_fails_open_logs_once_and_recovers(caplog: pytest.LogCaptureFixture) -> None:
    store = FlakyStore()
    guard = LoopGuard(ON, store=store)
    for i in range(15):
        _pair(guard, i)
    store.down = True
    with caplog.at_level(logging.ERROR, logger="loopwarden"):
        actions = [_pair(guard, 100 + i) for i in range(10)]
    assert actions == ["allow"] * 10
    assert guard.stats.store_failures == 20
    assert caplog.text.count("state store failed") == 1
    store.down = False
    actions = [_pair(guard, 200 + i) for i in range(6)]
    assert "block" in actions  # detection resumed on the history kept before the outage


def test_store_outage_fail_closed_blocks() -> None:
    store = FlakyStore()
    guard = LoopGuard(ON, store=store, fail_closed=True)
    store.down = True
    v = guard.before_tool_call("read", {"p": 1}, session="s")
    assert v.action == "block" and "fail closed" in (v.message or "")
    assert v.blocked_result()["details"]["status"] == "blocked"


# -- memory store bounds --------------------------------------------------------------------------


def test_memory_store_idle_ttl_and_cap() -> None:
    now = [0.0]
    store = MemoryStore(idle_ttl=60, max_sessions=3, clock=lambda: now[0])
    guard = LoopGuard(ON, store=store)
    for s in "abcd":
        _pair(guard, 0, session=s)
    assert len(store) == 3 and guard.history("a") == []
    now[0] = 1000
    _pair(guard, 1, session="e")
    assert len(store) == 1


def test_events_reach_store_and_callbacks() -> None:
    seen: list[LoopEvent] = []
    store = MemoryStore()
    guard = LoopGuard(ON, store=store, sinks=[seen.append])
    for i in range(21):
        _pair(guard, i)
    assert [e.action for e in seen] == ["warn", "block"]
    assert [e.action for e in store.events("s")] == ["warn", "block"]
    assert seen[1].to_dict()["type"] == "tool.loop"


# -- early preset ---------------------------------------------------------------------------------


def test_early_preset_warns_on_the_result_that_completes_the_pattern() -> None:
    events: list[LoopEvent] = []
    guard = LoopGuard(LoopDetectionConfig(enabled=True, preset="early"), sinks=[events.append])
    warned_after = []
    for i in range(8):
        before = guard.before_tool_call("probe", {"q": 1}, session="s", run_id="r", call_id=f"c{i}")
        assert before.action != "warn"  # shared dampening: never warned twice in one bucket
        after = guard.after_tool_call("probe", {"q": 1}, session="s", run_id="r", call_id=f"c{i}",
                                      result=SAME)
        if after.action == "warn":
            warned_after.append(i)
            assert after.annotate("x").endswith("stop if you are not making progress.]")
    threshold = guard.config.warning_threshold
    assert warned_after == [threshold - 1]
    assert len(events) == 1


def test_guard_never_raises_on_hostile_values() -> None:
    guard = LoopGuard(ON)

    class Weird:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

        def __eq__(self, other: object) -> bool:
            raise RuntimeError("no eq")

        __hash__ = object.__hash__

    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    for value in (Weird(), cyclic, b"\xff", {1: 2, "1": 3}, float("nan"), [Weird()], None):
        guard.before_tool_call("t", value, session="s")
        guard.after_tool_call("t", value, session="s", result=value, error=value)
    asyncio.run(guard.abefore_tool_call("t", Weird(), session="s"))


# -- every async twin runs the same transaction as its sync hook --------------------------------
# The drift the guard package's split removed: ``aadmit_batch`` skipped the
# ``LOOPWARDEN_DISABLED`` kill switch that ``admit_batch`` honours, so an async host with loop
# detection turned off still had its turns recorded and blocked.


def _async_batch_turns(guard: LoopGuard) -> list[str]:
    actions: list[str] = []
    for i in range(25):
        calls = [ToolCall("read", {"path": "a.py"}, f"c{i}")]
        admission = asyncio.run(guard.aadmit_batch(calls, session="s", run_id="r"))
        actions.extend(v.action for v in admission.verdicts)
    return actions


def test_aadmit_batch_honours_the_kill_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPWARDEN_DISABLED", "1")
    guard = LoopGuard(LoopDetectionConfig(enabled=True))
    assert _async_batch_turns(guard) == ["allow"] * 25
    assert guard.history("s") == []  # nothing recorded, as admit_batch records nothing
    assert guard.stats.calls == 0


def test_aadmit_batch_still_guards_when_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOOPWARDEN_DISABLED", raising=False)
    guard = LoopGuard(LoopDetectionConfig(enabled=True))
    assert "block" in _async_batch_turns(guard)
    assert guard.history("s")


def test_the_sync_and_async_hooks_answer_alike() -> None:
    def run(use_async: bool) -> list[tuple[str, str]]:
        guard = LoopGuard(LoopDetectionConfig(enabled=True))
        seen: list[tuple[str, str]] = []
        for i in range(25):
            kw = {"session": "s", "run_id": "r", "call_id": f"c{i}"}
            if use_async:
                before = asyncio.run(guard.abefore_tool_call("read", {"p": 1}, **kw))
                after = asyncio.run(guard.aafter_tool_call("read", {"p": 1}, result="x", **kw))
            else:
                before = guard.before_tool_call("read", {"p": 1}, **kw)
                after = guard.after_tool_call("read", {"p": 1}, result="x", **kw)
            seen.append((before.action, after.action))
        return seen

    assert run(True) == run(False)
    assert ("block", "allow") in run(False)
