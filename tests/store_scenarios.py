"""Scripted tool-call sequences shared by the store tests (and the race test's worker processes).

A scenario is driven through a ``LoopGuard``; the actions it returns and the history it leaves
must not depend on which store holds the state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loopwarden import LoopDetectionConfig, LoopGuard, SessionState, Store

Step = tuple[str, dict[str, Any], Any]  # tool, args, result

ENABLED = LoopDetectionConfig(enabled=True)
SAME = {"content": [{"type": "text", "text": "same output"}], "details": {"ok": True}}
POLL_ARGS = {"action": "poll", "sessionId": "sess-1"}
POLL_RESULT = {
    "content": [{"type": "text", "text": "(no new output)\n\nProcess still running."}],
    "details": {"status": "running", "aggregated": "steady"},
}

# Each race worker repeats its own tool; ping-pong, cycles and argument churn are off because
# they look across keys, where the interleaving of workers (not the store) decides what is
# adjacent.
RACE_CONFIG = LoopDetectionConfig(
    enabled=True, history_size=500, warning_threshold=4, critical_threshold=8,
    global_circuit_breaker_threshold=12,
    detectors={"ping_pong": False, "argument_churn": False, "cycle": False},
)
RACE_CALLS = 14
RACE_WORKERS = 8
RACE_SESSION = "race-session"


def mixed_script() -> list[Step]:
    """Warnings from several detectors, then a generic critical and the global breaker."""
    steps: list[Step] = []
    steps += [("read", {"path": f"f{i}"}, f"content {i}") for i in range(5)]
    steps += [("process", POLL_ARGS, POLL_RESULT)] * 12
    steps += [("a", {"x": 1}, "A") if i % 2 == 0 else ("b", {"y": 2}, "B") for i in range(12)]
    steps += [("read", {"path": "loop"}, SAME)] * 34
    return steps


# A lone surrogate: a valid Python string that UTF-8 (hence SQLite text, Redis keys, orjson)
# cannot hold. Agents and transcripts can hand such ids and results to the guard.
SURROGATE = "\ud800"
SURROGATE_SESSION = f"session-{SURROGATE}"
SURROGATE_RUN = f"run-{SURROGATE}"


def surrogate_script() -> list[Step]:
    """:func:`mixed_script` with lone surrogates in tool names, arguments and results."""
    def odd(value: Any) -> Any:
        if isinstance(value, str):
            return f"{value}{SURROGATE}"
        if isinstance(value, dict):
            return {f"{k}{SURROGATE}": odd(v) for k, v in value.items()}
        if isinstance(value, list):
            return [odd(v) for v in value]
        return value

    return [(odd(tool), odd(args), odd(result)) for tool, args, result in mixed_script()]


def drive(
    guard: LoopGuard, steps: list[Step], *, session: str, run_id: str | None = "run-1",
    prefix: str = "c", retry_before: bool = False, retry_after: bool = False,
    before_step: Callable[[], object] | None = None,
) -> list[str]:
    """Run ``steps`` as an agent would; ``retry_before``/``retry_after`` fire that hook twice
    with the same call id (a retried hook); ``before_step`` runs before each step."""
    actions = []
    for i, (tool, args, result) in enumerate(steps):
        if before_step is not None:
            before_step()
        call_id = f"{prefix}{i}"
        verdict = guard.before_tool_call(tool, args, session=session, run_id=run_id,
                                         call_id=call_id)
        if retry_before:
            guard.before_tool_call(tool, args, session=session, run_id=run_id, call_id=call_id)
        actions.append(verdict.action)
        if verdict.action == "block":
            continue
        guard.after_tool_call(tool, args, session=session, result=result, run_id=run_id,
                              call_id=call_id)
        if retry_after:
            guard.after_tool_call(tool, args, session=session, result=result, run_id=run_id,
                                  call_id=call_id)
    return actions


def history_view(state: SessionState | None) -> list[tuple[Any, ...]]:
    """The history without timestamps (the only field that differs between two runs)."""
    if state is None:
        return []
    return [(r.tool_name, r.args_hash, r.call_id, r.run_id, r.result_hash, r.outcome_kind,
             r.no_progress) for r in state.history]


def race_steps(worker: int) -> list[Step]:
    return [(f"tool{worker}", {"n": 1}, SAME)] * RACE_CALLS


def race_worker_run(guard: LoopGuard, worker: int,
                    before_step: Callable[[], object] | None = None) -> list[str]:
    return drive(guard, race_steps(worker), session=RACE_SESSION, run_id="race",
                 prefix=f"w{worker}-", retry_before=worker % 2 == 0,
                 retry_after=worker % 3 == 0, before_step=before_step)


def sequential_race_reference(store: Store) -> tuple[dict[int, list[str]], SessionState]:
    """What the race must end with: every worker's script run one after another."""
    guard = LoopGuard(RACE_CONFIG, store=store)
    actions = {w: race_worker_run(guard, w) for w in range(RACE_WORKERS)}
    state = store.load(RACE_SESSION)
    assert state is not None
    return actions, state


def sorted_history(state: SessionState | None) -> list[tuple[Any, ...]]:
    return sorted(history_view(state), key=repr)


def make_store(kind: str, where: str, prefix: str) -> Any:
    if kind == "redis":
        from loopwarden.guard.stores.redis import RedisStore

        return RedisStore(where, prefix=prefix)
    from loopwarden.guard.stores.sqlite import SQLiteStore

    return SQLiteStore(where)


_barrier: Any = None


def init_race_worker(barrier: Any) -> None:
    """Pool initializer: every race step waits on this (reusable) barrier, so all workers
    make their n-th call together."""
    global _barrier
    _barrier = barrier


def race_task(kind: str, where: str, prefix: str, worker: int) -> tuple[int, list[str], int, int]:
    """One worker of the race test (module level, so a ``spawn`` pool can import it)."""
    store = make_store(kind, where, prefix)
    guard = LoopGuard(RACE_CONFIG, store=store)
    try:
        # Lock-step: every worker makes its n-th call only once all have finished their
        # (n-1)-th, so the eight race within each round, and each round holds a call of each:
        # the records interleave by construction, whatever the scheduler does.
        actions = race_worker_run(guard, worker, lambda: _barrier.wait(timeout=120))
    finally:
        store.close()
    failures = guard.stats.store_failures + guard.stats.internal_errors
    return worker, actions, failures, getattr(store, "conflicts", 0)
