"""The guard's policies: :class:`LoopPolicy`, when a call is warned on, blocked, or stops its
run; and the failure policy, what the guard does when its store fails.

:class:`LoopPolicy` holds the rules: OpenClaw's dampening, vetoes, in-flight counting, the
recovery turn and the terminal stop. A transaction (``transactions.py``) has a :class:`Call`
and hands it to one of the policy's rules inside the store's transaction; a rule answers with
its value, or with a :class:`Step` when events or an abort must follow the commit.

:class:`FailOpen` (the default) lets calls run while the store is down — detection pauses, the
agent does not; :class:`FailClosed` blocks them with :data:`STORE_DOWN_MESSAGE` until the store
answers again. Either way an outcome is never refused (the call has already run), and the
outage is logged once when it starts and once when it ends, not per call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Generic, Protocol, TypeVar

from ..base.log import get_logger
from ..base.text import log_text, text_id
from ..base.types import MISSING
from ..engine import LoopDetector, detector_log_line
from ..engine.compaction import CompactionLoopPersistedError
from ..engine.detectors import Detection, Prospect
from ..engine.history import (
    OUTCOME_VETO,
    CallRecord,
    SessionState,
    normalize_run_id,
    now_ms,
    warning_bucket,
    warning_key,
)
from ..engine.history import restart_run as restart_run_window
from ..fingerprint import Outcome
from ..fingerprint.leaves import Leaves
from .events import LoopEvent
from .learning import learn, learned_for, learned_hash
from .verdicts import STOP_MESSAGE, GuardStats, Verdict

log = get_logger("loopwarden")
#: The detectors' own log lines (OpenClaw's), logged here: the engine never logs.
detection_log = get_logger("loopwarden.detection")

R = TypeVar("R")
#: A warning's dedupe key and bucket (spec §f.2), computed once per warned call.
WarningSlot = tuple[str, int]
#: The outcome a blocked call is recorded with.
VETO = Outcome(result_hash=None, outcome_kind=OUTCOME_VETO)

STORE_DOWN_MESSAGE = (
    "CRITICAL: loopwarden could not reach its state store and is configured to fail closed. "
    "The tool call was not executed."
)


class FailurePolicy(Protocol):
    """How calls are admitted while the store cannot be reached."""

    #: How the outage's log line names the policy.
    mode: str

    def admission(self, tool: str, call_id: str | None) -> Verdict:
        """The verdict for a call that the guard could not check against the store."""
        ...


class FailOpen:
    """Allow every call while the store is down: a state store never stops the agent."""

    __slots__ = ()
    mode = "open (calls allowed)"

    def admission(self, tool: str, call_id: str | None) -> Verdict:
        """``allow``: the call runs unchecked."""
        return Verdict("allow", None, tool, call_id)


class FailClosed:
    """Block every call while the store is down: nothing runs that the guard could not check."""

    __slots__ = ()
    mode = "closed (blocking calls)"

    def admission(self, tool: str, call_id: str | None) -> Verdict:
        """``block``, with :data:`STORE_DOWN_MESSAGE` for the model."""
        return Verdict("block", None, tool, call_id, STORE_DOWN_MESSAGE)


def failure_policy(fail_closed: bool) -> FailurePolicy:
    """The policy ``LoopGuard(fail_closed=...)`` asks for."""
    return FailClosed() if fail_closed else FailOpen()


class StoreHealth:
    """Whether the store is down, as the drivers saw it: counts every failure (exactly, under a
    lock: operators alert on it) and logs each outage's start and end once."""

    __slots__ = ("down", "lock", "policy", "stats")

    def __init__(self, policy: FailurePolicy, stats: GuardStats) -> None:
        self.policy = policy
        self.stats = stats
        #: Also guards the guard's other exact counters (events delivered).
        self.lock = threading.Lock()
        self.down = False

    def failed(self, exc: Exception) -> None:
        """A store operation raised ``exc``; the caller answers with its fallback."""
        with self.lock:
            self.stats.store_failures += 1
        if not self.down:
            self.down = True
            log.error("loopwarden state store failed: %s: %s; failing %s until it recovers",
                      log_text(type(exc).__name__), log_text(exc), self.policy.mode)

    def answered(self) -> None:
        """A store transaction succeeded: the outage, if there was one, is over."""
        if self.down:
            self.down = False
            log.warning("loopwarden state store recovered; loop detection resumed")


