"""``RedisStore``: session state shared by a fleet of workers, with no lost or doubled updates.

Each session is one key (``<prefix>session:<id>``) holding its state as JSON, expiring after
``idle_ttl`` seconds unused. A check-and-record is an optimistic transaction: WATCH the key, read
it, run the guard's pure function, then MULTI/SET/EXEC. If another worker changed the session in
between, EXEC fails and the function runs again on the fresh state — so two workers racing on one
session serialise exactly as if they had taken turns. Events go to one Redis stream.

Strings are encoded with ``surrogatepass``, so ids holding lone surrogates get keys and stream
fields of their own (those bytes are never valid UTF-8: no collision with an ordinary id).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, WatchError
from redis.retry import Retry
from redis.typing import EncodableT, FieldT

from ...engine.history import SessionState
from ..events import LoopEvent
from ._codec import (
    EVENT_FIELDS,
    StateDecoder,
    encode_state,
    event_from_values,
    field_text,
    text_value,
)
from .base import CircuitBreaker, StoreError

T = TypeVar("T")



class RedisStore:
    """Session states in Redis under ``prefix``; the run record in the stream
    ``<prefix>events`` (capped near ``stream_maxlen`` entries, ``None`` = uncapped).

    ``max_retries`` bounds the optimistic retries of one transaction under contention; beyond
    it the call fails with :class:`StoreError` (and the guard's failure policy applies).

    A hung server (stopped, or busy in a slow command) costs one ``socket_timeout``: timeouts
    are not retried, and the store is then skipped for ``cooldown`` seconds (see
    :class:`~loopwarden.guard.stores.base.CircuitBreaker`; 0 turns that off). A session value that
    cannot be decoded is logged once, counted in :attr:`corrupt_states` and replaced by a fresh
    state.
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
        cooldown: float = 5.0,
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.idle_ttl = idle_ttl
        self.stream_maxlen = stream_maxlen
        self.max_retries = max_retries
        self.conflicts = 0  # transactions re-run because another worker won the race
        self._where = f"Redis store {url}"
        self.breaker = CircuitBreaker(cooldown)
        self._decode = StateDecoder(self._where)
        self._options: dict[str, Any] = {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": connect_timeout,
            "encoding_errors": "surrogatepass",
        }
        # One quick retry replaces a pooled connection that died with a restarted server; the
        # client's default (ten, backing off to a second each) would stall the agent in an
        # outage that the guard should simply fail open through. Timeouts are not retried: a
        # server that did not answer in time will not answer a second try sooner, and each
        # retry would cost the agent another socket_timeout.
        backoff = ExponentialWithJitterBackoff(base=0.01, cap=0.1)
        # Connections are made lazily, so a store built while Redis is down still works later.
        self.client: redis.Redis = redis.Redis.from_url(
            url, retry=Retry(backoff, retries=1, supported_errors=(RedisConnectionError,)),
            **self._options)
        self._async_retry = AsyncRetry(backoff, retries=1,
                                       supported_errors=(RedisConnectionError,))
        # redis.asyncio connections belong to the loop that opened them: one client per loop.
        self._aclients: list[tuple[asyncio.AbstractEventLoop, aredis.Redis]] = []

    @property
    def stream_key(self) -> str:
        """The stream the run record goes to, ``<prefix>events``."""
        return f"{self.prefix}events"

    def session_key(self, session: str) -> str:
        """The key that holds ``session``'s state, ``<prefix>session:<id>``."""
        return f"{self.prefix}session:{session}"

    @property
    def corrupt_states(self) -> int:
        """Session values found undecodable (each was replaced by a fresh state)."""
        return self._decode.corrupt

    @property
    def failures(self) -> int:
        """Operations that reached (or tried to reach) the server and failed."""
        return self.breaker.failures

    # -- the Store protocol ------------------------------------------------------------------

    def transact(self, session: str, fn: Callable[[SessionState], T]) -> T:
        """Run ``fn`` on the session's state in a WATCH/MULTI transaction, again on the fresh
        state when another worker changed it first (at most ``max_retries`` times)."""
        key = self.session_key(session)
        with self._call(), self.client.pipeline() as pipe:
            for attempt in range(self.max_retries):
                pipe.watch(key)  # type: ignore[no-untyped-call]
                state = self._state(pipe.get(key), session)
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
        raise self._contended(session)

    async def atransact(self, session: str, fn: Callable[[SessionState], T]) -> T:
        """Like :meth:`transact`, on the running loop's client, without blocking the event loop."""
        key = self.session_key(session)
        with self._call():
            async with self._aclient().pipeline() as pipe:
                for attempt in range(self.max_retries):
                    await pipe.watch(key)
                    state = self._state(await pipe.get(key), session)
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
        raise self._contended(session)

    def load(self, session: str) -> SessionState | None:
        """The session's stored state, or None if it has none (expired, or undecodable)."""
        with self._call():
            raw = self.client.get(self.session_key(session))
        return None if raw is None else self._decode(raw, session)

    def record_events(self, events: Sequence[LoopEvent]) -> None:
        """Append events to the stream in one round trip (trimmed near ``stream_maxlen``)."""
        if not events:
            return
        with self._call(), self.client.pipeline(transaction=False) as pipe:
            for event in events:
                pipe.xadd(self.stream_key, _encode_event(event), maxlen=self.stream_maxlen,
                          approximate=True)
            pipe.execute()

    async def arecord_events(self, events: Sequence[LoopEvent]) -> None:
        """Like :meth:`record_events`, without blocking the event loop."""
        if not events:
            return
        with self._call():
            async with self._aclient().pipeline(transaction=False) as pipe:
                for event in events:
                    pipe.xadd(self.stream_key, _encode_event(event), maxlen=self.stream_maxlen,
                              approximate=True)
                await pipe.execute()

    def close(self) -> None:
        """Close the sync client and drop the async ones (:meth:`aclose` closes them cleanly)."""
        self.client.close()
        # Async clients of other (possibly closed) loops cannot be awaited from here; their
        # sockets close when collected. Use :meth:`aclose` inside the loop to close cleanly.
        self._aclients.clear()

    async def aclose(self) -> None:
        """Close the async clients opened on the running loop."""
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
        with self._call():
            entries = cast(list[tuple[bytes, dict[bytes, bytes]]],
                           self.client.xrange(self.stream_key))
        selected = [
            event for event in (_decode_event(data) for _, data in entries)
            if (session is None or event.session == session) and (run is None or event.run == run)
        ]
        return selected[-limit:] if limit else selected

    # -- internals ---------------------------------------------------------------------------

    @contextmanager
    def _call(self) -> Iterator[None]:
        """One operation on the server: under the circuit breaker, Redis errors as StoreError."""
        try:
            with self.breaker.attempt(self._where, (RedisError,)):
                yield
        except RedisError as exc:
            raise StoreError(f"{self._where}: {exc}") from exc

    def _state(self, raw: Any, session: str) -> SessionState:
        return (None if raw is None else self._decode(raw, session)) or SessionState()

    def _contended(self, session: str) -> StoreError:
        return StoreError(f"{self._where}: session {session!r} stayed contended "
                          f"through {self.max_retries} attempts")

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
        name = raw_name.decode("utf-8", "surrogatepass")
        if name in EVENT_FIELDS:
            values[name] = text_value(name, raw_value.decode("utf-8", "surrogatepass"))
    return event_from_values(values)
