"""The no-progress streak of one exact call (§d.3), read by three families of rows: the
``global_circuit_breaker`` (always on), ``known_poll_no_progress`` (``detectors.
knownPollNoProgress``) and ``generic_repeat`` (``detectors.genericRepeat``).

loopwarden's equivalent argument forms (``detectors.equivalentArguments``) widen "one exact
call" to the call written with or without keys that only restate a default (``{}`` and
``{"model": "default"}``, see :mod:`loopwarden.fingerprint.defaults`): the streak over every
form, like the exact one, holds only while the results are identical, so a key whose value
matters (its result differs) merges nothing. Its rows report ``generic_repeat``."""

from __future__ import annotations

from typing import NamedTuple

from ...config.switches import detector_switch
from ..history import RunView, SessionState
from .base import WAKE_REPEAT, WAKE_TAIL, Detector, Facts, Limits, Prospect, Rule, Score
from .streaks import (
    NO_STREAK,
    Streak,
    no_progress_streak,
    progress_streak,
    tool_tail_may_reach,
    walk_same_args,
)

#: The switches of the known-poll rows, the plain repeat rows and the equivalent-forms rows
#: (``detectors.knownPollNoProgress``, ``genericRepeat``, ``equivalentArguments``); the
#: circuit breaker's row is always on.
POLL_SWITCH = detector_switch("known_poll_no_progress")
REPEAT_SWITCH = detector_switch("generic_repeat")
EQUIVALENT_SWITCH = detector_switch("equivalent_arguments")


class NoProgress(NamedTuple):
    """The streak of identical outcomes, the identical calls in the window (what OpenClaw's
    generic-repeat warning counts), and the streak over the call's equivalent forms when it is
    longer than the exact one's."""

    streak: Streak = NO_STREAK
    recent: int = 0
    equivalent: Streak = NO_STREAK


NO_NO_PROGRESS = NoProgress()


class NoProgressDetector(Detector[NoProgress]):
    """The no-progress streak of this exact call, which ``generic_repeat``,
    ``known_poll_no_progress`` and the ``global_circuit_breaker`` compare with their thresholds
    (one measurement and one pre-check for the three), and the count of identical calls that
    OpenClaw's generic-repeat warning compares."""

    __slots__ = ()
    wakes = WAKE_REPEAT | WAKE_TAIL
    name = "no_progress"
    empty = NO_NO_PROGRESS  # (never used: the breaker's rows are always on)

    def may_fire(self, view: RunView, call: Prospect, limits: Limits) -> bool:
        """The window holds ``warning`` calls with these arguments (``exec``: a failure tail),
        or with equivalent forms of them."""
        # Either count needs ``warning`` records of this exact call, but exec's terminal-failure
        # tail spans different commands.
        if len(view.by_key.get(call.args_hash, ())) >= limits.warning:
            return True
        core = call.core_hash
        if core is not None and (core != call.args_hash or core in view.by_core) and len(
                view.by_core.get(core, ())) + len(view.by_key.get(core, ())) >= limits.warning:
            return True
        return call.tool_name == "exec" and tool_tail_may_reach(
            view.records, call.tool_name, limits.warning)

    def measure(self, state: SessionState, run: str | None, call: Prospect,
                limits: Limits) -> NoProgress:
        """(the streak, the identical calls in the window, the streak over equivalent forms);
        ``early``'s streaks end at fresh mutations, and a pacing call is neutral (only the hard
        cap watches it)."""
        if not limits.progress:
            streak = no_progress_streak(state, run, call)
            return NoProgress(streak, len(state.key_records(run, call.args_hash)),
                              _equivalent(state, run, call, limits, streak))
        streak = progress_streak(state, run, call)
        return NoProgress(streak, 0 if call.pacing else len(state.key_records(run, call.args_hash)),
                          _equivalent(state, run, call, limits, streak))

    def score(self, facts: Facts, limits: Limits) -> Score:
        """The generic-repeat count (for a known poll, the streak) against the warning threshold,
        and the streak against the critical one."""
        count = facts[self].streak.count
        generic = count if facts.call.known_poll else repeat_count(facts, limits)
        return Score(warning=generic, critical=count)


def _equivalent(state: SessionState, run: str | None, call: Prospect, limits: Limits,
                exact: Streak) -> Streak:
    """The no-progress streak over every form of the call with its core hash, when it is
    longer than ``exact`` (the exact form's own); else NO_STREAK."""
    core = call.core_hash  # (None while the switch is off: no core hashes are computed)
    if core is None:
        return NO_STREAK
    view = state.run_view(run)
    if view is None or (core == call.args_hash and core not in view.by_core):
        return NO_STREAK
    if limits.progress:
        if call.pacing:
            return NO_STREAK
        merged = progress_streak(state, run, call, core=core)
    else:
        merged = walk_same_args(
            r for r in state.reversed_run(run) if r.args_hash == core or r.core_hash == core)
    return merged if merged.count > exact.count else NO_STREAK


NO_PROGRESS = NoProgressDetector()


def _streak(f: Facts) -> Streak:
    return f[NO_PROGRESS].streak


def repeat_count(f: Facts, lim: Limits) -> int:
    """What the generic-repeat warning counts: identical arguments (OpenClaw), or with
    ``progress`` identical outcomes without progress in between (0 while backing off)."""
    if not lim.progress:
        return f[NO_PROGRESS].recent
    streak = _streak(f)
    return 0 if streak.compliant else streak.count


def _blocks_at(f: Facts, lim: Limits, critical: int) -> int:
    """``early``: a paced or backing-off repeat is blocked only at the hard cap, a pacing call
    only by the global breaker."""
    if lim.progress and f.call.pacing:
        return lim.global_breaker
    if lim.progress and (_streak(f).paced or _streak(f).compliant):
        return max(critical, lim.eased_critical)
    return critical


