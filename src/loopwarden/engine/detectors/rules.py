"""The precedence table: the ``RULES`` that turn the detectors' measurements into at most one
:class:`Detection`, first match wins, in OpenClaw's order (§d), and :class:`Facts`, the
measurements of one prospective call.

Each rule names its ``family``, the :class:`~loopwarden.engine.detectors.base.Detector` whose
measurement it compares with a threshold. The families of this table are ``DETECTORS``: the
engine's O(1) gate asks each of them (:func:`gates_for`) and calibration reads their scores, so
a rule is never left out of either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..history import RunView, SessionState
from .base import (
    NO_CYCLE,
    Churn,
    Cycle,
    Detection,
    Detector,
    Level,
    Limits,
    PingPong,
    Prospect,
    Streak,
)
from .churn import ARGUMENT_CHURN
from .cycle import CYCLE
from .pingpong import PING_PONG
from .streaks import ERROR_REPEAT, NO_PROGRESS, UNKNOWN_TOOL, repeat_count


@dataclass(slots=True)
class Facts:
    """All measurements for one prospective call, computed once: each detector's part."""

    call: Prospect
    unknown: Streak  # UNKNOWN_TOOL
    no_progress: Streak  # NO_PROGRESS
    ping_pong: PingPong  # PING_PONG
    churn: Churn  # ARGUMENT_CHURN
    recent: int  # NO_PROGRESS
    errors: Streak  # ERROR_REPEAT
    cycle: Cycle = NO_CYCLE  # CYCLE

    @classmethod
    def measure(
        cls, state: SessionState, run: str | None, call: Prospect, limits: Limits
    ) -> Facts:
        """Every detector's measurement of the run for ``call``, each taken once."""
        no_progress, recent = NO_PROGRESS.measure(state, run, call, limits)
        return cls(
            call,
            UNKNOWN_TOOL.measure(state, run, call, limits),
            no_progress,
            PING_PONG.measure(state, run, call, limits),
            ARGUMENT_CHURN.measure(state, run, call, limits),
            recent,
            ERROR_REPEAT.measure(state, run, call, limits),
            CYCLE.measure(state, run, call, limits),
        )


def _blocks_at(f: Facts, lim: Limits, critical: int) -> int:
    """``early``: a paced or backing-off repeat is blocked only at the hard cap, a pacing call
    only by the global breaker."""
    if lim.progress and f.call.pacing:
        return lim.global_breaker
    if lim.progress and (f.no_progress.paced or f.no_progress.compliant):
        return max(critical, lim.eased_critical)
    return critical


def _poll_warns(f: Facts, lim: Limits) -> bool:
    return not (lim.progress and f.no_progress.compliant)


def _pp_warns(f: Facts, lim: Limits) -> bool:
    # At lowered thresholds an alternation warns only with evidence of no progress.
    return not lim.progress or f.ping_pong.no_progress_evidence


