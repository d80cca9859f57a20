"""``SQLiteStore``: persistence, WAL, idle TTL, the run record, threads, asyncio, idempotency."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from loopwarden import LoopEvent, LoopGuard, MemoryStore, SessionState, StoreError
from loopwarden.guard.stores.sqlite import SQLiteStore
from store_scenarios import ENABLED, drive, history_view, mixed_script


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "loopwarden.db"


def event(session: str, run: str | None, action: str = "warn", *, agent: str | None = None,
          detector: str = "generic_repeat", count: int = 10, timestamp: int = 1_000) -> LoopEvent:
    level = "warning" if action == "warn" else "critical"
    return LoopEvent(session=session, run=run, agent=agent, tool="read", level=level,
                     action=action, detector=detector, count=count, message=f"{action} {count}",
                     call_id=f"call-{count}", timestamp=timestamp)


def test_file_uses_wal_and_the_documented_tables(db: Path) -> None:
    with SQLiteStore(db) as store:
        store.transact("s", lambda state: None)
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"sessions", "events"} <= tables
        session, blob, updated_at = conn.execute("SELECT session, state, updated_at FROM sessions").fetchone()
        assert session == "s" and updated_at > 0
        assert SessionState.from_dict(__import__("orjson").loads(blob)).history == []
    finally:
        conn.close()


def test_constructor_does_not_touch_the_file(tmp_path: Path) -> None:
    path = tmp_path / "not-yet" / "x.db"
    SQLiteStore(path).close()
    assert not path.exists()


def test_guard_behaves_exactly_as_with_the_memory_store(db: Path) -> None:
    memory = LoopGuard(ENABLED, store=MemoryStore())
    expected = drive(memory, mixed_script(), session="s")
    with SQLiteStore(db) as store:
        guard = LoopGuard(ENABLED, store=store)
        assert drive(guard, mixed_script(), session="s") == expected
        assert {"warn", "block"} <= set(expected)
        state = store.load("s")
        reference = memory.store.load("s")
        assert state is not None and reference is not None
        assert history_view(state) == history_view(reference)
        assert state.warning_buckets == reference.warning_buckets
        assert guard.stats.warnings == memory.stats.warnings
        assert guard.stats.blocks == memory.stats.blocks


def test_state_survives_a_restart_and_detection_continues(db: Path) -> None:
    steps = [("read", {"path": "a"}, "same")] * 10
    with SQLiteStore(db) as store:
        drive(LoopGuard(ENABLED, store=store), steps, session="s", prefix="first")
    with SQLiteStore(db) as reopened:
        assert len(history_view(reopened.load("s"))) == 10
        guard = LoopGuard(ENABLED, store=reopened)
        verdict = guard.before_tool_call("read", {"path": "a"}, session="s", run_id="run-1")
        assert verdict.action == "warn"
        assert verdict.detection is not None and verdict.detection.count == 10


def test_two_store_objects_on_one_file_share_sessions(db: Path) -> None:
    with SQLiteStore(db) as one, SQLiteStore(db) as two:
        guards = [LoopGuard(ENABLED, store=one), LoopGuard(ENABLED, store=two)]
        actions = []
        for i in range(12):
            guard = guards[i % 2]
            verdict = guard.before_tool_call("read", {"p": 1}, session="s", call_id=f"c{i}")
            guard.after_tool_call("read", {"p": 1}, session="s", result="r", call_id=f"c{i}")
            actions.append(verdict.action)
        assert actions.index("warn") == 10
        assert len(history_view(one.load("s"))) == 12


def test_retried_outcome_hooks_are_idempotent(db: Path) -> None:
    reference = LoopGuard(ENABLED, store=MemoryStore())
    expected = drive(reference, mixed_script(), session="s")
    with SQLiteStore(db) as store:
        guard = LoopGuard(ENABLED, store=store)
        assert drive(guard, mixed_script(), session="s", retry_after=True) == expected
        state, ref_state = store.load("s"), reference.store.load("s")
        assert history_view(state) == history_view(ref_state)
        assert state is not None and ref_state is not None
        assert state.warning_buckets == ref_state.warning_buckets


def test_retried_call_hooks_do_not_add_records(db: Path) -> None:
    reference = LoopGuard(ENABLED, store=MemoryStore())
    drive(reference, mixed_script(), session="s")
    with SQLiteStore(db) as store:
        drive(LoopGuard(ENABLED, store=store), mixed_script(), session="s", retry_before=True,
              retry_after=True)
        assert history_view(store.load("s")) == history_view(reference.store.load("s"))


def test_retried_call_hook_returns_the_same_verdict(db: Path) -> None:
    with SQLiteStore(db) as store:
        guard = LoopGuard(ENABLED, store=store)
        drive(guard, [("read", {"p": 1}, "r")] * 9, session="s", run_id=None)
        first = guard.before_tool_call("read", {"p": 1}, session="s", call_id="again")
        retry = guard.before_tool_call("read", {"p": 1}, session="s", call_id="again")
        assert retry.action == first.action


def test_idle_sessions_expire_and_are_pruned(db: Path) -> None:
    clock = FakeClock()
    with SQLiteStore(db, idle_ttl=60, clock=clock) as store:
        store.transact("old", lambda s: s.warning_buckets.update(k=1))
        clock.now += 30
        store.transact("young", lambda s: s.warning_buckets.update(k=2))
        clock.now += 45  # "old" idle 75 s, "young" 45 s
        assert store.load("old") is None
        young = store.load("young")
        assert young is not None and young.warning_buckets == {"k": 2}
        assert store.sessions() == ["young"]
        assert store.transact("old", lambda s: dict(s.warning_buckets)) == {}
        clock.now += 61
        assert store.prune() == 2
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 0
    finally:
        conn.close()


def test_use_prunes_expired_rows_without_being_asked(db: Path) -> None:
    clock = FakeClock()
    with SQLiteStore(db, idle_ttl=10, clock=clock) as store:
        for i in range(50):
            store.transact(f"s{i}", lambda s: None)
        clock.now += 100
        store.transact("fresh", lambda s: None)
    conn = sqlite3.connect(db)
    try:
        assert [r[0] for r in conn.execute("SELECT session FROM sessions")] == ["fresh"]
    finally:
        conn.close()


def test_a_failing_function_leaves_the_state_unchanged(db: Path) -> None:
    with SQLiteStore(db) as store:
        store.transact("s", lambda s: s.warning_buckets.update(kept=1))

        def explode(state: SessionState) -> None:
            state.warning_buckets["lost"] = 2
            raise ValueError("boom")

        with pytest.raises(ValueError, match="boom"):
            store.transact("s", explode)
        state = store.load("s")
        assert state is not None and state.warning_buckets == {"kept": 1}
        store.transact("s", lambda s: s.warning_buckets.update(after=3))  # still usable
        assert store.load("s").warning_buckets == {"kept": 1, "after": 3}  # type: ignore[union-attr]


def test_threads_never_lose_an_update(db: Path) -> None:
    def bump(state: SessionState) -> None:
        state.learned["n"] = state.learned.get("n", 0) + 1

    with SQLiteStore(db) as store:
        def work() -> None:
            for _ in range(50):
                store.transact("shared", bump)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        state = store.load("shared")
        assert state is not None and state.learned["n"] == 400


def test_events_are_recorded_and_filtered(db: Path) -> None:
    events = [
        event("s1", "r1", "warn", agent="main", count=10, timestamp=1_000),
        event("s1", "r1", "block", agent="main", count=20, timestamp=2_000),
        event("s1", None, "warn", count=10, timestamp=3_000),
        event("s2", "r1", "abort", detector="compaction_loop_persisted", count=3,
              timestamp=4_000),
    ]
    with SQLiteStore(db) as store:
        store.record_events(events[:2])
        store.record_events(events[2:])
        store.record_events([])
        assert store.events() == events
        assert store.events(session="s1") == events[:3]
        assert store.events(session="s1", run="r1") == events[:2]
        assert store.events(run="r1") == [events[0], events[1], events[3]]
        assert store.events(limit=2) == events[2:]


def test_runs_summarise_the_run_record(db: Path) -> None:
    with SQLiteStore(db) as store:
        store.record_events([
            event("s1", "r1", "warn", agent="main", timestamp=1_000),
            event("s1", "r1", "block", agent="helper", count=20, timestamp=2_000),
            event("s1", "r1", "block", agent="main", detector="global_circuit_breaker",
                  count=30, timestamp=2_500),
            event("s1", None, "warn", timestamp=3_000),
            event("s2", "r9", "abort", detector="compaction_loop_persisted", count=3,
                  timestamp=4_000),
        ])
        runs = store.runs()
        assert [(r.session, r.run) for r in runs] == [("s1", "r1"), ("s1", None), ("s2", "r9")]
        first = runs[0]
        assert (first.events, first.warnings, first.blocks, first.aborts) == (3, 1, 2, 0)
        assert (first.first, first.last) == (1_000, 2_500)
        assert first.agents == ("helper", "main")
        assert first.detectors == ("generic_repeat", "global_circuit_breaker")
        assert runs[1].agents == ()
        assert [r.run for r in store.runs("s1")] == ["r1", None]
        assert [r.session for r in store.runs(limit=1)] == ["s2"]
        assert runs[2].to_dict()["detectors"] == ["compaction_loop_persisted"]


def test_guard_events_land_in_the_run_record(db: Path) -> None:
    with SQLiteStore(db) as store:
        guard = LoopGuard(ENABLED, store=store)
        for i in range(21):
            verdict = guard.before_tool_call("read", {"p": 1}, session="s", run_id="r",
                                             call_id=f"c{i}", agent_id="agent-7")
            if verdict.action != "block":
                guard.after_tool_call("read", {"p": 1}, session="s", run_id="r",
                                      call_id=f"c{i}", result="same")
        recorded = store.events(session="s")
        assert [(e.action, e.count, e.call_id) for e in recorded] == [
            ("warn", 10, "c10"), ("block", 20, "c20")]
        assert all(e.agent == "agent-7" and e.run == "r" for e in recorded)
        (run,) = store.runs()
        assert (run.session, run.run, run.warnings, run.blocks) == ("s", "r", 1, 1)


async def test_async_guard_and_store(db: Path) -> None:
    with SQLiteStore(db) as store:
        guard = LoopGuard(ENABLED, store=store)
        actions = []
        for i in range(11):
            verdict = await guard.abefore_tool_call("read", {"p": 1}, session="s",
                                                    call_id=f"c{i}")
            await guard.aafter_tool_call("read", {"p": 1}, session="s", result="same",
                                         call_id=f"c{i}")
            actions.append(verdict.action)
        assert actions == ["allow"] * 10 + ["warn"]
        assert [e.count for e in store.events()] == [10]
        results = await asyncio.gather(*(store.atransact("t", lambda s: s.learned.update(
            n=s.learned.get("n", 0) + 1)) for _ in range(20)))
        assert results == [None] * 20
        assert store.load("t").learned == {"n": 20}  # type: ignore[union-attr]
        await store.arecord_events([event("t", None)])
        assert len(store.events(session="t")) == 1


def test_errors_surface_as_store_errors(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    store = SQLiteStore(blocker / "x.db")
    with pytest.raises(StoreError):
        store.transact("s", lambda s: None)
    with pytest.raises(StoreError):
        store.load("s")
    with pytest.raises(StoreError):
        store.record_events([event("s", None)])
    store.close()


def test_missing_parent_directories_are_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "loopwarden.db"
    with SQLiteStore(path) as store:
        store.transact("s", lambda s: None)
    assert path.is_file()


def test_event_fields_without_a_column_round_trip(db: Path) -> None:
    learned = LoopEvent(session="s", tool="exec", level="warning", action="warn",
                        detector="generic_repeat", count=10, message="m",
                        learned=("$.details.cpu#digits", "$.details.pid"))
    with SQLiteStore(db) as store:
        store.record_events([learned, event("s", None)])
        assert store.events() == [learned, event("s", None)]
