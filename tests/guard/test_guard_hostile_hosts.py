"""LoopGuard's hooks under hostile hosts: unprintable and unhashable ids (item 3), tools that
change their args between the hooks (item 6), hosts that reuse call ids every turn (item 7),
and store failures and async stores (item 20). Each test failed before its fix."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest

from loopwarden import (
    LoopDetectionConfig,
    LoopEvent,
    LoopGuard,
    MemoryStore,
    SessionState,
    StoreError,
    ToolCall,
    Verdict,
)

T = TypeVar("T")
ON = LoopDetectionConfig(enabled=True)
SAME = {"content": [{"type": "text", "text": "same"}], "details": {}}


class Unprintable:
    """An id whose ``__str__`` and ``__repr__`` raise (and which hashes like any object)."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")

    __repr__ = __str__


MARKER = "<unprintable id: Unprintable>"


# -- item 3: every hook is total over its ids ------------------------------------------------

def _sync_hooks(guard: LoopGuard, ids: dict[str, Any]) -> list[Any]:
    tool = ids.get("tool", "probe")
    kw = {"session": ids.get("session", "s"), "run_id": ids.get("run_id", "r")}
    cid, agent = ids.get("call_id", "c1"), ids.get("agent_id", "a")
    return [
        guard.before_tool_call(tool, {"q": 1}, call_id=cid, agent_id=agent, **kw),
        guard.after_tool_call(tool, {"q": 1}, call_id=cid, agent_id=agent, result=SAME, **kw),
        guard.observe_call(tool, {"q": 1}, call_id=cid, agent_id=agent, result=SAME, **kw),
        guard.compaction_retried(**kw),
        guard.admit_batch([ToolCall(tool, {"q": 1}, call_id=cid, run_id=kw["run_id"])],
                          session=kw["session"], agent_id=agent),
        guard.admit_batch([ToolCall(tool, {"q": 2}, call_id=cid)], agent_id=agent, **kw),
        guard.history(kw["session"]),
    ]


async def _async_hooks(guard: LoopGuard, ids: dict[str, Any]) -> list[Any]:
    tool = ids.get("tool", "probe")
    kw = {"session": ids.get("session", "s"), "run_id": ids.get("run_id", "r")}
    cid, agent = ids.get("call_id", "c1"), ids.get("agent_id", "a")
    return [
        await guard.abefore_tool_call(tool, {"q": 1}, call_id=cid, agent_id=agent, **kw),
        await guard.aafter_tool_call(tool, {"q": 1}, call_id=cid, agent_id=agent, result=SAME,
                                     **kw),
        await guard.acompaction_retried(**kw),
        await guard.aadmit_batch([ToolCall(tool, {"q": 1}, call_id=cid, run_id=kw["run_id"])],
                                 session=kw["session"], agent_id=agent),
    ]


ID_NAMES = ["tool", "session", "run_id", "call_id", "agent_id"]


@pytest.mark.parametrize("which", ID_NAMES)
def test_sync_hooks_take_an_unprintable_id(which: str) -> None:
    guard = LoopGuard(ON)
    results = _sync_hooks(guard, {which: Unprintable()})
    verdicts = [r for r in results if isinstance(r, Verdict)]
    assert verdicts and all(v.action == "allow" for v in verdicts)
    repr(results)  # everything handed back is printable again
    if which == "tool":
        assert {v.tool_name for v in verdicts} == {MARKER}
    if which == "call_id":
        assert {v.call_id for v in verdicts} == {MARKER}
    assert guard.stats.internal_errors == 0 and guard.stats.store_failures == 0


@pytest.mark.parametrize("which", ID_NAMES)
async def test_async_hooks_take_an_unprintable_id(which: str) -> None:
    guard = LoopGuard(ON)
    results = await _async_hooks(guard, {which: Unprintable()})
    repr(results)
    assert guard.stats.internal_errors == 0 and guard.stats.store_failures == 0


