"""What the guard runs against a store, as small objects that either driver runs.

A :class:`Transaction` is one piece of guard work on one session's state:

- :meth:`~Transaction.apply` runs inside the store's transaction. It may run more than once
  (RedisStore retries on a write conflict), so it changes nothing but the state it is given;
  it answers with its value, or with a :class:`Step` when events or an abort must follow.
- :meth:`~Transaction.fallback` answers instead when the store failed (the failure policy).
- :attr:`~Transaction.counts_calls` / :attr:`~Transaction.counts_outcomes`: what the hook
  counts in the guard's stats.

Whatever needs no lock (ids, fingerprints, outcome hashes) is computed when the transaction is
built, so a Redis retry never hashes again. The one-call hooks are in ``calls.py``, batch
admission in ``batch.py``; the two small ones that need neither are here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from ..base.text import text_id
from ..engine.compaction import CompactionLoopPersistedError, PostCompactionGuard
from ..engine.history import CallRecord, SessionState, normalize_run_id
from .events import LoopEvent

if TYPE_CHECKING:
    from .core import GuardCore

R = TypeVar("R")


class Step(Generic[R]):
    """A transaction's value with what must follow the commit: the events to deliver and
    record, and the abort to raise (a loop that survived compaction). A transaction that has
    neither answers with the bare value: the common case builds no Step."""

    # A plain slots class: one may be built per guarded call, where a dataclass costs more.
    __slots__ = ("abort", "events", "then", "value")

    def __init__(self, value: R, events: list[LoopEvent] | None = None) -> None:
        self.value = value
        self.events: list[LoopEvent] = [] if events is None else events
        self.abort: CompactionLoopPersistedError | None = None
        #: A second decision of the same transaction (``observe_call`` decides before and
        #: after the call), delivered and recorded after this one, as its own hook would be.
        self.then: Step[Any] | None = None


class Transaction(Generic[R]):
    """One piece of guard work on one session's state (see the module docstring)."""

    __slots__ = ()
    #: False for a read: the driver loads the state instead of opening a transaction, so
    #: nothing is persisted (and a read that succeeds does not end a store outage).
    persists: ClassVar[bool] = True
    #: How many calls and outcomes the hook counts in the guard's stats once the store
    #: answered or failed (a read or a compaction retry counts neither).
    counts_calls: int = 0
    counts_outcomes: int = 0
    session: str

    def apply(self, state: SessionState) -> R | Step[R]:
        """The work, on the session's state, inside the store's transaction."""
        raise NotImplementedError

    def fallback(self) -> R | Step[R]:
        """The answer when the store failed."""
        raise NotImplementedError



class Answered(Transaction[R]):
    """A hook answered without the store: the kill switch is on, or the guard could not
    read the hook's input (logged and counted). The drivers hand :attr:`value` back as it is."""

    __slots__ = ("session", "value")

    def __init__(self, value: R) -> None:
        self.session = ""
        self.value = value


class CallContext:
    """Who a transaction is for: session, normalised run, call id, agent."""

    # A plain slots class: a frozen dataclass costs a microsecond to build, once per hook.
    __slots__ = ("agent", "call_id", "run_id", "session")

    def __init__(self, session: str, run_id: str | None, call_id: str | None,
                 agent: str | None) -> None:
        self.session = session
        self.run_id = run_id
        self.call_id = call_id
        self.agent = agent

    def for_call(self, call_id: str | None) -> CallContext:
        """The same session, run and agent, for another call of the turn."""
        return CallContext(self.session, self.run_id, call_id, self.agent)


class ArmCompaction(Transaction[None]):
    """``compaction_retried``: arm the post-compaction guard of one session and run with the
    run's latest calls, so that a loop that survives the compaction is caught."""

    __slots__ = ("core", "run", "session")

    def __init__(self, core: GuardCore, session: str, run_id: str | None) -> None:
        self.core = core
        self.session = text_id(session)
        self.run = normalize_run_id(run_id)

    @classmethod
    def of(cls, core: GuardCore, session: str, run_id: str | None) -> Transaction[None]:
        """The transaction, or nothing to do while the kill switch is on."""
        return Answered(None) if core.disabled else cls(core, session, run_id)

    def apply(self, state: SessionState) -> None:
        """Arm (or re-arm) the run's guard with its last 16 completed calls."""
        config = self.core.config
        if not config.compaction_guard_enabled:
            return
        key = self.run or ""
        guard = state.compaction.get(key)
        if guard is None:
            guard = state.compaction[key] = PostCompactionGuard(
                config.post_compaction_guard.window_size)
        recent = [(r.tool_name, r.args_hash) for r in state.run_records(self.run)
                  if r.result_hash][-16:]
        guard.arm(recent)

    def fallback(self) -> None:
        """Nothing is armed while the store is down."""


class ReadHistory(Transaction[list[CallRecord]]):
    """``history``: the session's records, oldest first (``[]`` when the store has none, or
    cannot be read)."""

    __slots__ = ("session",)
    persists = False

    def __init__(self, session: str) -> None:
        self.session = text_id(session)

    def apply(self, state: SessionState) -> list[CallRecord]:
        """A copy of the loaded state's history."""
        return list(state.history)

    def fallback(self) -> list[CallRecord]:
        """No history while the store is down (the failure is logged and counted)."""
        return []
