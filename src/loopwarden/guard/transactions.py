"""What the guard runs against a store, as small objects, and the two drivers that run them.

A :class:`Transaction` is one piece of guard work on one session's state. The one-call hooks'
transactions (:class:`Admit`, :class:`Settle`, :class:`Observe`) each *have* a
:class:`~.policy.Call` and hold no rules: their :meth:`~Transaction.apply` hands the call to
the guard's :class:`~.policy.LoopPolicy`.

- :meth:`~Transaction.apply` runs inside the store's transaction. It may run more than once
  (RedisStore retries on a write conflict), so it changes nothing but the state it is given;
  it answers with its value, or with a :class:`~.policy.Step` when events or an abort must
  follow.
- :meth:`~Transaction.fallback` answers instead when the store failed (the failure policy).
- :attr:`~Transaction.counts_calls` / :attr:`~Transaction.counts_outcomes`: what the hook
  counts in the guard's stats.

Whatever needs no lock (ids, fingerprints, outcome hashes) is computed when the transaction is
built, so a Redis retry never hashes again. Batch admission is in ``batch.py``.

:func:`drive` runs a transaction for the sync hooks, :func:`adrive` for their awaitable twins.
Both do the same four things in the same order — run the transaction (or its fallback when the
store fails), count the hook, deliver each decision's events to the sinks and then to the
store's run record, raise the abort last — and differ only in how they reach the store: the
async driver uses the store's own ``atransact`` / ``arecord_events`` when it has them
(RedisStore, SQLiteStore, MemoryStore do) and runs a sync-only store's methods in a worker
thread, never on the event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any, ClassVar, Generic, TypeVar, cast

from ..base.text import text_id
from ..base.types import MISSING
from ..engine.compaction import PostCompactionGuard
from ..engine.history import CallRecord, SessionState, normalize_run_id
from .core import GuardCore, internal_error
from .events import LoopEvent, deliver
from .policy import Call, Step
from .verdicts import Verdict

R = TypeVar("R")
T = TypeVar("T")


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


class Admit(Transaction[Verdict]):
    """``before_tool_call``: may the call run? Detect, dampen, veto (the call is recorded as
    pending, or as a veto when blocked)."""

    __slots__ = ("call", "core", "session")
    counts_calls = 1

    def __init__(self, core: GuardCore, call: Call) -> None:
        self.core = core
        self.call = call
        self.session = call.session

    def apply(self, state: SessionState) -> Verdict | Step[Verdict]:
        """The policy's admission of the call."""
        return self.core.policy.admit(state, self.call)

    def fallback(self) -> Verdict:
        """The failure policy's verdict."""
        return self.core.store_health.policy.admission(self.call.prospect.tool_name,
                                                       self.call.call_id)


class Settle(Transaction[Verdict]):
    """``after_tool_call``: record the outcome, check the post-compaction guard, and (``early``)
    warn on a result that completes a pattern."""

    __slots__ = ("call", "core", "session")
    counts_outcomes = 1

    def __init__(self, core: GuardCore, call: Call, result: Any, error: Any) -> None:
        self.core = core
        self.call = _observed(core, call, result, error)
        self.session = call.session

    def apply(self, state: SessionState) -> Verdict | Step[Verdict]:
        """``allow``, or ``warn`` (post-outcome); a Step that aborts after a compaction."""
        return self.core.policy.settle(state, self.call)

    def fallback(self) -> Verdict:
        """``allow``: an outcome is never refused, the call has run."""
        return Verdict("allow", None, self.call.prospect.tool_name)


def _observed(core: GuardCore, call: Call, result: Any, error: Any) -> Call:
    """``call`` with its outcome hashed (outside the store's lock, once)."""
    call.outcome, call.leaves = core.detector.observe(call.prospect, call.args, result, error)
    call.error = error
    return call


class Observe(Transaction[tuple[Verdict, Verdict]]):
    """``observe_call``: a call that already ran (a saved transcript, a tailed log), judged
    before and after its outcome in one transaction. A call that would have been blocked is
    still recorded as having run."""

    __slots__ = ("call", "core", "session")
    counts_calls = 1
    counts_outcomes = 1

    def __init__(self, core: GuardCore, call: Call, result: Any, error: Any) -> None:
        self.core = core
        self.call = _observed(core, call, result, error)
        self.session = call.session

    @classmethod
    def of(cls, core: GuardCore, tool_name: Any, args: Any, session: Any, run_id: Any,
           call_id: Any, agent_id: Any, result: Any,
           error: Any) -> Transaction[tuple[Verdict, Verdict]]:
        """The transaction, or (input the guard cannot read) ``allow`` twice. The kill switch
        does not apply: ``observe_call`` gates nothing."""
        try:
            call = Call(core.detector, tool_name, args, session, run_id, call_id, agent_id)
            return cls(core, call, result, error)
        except Exception as exc:
            verdict = internal_error(core.stats, tool_name, exc)
            return Answered((verdict, verdict))

    def apply(self, state: SessionState) -> Step[tuple[Verdict, Verdict]]:
        """Both verdicts; each one's events follow as its own hook's would."""
        policy = self.core.policy
        before = policy.admit(state, self.call, live=False)
        after = policy.settle(state, self.call)
        first = before if isinstance(before, Step) else Step(before)
        step = Step((first.value, after.value if isinstance(after, Step) else after),
                    first.events)
        if isinstance(after, Step):
            step.then = after
        return step

    def fallback(self) -> tuple[Verdict, Verdict]:
        """The failure policy's verdict, then ``allow``."""
        policy = self.core.store_health.policy
        return policy.admission(self.call.prospect.tool_name, self.call.call_id), Verdict("allow")


