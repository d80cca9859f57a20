"""loopwarden's ``error_repeat``: one tool failing with one masked error, whatever the
arguments. On with ``detectors.errorRepeat`` (unset: the preset decides, on for ``early``)."""

from __future__ import annotations

from ...config.switches import detector_switch
from ..history import RunView, SessionState
from .base import WAKE_ERRORS, Detector, Facts, Limits, Prospect, Rule, Score
from .streaks import NO_STREAK, Streak, error_streak

#: ``detectors.errorRepeat``: this detector's switch.
SWITCH = detector_switch("error_repeat", default=None)  # None: the preset decides


class ErrorRepeatDetector(Detector[Streak]):
    """``error_repeat``: this tool failing with one error, whatever the arguments."""

    __slots__ = ()
    wakes = WAKE_ERRORS
    name = "error_repeat"
    switches = (SWITCH,)
    empty = NO_STREAK
    reads_error_identity = True

    def may_fire(self, view: RunView, call: Prospect, limits: Limits) -> bool:
        """The window holds enough outcomes with an error identity to reach either threshold."""
        # The streak skips other tools' records, but needs as many with an error identity.
        return view.errors >= min(limits.error_repeat, limits.critical)

    def measure(self, state: SessionState, run: str | None, call: Prospect,
                limits: Limits) -> Streak:
        """This tool's streak of identical masked errors; ``early``: pacing calls are neutral."""
        if limits.progress and call.pacing:  # ``early``: neutral
            return NO_STREAK
        return error_streak(state, run, call.tool_name, progress=limits.progress)

    def score(self, facts: Facts, limits: Limits) -> Score:
        """The streak against the critical and the error-repeat thresholds."""
        count = facts[self].count
        return Score(critical=count, error_repeat=count)


ERROR_REPEAT = ErrorRepeatDetector()


def _count(f: Facts, _: Limits) -> int:
    return f[ERROR_REPEAT].count


def _key(f: Facts) -> str:
    return f"error:{f.call.tool_name}:{f[ERROR_REPEAT].latest_result_hash}"


CRITICAL = Rule(
    ERROR_REPEAT, "error_repeat", "critical",
    lambda f, lim: f[ERROR_REPEAT].count >= lim.critical,
    _count,
    lambda f, n: (
        f"CRITICAL: {f.call.tool_name} failed {n} times in this run with the same error. "
        "Session execution blocked to prevent runaway loops."
    ),
    _key,
    "Critical error repeat detected: {tool} failed {n} times with the same error",
    switch=SWITCH,
)
WARNING = Rule(
    ERROR_REPEAT, "error_repeat", "warning",
    lambda f, lim: f[ERROR_REPEAT].count >= lim.error_repeat,
    _count,
    lambda f, n: (
        f"WARNING: {f.call.tool_name} has failed {n} times in this run with the same error. "
        "Stop retrying the same failing action; change your approach or report the failure."
    ),
    _key,
    "Error repeat warning: {tool} failed {n} times with the same error",
    switch=SWITCH,
)