def test_unprintable_ids_are_one_stable_id_per_type() -> None:
    guard = LoopGuard(ON)
    for i in range(21):
        verdict = guard.before_tool_call("probe", {"q": 1}, session=Unprintable(),
                                         run_id=Unprintable(), call_id=f"c{i}")
        guard.after_tool_call("probe", {"q": 1}, session=Unprintable(), run_id=Unprintable(),
                              call_id=f"c{i}", result=SAME)
    assert verdict.action == "block"
    history = guard.history(MARKER)
    assert len(history) == 21 and {r.run_id for r in history} == {MARKER}


@pytest.mark.parametrize("session", [["x"], {"k": 1}, 7, b"raw"], ids=repr)
def test_a_non_str_session_is_normalised_not_a_store_failure(session: Any) -> None:
    guard = LoopGuard(ON)
    actions = []
    for i in range(21):
        verdict = guard.before_tool_call("probe", {"q": 1}, session=session, call_id=f"c{i}")
        guard.after_tool_call("probe", {"q": 1}, session=session, call_id=f"c{i}", result=SAME)
        actions.append(verdict.action)
    assert actions[10] == "warn" and actions[20] == "block"
    assert guard.stats.store_failures == 0
    assert len(guard.history(session)) == 21
    assert guard.history(str(session)) == guard.history(session)


def test_str_subclass_ids_become_plain_str() -> None:
    class Sneaky(str):
        def __hash__(self) -> int:
            raise RuntimeError("no hashing")

    guard = LoopGuard(ON)
    verdict = guard.before_tool_call(Sneaky("probe"), {}, session=Sneaky("s"),
                                     call_id=Sneaky("c"))
    assert type(verdict.tool_name) is str and type(verdict.call_id) is str
    assert [type(r.call_id) for r in guard.history("s")] == [str]


def test_decorator_takes_unprintable_names_and_a_failing_session_callable() -> None:
    guard = LoopGuard(ON)

    @guard.tool(name=Unprintable(), session=Unprintable())  # type: ignore[arg-type]
    def probe(q: int) -> str:
        return "same"

    def broken_session() -> str:
        raise RuntimeError("session lookup failed")

    @guard.tool(session=broken_session)
    def other(q: int) -> str:
        return "ok"

    assert [probe(1) for _ in range(3)] == ["same"] * 3
    assert len(guard.history(MARKER)) == 3
    assert other(1) == "ok"  # run unguarded; the failure is counted
    assert guard.stats.internal_errors == 1


def _run_child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.integration
def test_log_lines_never_fail_to_format_or_write(tmp_path: Any) -> None:
    # A strict UTF-8 file handler (logging's default errors) and stderr: a tool name whose
    # __str__ raises, or one with a lone surrogate, used to make logging print
    # "--- Logging error ---" instead of the line.
    log_file = tmp_path / "loopwarden.log"
    child = _run_child(f"""
        import logging
        from loopwarden import LoopDetectionConfig, LoopGuard
        handler = logging.FileHandler({str(log_file)!r}, encoding="utf-8")
        logging.basicConfig(level=logging.INFO, handlers=[logging.StreamHandler(), handler])

        class Unprintable:
            def __str__(self):
                raise RuntimeError("no text")
            __repr__ = __str__

        class BadArgs:
            def __init__(self):
                self.x = self
            def __reduce_ex__(self, protocol):
                raise ValueError(Unprintable())
            __reduce__ = __reduce_ex__

        def sink(event):
            raise KeyError(Unprintable())

        guard = LoopGuard(LoopDetectionConfig(enabled=True), sinks=[sink])
        for tool in (Unprintable(), "sur\\udc80rogate", "plain"):
            for i in range(21):
                verdict = guard.before_tool_call(tool, {{"q": 1}}, session="s\\ud800",
                                                 call_id=f"c{{i}}")
                guard.after_tool_call(tool, {{"q": 1}}, session="s\\ud800", call_id=f"c{{i}}",
                                      result="same")
            assert verdict.action == "block", verdict
        guard.before_tool_call(Unprintable(), BadArgs(), session="s")
        print("done")
    """)
    assert child.returncode == 0, child.stderr
    assert "done" in child.stdout
    assert "Logging error" not in child.stderr
    written = log_file.read_text(encoding="utf-8")
    assert "Blocking <unprintable id: Unprintable> due to critical loop" in written
    assert "sur\\udc80rogate" in written  # escaped, not dropped
    assert "event sink" in written


