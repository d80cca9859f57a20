"""loopwarden's one-tool cycles: one tool called over k distinct argument sets (k in
:data:`~.cycle.CYCLE_PERIODS`) again and again, each step with the same outcome every time,
and not all steps with one outcome (that is argument churn, warning-only). Period 2 is
ping-pong, which sees one tool as well as two. A call that changes the world (a write, an
edit, a mutating command) is progress and never part of such a cycle. Reported as ``cycle``;
off with ``detectors.oneToolCycle``."""

from __future__ import annotations

from ...config.switches import detector_switch
from ..history import OUTCOME_VETO, RunView, SessionState
from .base import WAKE_REPEAT, Detector, Facts, Limits, Prospect, Rule, Score
from .cycle import NO_CYCLE, Cycle, cycle_possible, no_progress_cycle, unpaced_cycle

#: ``detectors.oneToolCycle``: this detector's switch.
SWITCH = detector_switch("one_tool_cycle")


class OneToolCycleDetector(Detector[Cycle]):
    """``cycle`` over one tool's argument sets (``cat a``, ``cat b``, ``cat c``, ``cat a``...)."""

    __slots__ = ()
    wakes = WAKE_REPEAT
    name = "one_tool_cycle"
    switches = (SWITCH,)
    empty = NO_CYCLE
    reads_mutations = True

    def may_fire(self, view: RunView, call: Prospect, limits: Limits) -> bool:
        """The cycle detector's pre-check: this call closes a cycle back to itself."""
        if not view.by_key.get(call.args_hash):
            return False
        records = view.records
        return records[-1].outcome_kind == OUTCOME_VETO or cycle_possible(
            records, call.args_hash, limits.warning)

    def measure(self, state: SessionState, run: str | None, call: Prospect,
                limits: Limits) -> Cycle:
        """The one-tool cycle; ``early``: only an unpaced one, and none for a pacing call."""
        if not limits.progress:
            return no_progress_cycle(state, run, call, one_tool=True)
        return NO_CYCLE if call.pacing else unpaced_cycle(state, run, call, one_tool=True)

    def score(self, facts: Facts, limits: Limits) -> Score:
        """The cycle's count against both thresholds."""
        count = facts[self].count
        return Score(warning=count, critical=count)


ONE_TOOL_CYCLE = OneToolCycleDetector()


def _text(f: Facts, n: int) -> str:
    cycle = f[ONE_TOOL_CYCLE]
    return (
        f"You are repeating a cycle of {len(cycle.steps)} {f.call.tool_name} calls with "
        f"different arguments and identical results ({n} consecutive calls)."
    )


def _key(f: Facts) -> str:
    steps = f[ONE_TOOL_CYCLE].steps
    return "cycle:" + "|".join(min(steps[i:] + steps[:i] for i in range(len(steps))))


def _count(f: Facts, _: Limits) -> int:
    return f[ONE_TOOL_CYCLE].count


BREAKER = Rule(
    ONE_TOOL_CYCLE, "global_circuit_breaker", "critical",
    lambda f, lim: f[ONE_TOOL_CYCLE].count >= lim.global_breaker,
    _count,
    lambda f, n: (
        f"CRITICAL: {_text(f, n)} Session execution blocked by global circuit breaker "
        "to prevent runaway loops."
    ),
    lambda f: "global:" + _key(f),
    "Global circuit breaker triggered: {tool} repeated {n} times with no progress",
    switch=SWITCH,
)
CRITICAL = Rule(
    ONE_TOOL_CYCLE, "cycle", "critical",
    lambda f, lim: f[ONE_TOOL_CYCLE].count >= lim.critical,
    _count,
    lambda f, n: (
        f"CRITICAL: {_text(f, n)} This appears to be a stuck cycle. Session execution "
        "blocked to prevent resource waste."
    ),
    _key,
    "Critical cycle loop detected: repeating cycle count={n} currentTool={tool}",
    switch=SWITCH,
)
WARNING = Rule(
    ONE_TOOL_CYCLE, "cycle", "warning",
    lambda f, lim: f[ONE_TOOL_CYCLE].count >= lim.warning,
    _count,
    lambda f, n: (
        f"WARNING: {_text(f, n)} This looks like a no-progress loop; change your "
        "approach or report the task as failed."
    ),
    _key,
    "Cycle loop warning: repeating cycle count={n} currentTool={tool}",
    switch=SWITCH,
    liveness=True,
)
