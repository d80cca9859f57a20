"""The store interface: where session state lives, and where the run record goes.

One interface, pluggable back ends (like httpx transports): the guard only ever calls
:meth:`Store.transact` with a function that reads and updates one session's state. A store
makes that atomic for its medium — a lock in memory, a write transaction in SQLite, an
optimistic WATCH/MULTI retry in Redis (so ``fn`` may run more than once and must have no side
effects outside the state it is given).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar, runtime_checkable

from ..errors import LoopwardenError
from ..events import LoopEvent
from ..history import SessionState

__all__ = ["AsyncStore", "Store", "StoreError"]

T = TypeVar("T")


class StoreError(LoopwardenError):
    """A store could not be reached or failed; the guard fails open (or closed) on it."""


@runtime_checkable
class Store(Protocol):
    def transact(self, session: str, fn: Callable[[SessionState], T]) -> T:
        """Run ``fn`` on the session's state and persist what it changed, atomically."""
        ...

    def load(self, session: str) -> SessionState | None:
        """A snapshot of the session's state, or None if the store has none."""
        ...

    def record_events(self, events: Sequence[LoopEvent]) -> None:
        """Append events to the run record."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncStore(Protocol):
    async def atransact(self, session: str, fn: Callable[[SessionState], T]) -> T: ...

    async def arecord_events(self, events: Sequence[LoopEvent]) -> None: ...
