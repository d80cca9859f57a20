"""The one-call transactions: :class:`BeforeCall` (admission), :class:`AfterCall` (the outcome)
and :class:`ObserveCall` (a call that already happened: both, in one transaction).

Each is built from what the host passed — ids normalised (total, see ``_text``), the call
fingerprinted and its outcome hashed — outside the store's lock; :func:`one_call` builds them
for the hooks and answers without the store when the guard is off or the input unreadable.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from ..base.text import text_id
from ..base.types import MISSING
from ..engine import PreparedCall
from ..engine.compaction import CompactionLoopPersistedError
from ..engine.detectors import Prospect
from ..engine.history import CallRecord, SessionState, normalize_run_id
from ..fingerprint import Outcome
from ..fingerprint.leaves import Leaves
from .core import (
    as_vetoes,
    detect,
    in_flight,
    internal_error,
    loop_event,
    run_stopped,
    should_warn,
    stop_run,
    veto,
)
from .events import LoopEvent
from .learning import learn, learned_hash
from .transactions import Answered, Step, Transaction
from .verdicts import STOP_MESSAGE, Verdict

if TYPE_CHECKING:
    from .core import GuardCore


class GuardCall(PreparedCall):
    """One hook's call: a :class:`PreparedCall` (the engine takes it as it is) with the hook's
    ids and, after it ran, its outcome — all a transaction needs, in one object, so the path
    every call takes builds nothing else. It names a call as a :class:`CallContext` does.

    Raises only when the args cannot be fingerprinted (or the outcome hashed)."""

    __slots__ = ("agent", "call_id", "core", "error", "leaves", "outcome", "session")
    #: Whether the call has run: its outcome is hashed when it is built.
    observes: ClassVar[bool] = False
    # Set when the call observes (see observes).
    outcome: Outcome
    error: Any
    leaves: Leaves | None

    def __init__(self, core: GuardCore, tool_name: Any, args: Any, session: Any, run_id: Any,
                 call_id: Any, agent_id: Any, result: Any = MISSING,
                 error: Any = MISSING) -> None:
        self.core = core
        # Type tests inline: ids are str on the path every tool call takes.
        if type(tool_name) is not str:
            tool_name = text_id(tool_name)
        self.session = session if type(session) is str else text_id(session)
        self.call_id = call_id if call_id is None or type(call_id) is str else text_id(call_id)
        self.agent = agent_id if agent_id is None or type(agent_id) is str else text_id(agent_id)
        detector = core.detector
        # PreparedCall.__init__ written out (a call less on every hook): what
        # LoopDetector.prepare would build, the run id normalised.
        self.prospect = detector.fingerprint(tool_name, args)
        self.run_id = normalize_run_id(run_id)
        self.args = args
        if self.observes:
            self.outcome, self.leaves = detector.observe(self, result, error)
            self.error = error

    # -- the rules (run inside the store's transaction) ---------------------------------------

    def admit(self, state: SessionState, live: bool = True) -> Verdict | Step[Verdict]:
        """Admission (spec §f.1 V2 wrapper + §f.2 dampening). ``live`` is False for a call that
        already happened (``observe_call``): nothing of a replayed history is in flight."""
        core = self.core
        detector = core.detector
        prospect = self.prospect
        run = self.run_id
        seen = state.open_call(run, self.call_id, prospect.tool_name, prospect.args_hash)
        if seen is not None:
            # A retried hook: answer as the first delivery did, without counting or warning again.
            if seen.is_veto:
                again, _ = detect(core, state, self)
                return Verdict("block", again, prospect.tool_name, self.call_id)
            return Verdict("allow", None, prospect.tool_name, self.call_id)
        if not core.rolling:
            return Verdict("allow", None, prospect.tool_name, self.call_id)
        if core.deny_after_stop and run_stopped(state, run):
            # The host let the run go on after its terminal stop: nothing more of it runs.
            return Verdict("block", None, prospect.tool_name, self.call_id, STOP_MESSAGE,
                           terminate=True)
        flights = in_flight(core, state, run, (prospect.args_hash,)) if live else ()
        if flights:
            with as_vetoes(flights):
                detection, slot = detect(core, state, self)
        else:
            detection, slot = detect(core, state, self)
        if detection is None:  # the common case, kept short: no events, so no Step
            detector.record(state, self, self.call_id, True)  # new: looked for above
            return Verdict("allow", None, prospect.tool_name, self.call_id)
        if detection.level == "critical":
            veto(core, state, self, self.call_id)
            # The first critical of a run leaves the model one recovery turn; a second one in
            # the same run is terminal (spec §f.1), for one-call doors as for batches.
            verdict = Verdict("block", detection, prospect.tool_name, self.call_id,
                              terminate=not state.mark_recovery(run))
            if verdict.terminate and core.deny_after_stop:
                stop_run(state, run)
            return Step(verdict, [loop_event(self, prospect.tool_name, detection, "block", state,
                                             terminal=verdict.terminate)])
        step = Step(Verdict("allow", detection, prospect.tool_name, self.call_id))
        if should_warn(core, state, detection, prospect.tool_name, run, slot):
            step.value.action = "warn"
            step.events.append(loop_event(self, prospect.tool_name, detection, "warn", state))
        detector.record(state, self, self.call_id, True)
        return step

    def settle(self, state: SessionState) -> Verdict | Step[Verdict]:
        """Record the call's outcome (learning volatile fields first, ``early``), then check the
        post-compaction guard and, ``early``, whether the same call made next would warn."""
        core = self.core
        detector = core.detector
        outcome, leaves = self.outcome, self.leaves
        run = self.run_id
        call: PreparedCall = self
        prospect = self.prospect
        admitted = state.admitted_record(run, self.call_id, prospect.tool_name,
                                         prospect.args_hash)
        if admitted is not None:  # the tool changed its args while it ran
            call = _as_admitted(self, admitted)
            prospect = call.prospect
        if leaves is not None and outcome.result_hash and outcome.outcome_kind is None:
            volatile = learn(state.learned, prospect.tool_name,
                             f"{run or ''}|{prospect.args_hash}", leaves)
            if volatile:
                outcome = outcome._replace(result_hash=learned_hash(leaves, volatile))
        record = detector.record_outcome(state, call, outcome=outcome, error=self.error,
                                         call_id=self.call_id)
        guard = state.compaction.get(run or "") if state.compaction else None
        if guard is None and not core.post_outcome:  # the common case: no events possible
            return Verdict("allow", None, prospect.tool_name, self.call_id)
        step = Step(Verdict("allow", None, prospect.tool_name, self.call_id))
        if (guard is not None and record is not None and core.compaction_on
                and not detector.is_exempt(prospect.tool_name)):
            verdict = guard.observe(prospect.tool_name, prospect.args_hash, record.result_hash)
            if verdict.should_abort:
                step.abort = CompactionLoopPersistedError.from_verdict(verdict)
                step.events.append(LoopEvent(
                    session=self.session, run=run, agent=self.agent, call_id=self.call_id,
                    tool=prospect.tool_name, level="critical", action="abort",
                    detector=verdict.detector or "compaction_loop_persisted",
                    count=verdict.count, message=verdict.message or "",
                ))
                return step
        if core.post_outcome and record is not None:
            # Would the same call, made next, continue a loop? Tell the model now, on this
            # result, instead of after it has made that call (a critical next call is still
            # blocked before it runs).
            detection, slot = detect(core, state, call)
            if detection is not None and should_warn(core, state, detection, prospect.tool_name,
                                                     run, slot, any_level=True):
                step.value = replace(step.value, action="warn", detection=detection)
                step.events.append(loop_event(self, prospect.tool_name, detection, "warn", state))
        return step


class BeforeCall(GuardCall, Transaction[Verdict]):
    """``before_tool_call``: may the call run? Detect, dampen, veto."""

    __slots__ = ()

    #: The verdict; the call is recorded as pending, or as a veto when blocked. (The rule
    #: itself, with no call in between: every admission runs it.)
    apply = GuardCall.admit

    def fallback(self) -> Verdict:
        """The failure policy's verdict."""
        return self.core.store_health.policy.admission(self.prospect.tool_name, self.call_id)

    counts_calls = 1