class Step(Generic[R]):
    """A transaction's value with what must follow the commit: the events to deliver and
    record, and the abort to raise (a loop that survived compaction). A rule that has neither
    answers with the bare value: the common case builds no Step."""

    # A plain slots class: one may be built per guarded call, where a dataclass costs more.
    __slots__ = ("abort", "events", "then", "value")

    def __init__(self, value: R, events: list[LoopEvent] | None = None) -> None:
        self.value = value
        self.events: list[LoopEvent] = [] if events is None else events
        self.abort: CompactionLoopPersistedError | None = None
        #: A second decision of the same transaction (``observe_call`` decides before and
        #: after the call), delivered and recorded after this one, as its own hook would be.
        self.then: Step[Any] | None = None


class Call:
    """The guard's call: who made it (session, normalised run, call id, agent), its
    fingerprint and arguments, and once it has run its outcome (hashed, with the leaves the
    ``early`` preset learns volatile fields from). Built from what the host passed, outside
    the store's lock; ids are normalised (total, see ``base.text``).

    Raises only when the args cannot be fingerprinted."""

    __slots__ = ("agent", "args", "call_id", "error", "leaves", "outcome", "prospect", "run_id",
                 "session")
    # Set once the call has run (see Settle).
    outcome: Outcome
    error: Any
    leaves: Leaves | None

    def __init__(self, detector: LoopDetector, tool_name: Any, args: Any, session: Any,
                 run_id: Any, call_id: Any, agent_id: Any) -> None:
        # Type tests inline: ids are str on the path every tool call takes.
        if type(tool_name) is not str:
            tool_name = text_id(tool_name)
        self.session = session if type(session) is str else text_id(session)
        self.call_id = call_id if call_id is None or type(call_id) is str else text_id(call_id)
        self.agent = agent_id if agent_id is None or type(agent_id) is str else text_id(agent_id)
        self.prospect = detector.fingerprint(tool_name, args)
        self.run_id = None if run_id is None else normalize_run_id(run_id)
        self.args = args


class Guarded(Protocol):
    """What the policy reads of its guard (``GuardCore``), on every call: the switches may
    change while the guard runs (a door sets ``deny_after_stop``, a test ``in_flight_seconds``)."""

    detector: LoopDetector
    rolling: bool
    post_outcome: bool
    compaction_on: bool
    in_flight_seconds: float
    deny_after_stop: bool