# -- item 6: args changed in place between the hooks -----------------------------------------

def _actions(guard: LoopGuard, *, call_id: Callable[[int], str | None],
             mutate: bool, n: int = 40) -> list[str]:
    actions = []
    for i in range(n):
        args: dict[str, Any] = {"q": 1}
        verdict = guard.before_tool_call("probe", args, session="s", run_id="r",
                                         call_id=call_id(i))
        actions.append(verdict.action)
        if verdict.action == "block":
            continue
        if mutate:
            args.setdefault("timeout", 30)  # the tool fills in a default
        guard.after_tool_call("probe", args, session="s", run_id="r", call_id=call_id(i),
                              result=SAME)
    return actions


def _unique(i: int) -> str:
    return f"c{i}"


def _no_id(i: int) -> None:
    return None


@pytest.mark.parametrize("ids", [_unique, _no_id], ids=["call ids", "no call ids"])
def test_args_mutated_between_hooks_match_the_admitted_call(ids: Callable[[int], Any]) -> None:
    reference = _actions(LoopGuard(ON), call_id=ids, mutate=False)
    guard = LoopGuard(ON)
    assert _actions(guard, call_id=ids, mutate=True) == reference
    assert reference.index("warn") == 10 and reference.index("block") == 20
    history = guard.history("s")
    assert len(history) == 30 and not any(r.pending for r in history)
    assert len({r.args_hash for r in history}) == 1


def test_decorated_tool_mutating_its_args_is_blocked() -> None:
    guard = LoopGuard(ON)

    @guard.tool(on_block="return")
    def probe(options: dict[str, Any]) -> str:
        options.setdefault("timeout", 30)
        return "same"

    results = [probe({"q": 1}) for _ in range(21)]
    # The 11th carries the warning note (the decorator shows it to the model).
    assert [r.split("\n\n")[0] for r in results[:20]] == ["same"] * 20
    assert "Tool-loop warning" in results[10] and isinstance(results[20], dict)
    assert not any(r.pending for r in guard.history("default"))


async def test_async_decorated_tool_mutating_its_args_is_blocked() -> None:
    guard = LoopGuard(ON)

    @guard.tool(on_block="return")
    async def probe(options: dict[str, Any]) -> str:
        options.setdefault("timeout", 30)
        return "same"

    results = [await probe({"q": 1}) for _ in range(21)]
    # The 11th carries the warning note (the decorator shows it to the model).
    assert [r.split("\n\n")[0] for r in results[:20]] == ["same"] * 20
    assert "Tool-loop warning" in results[10] and isinstance(results[20], dict)


def test_an_outcome_with_unchanged_args_still_finds_its_own_call() -> None:
    # Two pending calls of one tool without ids: the exact match (the spec's rule) wins over
    # the newest pending call.
    guard = LoopGuard(ON)
    guard.before_tool_call("probe", {"q": 1}, session="s")
    guard.before_tool_call("probe", {"q": 2}, session="s")
    guard.after_tool_call("probe", {"q": 1}, session="s", result="one")
    first, second = guard.history("s")
    assert first.result_hash is not None and second.pending


# -- item 7: call ids reused every turn ------------------------------------------------------

def test_per_turn_call_ids_are_new_calls() -> None:
    reference = _actions(LoopGuard(ON), call_id=_unique, mutate=False)
    guard = LoopGuard(ON)
    assert _actions(guard, call_id=lambda i: "call_0", mutate=False) == reference
    assert len(guard.history("s")) == 21  # 20 runs, then the blocked call: re-asked, not recounted