def _poll_critical_threshold(f: Facts, lim: Limits) -> int:
    return lim.warning if f.call.poll_critical_at_warning else lim.critical


def _count(f: Facts, _: Limits) -> int:
    return _streak(f).count


def _latest(f: Facts) -> str:
    return _streak(f).latest_result_hash or "none"


BREAKER = Rule(
    NO_PROGRESS, "global_circuit_breaker", "critical",
    lambda f, lim: _streak(f).count >= lim.global_breaker,
    _count,
    lambda f, n: (
        f"CRITICAL: {f.call.tool_name} repeated identical no-progress outcomes {n} times. "
        "Session execution blocked by global circuit breaker to prevent runaway loops."
    ),
    lambda f: f"global:{f.call.tool_name}:{f.call.args_hash}:{_latest(f)}",
    "Global circuit breaker triggered: {tool} repeated {n} times with no progress",
)
POLL_CRITICAL = Rule(
    NO_PROGRESS, "known_poll_no_progress", "critical",
    lambda f, lim: f.call.known_poll
    and _streak(f).count >= _blocks_at(f, lim, _poll_critical_threshold(f, lim)),
    _count,
    lambda f, n: (
        f"CRITICAL: Called {f.call.tool_name} with identical arguments and no progress {n} "
        "times. This appears to be a stuck polling loop. Session execution blocked to "
        "prevent resource waste."
    ),
    lambda f: f"poll:{f.call.tool_name}:{f.call.args_hash}:{_latest(f)}",
    "Critical polling loop detected: {tool} repeated {n} times",
    switch=POLL_SWITCH,
)
POLL_WARNING = Rule(
    NO_PROGRESS, "known_poll_no_progress", "warning",
    lambda f, lim: f.call.known_poll and _streak(f).count >= lim.warning
    and not (lim.progress and _streak(f).compliant),
    _count,
    lambda f, n: (
        f"WARNING: You have called {f.call.tool_name} {n} times with identical arguments and "
        "no progress. Stop polling and either (1) increase wait time between checks, or (2) "
        "report the task as failed if the process is stuck."
    ),
    lambda f: f"poll:{f.call.tool_name}:{f.call.args_hash}:{_latest(f)}",
    "Polling loop warning: {tool} repeated {n} times",
    switch=POLL_SWITCH,
    liveness=True,
)
GENERIC_CRITICAL = Rule(
    NO_PROGRESS, "generic_repeat", "critical",
    lambda f, lim: not f.call.known_poll
    and _streak(f).count >= _blocks_at(f, lim, lim.critical),
    _count,
    lambda f, n: (
        f"CRITICAL: Called {f.call.tool_name} with identical outcomes {n} times. Session "
        "execution blocked to prevent runaway loops."
    ),
    lambda f: f"generic:{f.call.tool_name}:{f.call.args_hash}:{_latest(f)}",
    "Critical generic loop detected: {tool} repeated {n} times",
    switch=REPEAT_SWITCH,
)
GENERIC_WARNING = Rule(
    NO_PROGRESS, "generic_repeat", "warning",
    lambda f, lim: not f.call.known_poll and repeat_count(f, lim) >= lim.warning,
    repeat_count,
    lambda f, n: (
        f"WARNING: You have called {f.call.tool_name} {n} times with identical arguments. "
        "If this is not making progress, stop retrying and report the task as failed."
    ),
    lambda f: f"generic:{f.call.tool_name}:{f.call.args_hash}",
    "Loop warning: {tool} called {n} times with identical arguments",
    switch=REPEAT_SWITCH,
)


def _equivalent_streak(f: Facts) -> Streak:
    return f[NO_PROGRESS].equivalent


def _equivalent_blocks_at(f: Facts, lim: Limits) -> int:
    """As ``generic_repeat``'s: ``early`` blocks a paced or backing-off repeat at the hard cap."""
    streak = _equivalent_streak(f)
    if lim.progress and (streak.paced or streak.compliant):
        return max(lim.critical, lim.eased_critical)
    return lim.critical


def _core(f: Facts) -> str:
    return f.call.core_hash or f.call.args_hash


EQUIVALENT_CRITICAL = Rule(
    NO_PROGRESS, "generic_repeat", "critical",
    lambda f, lim: _equivalent_streak(f).count >= _equivalent_blocks_at(f, lim),
    lambda f, _: _equivalent_streak(f).count,
    lambda f, n: (
        f"CRITICAL: Called {f.call.tool_name} with equivalent arguments and identical outcomes "
        f"{n} times. Session execution blocked to prevent runaway loops."
    ),
    lambda f: (f"generic:{f.call.tool_name}:{_core(f)}:"
               f"{_equivalent_streak(f).latest_result_hash or 'none'}"),
    "Critical generic loop detected: {tool} repeated {n} times",
    switch=EQUIVALENT_SWITCH,
)
EQUIVALENT_WARNING = Rule(
    NO_PROGRESS, "generic_repeat", "warning",
    lambda f, lim: _equivalent_streak(f).count >= lim.warning
    and not (lim.progress and _equivalent_streak(f).compliant),
    lambda f, _: _equivalent_streak(f).count,
    lambda f, n: (
        f"WARNING: You have called {f.call.tool_name} {n} times with equivalent arguments and "
        "identical outcomes. If this is not making progress, stop retrying and report the task "
        "as failed."
    ),
    lambda f: f"generic:{f.call.tool_name}:{_core(f)}",
    "Loop warning: {tool} called {n} times with identical arguments",
    switch=EQUIVALENT_SWITCH,
)