class LoopPolicy:
    """When the guard warns, blocks and stops: OpenClaw's dampening (a warning once per slot),
    vetoes, in-flight counting, the recovery turn and the terminal stop. Its rules run inside
    the store's transaction, on one session's state, and change nothing but that state."""

    __slots__ = ("guard",)

    def __init__(self, guard: Guarded) -> None:
        self.guard = guard

    # -- one call ---------------------------------------------------------------------------

    def admit(self, state: SessionState, call: Call, live: bool = True
              ) -> Verdict | Step[Verdict]:
        """Admission (spec §f.1 V2 wrapper + §f.2 dampening). ``live`` is False for a call that
        already happened (``observe_call``): nothing of a replayed history is in flight."""
        guard = self.guard
        prospect = call.prospect
        tool, run, call_id = prospect.tool_name, call.run_id, call.call_id
        seen = state.open_call(run, call_id, tool, prospect.args_hash)
        if seen is not None:
            # A retried hook: answer as the first delivery did, without counting or warning again.
            if seen.is_veto:
                return Verdict("block", self.detect(state, call)[0], tool, call_id)
            return Verdict("allow", None, tool, call_id)
        if not guard.rolling:
            return Verdict("allow", None, tool, call_id)
        if guard.deny_after_stop and self.run_stopped(state, run):
            # The host let the run go on after its terminal stop: nothing more of it runs.
            return Verdict("block", None, tool, call_id, STOP_MESSAGE, terminate=True)
        # (An identical call in flight has a record with these args: most calls have none.)
        flights = (self.in_flight(state, run, (prospect.args_hash,))
                   if live and state.key_records(run, prospect.args_hash) else ())
        if flights:
            with as_vetoes(flights):
                detection, slot = self.detect(state, call)
        else:
            detection, slot = self.detect(state, call)
        detector = guard.detector
        if detection is None:  # the common case, kept short: no events, so no Step
            detector.record_prospect(state, prospect, run, call_id, True)  # new: looked above
            return Verdict("allow", None, tool, call_id)
        if detection.level == "critical":
            self.veto(state, call)
            # The first critical of a run leaves the model one recovery turn; a second one in
            # the same run is terminal (spec §f.1), for one-call doors as for batches.
            verdict = Verdict("block", detection, tool, call_id,
                              terminate=not state.mark_recovery(run))
            if verdict.terminate and guard.deny_after_stop:
                self.stop_run(state, run)
            return Step(verdict, [self.event(call, detection, "block", state,
                                             terminal=verdict.terminate)])
        step = Step(Verdict("allow", detection, tool, call_id))
        if self.should_warn(state, detection, tool, run, slot):
            step.value.action = "warn"
            step.events.append(self.event(call, detection, "warn", state))
        detector.record_prospect(state, prospect, run, call_id, True)
        return step

    def settle(self, state: SessionState, call: Call) -> Verdict | Step[Verdict]:
        """Record the call's outcome (learning volatile fields first, ``early``), then check the
        post-compaction guard and, ``early``, whether the same call made next would warn."""
        guard = self.guard
        detector = guard.detector
        outcome, leaves = call.outcome, call.leaves
        run, call_id = call.run_id, call.call_id
        prospect = call.prospect
        admitted = state.admitted_record(run, call_id, prospect.tool_name, prospect.args_hash)
        if admitted is not None:  # the tool changed its args while it ran
            prospect = _as_admitted(prospect, admitted)
        tool = prospect.tool_name
        if leaves is not None and outcome.result_hash and outcome.outcome_kind is None:
            volatile = learn(state.learned, tool, f"{run or ''}|{prospect.args_hash}", leaves)
            if volatile:
                outcome = outcome._replace(result_hash=learned_hash(leaves, volatile))
        record = detector.record_prospect_outcome(state, prospect, run, outcome, call.error,
                                                  call_id)
        compaction = state.compaction.get(run or "") if state.compaction else None
        if compaction is None and not guard.post_outcome:  # the common case: no events possible
            return Verdict("allow", None, tool, call_id)
        step = Step(Verdict("allow", None, tool, call_id))
        if (compaction is not None and record is not None and guard.compaction_on
                and not detector.is_exempt(tool)):
            verdict = compaction.observe(tool, prospect.args_hash, record.result_hash)
            if verdict.should_abort:
                step.abort = CompactionLoopPersistedError.from_verdict(verdict)
                step.events.append(LoopEvent(
                    session=call.session, run=run, agent=call.agent, call_id=call_id, tool=tool,
                    level="critical", action="abort",
                    detector=verdict.detector or "compaction_loop_persisted",
                    count=verdict.count, message=verdict.message or "",
                ))
                return step
        if guard.post_outcome and record is not None:
            # Would the same call, made next, continue a loop? Tell the model now, on this
            # result, instead of after it has made that call (a critical next call is still
            # blocked before it runs).
            detection = detector.detect_prospect(state, prospect, run)
            slot = self._logged(state, detection, tool, run)
            if detection is not None and self.should_warn(state, detection, tool, run, slot,
                                                          any_level=True):
                step.value = replace(step.value, action="warn", detection=detection)
                step.events.append(self.event(call, detection, "warn", state))
        return step

    # -- the rules both share with batch admission ------------------------------------------

    def detect(self, state: SessionState, call: Call
               ) -> tuple[Detection | None, WarningSlot | None]:
        """The loop ``call`` would continue, with a warning's slot (computed once, for both the
        log line and the dampening); the detector's log line is logged when it is due."""
        prospect = call.prospect
        detection = self.guard.detector.detect_prospect(state, prospect, call.run_id)
        if detection is None:
            return None, None
        return detection, self._logged(state, detection, prospect.tool_name, call.run_id)

    def _logged(self, state: SessionState, detection: Detection | None, tool: str,
                run: str | None) -> WarningSlot | None:
        """Log the detector's line when it is due, and give a warning's slot. OpenClaw logs it
        on every evaluation (a warning on every call from the 10th to the 19th); loopwarden
        logs a warning once per slot, when the guard warns, and a critical every time."""
        if detection is None:
            return None
        slot = None
        if detection.level == "warning":
            slot = self.warning_slot(detection, tool, run)
            if detection_log.isEnabledFor(logging.WARNING) and state.warning_is_new(*slot):
                _log_line(detection, tool)
        elif detection_log.isEnabledFor(logging.ERROR):
            _log_line(detection, tool)
        return slot

    def warning_slot(self, detection: Detection, tool: str, run: str | None) -> WarningSlot:
        """The key and bucket a warning is deduplicated by: buckets of ``warningThreshold``
        calls (the tool's own, if perTool sets one), not OpenClaw's fixed 10."""
        detector = self.guard.detector
        limits = detector.limits_for_tool(tool)
        return (warning_key(detection.detector, detection.warning_key, tool, run),
                warning_bucket(detection.count, (limits or detector.limits).warning))

    def should_warn(self, state: SessionState, detection: Detection, tool: str,
                    run: str | None, slot: WarningSlot | None, *, any_level: bool = False
                    ) -> bool:
        """OpenClaw's dampening: True for a warning whose slot is newer than the last one
        warned (``slot`` as :meth:`detect` computed it, or None to compute it here)."""
        if detection.level != "warning" and not any_level:
            return False
        return state.remember_warning(*(slot or self.warning_slot(detection, tool, run)))

    def in_flight(self, state: SessionState, run: str | None, keys: Iterable[str]
                  ) -> list[CallRecord]:
        """The run's calls with these args hashes admitted within ``in_flight_seconds`` whose
        outcome has not come (a sequential host has none)."""
        flights: list[CallRecord] = []
        seconds = self.guard.in_flight_seconds
        if seconds <= 0:
            return flights
        since: int | None = None
        for key in keys:
            for record in state.key_records(run, key):
                if not record.pending:
                    continue
                if since is None:
                    since = now_ms() - int(seconds * 1000)
                if record.timestamp > since:
                    flights.append(record)
        return flights

    def veto(self, state: SessionState, call: Call) -> None:
        """Record a blocked call as a veto. A call id that names no open call is a new call
        (an earlier call's id reused), so it gets its own record rather than being taken
        for a retry of that finished call."""
        detector = self.guard.detector
        prospect, run, call_id = call.prospect, call.run_id, call.call_id
        if call_id:  # (an open call with this id: itself)
            detector.record_prospect(state, prospect, run, call_id)
        detector.record_prospect_outcome(state, prospect, run, VETO, MISSING, call_id)

    @staticmethod
    def event(call: Call, detection: Detection, action: str, state: SessionState | None = None,
              *, terminal: bool = False) -> LoopEvent:
        """The event of a warn or block of ``call``; ``terminal`` marks the block that ends
        the run (the terminal stop)."""
        tool = call.prospect.tool_name
        return LoopEvent(
            session=call.session, run=call.run_id, agent=call.agent, call_id=call.call_id,
            tool=tool, level=detection.level, action=action, detector=detection.detector,
            count=detection.count, message=detection.message,
            paired_tool=detection.paired_tool_name,
            learned=learned_for(state.learned, tool) if state is not None else (),
            terminal=terminal,
        )

    # -- the terminal stop --------------------------------------------------------------------

    @staticmethod
    def stop_run(state: SessionState, run: str | None) -> None:
        """Remember that a terminal verdict stopped ``run`` (see ``deny_after_stop``)."""
        state.recovery_used[_STOPPED_PREFIX + (run or "")] = True

    @staticmethod
    def run_stopped(state: SessionState, run: str | None) -> bool:
        """Whether a terminal verdict stopped ``run`` earlier."""
        return bool(state.recovery_used.get(_STOPPED_PREFIX + (run or "")))

    @staticmethod
    def restart_run(state: SessionState, run: str | None) -> None:
        """A human let ``run`` go on after its stop: every loop count starts over, and a run
        stopped under ``deny_after_stop`` runs again."""
        restart_run_window(state, run)
        state.recovery_used.pop(_STOPPED_PREFIX + (run or ""), None)


# A stopped run is kept in the same bounded map as the recovery turn (``recovery_used``), under
# a key no run id normalises to, so the stores' format does not change.
_STOPPED_PREFIX = "\x00stopped:"


def _log_line(detection: Detection, tool: str) -> None:
    line = detector_log_line(detection, tool)
    if line is not None:
        detection_log.log(*line)


@contextmanager
def as_vetoes(records: Sequence[CallRecord]) -> Iterator[None]:
    """Project pending records as vetoes for one detection (OpenClaw's batch projection:
    counted as no-progress repeats), and give them back their pending state afterwards."""
    for record in records:
        record.outcome_kind = OUTCOME_VETO
    try:
        yield
    finally:
        for record in records:
            record.outcome_kind = None


def _as_admitted(prospect: Prospect, record: CallRecord) -> Prospect:
    """``prospect`` under the fingerprint it was admitted with (see
    :meth:`SessionState.admitted_record`): the outcome is recorded, and the next call judged,
    as for the unchanged arguments that the model will send again."""
    return Prospect(prospect.tool_name, record.args_hash, prospect.known_poll,
                    prospect.poll_critical_at_warning, record.mutation_target_hash,
                    prospect.profile)