def one_call(core: GuardCore, tool_name: Any, args: Any, session: Any, run_id: Any,
             call_id: Any, agent_id: Any, result: Any = MISSING, error: Any = MISSING,
             *, settle: bool = False) -> Transaction[Verdict]:
    """A one-call hook's transaction (``settle``: the outcome's, else the admission's), or its
    answer without the store: ``allow`` while the kill switch is on, and for input the guard
    cannot read (logged and counted)."""
    if core.disabled:
        return Answered(Verdict("allow", None, tool_name, call_id))
    try:
        call = Call(core.detector, tool_name, args, session, run_id, call_id, agent_id)
        return Settle(core, call, result, error) if settle else Admit(core, call)
    except Exception as exc:
        return Answered(internal_error(core.stats, tool_name, exc))


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


# -- the drivers ---------------------------------------------------------------------------


def drive(core: GuardCore, txn: Transaction[R]) -> R:
    """Run ``txn`` against ``core``'s store in this thread."""
    if type(txn) is Answered:
        return cast(R, txn.value)
    # (type() is, not isinstance: no subclass of either is ever built, and isinstance of an
    # object that is none costs a look-up of its __class__. The attempt is written out,
    # unlike the async driver's: this is the path every sync hook takes.)
    store = core.store
    health = core.store_health
    try:
        if txn.persists:
            out = store.transact(txn.session, txn.apply)
        else:
            out = txn.apply(_loaded(store.load(txn.session)))
    except Exception as exc:
        health.failed(exc)
        out = txn.fallback()
    else:
        if health.down and txn.persists:
            health.answered()
    stats = core.stats  # (_count written out, as the attempt is)
    if txn.counts_calls:
        stats.calls += txn.counts_calls
    if txn.counts_outcomes:
        stats.outcomes += txn.counts_outcomes
    if type(out) is not Step:
        return cast(R, out)
    step = cast("Step[R]", out)
    for events in _commits(core, step):
        _record(core, events)
    return step.value


async def adrive(core: GuardCore, txn: Transaction[R]) -> R:
    """Run ``txn`` against ``core``'s store without blocking the event loop."""
    if type(txn) is Answered:
        return cast(R, txn.value)
    out = await _aattempt(core, txn)
    _count(core, txn)
    if type(out) is not Step:
        return cast(R, out)
    step = cast("Step[R]", out)
    for events in _commits(core, step):
        await _arecord(core, events)
    return step.value


async def _aattempt(core: GuardCore, txn: Transaction[R]) -> R | Step[R]:
    store = core.store
    try:
        if not txn.persists:
            return txn.apply(_loaded(await _to_thread(store.load, txn.session)))
        atransact = getattr(store, "atransact", None)
        if atransact is not None:
            out = await cast(Callable[..., Awaitable[R | Step[R]]], atransact)(txn.session,
                                                                               txn.apply)
        else:
            out = await _to_thread(store.transact, txn.session, txn.apply)
    except Exception as exc:
        core.store_health.failed(exc)
        return txn.fallback()
    core.store_health.answered()
    return out


def _count(core: GuardCore, txn: Transaction[Any]) -> None:
    # Counters are diagnostics: a lock-free increment may, rarely, lose a count under threads;
    # a lock twice per call would cost more than the whole store step.
    stats = core.stats
    if txn.counts_calls:
        stats.calls += txn.counts_calls
    if txn.counts_outcomes:
        stats.outcomes += txn.counts_outcomes


def _commits(core: GuardCore, step: Step[Any]) -> Iterator[list[LoopEvent]]:
    """Deliver each decision's events to the sinks and hand them on for the store's run
    record, then raise the decision's abort: sinks first, the record next, the abort last."""
    current: Step[Any] | None = step
    while current is not None:
        events = current.events
        if events:
            _deliver(core, events)
            yield events
        if current.abort is not None:
            raise current.abort
        current = current.then


def _record(core: GuardCore, events: list[LoopEvent]) -> None:
    try:
        core.store.record_events(events)
    except Exception as exc:  # the run record misses them; the verdict stands
        core.store_health.failed(exc)


async def _arecord(core: GuardCore, events: list[LoopEvent]) -> None:
    store = core.store
    try:
        arecord = getattr(store, "arecord_events", None)
        if arecord is not None:
            await arecord(events)
        else:
            await _to_thread(store.record_events, events)
    except Exception as exc:  # the run record misses them; the verdict stands
        core.store_health.failed(exc)


def _deliver(core: GuardCore, events: list[LoopEvent]) -> None:
    stats = core.stats
    with core.store_health.lock:  # exact, like store failures
        for e in events:
            if e.action == "warn":
                stats.warnings += 1
            elif e.action == "block":
                stats.blocks += 1
            else:
                stats.aborts += 1
    deliver(events, core.sinks)


def _loaded(state: SessionState | None) -> SessionState:
    """A loaded state; a session the store has never seen reads as an empty one."""
    return state if state is not None else SessionState()


async def _to_thread(fn: Callable[..., T], /, *args: Any) -> T:
    # asyncio loads on the first async call only: a process that never awaits (the Claude Code
    # hook, started twice per tool call) does not pay for its import.
    import asyncio

    return await asyncio.to_thread(fn, *args)
