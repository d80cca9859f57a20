"""Eight processes drive one session at once; the result must equal running them in turn.

Each worker repeats its own tool (with retried hooks on some workers), so what it is told —
allow, warn, block — depends only on its own calls. A lost update would drop records and shift
its warnings and blocks; a doubled one would add records. Either shows up as a difference from
the sequential run through a ``MemoryStore``.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from loopwarden import MemoryStore, SessionState
from store_scenarios import (
    RACE_SESSION,
    RACE_WORKERS,
    init_race_worker,
    make_store,
    race_task,
    sequential_race_reference,
    sorted_history,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    # One pool for both races: starting eight interpreters is most of the cost. Each worker
    # blocks on the barrier holding its task, so a race's eight tasks run in eight processes,
    # and the barrier before each step keeps them in lock-step.
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(RACE_WORKERS, mp_context=ctx, initializer=init_race_worker,
                             initargs=(ctx.Barrier(RACE_WORKERS),)) as executor:
        yield executor


def run_race(
    pool: ProcessPoolExecutor, kind: str, where: str, prefix: str = ""
) -> tuple[dict[int, list[str]], int]:
    futures = [pool.submit(race_task, kind, where, prefix, w) for w in range(RACE_WORKERS)]
    actions: dict[int, list[str]] = {}
    conflicts = 0
    for future in futures:
        worker, worker_actions, failures, worker_conflicts = future.result(timeout=180)
        assert failures == 0, f"worker {worker} hit {failures} store failures"
        actions[worker] = worker_actions
        conflicts += worker_conflicts
    return actions, conflicts


def assert_same_as_sequential(actions: dict[int, list[str]], final: SessionState | None) -> None:
    expected_actions, expected = sequential_race_reference(
        MemoryStore(idle_ttl=None, max_sessions=None))
    assert final is not None
    assert actions == expected_actions
    assert {"warn", "block"} <= {a for worker in actions.values() for a in worker}
    assert sorted_history(final) == sorted_history(expected)
    assert final.warning_buckets == expected.warning_buckets
    assert final.recovery_used == expected.recovery_used
    # The workers ran in lock-step (each step waits on a barrier), so their records interleave
    # by construction: step n of every worker comes before step n+1 of any. This follows from
    # the barrier, not from how the scheduler happened to run the processes.
    steps = [int(str(r.call_id).rsplit("-", 1)[1]) for r in final.history]
    assert steps == sorted(steps)
    first_round = {r.tool_name for r in final.history if str(r.call_id).endswith("-0")}
    assert len(first_round) == RACE_WORKERS


@pytest.mark.redis
def test_eight_processes_through_redis(
    pool: ProcessPoolExecutor, redis_url: str, redis_prefix: str
) -> None:
    actions, conflicts = run_race(pool, "redis", redis_url, redis_prefix)
    store: Any = make_store("redis", redis_url, redis_prefix)
    try:
        assert_same_as_sequential(actions, store.load(RACE_SESSION))
    finally:
        store.close()
    print(f"WATCH conflicts retried: {conflicts}")


def test_eight_processes_through_one_sqlite_file(
    pool: ProcessPoolExecutor, tmp_path: Path
) -> None:
    db = str(tmp_path / "race.db")
    actions, _ = run_race(pool, "sqlite", db)
    store: Any = make_store("sqlite", db, "")
    try:
        assert_same_as_sequential(actions, store.load(RACE_SESSION))
    finally:
        store.close()