def test_per_turn_call_ids_in_batches_are_new_calls() -> None:
    def actions(call_id: Callable[[int], str]) -> list[str]:
        guard = LoopGuard(ON)
        out = []
        for i in range(25):
            admission = guard.admit_batch([ToolCall("probe", {"q": 1}, call_id=call_id(i))],
                                          session="s", run_id="r")
            verdict = admission.verdicts[0]
            out.append(verdict.action)
            if verdict.action != "block":
                guard.after_tool_call("probe", {"q": 1}, session="s", run_id="r",
                                      call_id=call_id(i), result=SAME)
        return out

    assert actions(lambda i: "call_0") == actions(_unique)


def test_a_reused_id_of_a_blocked_call_with_other_args_is_a_new_call() -> None:
    guard = LoopGuard(ON)
    for _ in range(20):
        _actions(guard, call_id=lambda i: "call_0", mutate=False, n=1)
    assert guard.before_tool_call("probe", {"q": 1}, session="s", run_id="r",
                                  call_id="call_0").action == "block"
    other = guard.before_tool_call("probe", {"q": 2}, session="s", run_id="r", call_id="call_0")
    assert other.action == "allow" and other.message is None


def test_retried_hooks_are_still_not_counted() -> None:
    guard = LoopGuard(ON)
    for i in range(10):
        for _ in range(2):
            guard.before_tool_call("probe", {"q": 1}, session="s", run_id="r", call_id=f"c{i}")
        for _ in range(2):
            guard.after_tool_call("probe", {"q": 1}, session="s", run_id="r", call_id=f"c{i}",
                                  result=SAME)
    assert len(guard.history("s")) == 10
    _actions(guard, call_id=lambda i: f"more{i}", mutate=False, n=10)
    # A blocked call's hook re-delivered: blocked again, and one veto recorded.
    verdicts = [guard.before_tool_call("probe", {"q": 1}, session="s", run_id="r", call_id="x")
                for _ in range(2)]
    assert [v.action for v in verdicts] == ["block", "block"]
    assert sum(r.is_veto for r in guard.history("s")) == 1


def test_engine_record_call_reuses_only_an_open_call() -> None:
    from loopwarden.engine import LoopDetector

    detector, state = LoopDetector(ON), SessionState()
    first = detector.record_call(state, "read", {"p": 1}, call_id="call_0")
    assert detector.record_call(state, "read", {"p": 1}, call_id="call_0") is first  # retry
    detector.record_outcome(state, "read", {"p": 1}, call_id="call_0", result="r")
    assert detector.record_call(state, "read", {"p": 1}, call_id="call_0") is not first
    assert len(state.history) == 2


# -- item 20: history fails open; async hooks and the store's async transaction --------------

