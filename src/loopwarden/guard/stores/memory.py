"""``MemoryStore``: the default, in-process store, bounded for long-running gateways."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from typing import TypeVar

from ...engine.history import SessionState
from ..events import LoopEvent

__all__ = ["MemoryStore"]

T = TypeVar("T")


class MemoryStore:
    """Session states in memory, evicted after ``idle_ttl`` seconds unused or beyond
    ``max_sessions`` (least recently used first) — OpenClaw's 30 min / 2,000 sessions.

    One lock guards the map; the work done under it is the detection itself (microseconds), so
    threads never see a half-updated history.
    """

    def __init__(
        self,
        *,
        idle_ttl: float | None = 30 * 60,
        max_sessions: int | None = 2000,
        max_events: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.idle_ttl = idle_ttl
        self.max_sessions = max_sessions
        self._clock = clock
        self._sessions: OrderedDict[str, _Entry] = OrderedDict()
        self._events: deque[LoopEvent] = deque(maxlen=max_events)
        self._lock = threading.Lock()
        # Most calls hit the session used last: it is already at the LRU end, and idle
        # sessions are swept at most once a second (or a TTL) instead of on every call.
        self._newest: str | None = None
        self._next_sweep = float("-inf")

    def __len__(self) -> int:
        return len(self._sessions)

    def transact(self, session: str, fn: Callable[[SessionState], T]) -> T:
        """Run ``fn`` on the session's state under the lock: a new or expired session starts
        afresh, and the least recently used beyond ``max_sessions`` are evicted."""
        # acquire/release rather than `with`: this runs twice per guarded call.
        self._lock.acquire()
        try:
            now = self._clock()
            if session == self._newest and now < self._next_sweep:
                # The session used last, within a sweep interval (at most one TTL) of the last
                # sweep, which ran at or before its last use: it cannot have expired.
                newest = self._sessions[session]
                newest.last_used = now
                return fn(newest.state)
            sessions = self._sessions
            entry = sessions.get(session)
            if entry is None:
                entry = sessions[session] = _Entry(SessionState(), now)
                self._newest = session
                self._evict(now)
            else:
                if self._expired(entry.last_used, now):
                    entry.state = SessionState()
                entry.last_used = now
                if session != self._newest:
                    sessions.move_to_end(session)
                    self._newest = session
                if now >= self._next_sweep:
                    self._evict(now)
            return fn(entry.state)
        finally:
            self._lock.release()

    async def atransact(self, session: str, fn: Callable[[SessionState], T]) -> T:
        """Like :meth:`transact`, inline: microseconds under a lock do not block the event loop."""
        return self.transact(session, fn)

    def load(self, session: str) -> SessionState | None:
        """The session's state (the live object, not a copy), or None if it has none or expired."""
        with self._lock:
            entry = self._sessions.get(session)
            if entry is None or self._expired(entry.last_used, self._clock()):
                return None
            return entry.state

    def record_events(self, events: Sequence[LoopEvent]) -> None:
        """Append events to the run record, which keeps the newest ``max_events``."""
        with self._lock:
            self._events.extend(events)

    async def arecord_events(self, events: Sequence[LoopEvent]) -> None:
        """Like :meth:`record_events`, inline: a deque append does not block the event loop."""
        self.record_events(events)

    def events(self, session: str | None = None) -> list[LoopEvent]:
        """The recorded events, oldest first, of one session (``None``: of all)."""
        with self._lock:
            return [e for e in self._events if session is None or e.session == session]

    def close(self) -> None:
        """Forget every session's state (the recorded events are kept)."""
        with self._lock:
            self._sessions.clear()
            self._newest = None

    def _expired(self, last_used: float, now: float) -> bool:
        return self.idle_ttl is not None and now - last_used > self.idle_ttl

    def _evict(self, now: float) -> None:
        sessions = self._sessions
        # Sessions only grow on creation, which always evicts; idle ones need a timed sweep.
        self._next_sweep = float("inf") if self.idle_ttl is None else now + min(1.0, self.idle_ttl)
        if self.idle_ttl is not None:
            # Oldest-used first: stop at the first session still alive.
            while sessions:
                key, entry = next(iter(sessions.items()))
                if not self._expired(entry.last_used, now):
                    break
                del sessions[key]
        if self.max_sessions is not None:
            while len(sessions) > self.max_sessions:
                sessions.popitem(last=False)


class _Entry:
    """A session's state and when it was last used, refreshed in place by each transaction."""

    __slots__ = ("last_used", "state")

    def __init__(self, state: SessionState, last_used: float) -> None:
        self.state = state
        self.last_used = last_used
