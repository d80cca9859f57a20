"""The guard's state and the rules its transactions share.

:class:`GuardCore` is what :class:`~loopwarden.guard.LoopGuard` is made of below its public
hooks: the detector and the switches derived from its config, the store and its failure policy,
the sinks and the counters. The functions below are the rules more than one transaction applies
(dampening, in-flight calls, vetoes, events); the transactions themselves live in
``calls.py`` and ``batch.py``, and the drivers that run them in ``drivers.py``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from ..base.log import get_logger
from ..base.text import log_text, text_id
from ..engine import LoopDetector, detector_log_line
from ..engine.detectors import Detection
from ..engine.history import (
    OUTCOME_VETO,
    CallRecord,
    SessionState,
    now_ms,
    warning_bucket,
    warning_key,
)
from ..engine.history import restart_run as restart_run_window
from ..fingerprint import Outcome
from .events import EventSink, LoggingSink, LoopEvent
from .learning import learned_for
from .policy import FailClosed, StoreHealth, failure_policy
from .stores.base import Store
from .stores.memory import MemoryStore
from .verdicts import GuardStats, Verdict

if TYPE_CHECKING:
    from ..config import LoopDetectionConfig  # only the engine loads it, and only when needed
    from ..engine import PreparedCall


log = get_logger("loopwarden")
#: The detectors' own log lines (OpenClaw's), logged here: the engine never logs.
detection_log = get_logger("loopwarden.detection")

#: A warning's dedupe key and bucket (spec §f.2), computed once per warned call.
WarningSlot = tuple[str, int]

DISABLE_ENV = "LOOPWARDEN_DISABLED"
#: The outcome a blocked call is recorded with.
VETO = Outcome(result_hash=None, outcome_kind=OUTCOME_VETO)

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


def _warn_enabled_unset() -> None:
    """Say once per guard that an explicit config without ``enabled`` detects no loops."""
    log.warning(
        "LoopGuard(config=...): the config leaves `enabled` unset, so the rolling loop "
        "detectors are OFF (only the post-compaction guard runs). Set "
        "tools.loopDetection.enabled = true in the file, or pass "
        "LoopDetectionConfig(enabled=True, ...), or use LoopGuard(preset=..., **overrides) "
        "which starts from the enabled default")


class GuardCore:
    """A guard's state: what every transaction reads and every driver updates (the
    constructor's arguments are :class:`~loopwarden.guard.LoopGuard`'s)."""

    #: How long an admitted call counts as in flight while its outcome has not come: an
    #: identical call admitted meanwhile counts it as a no-progress repeat, as OpenClaw counts
    #: a batch's earlier siblings, so a burst of concurrent identical calls is stopped like the
    #: same calls made one after another. Older calls without an outcome are not in flight (a
    #: host that never calls ``after_tool_call`` would otherwise pile them up); 0 turns
    #: in-flight counting off. Sequential hosts (each outcome reported before the next call)
    #: never have a call in flight.
    in_flight_seconds: float = 60.0
    #: Deny every later call of a run once a terminal verdict stopped it, with
    #: :data:`~loopwarden.guard.STOP_MESSAGE`. For doors whose host cannot end a run from a
    #: tool hook (Codex CLI): the run goes on, so the guard keeps it stopped. Off by default:
    #: hosts that end the run never send another call of it.
    deny_after_stop: bool = False

    def __init__(
        self,
        config: LoopDetectionConfig | None = None,
        *,
        store: Store | None = None,
        profiles: object = None,
        sinks: Sequence[EventSink] = (),
        fail_closed: bool = False,
        preset: str | None = None,
        **overrides: object,
    ) -> None:
        if config is None:
            from ..config import LoopDetectionConfig  # a hook passing its snapshot never loads it

            config = LoopDetectionConfig(enabled=True)
        if preset is not None:
            overrides["preset"] = preset
        if overrides:
            # Keyword customisations apply on top of the given (or the enabled default) config:
            # "block sooner" must never be the switch that turns the guard off.
            config = config.with_overrides(**overrides)
        if config.enabled is None:
            _warn_enabled_unset()
        self.detector = LoopDetector(config, profiles)
        self.config = self.detector.config
        # The config is immutable; these derived switches are read on every call.
        #: The rolling detectors are on (``enabled`` is exactly True).
        self.rolling: bool = self.config.rolling_enabled
        #: ``early``: a result that completes a pattern is warned on at once.
        self.post_outcome: bool = self.config.post_outcome_warnings and self.rolling
        #: The post-compaction guard is on (``enabled`` is not False).
        self.compaction_on: bool = self.config.compaction_guard_enabled
        self.store: Store = store if store is not None else MemoryStore()
        self.sinks: list[EventSink] = [LoggingSink(), *sinks]
        self.stats = GuardStats()
        #: The store's outage state and the failure policy (see :attr:`fail_closed`).
        self.store_health = StoreHealth(failure_policy(fail_closed), self.stats)
        #: The kill switch: every hook answers "allow" and touches no state.
        self.disabled = _disabled_by_env()

    @property
    def fail_closed(self) -> bool:
        """Whether calls are blocked while the store cannot be reached (else they run)."""
        return isinstance(self.store_health.policy, FailClosed)

    @fail_closed.setter
    def fail_closed(self, value: bool) -> None:
        """Set the failure policy: True blocks calls while the store cannot be reached."""
        self.store_health.policy = failure_policy(value)


# A stopped run is kept in the same bounded map as the recovery turn (``recovery_used``), under
# a key no run id normalises to, so the stores' format does not change.
_STOPPED_PREFIX = "\x00stopped:"


def stop_run(state: SessionState, run: str | None) -> None:
    """Remember that a terminal verdict stopped ``run`` (see :attr:`GuardCore.deny_after_stop`)."""
    state.recovery_used[_STOPPED_PREFIX + (run or "")] = True


def restart_run(state: SessionState, run: str | None) -> None:
    """A human let ``run`` go on after its stop: every loop count starts over, and a run stopped
    under :attr:`GuardCore.deny_after_stop` runs again."""
    restart_run_window(state, run)
    state.recovery_used.pop(_STOPPED_PREFIX + (run or ""), None)


def run_stopped(state: SessionState, run: str | None) -> bool:
    """Whether a terminal verdict stopped ``run`` earlier."""
    return bool(state.recovery_used.get(_STOPPED_PREFIX + (run or "")))


def internal_error(core: GuardCore, tool: object, exc: Exception) -> Verdict:
    """``allow`` for a hook whose input the guard could not handle: logged and counted, never
    raised (every hook is total)."""
    # Counters are diagnostics: a lock-free increment may, rarely, lose a count under threads.
    core.stats.internal_errors += 1
    # The exception's type, not its text: that may quote the call's arguments.
    log.warning("tool loop outcome tracking failed: tool=%s error=%s", log_text(tool),
                type(exc).__name__)
    return Verdict("allow", tool_name=text_id(tool))


def veto(core: GuardCore, state: SessionState, call: PreparedCall, call_id: str | None) -> None:
    """Record a blocked call as a veto. A call id that names no open call is a new call
    (an earlier call's id reused), so it gets its own record rather than being taken
    for a retry of that finished call."""
    detector = core.detector
    if call_id:
        detector.record(state, call, call_id=call_id)  # (an open call with this id: itself)
    detector.record_outcome(state, call, outcome=VETO, call_id=call_id)


def in_flight(core: GuardCore, state: SessionState, run: str | None,
              keys: Iterable[str]) -> list[CallRecord]:
    """The run's calls with these args hashes admitted within ``in_flight_seconds`` whose
    outcome has not come (a sequential host has none)."""
    flights: list[CallRecord] = []
    seconds = core.in_flight_seconds
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


def warning_slot(core: GuardCore, detection: Detection, tool: str, run: str | None
                 ) -> WarningSlot:
    """The key and bucket a warning is deduplicated by: buckets of ``warningThreshold`` calls
    (the tool's own, if perTool sets one), not OpenClaw's fixed 10."""
    detector = core.detector
    limits = detector.limits_for_tool(tool)
    return (warning_key(detection.detector, detection.warning_key, tool, run),
            warning_bucket(detection.count, (limits or detector.limits).warning))


def detect(core: GuardCore, state: SessionState, call: PreparedCall
           ) -> tuple[Detection | None, WarningSlot | None]:
    """The loop ``call`` would continue, with a warning's slot (computed here, once, for both
    the log line and the dampening), and the detector's log line when it is due. OpenClaw logs
    it on every evaluation (a warning on every call from the 10th to the 19th); loopwarden logs
    a warning once per slot, when the guard warns, and a critical every time."""
    detection = core.detector.detect(state, call)
    if detection is None:
        return None, None
    tool = call.prospect.tool_name
    slot = None
    if detection.level == "warning":
        slot = warning_slot(core, detection, tool, call.run_id)
        if detection_log.isEnabledFor(logging.WARNING) and state.warning_is_new(*slot):
            _log_line(detection, tool)
    elif detection_log.isEnabledFor(logging.ERROR):
        _log_line(detection, tool)
    return detection, slot


def _log_line(detection: Detection, tool: str) -> None:
    line = detector_log_line(detection, tool)
    if line is not None:
        detection_log.log(*line)


def should_warn(
    core: GuardCore, state: SessionState, detection: Detection, tool: str, run: str | None,
    slot: WarningSlot | None, *, any_level: bool = False,
) -> bool:
    """OpenClaw's dampening: True for a warning whose slot is newer than the last one warned
    (``slot`` as :func:`detect` computed it, or None to compute it here)."""
    if detection.level != "warning" and not any_level:
        return False
    return state.remember_warning(*(slot or warning_slot(core, detection, tool, run)))


class Named(Protocol):
    """What names a call in its events: a :class:`CallContext`, or a one-call hook's call."""

    session: str
    run_id: str | None
    call_id: str | None
    agent: str | None


def loop_event(ctx: Named, tool: str, detection: Detection, action: str,
               state: SessionState | None = None, *, terminal: bool = False) -> LoopEvent:
    """The event of a warn or block; ``ctx`` names the session, run, agent and call id;
    ``terminal`` marks the block that ends the run (the terminal stop)."""
    return LoopEvent(
        session=ctx.session, run=ctx.run_id, agent=ctx.agent, call_id=ctx.call_id, tool=tool,
        level=detection.level, action=action, detector=detection.detector,
        count=detection.count, message=detection.message,
        paired_tool=detection.paired_tool_name,
        learned=learned_for(state.learned, tool) if state is not None else (),
        terminal=terminal,
    )