class AfterCall(GuardCall, Transaction[Verdict]):
    """``after_tool_call``: record the outcome, check the post-compaction guard, and (``early``)
    warn on a result that completes a pattern."""

    __slots__ = ()
    observes = True

    #: ``allow``, or ``warn`` (post-outcome); a Step that aborts after a compaction.
    apply = GuardCall.settle

    def fallback(self) -> Verdict:
        """``allow``: an outcome is never refused, the call has run."""
        return Verdict("allow", None, self.prospect.tool_name)

    counts_outcomes = 1


class ObserveCall(GuardCall, Transaction[tuple[Verdict, Verdict]]):
    """``observe_call``: a call that already ran (a saved transcript, a tailed log), judged
    before and after its outcome in one transaction. A call that would have been blocked is
    still recorded as having run."""

    __slots__ = ()
    observes = True

    @classmethod
    def of(cls, core: GuardCore, tool_name: Any, args: Any, session: Any, run_id: Any,
           call_id: Any, agent_id: Any, result: Any,
           error: Any) -> Transaction[tuple[Verdict, Verdict]]:
        """The transaction, or (input the guard cannot read) ``allow`` twice. The kill switch
        does not apply: ``observe_call`` gates nothing."""
        try:
            return cls(core, tool_name, args, session, run_id, call_id, agent_id, result, error)
        except Exception as exc:
            verdict = internal_error(core, tool_name, exc)
            return Answered((verdict, verdict))

    def apply(self, state: SessionState) -> Step[tuple[Verdict, Verdict]]:
        """Both verdicts; each one's events follow as its own hook's would."""
        before = self.admit(state, live=False)
        after = self.settle(state)
        first = before if isinstance(before, Step) else Step(before)
        step = Step((first.value, after.value if isinstance(after, Step) else after),
                    first.events)
        if isinstance(after, Step):
            step.then = after
        return step

    def fallback(self) -> tuple[Verdict, Verdict]:
        """The failure policy's verdict, then ``allow``."""
        policy = self.core.store_health.policy
        return policy.admission(self.prospect.tool_name, self.call_id), Verdict("allow")

    counts_calls = 1
    counts_outcomes = 1


def one_call(
    kind: type[BeforeCall] | type[AfterCall], core: GuardCore, tool_name: Any, args: Any,
    session: Any, run_id: Any, call_id: Any, agent_id: Any, result: Any = MISSING,
    error: Any = MISSING,
) -> Transaction[Verdict]:
    """A one-call hook's transaction, or its answer without the store: ``allow`` while the
    kill switch is on, and for input the guard cannot read (logged and counted)."""
    if core.disabled:
        return Answered(Verdict("allow", None, tool_name, call_id))
    try:
        return kind(core, tool_name, args, session, run_id, call_id, agent_id, result, error)
    except Exception as exc:
        return Answered(internal_error(core, tool_name, exc))


def _as_admitted(call: PreparedCall, record: CallRecord) -> PreparedCall:
    """``call`` under the fingerprint it was admitted with (see
    :meth:`SessionState.admitted_record`): the outcome is recorded, and the next call judged,
    as for the unchanged arguments that the model will send again."""
    prospect = call.prospect
    return PreparedCall(Prospect(prospect.tool_name, record.args_hash, prospect.known_poll,
                                 prospect.poll_critical_at_warning, record.mutation_target_hash,
                                 prospect.profile), call.run_id, call.args)
