"""``RedisStore``: session state shared by a fleet of workers, with no lost or doubled updates.

Each session is one key (``<prefix>session:<id>``) holding its state as JSON, expiring after
``idle_ttl`` seconds unused. A check-and-record is an optimistic transaction: WATCH the key, read
it, run the guard's pure function, then MULTI/SET/EXEC. If another worker changed the session in
between, EXEC fails and the function runs again on the fresh state — so two workers racing on one
session serialise exactly as if they had taken turns. Events go to one Redis stream.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import RedisError, WatchError
from redis.retry import Retry
from redis.typing import EncodableT, FieldT

from ..events import LoopEvent
from ..history import SessionState
from ._codec import (
    EVENT_FIELDS,
    decode_state,
    encode_state,
    event_from_values,
    field_text,
    text_value,
)
from .base import StoreError

__all__ = ["RedisStore"]

T = TypeVar("T")



class RedisStore:
    """Session states in Redis under ``prefix``; the run record in the stream
    ``<prefix>events`` (capped near ``stream_maxlen`` entries, ``None`` = uncapped).

    ``max_retries`` bounds the optimistic retries of one transaction under contention; beyond
    it the call fails with :class:`StoreError` (and the guard's failure policy applies).
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "loopwarden:",
        idle_ttl: float | None = 1800,
        stream_maxlen: int | None = 100_000,
        max_retries: int = 200,
        socket_timeout: float | None = 1.0,
        connect_timeout: float | None = 1.0,
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.idle_ttl = idle_ttl
        self.stream_maxlen = stream_maxlen
        self.max_retries = max_retries
        self.conflicts = 0  # transactions re-run because another worker won the race
        self._options: dict[str, Any] = {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": connect_timeout,
        }
        # One quick retry replaces a pooled connection that died with a restarted server; the
        # client's default (ten, backing off to a second each) would stall the agent in an
        # outage that the guard should simply fail open through.
        backoff = ExponentialWithJitterBackoff(base=0.01, cap=0.1)
        # Connections are made lazily, so a store built while Redis is down still works later.
        self.client: redis.Redis = redis.Redis.from_url(
            url, retry=Retry(backoff, retries=1), **self._options)
        self._async_retry = AsyncRetry(backoff, retries=1)
        # redis.asyncio connections belong to the loop that opened them: one client per loop.
        self._aclients: list[tuple[asyncio.AbstractEventLoop, aredis.Redis]] = []

    @property
    def stream_key(self) -> str:
        return f"{self.prefix}events"

    def session_key(self, session: str) -> str:
        return f"{self.prefix}session:{session}"

    # -- the Store protocol ------------------------------------------------------------------

    def transact(self, session: str, fn: Callable[[SessionState], T]) -> T:
        key = self.session_key(session)
        try:
            with self.client.pipeline() as pipe:
                for attempt in range(self.max_retries):
                    pipe.watch(key)  # type: ignore[no-untyped-call]
                    state = _decode_state(pipe.get(key))
                    result = fn(state)
                    pipe.multi()
                    pipe.set(key, encode_state(state), px=self._ttl_ms())
                    try:
                        pipe.execute()
                    except WatchError:
                        self.conflicts += 1
                        time.sleep(_backoff(attempt))
                        continue
                    return result
        except RedisError as exc:
            raise StoreError(f"Redis store {self.url}: {exc}") from exc
        raise StoreError(f"Redis store {self.url}: session {session!r} stayed contended "
                         f"through {self.max_retries} attempts")

    async def atransact(self, session: str, fn: Callable[[SessionState], T]) -> T:
        key = self.session_key(session)
        try:
            async with self._aclient().pipeline() as pipe:
                for attempt in range(self.max_retries):
                    await pipe.watch(key)
                    state = _decode_state(await pipe.get(key))
                    result = fn(state)
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.set(key, encode_state(state), px=self._ttl_ms())
                    try:
                        await pipe.execute()
                    except WatchError:
                        self.conflicts += 1
                        await asyncio.sleep(_backoff(attempt))
                        continue
                    return result
        except RedisError as exc:
            raise StoreError(f"Redis store {self.url}: {exc}") from exc
        raise StoreError(f"Redis store {self.url}: session {session!r} stayed contended "
                         f"through {self.max_retries} attempts")

    def load(self, session: str) -> SessionState | None:
        try:
            raw = self.client.get(self.session_key(session))
        except RedisError as exc:
            raise StoreError(f"Redis store {self.url}: {exc}") from exc
        return None if raw is None else _decode_state(raw)

    def record_events(self, events: Sequence[LoopEvent]) -> None:
        if not events:
            return
        try:
            with self.client.pipeline(transaction=False) as pipe:
                for event in events:
                    pipe.xadd(self.stream_key, _encode_event(event), maxlen=self.stream_maxlen,
                              approximate=True)
                pipe.execute()
        except RedisError as exc:
            raise StoreError(f"Redis store {self.url}: {exc}") from exc

    async def arecord_events(self, events: Sequence[LoopEvent]) -> None:
        if not events:
            return
        try:
            async with self._aclient().pipeline(transaction=False) as pipe:
                for event in events:
                    pipe.xadd(self.stream_key, _encode_event(event), maxlen=self.stream_maxlen,
                              approximate=True)
                await pipe.execute()
        except RedisError as exc:
            raise StoreError(f"Redis store {self.url}: {exc}") from exc

    def close(self) -> None:
        self.client.close()
        # Async clients of other (possibly closed) loops cannot be awaited from here; their
        # sockets close when collected. Use :meth:`aclose` inside the loop to close cleanly.
        self._aclients.clear()

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        mine = [c for lp, c in self._aclients if lp is loop]
        self._aclients = [(lp, c) for lp, c in self._aclients if lp is not loop]
        for client in mine:
            await client.aclose()

    # -- the run record ----------------------------------------------------------------------

    def events(
        self, session: str | None = None, run: str | None = None, *, limit: int | None = None
    ) -> list[LoopEvent]:
        """Events in the stream, oldest first, optionally of one session and/or run."""
        try:
            entries = cast(list[tuple[bytes, dict[bytes, bytes]]],
                           self.client.xrange(self.stream_key))
        except RedisError as exc:
            raise StoreError(f"Redis store {self.url}: {exc}") from exc
        selected = [
            event for event in (_decode_event(data) for _, data in entries)
            if (session is None or event.session == session) and (run is None or event.run == run)
        ]
        return selected[-limit:] if limit else selected

    # -- internals ---------------------------------------------------------------------------

    def _ttl_ms(self) -> int | None:
        return None if self.idle_ttl is None else max(1, int(self.idle_ttl * 1000))

    def _aclient(self) -> aredis.Redis:
        loop = asyncio.get_running_loop()
        self._aclients = [(lp, c) for lp, c in self._aclients if not lp.is_closed()]
        for lp, client in self._aclients:
            if lp is loop:
                return client
        client = aredis.Redis.from_url(self.url, retry=self._async_retry, **self._options)
        self._aclients.append((loop, client))
        return client


def _backoff(attempt: int) -> float:
    # Jittered so racing workers stop colliding in lockstep; capped to keep latency small.
    return random.uniform(0, min(0.05, 0.0005 * 2 ** min(attempt, 10)))


def _decode_state(raw: Any) -> SessionState:
    return SessionState() if raw is None else decode_state(raw)


def _encode_event(event: LoopEvent) -> dict[FieldT, EncodableT]:
    # Flat text fields (empty ones left out) so any stream consumer can read them.
    encoded: dict[FieldT, EncodableT] = {}
    for name in EVENT_FIELDS:
        text = field_text(name, getattr(event, name))
        if text is not None:
            encoded[name] = text
    return encoded


def _decode_event(data: dict[bytes, bytes]) -> LoopEvent:
    values = {}
    for raw_name, raw_value in data.items():
        name = raw_name.decode()
        if name in EVENT_FIELDS:
            values[name] = text_value(name, raw_value.decode())
    return event_from_values(values)
