"""The store interface: where session state lives, and where the run record goes.

One interface, pluggable back ends (like httpx transports): the guard only ever calls
:meth:`Store.transact` with a function that reads and updates one session's state. A store
makes that atomic for its medium — a lock in memory, a write transaction in SQLite, an
optimistic WATCH/MULTI retry in Redis (so ``fn`` may run more than once and must have no side
effects outside the state it is given).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol, TypeVar, runtime_checkable

from ...base.errors import StoreError
from ...engine.history import SessionState
from ..events import LoopEvent

__all__ = ["StoreError"]

T = TypeVar("T")


@runtime_checkable
class Store(Protocol):
    """What the guard needs of a store: atomic updates of one session's state, and a run record."""

    def transact(self, session: str, fn: Callable[[SessionState], T]) -> T:
        """Run ``fn`` on the session's state and persist what it changed, atomically."""
        ...

    def load(self, session: str) -> SessionState | None:
        """A snapshot of the session's state, or None if the store has none."""
        ...

    def record_events(self, events: Sequence[LoopEvent]) -> None:
        """Append events to the run record."""
        ...

    def close(self) -> None:
        """Release what the store holds open (connections, files, in-memory sessions)."""
        ...


@runtime_checkable
class AsyncStore(Protocol):
    """The async twin of :class:`Store`: a store that has these methods serves the async guard
    without blocking its event loop (one without them runs in a worker thread)."""

    async def atransact(self, session: str, fn: Callable[[SessionState], T]) -> T:
        """Like :meth:`Store.transact`, without blocking the event loop."""
        ...

    async def arecord_events(self, events: Sequence[LoopEvent]) -> None:
        """Like :meth:`Store.record_events`, without blocking the event loop."""
        ...


class CircuitBreaker:
    """Spares the agent a hung store: after a *slow* failure (one that took ``slow_failure``
    seconds or more to fail — a timeout, a lock wait), the store is skipped for ``cooldown``
    seconds: its operations raise :class:`StoreError` at once, without touching it, and the
    guard fails open (or closed) as for any failure. The first operation after the cool-down
    probes the store (the others keep skipping while it does); a success closes the breaker,
    another slow failure opens it again. So an outage costs the agent one timeout per
    cool-down instead of one per call.

    A fast failure (a refused connection, a missing directory) costs nothing to repeat and
    does not open the breaker: detection resumes on the first call after the store is back.
    ``cooldown=0`` turns the breaker off.

    :attr:`failures` counts operations that reached the store and failed; :attr:`skipped`
    those refused during a cool-down.
    """

    def __init__(self, cooldown: float = 5.0, *, slow_failure: float = 0.25,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cooldown = cooldown
        self.slow_failure = slow_failure
        self.failures = 0
        self.skipped = 0
        self._clock = clock
        self._open_until = 0.0  # 0: closed
        self._lock = threading.Lock()

    @property
    def open(self) -> bool:
        """Whether operations are skipped now (a cool-down, or the probe ending it, is running)."""
        return self._open_until > 0 and self._clock() < self._open_until

    def enter(self, where: str) -> float:
        """Before an operation: its start time, or :class:`StoreError` during a cool-down."""
        now = self._clock()
        if self._open_until:
            with self._lock:
                if self._open_until:
                    if now < self._open_until:
                        self.skipped += 1
                        raise StoreError(f"{where}: skipped for {self._open_until - now:.1f} s "
                                         "more after a failure (circuit breaker open)")
                    # This operation probes; the others skip until it is known how it went.
                    self._open_until = now + self.cooldown
        return now

    @contextmanager
    def attempt(self, where: str, errors: tuple[type[BaseException], ...]) -> Iterator[None]:
        """Run one store operation under the breaker: ``errors`` are the store's own failures
        (anything else, e.g. the guard's function raising, means the store answered)."""
        started = self.enter(where)
        try:
            yield
        except errors:
            self.failed(started)
            raise
        except BaseException:
            self.succeeded()
            raise
        self.succeeded()

    def succeeded(self) -> None:
        """Record that an operation reached the store: the breaker closes."""
        if self._open_until:
            with self._lock:
                self._open_until = 0.0

    def failed(self, started: float) -> None:
        """Record a failed operation begun at ``started``: a slow one opens the breaker for
        ``cooldown`` seconds, a fast one closes it."""
        now = self._clock()
        with self._lock:
            self.failures += 1
            slow = self.cooldown > 0 and now - started >= self.slow_failure
            self._open_until = now + self.cooldown if slow else 0.0
