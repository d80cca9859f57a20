"""``LoopGuard``: the policy every door uses — warn, dampen, block — over a pluggable store.

The sync and async twins share one core: pure functions that take a :class:`SessionState` and
return a result plus the events to deliver. Fingerprinting happens before the store
transaction, so a Redis retry never re-hashes and the lock is held only for detection.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from .._text import log_text, optional_id, text_id
from ..compaction import CompactionLoopPersistedError, PostCompactionGuard
from ..detectors import Detection, Prospect
from ..engine import LoopDetector
from ..events import EventSink, LoggingSink, LoopEvent, deliver
from ..fingerprint import Outcome
from ..history import OUTCOME_VETO, CallRecord, SessionState, normalize_run_id, now_ms
from ..learning import Leaves, learn, learned_for, learned_hash
from ..stores.base import Store
from ..stores.memory import MemoryStore
from ..types import MISSING, ToolCall
from .decorators import IdSource, wrap
from .verdicts import (
    RECOVERY_SIBLING_TEXT,
    RECOVERY_TEXT,
    STORE_DOWN_MESSAGE,
    TERMINAL_SIBLING_TEXT,
    TERMINAL_TEXT,
    BatchAdmission,
    ExitBehavior,
    GuardStats,
    Intervention,
    Verdict,
    check_exit_behavior,
)

if TYPE_CHECKING:
    from ..config import LoopDetectionConfig  # only the engine loads it, and only when needed

__all__ = ["DISABLE_ENV", "LoopGuard"]

log = logging.getLogger("loopwarden")

DISABLE_ENV = "LOOPWARDEN_DISABLED"
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

_VETO = Outcome(result_hash=None, outcome_kind=OUTCOME_VETO)


_disabled_logged = False


def _disabled_by_env() -> bool:
    """The ``LOOPWARDEN_DISABLED`` kill switch, read when a guard is built (logged once)."""
    global _disabled_logged
    value = os.environ.get(DISABLE_ENV, "").strip().lower()
    off = value not in ("", "0", "false", "no", "off")
    if off and not _disabled_logged:
        _disabled_logged = True
        log.warning("%s=%s: loopwarden guards allow every tool call (loop detection is off)",
                    DISABLE_ENV, value)
    return off




class _Step:
    """What one transaction decided: a verdict and the events to deliver after commit."""

    # A plain slots class: built twice per guarded call, where a dataclass costs more.
    __slots__ = ("abort", "events", "verdict")

    def __init__(self, verdict: Verdict, events: list[LoopEvent] | None = None) -> None:
        self.verdict = verdict
        self.events: list[LoopEvent] = [] if events is None else events
        self.abort: CompactionLoopPersistedError | None = None


class LoopGuard:
    """Warn → dampen → block over a store, for one agent deployment (many sessions).

    With ``config=None`` the guard is enabled with the default thresholds (a guard you create
    guards); an explicit :class:`LoopDetectionConfig` keeps OpenClaw's tri-state ``enabled``.
    ``LOOPWARDEN_DISABLED=1`` in the environment when the guard is built makes it allow every
    call and record nothing (``observe_call``, which gates nothing, still reports).
    """

    #: How long an admitted call counts as in flight while its outcome has not come: an
    #: identical call admitted meanwhile counts it as a no-progress repeat, as OpenClaw counts
    #: a batch's earlier siblings, so a burst of concurrent identical calls is stopped like the
    #: same calls made one after another. Older calls without an outcome are not in flight (a
    #: host that never calls ``after_tool_call`` would otherwise pile them up); 0 turns
    #: in-flight counting off. Sequential hosts (each outcome reported before the next call)
    #: never have a call in flight.
    in_flight_seconds: float = 60.0

    def __init__(
        self,
        config: LoopDetectionConfig | None = None,
        *,
        store: Store | None = None,
        profiles: object = None,
        sinks: Sequence[EventSink] = (),
        fail_closed: bool = False,
    ) -> None:
        if config is None:
            from ..config import LoopDetectionConfig  # a hook passing its snapshot never loads it

            config = LoopDetectionConfig(enabled=True)
        self.detector = LoopDetector(config, profiles)
        self.config = self.detector.config
        # The config is immutable; these derived switches are read on every call.
        self._rolling = self.config.rolling_enabled
        self._post_outcome = self.config.post_outcome_warnings and self._rolling
        self._compaction_on = self.config.compaction_guard_enabled
        self.store: Store = store if store is not None else MemoryStore()
        self.sinks: list[EventSink] = [LoggingSink(), *sinks]
        self.fail_closed = fail_closed
        self.stats = GuardStats()
        self._stats_lock = threading.Lock()
        self._store_down = False
        #: The kill switch: every hook answers "allow" and touches no state.
        self.disabled = _disabled_by_env()

    # -- the public sync API -----------------------------------------------------------------
    #
    # Every hook is total: whatever the host passes (ids whose __str__ raises, unhashable
    # sessions, args that cannot be fingerprinted), it answers with a verdict and logs what
    # went wrong; only CompactionLoopPersistedError (after_tool_call) and LoopBlockedError
    # (the decorator) are raised on purpose. Ids are normalised once, in _Call (see _text).

    def before_tool_call(
        self, tool_name: str, args: Any, *, session: str, run_id: str | None = None,
        call_id: str | None = None, agent_id: str | None = None,
    ) -> Verdict:
        """Decide whether the call may run (spec §f.1 V2 wrapper + §f.2 dampening)."""
        if self.disabled:
            return Verdict("allow", None, tool_name, call_id)
        try:
            call = _Call(self.detector, tool_name, args, session, run_id, call_id, agent_id)
        except Exception as exc:
            return self._internal_error(tool_name, exc)
        # (_run's failure policy written out: no fallback closure on the path every call takes.)
        try:
            step = self.store.transact(call.session, lambda state: self._before(state, call))
        except Exception as exc:
            step = self._store_failed(exc, lambda: self._store_fallback(call.prospect.tool_name,
                                                                        call.call_id))
        else:
            if self._store_down:
                self._store_ok()
        self.stats.calls += 1
        return step if type(step) is Verdict else self._finish(step)

    def after_tool_call(
        self, tool_name: str, args: Any, *, session: str, result: Any = MISSING,
        error: Any = MISSING, run_id: str | None = None, call_id: str | None = None,
        agent_id: str | None = None,
    ) -> Verdict:
        """Record the outcome. Returns a ``warn`` verdict when the ``early`` preset's
        post-outcome check finds this result completed a pattern (annotate the result with it).
        Raises :class:`CompactionLoopPersistedError` when a loop survived compaction."""
        if self.disabled:
            return Verdict("allow", None, tool_name, call_id)
        try:
            call = self._observed(tool_name, args, result, error, session, run_id, call_id,
                                  agent_id)
        except Exception as exc:
            return self._internal_error(tool_name, exc)
        # (Written out, as in before_tool_call.)
        try:
            step = self.store.transact(call.session, lambda state: self._after(state, call))
        except Exception as exc:
            step = self._store_failed(exc, lambda: Verdict("allow", None, call.prospect.tool_name))
        else:
            if self._store_down:
                self._store_ok()
        self.stats.outcomes += 1
        return step if type(step) is Verdict else self._finish(step)

    def compaction_retried(self, *, session: str, run_id: str | None = None) -> None:
        """Arm the post-compaction guard of this session and run (after a compaction-retry)."""
        if self.disabled:
            return
        run = normalize_run_id(run_id)
        self._run(text_id(session), lambda s: self._arm(s, run),
                  fallback=lambda: _Step(Verdict("allow")))

    def admit_batch(
        self, calls: Sequence[ToolCall], *, session: str, run_id: str | None = None,
        agent_id: str | None = None,
    ) -> BatchAdmission:
        """Admit one assistant turn's calls atomically, with one recovery turn per run."""
        if self.disabled:
            return BatchAdmission(tuple(Verdict("allow", None, c.tool_name, c.call_id)
                                        for c in calls))
        try:
            batch = _Batch(self, calls, session, run_id, agent_id)
        except Exception as exc:
            return self._batch_error(calls, exc)
        self._finish(self._run(batch.ctx.session, batch.admit, fallback=batch.fallback))
        return batch.admission()

    def history(self, session: str) -> list[CallRecord]:
        """The session's history, oldest first (``[]`` when the store cannot be read: the
        failure is logged and counted like any store failure)."""
        try:
            state = self.store.load(text_id(session))
            return list(state.history) if state is not None else []
        except Exception as exc:
            return self._store_failed(exc, list)

    # -- async twins -------------------------------------------------------------------------
    #
    # They use the store's own async transaction (atransact / arecord_events) when it has
    # one, and run a sync-only store in a worker thread, never on the event loop (_arun).

    async def abefore_tool_call(
        self, tool_name: str, args: Any, *, session: str, run_id: str | None = None,
        call_id: str | None = None, agent_id: str | None = None,
    ) -> Verdict:
        if self.disabled:
            return Verdict("allow", None, tool_name, call_id)
        try:
            call = _Call(self.detector, tool_name, args, session, run_id, call_id, agent_id)
        except Exception as exc:
            return self._internal_error(tool_name, exc)
        return await self._abefore_call(call)

    async def aafter_tool_call(
        self, tool_name: str, args: Any, *, session: str, result: Any = MISSING,
        error: Any = MISSING, run_id: str | None = None, call_id: str | None = None,
        agent_id: str | None = None,
    ) -> Verdict:
        if self.disabled:
            return Verdict("allow", None, tool_name, call_id)
        try:
            call = self._observed(tool_name, args, result, error, session, run_id, call_id,
                                  agent_id)
        except Exception as exc:
            return self._internal_error(tool_name, exc)
        return await self._aafter_call(call)

    async def acompaction_retried(self, *, session: str, run_id: str | None = None) -> None:
        if self.disabled:
            return
        run = normalize_run_id(run_id)
        await self._arun(text_id(session), lambda s: self._arm(s, run),
                         fallback=lambda: _Step(Verdict("allow")))

    async def aadmit_batch(
        self, calls: Sequence[ToolCall], *, session: str, run_id: str | None = None,
        agent_id: str | None = None,
    ) -> BatchAdmission:
        try:
            batch = _Batch(self, calls, session, run_id, agent_id)
        except Exception as exc:
            return self._batch_error(calls, exc)
        await self._afinish(await self._arun(batch.ctx.session, batch.admit,
                                             fallback=batch.fallback))
        return batch.admission()

    # -- decorator door ----------------------------------------------------------------------

    def tool(
        self, fn: F | None = None, /, *, name: str | None = None,
        session: IdSource = "default", run_id: IdSource | None = None,
        on_block: Literal["raise", "return"] = "raise", exit_behavior: ExitBehavior = "end",
    ) -> Any:
        """Guard a plain sync or async function as a tool: ``@guard.tool`` or
        ``@guard.tool(name=..., session=..., on_block="return")``. Arguments are bound to the
        function's parameters, so positional and keyword calls hash alike. See :meth:`wrap`."""
        if fn is not None:
            return self.wrap(fn)
        check_exit_behavior(exit_behavior)  # a bad option fails here, not at the first call
        return lambda f: self.wrap(f, name=name, session=session, run_id=run_id,
                                   on_block=on_block, exit_behavior=exit_behavior)

    def wrap(
        self, fn: F, *, name: str | None = None, session: IdSource = "default",
        run_id: IdSource | None = None, on_block: Literal["raise", "return"] = "raise",
        exit_behavior: ExitBehavior = "end",
    ) -> F:
        """``fn`` guarded. ``session`` / ``run_id``: a string, or a callable given the call's
        bound arguments as a dict (a zero-argument callable works too). A warned call's ``str``
        result gets the warning note appended (an OpenClaw-shaped dict result gets a text
        block); other results are returned unchanged and the note is logged. A blocked call
        raises :class:`LoopBlockedError` (or returns the blocked result, ``on_block="return"``);
        the terminal stop (a second critical in the same session and run) raises
        :class:`~loopwarden.LoopTerminatedError` unless ``exit_behavior="continue"``, since a
        plain function cannot end its caller's run any other way."""
        return wrap(self, fn, name=name, session=session, run_id=run_id, on_block=on_block,
                    exit_behavior=exit_behavior)

    # -- one call through the store ----------------------------------------------------------

    def _observed(
        self, tool_name: Any, args: Any, result: Any, error: Any, session: Any,
        run_id: Any, call_id: Any, agent_id: Any,
    ) -> _Call:
        """An after-call hook's call, fingerprinted and its outcome hashed (outside the lock)."""
        call = _Call(self.detector, tool_name, args, session, run_id, call_id, agent_id)
        call.outcome, call.leaves = self.detector.observe_prepared(call.prospect, args, result,
                                                                   error)
        call.error = error
        return call

    async def _abefore_call(self, call: _Call) -> Verdict:
        step = await self._arun(call.session, lambda state: self._before(state, call),
                                fallback=lambda: self._store_fallback(call.prospect.tool_name,
                                                                      call.call_id))
        self.stats.calls += 1
        return await self._afinish(step)

    async def _aafter_call(self, call: _Call) -> Verdict:
        step = await self._arun(call.session, lambda state: self._after(state, call),
                                fallback=lambda: Verdict("allow", None, call.prospect.tool_name))
        self.stats.outcomes += 1
        return await self._afinish(step)

    def _batch_error(self, calls: Any, exc: Exception) -> BatchAdmission:
        verdict = self._internal_error("batch", exc)
        try:
            n = len(calls)
        except Exception:
            n = 0
        return BatchAdmission(tuple(verdict for _ in range(n)))

    # -- the shared core (runs inside a store transaction) -----------------------------------

    def _before(self, state: SessionState, call: _Call, *, live: bool = True) -> _Step | Verdict:
        """``live`` is False for a call that already happened (``observe_call``): nothing of a
        replayed history is in flight."""
        detector = self.detector
        prospect = call.prospect
        seen = state.open_call(call.run, call.call_id, prospect.tool_name, prospect.args_hash)
        if seen is not None:
            # A retried hook: answer as the first delivery did, without counting or warning again.
            if seen.is_veto:
                again = detector.detect_prepared(state, prospect, run_id=call.run)
                return Verdict("block", again, prospect.tool_name, call.call_id)
            return Verdict("allow", None, prospect.tool_name, call.call_id)
        if not self._rolling:
            return Verdict("allow", None, prospect.tool_name, call.call_id)
        flights = self._in_flight(state, call.run, (prospect.args_hash,)) if live else ()
        if flights:
            with _as_vetoes(flights):
                detection = detector.detect_prepared(state, prospect, run_id=call.run)
        else:
            detection = detector.detect_prepared(state, prospect, run_id=call.run)
        if detection is None:  # the common case, kept short: no events, so no _Step
            detector.append_prepared(state, prospect, call.call_id, call.run)
            return Verdict("allow", None, prospect.tool_name, call.call_id)
        if detection.level == "critical":
            self._veto(state, prospect, call.call_id, call.run)
            # The first critical of a run leaves the model one recovery turn; a second one in
            # the same run is terminal (spec §f.1), for one-call doors as for batches.
            verdict = Verdict("block", detection, prospect.tool_name, call.call_id,
                              terminate=not state.mark_recovery(call.run))
            return _Step(verdict, [self._event(call, prospect.tool_name, detection, "block", state)])
        step = _Step(Verdict("allow", detection, prospect.tool_name, call.call_id))
        if self._should_warn(state, detection, prospect.tool_name, call.run):
            step.verdict.action = "warn"
            step.events.append(self._event(call, prospect.tool_name, detection, "warn", state))
        detector.append_prepared(state, prospect, call.call_id, call.run)
        return step

    def _veto(self, state: SessionState, prospect: Prospect, call_id: str | None,
              run: str | None) -> None:
        """Record a blocked call as a veto. A call id that names no open call is a new call
        (an earlier call's id reused), so it gets its own record rather than being taken
        for a retry of that finished call."""
        detector = self.detector
        if call_id and state.open_call(run, call_id, prospect.tool_name,
                                       prospect.args_hash) is None:
            detector.append_prepared(state, prospect, call_id, run)
        detector.record_outcome_prepared(state, prospect, _VETO, call_id=call_id, run_id=run)

    def _after(self, state: SessionState, call: _Call) -> _Step | Verdict:
        detector = self.detector
        outcome, leaves = call.outcome, call.leaves
        prospect = call.prospect
        admitted = state.admitted_record(call.run, call.call_id, prospect.tool_name,
                                         prospect.args_hash)
        if admitted is not None:  # the tool changed its args while it ran
            prospect = _as_admitted(prospect, admitted)
        if leaves is not None and outcome.result_hash and outcome.outcome_kind is None:
            volatile = learn(state.learned, prospect.tool_name,
                             f"{call.run or ''}|{prospect.args_hash}", leaves)
            if volatile:
                outcome = outcome._replace(result_hash=learned_hash(leaves, volatile))
        record = detector.record_outcome_prepared(state, prospect, outcome, call.error,
                                                  call.call_id, call.run)
        guard = state.compaction.get(call.run or "") if state.compaction else None
        if guard is None and not self._post_outcome:  # the common case: no events possible
            return Verdict("allow", None, prospect.tool_name, call.call_id)
        step = _Step(Verdict("allow", None, prospect.tool_name, call.call_id))
        if (guard is not None and record is not None and self._compaction_on
                and not detector.is_exempt(prospect.tool_name)):
            verdict = guard.observe(prospect.tool_name, prospect.args_hash, record.result_hash)
            if verdict.should_abort:
                step.abort = CompactionLoopPersistedError.from_verdict(verdict)
                step.events.append(LoopEvent(
                    session=call.session, run=call.run, agent=call.agent, call_id=call.call_id,
                    tool=prospect.tool_name, level="critical", action="abort",
                    detector=verdict.detector or "compaction_loop_persisted",
                    count=verdict.count, message=verdict.message or "",
                ))
                return step
        if self._post_outcome and record is not None:
            # Would the same call, made next, continue a loop? Tell the model now, on this
            # result, instead of after it has made that call (a critical next call is still
            # blocked before it runs).
            detection = detector.detect_prepared(state, prospect, run_id=call.run)
            if detection is not None and self._should_warn(state, detection, prospect.tool_name,
                                                           call.run, any_level=True):
                step.verdict = replace(step.verdict, action="warn", detection=detection)
                step.events.append(self._event(call, prospect.tool_name, detection, "warn", state))
        return step

    def _arm(self, state: SessionState, run: str | None) -> _Step:
        if not self.config.compaction_guard_enabled:
            return _Step(Verdict("allow"))
        key = run or ""
        guard = state.compaction.get(key)
        if guard is None:
            guard = state.compaction[key] = PostCompactionGuard(
                self.config.post_compaction_guard.window_size)
        recent = [(r.tool_name, r.args_hash) for r in state.run_records(run) if r.result_hash][-16:]
        guard.arm(recent)
        return _Step(Verdict("allow"))

    def _admit(
        self, state: SessionState, calls: Sequence[ToolCall], prepared: Sequence[Prospect],
        ctx: _Ctx,
    ) -> tuple[BatchAdmission, list[LoopEvent]]:
        detector = self.detector
        detections: list[Detection | None] = []
        if self.config.rolling_enabled:
            # Earlier turns' calls still in flight count like this batch's earlier siblings.
            flights = self._in_flight(state, ctx.run, {p.args_hash for p in prepared})
            with _as_vetoes(flights):
                projected = state.copy() if len(calls) > 1 else state
                for i, call in enumerate(prepared):
                    if i:
                        detector.record_outcome_prepared(projected, prepared[i - 1], _VETO,
                                                         run_id=ctx.run)
                    detections.append(detector.detect_prepared(projected, call, run_id=ctx.run))
        else:
            detections = [None] * len(calls)
        trigger = next((i for i, d in enumerate(detections) if d and d.level == "critical"), None)
        if trigger is None:
            return self._admit_all(state, calls, prepared, detections, ctx)
        detection = detections[trigger]
        assert detection is not None
        call = prepared[trigger]
        terminal = not state.mark_recovery(ctx.run)
        for c, p in zip(calls, prepared, strict=True):
            if p.args_hash == call.args_hash:
                self._veto(state, p, c.call_id, ctx.run)
        intervention = Intervention(calls[trigger].call_id, call.tool_name, call.args_hash,
                                    detection.detector, detection.count, detection.message)
        own = TERMINAL_TEXT if terminal else RECOVERY_TEXT
        sibling = TERMINAL_SIBLING_TEXT if terminal else RECOVERY_SIBLING_TEXT
        verdicts = tuple(
            Verdict("block", detection if i == trigger else None, p.tool_name, c.call_id,
                    f"{detection.message}\n\n{own}" if i == trigger else sibling,
                    intervention, terminal)
            for i, (c, p) in enumerate(zip(calls, prepared, strict=True))
        )
        tctx = ctx.for_call(calls[trigger].call_id)
        event = self._event(tctx, call.tool_name, detection, "block", state)
        return BatchAdmission(verdicts, intervention, terminal), [event]

    def _admit_all(
        self, state: SessionState, calls: Sequence[ToolCall], prepared: Sequence[Prospect],
        detections: Sequence[Detection | None], ctx: _Ctx,
    ) -> tuple[BatchAdmission, list[LoopEvent]]:
        verdicts: list[Verdict] = []
        events: list[LoopEvent] = []
        for c, p, d in zip(calls, prepared, detections, strict=True):
            verdict = Verdict("allow", d, p.tool_name, c.call_id)
            if d is not None and self._should_warn(state, d, p.tool_name, ctx.run):
                verdict = replace(verdict, action="warn")
                events.append(self._event(ctx.for_call(c.call_id), p.tool_name, d, "warn", state))
            verdicts.append(verdict)
        if self.config.rolling_enabled:
            for c, p in zip(calls, prepared, strict=True):
                self.detector.record_prepared(state, p, call_id=c.call_id, run_id=ctx.run)
        return BatchAdmission(tuple(verdicts)), events

    def _in_flight(self, state: SessionState, run: str | None,
                   keys: Iterable[str]) -> list[CallRecord]:
        """The run's calls with these args hashes admitted within :attr:`in_flight_seconds`
        whose outcome has not come (a sequential host has none)."""
        flights: list[CallRecord] = []
        if self.in_flight_seconds <= 0:
            return flights
        since: int | None = None
        for key in keys:
            for record in state.key_records(run, key):
                if not record.pending:
                    continue
                if since is None:
                    since = now_ms() - int(self.in_flight_seconds * 1000)
                if record.timestamp > since:
                    flights.append(record)
        return flights

    def _should_warn(
        self, state: SessionState, detection: Detection, tool: str, run: str | None,
        *, any_level: bool = False,
    ) -> bool:
        """OpenClaw's dampening, with buckets of ``warningThreshold`` calls (not a fixed 10)."""
        if detection.level != "warning" and not any_level:
            return False
        key = detection.warning_key or f"{detection.detector}:{tool}"
        if run:
            key = f"{run}:{key}"
        # A detector with its own lower threshold (error repeat, a post-outcome critical) still
        # gets its first bucket.
        limits = self.detector.limits_for_tool(tool)  # perTool warningThreshold, if any
        bucket = max(1, detection.count // (limits or self.detector.limits).warning)
        return state.remember_warning(key, bucket)

    @staticmethod
    def _event(ctx: _Ctx, tool: str, detection: Detection, action: str,
               state: SessionState | None = None) -> LoopEvent:
        return LoopEvent(
            session=ctx.session, run=ctx.run, agent=ctx.agent, call_id=ctx.call_id, tool=tool,
            level=detection.level, action=action, detector=detection.detector,
            count=detection.count, message=detection.message,
            paired_tool=detection.paired_tool_name,
            learned=learned_for(state.learned, tool) if state is not None else (),
        )

    # -- transactions, failure policy, delivery ----------------------------------------------

    def _run(self, session: str, fn: Callable[[SessionState], T], fallback: Callable[[], T]) -> T:
        try:
            step = self.store.transact(session, fn)
        except Exception as exc:
            return self._store_failed(exc, fallback)
        if self._store_down:
            self._store_ok()
        return step

    async def _arun(self, session: str, fn: Callable[[SessionState], T],
                    fallback: Callable[[], T]) -> T:
        store = self.store
        try:
            atransact = getattr(store, "atransact", None)
            if atransact is not None:
                step = await cast(Callable[..., Awaitable[T]], atransact)(session, fn)
            else:
                step = await _to_thread(store.transact, session, fn)
        except Exception as exc:
            return self._store_failed(exc, fallback)
        self._store_ok()
        return step

    def _store_failed(self, exc: Exception, fallback: Callable[[], T]) -> T:
        with self._stats_lock:  # exact: operators alert on this one
            self.stats.store_failures += 1
        if not self._store_down:
            self._store_down = True
            mode = "closed (blocking calls)" if self.fail_closed else "open (calls allowed)"
            log.error("loopwarden state store failed: %s: %s; failing %s until it recovers",
                      log_text(type(exc).__name__), log_text(exc), mode)
        return fallback()

    def _store_ok(self) -> None:
        if self._store_down:
            self._store_down = False
            log.warning("loopwarden state store recovered; loop detection resumed")

    def _store_fallback(self, tool: str, call_id: str | None) -> Verdict:
        if self.fail_closed:
            return Verdict("block", None, tool, call_id, STORE_DOWN_MESSAGE)
        return Verdict("allow", None, tool, call_id)

    def _finish(self, step: _Step | Verdict) -> Verdict:
        if type(step) is Verdict:
            return step
        assert isinstance(step, _Step)
        if step.events:
            self._deliver(step.events)
            try:
                self.store.record_events(step.events)
            except Exception as exc:
                self._store_failed(exc, lambda: step)
        if step.abort is not None:
            raise step.abort
        return step.verdict

    async def _afinish(self, step: _Step | Verdict) -> Verdict:
        if type(step) is Verdict:
            return step
        assert isinstance(step, _Step)
        self._deliver(step.events)
        if step.events:
            try:
                arecord = getattr(self.store, "arecord_events", None)
                if arecord is not None:
                    await arecord(step.events)
                else:
                    await _to_thread(self.store.record_events, step.events)
            except Exception as exc:
                self._store_failed(exc, lambda: step)
        if step.abort is not None:
            raise step.abort
        return step.verdict

    def _deliver(self, events: list[LoopEvent]) -> None:
        if not events:
            return
        with self._stats_lock:
            for e in events:
                if e.action == "warn":
                    self.stats.warnings += 1
                elif e.action == "block":
                    self.stats.blocks += 1
                else:
                    self.stats.aborts += 1
        deliver(events, self.sinks)

    def _count(self, name: str, n: int = 1) -> None:
        # Counters are diagnostics: a lock-free increment may, rarely, lose a count under
        # threads; taking a lock twice per call would cost more than the whole store step.
        setattr(self.stats, name, getattr(self.stats, name) + n)

    # -- calls that already happened ---------------------------------------------------------

    def observe_call(
        self, tool_name: str, args: Any, *, session: str, result: Any = MISSING,
        error: Any = MISSING, run_id: str | None = None, call_id: str | None = None,
        agent_id: str | None = None,
    ) -> tuple[Verdict, Verdict]:
        """Feed a call that has already run (a saved transcript, a tailed log): the verdict the
        guard would have given before it, and the one after its outcome, in one transaction.
        A call that would have been blocked is still recorded as having run."""
        try:
            call = self._observed(tool_name, args, result, error, session, run_id, call_id,
                                  agent_id)
        except Exception as exc:
            verdict = self._internal_error(tool_name, exc)
            return verdict, verdict
        steps: tuple[_Step | Verdict, _Step | Verdict] = self._run(
            call.session,
            lambda state: (self._before(state, call, live=False), self._after(state, call)),
            fallback=lambda: (self._store_fallback(call.prospect.tool_name, call.call_id),
                              Verdict("allow")),
        )
        before, after = steps
        self.stats.calls += 1
        self.stats.outcomes += 1
        return self._finish(before), self._finish(after)

    def _internal_error(self, tool: object, exc: Exception) -> Verdict:
        self._count("internal_errors")
        # The exception's type, not its text: that may quote the call's arguments.
        log.warning("tool loop outcome tracking failed: tool=%s error=%s", log_text(tool),
                    type(exc).__name__)
        return Verdict("allow", tool_name=text_id(tool))


class _Ctx:
    """Who a transaction is for: session, normalised run, call id, agent."""

    # A plain slots class: a frozen dataclass costs a microsecond to build, once per hook.
    __slots__ = ("agent", "call_id", "run", "session")

    def __init__(self, session: str, run: str | None, call_id: str | None,
                 agent: str | None) -> None:
        self.session = session
        self.run = run
        self.call_id = call_id
        self.agent = agent

    def for_call(self, call_id: str | None) -> _Ctx:
        return _Ctx(self.session, self.run, call_id, self.agent)


class _Call(_Ctx):
    """One hook's call: its context, its fingerprint and (after it ran) its outcome — all a
    transaction needs, in one object so the hot path builds one closure over it.

    Built from what the host passed: the ids are normalised (total, see _text) and the call
    is fingerprinted here, outside the store's lock. Raises only when the args cannot be
    fingerprinted."""

    __slots__ = ("error", "leaves", "outcome", "prospect")
    # Set by the after-call hook only (see LoopGuard._observed).
    outcome: Outcome
    error: Any
    leaves: Leaves | None

    def __init__(self, detector: LoopDetector, tool_name: Any, args: Any, session: Any,
                 run_id: Any, call_id: Any, agent_id: Any) -> None:
        # Type tests inline: ids are str on the path every tool call takes.
        if type(tool_name) is not str:
            tool_name = text_id(tool_name)
        self.session = session if type(session) is str else text_id(session)
        self.run = normalize_run_id(run_id)
        self.call_id = call_id if call_id is None or type(call_id) is str else text_id(call_id)
        self.agent = agent_id if agent_id is None or type(agent_id) is str else text_id(agent_id)
        self.prospect = detector.prepare(tool_name, args)


class _Batch:
    """One admit_batch call, prepared outside the store: its calls with their ids normalised,
    their fingerprints, and the two functions the transaction (or its fallback) runs."""

    __slots__ = ("calls", "ctx", "guard", "prepared", "result")

    def __init__(self, guard: LoopGuard, calls: Sequence[ToolCall], session: Any, run_id: Any,
                 agent_id: Any) -> None:
        self.guard = guard
        self.calls = [_normal_call(c) for c in calls]
        self.prepared = [guard.detector.prepare(c.tool_name, c.args) for c in self.calls]
        run = normalize_run_id(run_id if run_id is not None else _common_run(self.calls))
        self.ctx = _Ctx(text_id(session), run, None, optional_id(agent_id))
        self.result: BatchAdmission | None = None

    def admit(self, state: SessionState) -> _Step:
        admission, events = self.guard._admit(state, self.calls, self.prepared, self.ctx)
        self.result = admission
        return _Step(Verdict("allow"), events)

    def fallback(self) -> _Step:
        guard = self.guard
        self.result = BatchAdmission(tuple(
            guard._store_fallback(p.tool_name, c.call_id)
            for p, c in zip(self.prepared, self.calls, strict=True)))
        return _Step(Verdict("allow"))

    def admission(self) -> BatchAdmission:
        self.guard._count("calls", len(self.calls))
        if self.result is None:
            return BatchAdmission(tuple(Verdict("allow") for _ in self.calls))
        return self.result


def _normal_call(call: ToolCall) -> ToolCall:
    """``call`` with its tool name and ids as plain text (see _text), itself when they are."""
    tool, call_id, run_id = call.tool_name, call.call_id, call.run_id
    if (type(tool) is str and (call_id is None or type(call_id) is str)
            and (run_id is None or type(run_id) is str)):
        return call
    return ToolCall(text_id(tool), call.args, optional_id(call_id), optional_id(run_id),
                    call.result, call.error)


@contextmanager
def _as_vetoes(records: Sequence[CallRecord]) -> Iterator[None]:
    """Project pending records as vetoes for one detection (OpenClaw's batch projection:
    counted as no-progress repeats), and give them back their pending state afterwards."""
    for record in records:
        record.outcome_kind = OUTCOME_VETO
    try:
        yield
    finally:
        for record in records:
            record.outcome_kind = None


def _common_run(calls: Sequence[ToolCall]) -> str | None:
    return next((c.run_id for c in calls if c.run_id), None)


def _as_admitted(prospect: Prospect, record: CallRecord) -> Prospect:
    """``prospect`` under the fingerprint its call was admitted with (see
    :meth:`SessionState.admitted_record`): the outcome is recorded, and the next call judged,
    as for the unchanged arguments that the model will send again."""
    return Prospect(prospect.tool_name, record.args_hash, prospect.known_poll,
                    prospect.poll_critical_at_warning, record.mutation_target_hash,
                    prospect.profile)



async def _to_thread(fn: Callable[..., T], /, *args: Any) -> T:
    # asyncio loads on the first async call only: a process that never awaits (the Claude Code
    # hook, started twice per tool call) does not pay for its import.
    import asyncio

    return await asyncio.to_thread(fn, *args)