Count = Callable[[Facts, Limits], int]


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of the precedence table: the detection it makes (``detector``, ``level``) and
    the detector whose measurement it reads (``family``)."""

    detector: str
    level: Level
    family: Detector[Any]
    fires: Callable[[Facts, Limits], bool]
    count: Count
    message: Callable[[Facts, int], str]
    key: Callable[[Facts], str]


def _np(f: Facts, _: Limits) -> int:
    return f.no_progress.count


def _latest(f: Facts) -> str:
    return f.no_progress.latest_result_hash or "none"


def _pp_key(f: Facts) -> str:
    if f.ping_pong.paired_signature is None:
        return f"pingpong:{f.call.tool_name}:{f.call.args_hash}"
    return "pingpong:" + "|".join(sorted((f.call.args_hash, f.ping_pong.paired_signature)))


def _poll_critical_threshold(f: Facts, lim: Limits) -> int:
    return lim.warning if f.call.poll_critical_at_warning else lim.critical


def _churn_message(f: Facts, n: int) -> str:
    t = f.call.tool_name
    if f.churn.write_mutation:
        return (
            f"WARNING: {t} has changed the same target with {f.churn.variant_count} distinct "
            "argument variants and no intervening verification. Continued rewriting is treated "
            "as stalled run activity, but this tool call remains allowed. Read or verify the "
            "current result before rewriting it again."
        )
    return (
        f"WARNING: {t} has cycled through {f.churn.variant_count} repeated argument patterns "
        f"with the same stable outcome {n} times. Continued churn is treated as stalled run "
        "activity, but this tool call remains allowed."
    )


def _churn_key(f: Facts) -> str:
    if f.churn.write_mutation:
        return f"argument-churn:{f.call.tool_name}:write-mutation:{f.call.mutation_target_hash or 'unknown'}"
    return f"argument-churn:{f.call.tool_name}"


def unknown_tool_message(name: str, n: int) -> str:
    """The ``unknown_tool_repeat`` message. ``name`` is the missing tool as the error text
    named it, which the model wrote, possibly into an argument: logs use the called tool's
    name instead (:class:`~loopwarden.guard.events.LoggingSink`)."""
    return (f"CRITICAL: attempted unavailable tool {name} {n} times. "
            "Stop retrying that missing tool and answer without it.")
def _cycle_text(f: Facts, n: int) -> str:
    steps = " \u2192 ".join(f.cycle.tools)
    return (
        f"You are repeating a cycle of {len(f.cycle.steps)} tool calls ({steps}) with "
        f"identical results ({n} consecutive calls)."
    )


def _cycle_key(f: Facts) -> str:
    """The same for every step and phase of one cycle: its smallest rotation."""
    steps = f.cycle.steps
    return "cycle:" + "|".join(min(steps[i:] + steps[:i] for i in range(len(steps))))


RULES: tuple[Rule, ...] = (
    Rule(
        "unknown_tool_repeat", "critical", UNKNOWN_TOOL,
        lambda f, lim: f.unknown.count >= lim.unknown_tool,
        lambda f, _: f.unknown.count,
        lambda f, n: unknown_tool_message(f.unknown.name or f.call.tool_name, n),
        lambda f: f"unknown-tool:{f.call.tool_name}:{f.unknown.name or 'unknown'}",
    ),
    Rule(
        "global_circuit_breaker", "critical", NO_PROGRESS,
        lambda f, lim: f.no_progress.count >= lim.global_breaker,
        _np,
        lambda f, n: (
            f"CRITICAL: {f.call.tool_name} repeated identical no-progress outcomes {n} times. "
            "Session execution blocked by global circuit breaker to prevent runaway loops."
        ),
        lambda f: f"global:{f.call.tool_name}:{f.call.args_hash}:{_latest(f)}",
    ),
    Rule(
        "known_poll_no_progress", "critical", NO_PROGRESS,
        lambda f, lim: lim.known_poll and f.call.known_poll
        and f.no_progress.count >= _blocks_at(f, lim, _poll_critical_threshold(f, lim)),
        _np,
        lambda f, n: (
            f"CRITICAL: Called {f.call.tool_name} with identical arguments and no progress {n} "
            "times. This appears to be a stuck polling loop. Session execution blocked to "
            "prevent resource waste."
        ),
        lambda f: f"poll:{f.call.tool_name}:{f.call.args_hash}:{_latest(f)}",
    ),
    Rule(
        "known_poll_no_progress", "warning", NO_PROGRESS,
        lambda f, lim: lim.known_poll and f.call.known_poll
        and f.no_progress.count >= lim.warning and _poll_warns(f, lim),
        _np,
        lambda f, n: (
            f"WARNING: You have called {f.call.tool_name} {n} times with identical arguments and "
            "no progress. Stop polling and either (1) increase wait time between checks, or (2) "
            "report the task as failed if the process is stuck."
        ),
        lambda f: f"poll:{f.call.tool_name}:{f.call.args_hash}:{_latest(f)}",
    ),
    Rule(
        "ping_pong", "critical", PING_PONG,
        lambda f, lim: lim.ping_pong and f.ping_pong.count >= lim.critical
        and f.ping_pong.no_progress_evidence,
        lambda f, _: f.ping_pong.count,
        lambda f, n: (
            f"CRITICAL: You are alternating between repeated tool-call patterns ({n} consecutive "
            "calls) with no progress. This appears to be a stuck ping-pong loop. Session "
            "execution blocked to prevent resource waste."
        ),
        _pp_key,
    ),
    # loopwarden's cycles (periods 3-6) rank right after ping-pong (period 2). Blocked attempts
    # keep counting, so an insistent model reaches the breaker, as a repeated call does.
    Rule(
        "global_circuit_breaker", "critical", CYCLE,
        lambda f, lim: lim.cycle and f.cycle.count >= lim.global_breaker,
        lambda f, _: f.cycle.count,
        lambda f, n: (
            f"CRITICAL: {_cycle_text(f, n)} Session execution blocked by global circuit breaker "
            "to prevent runaway loops."
        ),
        lambda f: "global:" + _cycle_key(f),
    ),
    Rule(
        "cycle", "critical", CYCLE,
        lambda f, lim: lim.cycle and f.cycle.count >= lim.critical,
        lambda f, _: f.cycle.count,
        lambda f, n: (
            f"CRITICAL: {_cycle_text(f, n)} This appears to be a stuck cycle. Session execution "
            "blocked to prevent resource waste."
        ),
        _cycle_key,
    ),
    Rule(
        "ping_pong", "warning", PING_PONG,
        lambda f, lim: lim.ping_pong and f.ping_pong.count >= lim.warning and _pp_warns(f, lim),
        lambda f, _: f.ping_pong.count,
        lambda f, n: (
            f"WARNING: You are alternating between repeated tool-call patterns ({n} consecutive "
            "calls). This looks like a ping-pong loop; stop retrying and report the task as "
            "failed."
        ),
        _pp_key,
    ),
    Rule(
        "generic_repeat", "critical", NO_PROGRESS,
        lambda f, lim: lim.generic_repeat and not f.call.known_poll
        and f.no_progress.count >= _blocks_at(f, lim, lim.critical),
        _np,
        lambda f, n: (
            f"CRITICAL: Called {f.call.tool_name} with identical outcomes {n} times. Session "
            "execution blocked to prevent runaway loops."
        ),
        lambda f: f"generic:{f.call.tool_name}:{f.call.args_hash}:{_latest(f)}",
    ),
    Rule(
        "error_repeat", "critical", ERROR_REPEAT,
        lambda f, lim: lim.error_repeat_on and f.errors.count >= lim.critical,
        lambda f, _: f.errors.count,
        lambda f, n: (
            f"CRITICAL: {f.call.tool_name} failed {n} times in this run with the same error. "
            "Session execution blocked to prevent runaway loops."
        ),
        lambda f: f"error:{f.call.tool_name}:{f.errors.latest_result_hash}",
    ),
    # Below every critical, so that a cycle's warning never turns an existing block into a
    # warning.
    Rule(
        "cycle", "warning", CYCLE,
        lambda f, lim: lim.cycle and f.cycle.count >= lim.warning,
        lambda f, _: f.cycle.count,
        lambda f, n: (
            f"WARNING: {_cycle_text(f, n)} This looks like a no-progress loop; change your "
            "approach or report the task as failed."
        ),
        _cycle_key,
    ),
    Rule(
        "argument_churn", "warning", ARGUMENT_CHURN,
        lambda f, lim: lim.argument_churn and f.churn.count >= lim.warning,
        lambda f, _: f.churn.count,
        _churn_message,
        _churn_key,
    ),
    Rule(
        "generic_repeat", "warning", NO_PROGRESS,
        lambda f, lim: lim.generic_repeat and not f.call.known_poll
        and repeat_count(f, lim) >= lim.warning,
        repeat_count,
        lambda f, n: (
            f"WARNING: You have called {f.call.tool_name} {n} times with identical arguments. "
            "If this is not making progress, stop retrying and report the task as failed."
        ),
        lambda f: f"generic:{f.call.tool_name}:{f.call.args_hash}",
    ),
    Rule(
        "error_repeat", "warning", ERROR_REPEAT,
        lambda f, lim: lim.error_repeat_on and f.errors.count >= lim.error_repeat,
        lambda f, _: f.errors.count,
        lambda f, n: (
            f"WARNING: {f.call.tool_name} has failed {n} times in this run with the same error. "
            "Stop retrying the same failing action; change your approach or report the failure."
        ),
        lambda f: f"error:{f.call.tool_name}:{f.errors.latest_result_hash}",
    ),
)

_LIVENESS_DETECTORS = frozenset({"known_poll_no_progress", "ping_pong", "cycle", "argument_churn"})


def evaluate(facts: Facts, limits: Limits, rules: Iterable[Rule] = RULES) -> Detection | None:
    """The first rule that fires, as a :class:`Detection` (spec §d precedence)."""
    for rule in rules:
        if not rule.fires(facts, limits):
            continue
        count = rule.count(facts, limits)
        liveness = None
        if (
            rule.level == "warning"
            and rule.detector in _LIVENESS_DETECTORS
            and facts.churn.count >= limits.warning
        ):
            liveness = "argument_churn"
        paired = facts.ping_pong.paired_tool_name if rule.detector == "ping_pong" else None
        return Detection(
            level=rule.level,
            detector=rule.detector,
            count=count,
            message=rule.message(facts, count),
            paired_tool_name=paired,
            warning_key=rule.key(facts),
            liveness_signal=liveness,
        )
    return None


#: The detectors, in the order of their first rule: every family of ``RULES``, and no other.
DETECTORS: tuple[Detector[Any], ...] = tuple(dict.fromkeys(rule.family for rule in RULES))

Gate = Callable[[RunView, Prospect, Limits], bool]


def gates_for(limits: Limits) -> tuple[Gate, ...]:
    """The ``may_fire`` of every detector that ``limits``' switches leave on (the others' rules
    cannot fire): when none of them says yes, no rule fires and the call needs no measuring."""
    return tuple(d.may_fire for d in DETECTORS if d.enabled(limits))