class SyncOnlyStore:
    """A host's own store with only the sync protocol, which notes the threads it runs on."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.threads: list[int] = []

    def transact(self, session: str, fn: Callable[[SessionState], T]) -> T:
        self.threads.append(threading.get_ident())
        return self.inner.transact(session, fn)

    def load(self, session: str) -> SessionState | None:
        return self.inner.load(session)

    def record_events(self, events: Sequence[LoopEvent]) -> None:
        self.threads.append(threading.get_ident())
        self.inner.record_events(events)

    def close(self) -> None:
        self.inner.close()


class AsyncStore(SyncOnlyStore):
    """A store with an async transaction: the async hooks must use it, never ``transact``."""

    def __init__(self) -> None:
        super().__init__()
        self.async_calls = 0

    def transact(self, session: str, fn: Callable[[SessionState], T]) -> T:
        raise AssertionError("the sync transaction was used from an async hook")

    async def atransact(self, session: str, fn: Callable[[SessionState], T]) -> T:
        self.async_calls += 1
        return self.inner.transact(session, fn)

    def record_events(self, events: Sequence[LoopEvent]) -> None:
        raise AssertionError("the sync record_events was used from an async hook")

    async def arecord_events(self, events: Sequence[LoopEvent]) -> None:
        self.async_calls += 1
        self.inner.record_events(events)


async def _every_async_hook(guard: LoopGuard) -> None:
    for i in range(12):  # enough for a warning, so events are recorded too
        await guard.abefore_tool_call("probe", {"q": 1}, session="s", call_id=f"c{i}")
        await guard.aafter_tool_call("probe", {"q": 1}, session="s", call_id=f"c{i}",
                                     result=SAME)
    await guard.acompaction_retried(session="s")
    for i in range(3):
        await guard.aadmit_batch([ToolCall("probe", {"q": 1}, call_id=f"b{i}")], session="s")


async def test_async_hooks_run_a_sync_only_store_off_the_event_loop() -> None:
    store = SyncOnlyStore()
    guard = LoopGuard(ON, store=store)
    await _every_async_hook(guard)
    loop_thread = threading.get_ident()
    assert store.threads and loop_thread not in store.threads
    assert guard.stats.store_failures == 0 and guard.stats.warnings >= 1


async def test_async_hooks_use_the_stores_async_transaction() -> None:
    store = AsyncStore()
    guard = LoopGuard(ON, store=store)
    await _every_async_hook(guard)
    assert store.async_calls >= 12 * 2 + 1 + 3
    assert guard.stats.store_failures == 0 and guard.stats.warnings >= 1


@pytest.mark.redis
async def test_aadmit_batch_uses_redis_atransact() -> None:
    redis_url = os.environ.get("LOOPWARDEN_REDIS_URL")
    if not redis_url:
        pytest.skip("LOOPWARDEN_REDIS_URL is not set")
    from loopwarden.guard.stores.redis import RedisStore

    redis_prefix = f"loopwarden-test:{uuid.uuid4().hex}:"

    class CountingRedisStore(RedisStore):
        sync_calls = 0

        def transact(self, session: str, fn: Callable[[SessionState], T]) -> T:
            CountingRedisStore.sync_calls += 1
            return super().transact(session, fn)

    store = CountingRedisStore(redis_url, prefix=redis_prefix)
    try:
        guard = LoopGuard(ON, store=store)
        admission = await guard.aadmit_batch([ToolCall("probe", {"q": 1}, call_id="b")],
                                             session="s")
        assert [v.action for v in admission.verdicts] == ["allow"]
        assert CountingRedisStore.sync_calls == 0 and len(guard.history("s")) == 1
    finally:
        for key in store.client.scan_iter(match=f"{redis_prefix}*"):
            store.client.delete(key)
        await store.aclose()
        store.close()


class BrokenStore(MemoryStore):
    def load(self, session: str) -> SessionState | None:
        raise StoreError("store unreachable")


def test_history_fails_open_and_is_counted(caplog: pytest.LogCaptureFixture) -> None:
    guard = LoopGuard(ON, store=BrokenStore())
    with caplog.at_level(logging.ERROR, logger="loopwarden"):
        assert guard.history("s") == []
    assert guard.stats.store_failures == 1
    assert "state store failed: StoreError: store unreachable" in caplog.text


def test_async_hooks_share_the_sync_fallbacks() -> None:
    class DownStore(SyncOnlyStore):
        def transact(self, session: str, fn: Callable[[SessionState], T]) -> T:
            raise StoreError("down")

    guard = LoopGuard(ON, store=DownStore(), fail_closed=True)
    sync = guard.admit_batch([ToolCall("probe", {}, call_id="a")], session="s")
    asynchronous = asyncio.run(guard.aadmit_batch([ToolCall("probe", {}, call_id="a")],
                                                  session="s"))
    assert [v.action for v in sync.verdicts] == [v.action for v in asynchronous.verdicts]
    assert sync.verdicts[0].action == "block"
