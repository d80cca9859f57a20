"""``RedisStore`` against a real redis-server: key layout, TTL, optimistic transactions, the
event stream, asyncio, idempotency."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import orjson
import pytest
import redis

from loopwarden import LoopEvent, LoopGuard, MemoryStore, SessionState, StoreError
from loopwarden.guard.stores.redis import RedisStore
from redis_server import free_port
from store_scenarios import ENABLED, drive, history_view, mixed_script

pytestmark = pytest.mark.redis


@pytest.fixture
def store(redis_url: str, redis_prefix: str) -> Iterator[RedisStore]:
    s = RedisStore(redis_url, prefix=redis_prefix)
    yield s
    s.close()


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def event(session: str, run: str | None, action: str = "warn", count: int = 10) -> LoopEvent:
    return LoopEvent(session=session, run=run, tool="read",
                     level="warning" if action == "warn" else "critical", action=action,
                     detector="generic_repeat", count=count, message=f"{action} {count}",
                     call_id=f"c{count}", timestamp=1_700_000_000_000 + count)


def test_one_key_per_session_under_the_prefix_with_an_idle_ttl(
    store: RedisStore, raw: redis.Redis, redis_prefix: str
) -> None:
    store.transact("s1", lambda s: s.warning_buckets.update(k=1))
    key = f"{redis_prefix}session:s1"
    assert store.session_key("s1") == key
    assert [k.decode() for k in raw.scan_iter(match=f"{redis_prefix}*")] == [key]
    data = orjson.loads(raw.get(key))  # type: ignore[arg-type]
    assert data["warning_buckets"] == {"k": 1}
    assert 1_790_000 < raw.pttl(key) <= 1_800_000  # type: ignore[operator]


def test_no_ttl_when_idle_ttl_is_none(redis_url: str, redis_prefix: str, raw: redis.Redis) -> None:
    store = RedisStore(redis_url, prefix=redis_prefix, idle_ttl=None)
    store.transact("s", lambda s: None)
    assert raw.pttl(store.session_key("s")) == -1
    store.close()


def test_idle_sessions_expire(redis_url: str, redis_prefix: str) -> None:
    store = RedisStore(redis_url, prefix=redis_prefix, idle_ttl=0.6)
    store.transact("s", lambda s: s.warning_buckets.update(k=1))
    time.sleep(0.35)
    store.transact("s", lambda s: None)  # use refreshes the TTL
    time.sleep(0.35)
    assert store.load("s") is not None
    time.sleep(0.8)
    assert store.load("s") is None
    assert store.transact("s", lambda s: dict(s.warning_buckets)) == {}
    store.close()


def test_guard_behaves_exactly_as_with_the_memory_store(store: RedisStore) -> None:
    memory = LoopGuard(ENABLED, store=MemoryStore())
    expected = drive(memory, mixed_script(), session="s")
    guard = LoopGuard(ENABLED, store=store)
    assert drive(guard, mixed_script(), session="s") == expected
    state, reference = store.load("s"), memory.store.load("s")
    assert state is not None and reference is not None
    assert history_view(state) == history_view(reference)
    assert state.warning_buckets == reference.warning_buckets


def test_two_workers_share_one_session(redis_url: str, redis_prefix: str) -> None:
    stores = [RedisStore(redis_url, prefix=redis_prefix) for _ in range(2)]
    guards = [LoopGuard(ENABLED, store=s) for s in stores]
    actions = []
    for i in range(12):
        guard = guards[i % 2]
        actions.append(guard.before_tool_call("read", {"p": 1}, session="s", call_id=f"c{i}").action)
        guard.after_tool_call("read", {"p": 1}, session="s", result="r", call_id=f"c{i}")
    assert actions.index("warn") == 10
    assert len(guards[0].history("s")) == 12
    for s in stores:
        s.close()


def test_retried_hooks_never_count_twice(store: RedisStore) -> None:
    reference = LoopGuard(ENABLED, store=MemoryStore())
    expected = drive(reference, mixed_script(), session="s")
    guard = LoopGuard(ENABLED, store=store)
    assert drive(guard, mixed_script(), session="s", retry_after=True) == expected
    drive(guard, mixed_script(), session="t", retry_before=True, retry_after=True)
    ref = reference.store.load("s")
    assert history_view(store.load("s")) == history_view(ref)
    assert history_view(store.load("t")) == history_view(ref)


def test_a_conflicting_write_reruns_the_function_on_fresh_state(
    store: RedisStore, raw: redis.Redis
) -> None:
    key = store.session_key("s")
    seen: list[dict[str, int]] = []

    def update(state: SessionState) -> str:
        seen.append(dict(state.warning_buckets))
        if len(seen) == 1:  # another worker commits between our read and our write
            other = SessionState(warning_buckets={"theirs": 1})
            raw.set(key, orjson.dumps(other.to_dict()))
        state.warning_buckets["ours"] = 2
        return "done"

    assert store.transact("s", update) == "done"
    assert seen == [{}, {"theirs": 1}]
    final = store.load("s")
    assert final is not None and final.warning_buckets == {"theirs": 1, "ours": 2}


def test_endless_contention_gives_up_with_a_store_error(
    redis_url: str, redis_prefix: str, raw: redis.Redis
) -> None:
    store = RedisStore(redis_url, prefix=redis_prefix, max_retries=3)
    calls = 0

    def always_raced(state: SessionState) -> None:
        nonlocal calls
        calls += 1
        raw.set(store.session_key("s"), orjson.dumps(SessionState().to_dict()))

    with pytest.raises(StoreError, match="contended"):
        store.transact("s", always_raced)
    assert calls == 3
    store.close()


def test_function_errors_propagate_and_write_nothing(store: RedisStore) -> None:
    def explode(state: SessionState) -> None:
        state.warning_buckets["lost"] = 1
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        store.transact("s", explode)
    assert store.load("s") is None


def test_events_go_to_a_stream_of_flat_fields(store: RedisStore, raw: redis.Redis) -> None:
    events = [event("s1", "r1"), event("s1", "r1", "block", 20), event("s1", None, count=11),
              event("s2", "r2", "abort", 3)]
    store.record_events(events[:2])
    store.record_events(events[2:])
    store.record_events([])
    assert store.events() == events
    assert store.events(session="s1") == events[:3]
    assert store.events(session="s1", run="r1") == events[:2]
    assert store.events(limit=1) == events[3:]
    (_, fields), *_ = raw.xrange(store.stream_key)
    assert fields[b"tool"] == b"read" and fields[b"count"] == b"10"
    assert b"agent" not in fields  # None values are left out


def test_the_stream_is_capped(redis_url: str, redis_prefix: str, raw: redis.Redis) -> None:
    store = RedisStore(redis_url, prefix=redis_prefix, stream_maxlen=10)
    for i in range(30):
        store.record_events([event("s", None, count=j) for j in range(i * 20, i * 20 + 20)])
    # Approximate trimming (cheap) keeps at most one stream node (100 entries) extra.
    assert raw.xlen(store.stream_key) <= 110
    assert store.events()[-1].count == 599
    store.close()


def test_guard_events_reach_the_stream(store: RedisStore) -> None:
    guard = LoopGuard(ENABLED, store=store)
    for i in range(21):
        verdict = guard.before_tool_call("read", {"p": 1}, session="s", run_id="r",
                                         call_id=f"c{i}", agent_id="a1")
        if verdict.action != "block":
            guard.after_tool_call("read", {"p": 1}, session="s", run_id="r", call_id=f"c{i}",
                                  result="same")
    assert [(e.action, e.count, e.agent, e.run) for e in store.events(session="s")] == [
        ("warn", 10, "a1", "r"), ("block", 20, "a1", "r")]


async def test_async_guard_uses_the_async_client(store: RedisStore) -> None:
    guard = LoopGuard(ENABLED, store=store)
    actions = []
    for i in range(11):
        verdict = await guard.abefore_tool_call("read", {"p": 1}, session="s", call_id=f"c{i}")
        await guard.aafter_tool_call("read", {"p": 1}, session="s", result="same",
                                     call_id=f"c{i}")
        actions.append(verdict.action)
    assert actions == ["allow"] * 10 + ["warn"]
    assert [e.count for e in store.events(session="s")] == [10]
    assert len(store._aclients) == 1

    def bump(state: SessionState) -> None:
        state.learned["n"] = state.learned.get("n", 0) + 1

    await asyncio.gather(*(store.atransact("t", bump) for _ in range(25)))
    assert store.load("t").learned == {"n": 25}  # type: ignore[union-attr]
    await store.arecord_events([event("t", None)])
    assert len(store.events(session="t")) == 1
    await store.aclose()
    assert store._aclients == []


def test_one_store_serves_several_event_loops(store: RedisStore) -> None:
    async def bump() -> int:
        def fn(state: SessionState) -> int:
            state.learned["n"] = state.learned.get("n", 0) + 1
            return int(state.learned["n"])

        return await store.atransact("s", fn)

    assert asyncio.run(bump()) == 1
    assert asyncio.run(bump()) == 2  # the first loop is closed; a new client serves this one


def test_unreachable_server_raises_store_errors() -> None:
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", connect_timeout=0.5)
    with pytest.raises(StoreError):
        store.transact("s", lambda s: None)
    with pytest.raises(StoreError):
        store.load("s")
    with pytest.raises(StoreError):
        store.record_events([event("s", None)])
    with pytest.raises(StoreError):
        store.events()

    async def async_calls() -> None:
        with pytest.raises(StoreError):
            await store.atransact("s", lambda s: None)
        with pytest.raises(StoreError):
            await store.arecord_events([event("s", None)])

    asyncio.run(async_calls())
    store.close()


def test_structured_event_fields_round_trip(store: RedisStore, raw: redis.Redis) -> None:
    learned = LoopEvent(session="s", tool="exec", level="warning", action="warn",
                        detector="generic_repeat", count=10, message="m",
                        learned=("$.details.cpu#digits", "$.details.pid"))
    store.record_events([learned, event("s", None)])
    assert store.events() == [learned, event("s", None)]
    (_, fields), (_, plain) = raw.xrange(store.stream_key)
    assert orjson.loads(fields[b"learned"]) == list(learned.learned)
    assert b"learned" not in plain
