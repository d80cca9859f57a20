"""The two drivers that run any transaction against any store: :func:`drive` for the sync
hooks, :func:`adrive` for their awaitable twins.

Both do the same four things in the same order — run the transaction (or its fallback when the
store fails), count the hook, deliver each decision's events to the sinks and then to the
store's run record, raise the abort last — and differ only in how they reach the store: the
async driver uses the store's own ``atransact`` / ``arecord_events`` when it has them
(RedisStore, SQLiteStore, MemoryStore do) and runs a sync-only store's methods in a worker
thread, never on the event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..engine.history import SessionState
from .events import LoopEvent, deliver
from .transactions import Answered, Step, Transaction

if TYPE_CHECKING:
    from .core import GuardCore

R = TypeVar("R")
T = TypeVar("T")


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
