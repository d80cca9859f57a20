"""loopwarden's cycles: the run's newest calls repeat a sequence of k calls (k in
:data:`CYCLE_PERIODS`) with the same outcome at every step (period 2 is OpenClaw's ping-pong).
Off with ``detectors.cycle``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...config.switches import detector_switch
from ..history import OUTCOME_VETO, OUTCOME_WRITE_MUTATION, CallRecord, RunView, SessionState
from .base import WAKE_REPEAT, Detector, Facts, Limits, Prospect, Rule, Score

#: ``detectors.cycle``: this detector's switch.
SWITCH = detector_switch("cycle")


@dataclass(frozen=True, slots=True)
class Cycle:
    """A cycle (see :func:`no_progress_cycle`): how many calls its tail holds, its steps' args
    hashes and their tools."""

    count: int = 0  # calls in the cycling tail, blocked attempts and the prospective call included
    steps: tuple[str, ...] = ()  # the cycle's args hashes, starting at the prospective call
    tools: tuple[str, ...] = ()  # their tool names, in the same order


NO_CYCLE = Cycle()

# Periods the cycle detector looks for: 1 is a plain repeat, 2 is OpenClaw's ping-pong.
CYCLE_PERIODS = (3, 4, 5, 6)


def no_progress_cycle(state: SessionState, run: str | None, call: Prospect, *,
                      one_tool: bool = False) -> Cycle:
    """loopwarden's cycle: the run's newest calls repeat a sequence of k calls (k in
    :data:`CYCLE_PERIODS`, the
    prospective call being its next step; at least two tools), at least twice over, with the
    same outcome at each step in every repetition. Counted like ping-pong: the cycling tail
    plus this call.

    Loop vetoes are blocked attempts. Nothing ran, so a veto matches any outcome of its step;
    and a veto followed by the same call again is a retry that keeps the model's place in the
    cycle. Either way it counts, so a model that insists climbs from critical to the breaker
    instead of being let through after one block. A pending record (outcome unknown) ends the
    tail.

    ``one_tool``: instead, cycles of one tool over k distinct argument sets whose steps do not
    all share one outcome (that is argument churn); a call that changes the world (a mutating
    call, a write) ends the tail (see :mod:`.one_tool_cycle`)."""
    if one_tool and call.mutating:
        return NO_CYCLE
    records = state.run_records(run)
    best = NO_CYCLE
    for k in CYCLE_PERIODS:
        if len(records) + 1 < 2 * k:
            break
        found, ambiguous = _cycle_walk(records, call, k, retries_first=False, one_tool=one_tool)
        if ambiguous:  # a veto among the newest k steps could be a retry or a blocked step
            other, _ = _cycle_walk(records, call, k, retries_first=True, one_tool=one_tool)
            if other.count > found.count:
                found = other
        if found.count > best.count:
            best = found
    return best


def _cycle_walk(
    records: Sequence[CallRecord], call: Prospect, k: int, *, retries_first: bool,
    one_tool: bool = False,
) -> tuple[Cycle, bool]:
    """The period-``k`` cycling tail ending with ``call``, and whether a veto among its newest
    ``k`` steps was ambiguous (while the cycle's steps are not yet known, a veto of the call
    made right after it may be either a retry or a step of its own)."""
    keys = [call.args_hash]  # the tail's steps, newest first (vetoes of retries left out)
    tools = [call.tool_name]
    anchors: list[str | None] = [None] * k  # the outcome of each step, newest first
    count = 1
    after = call.args_hash  # the attempt made right after the record in hand
    ambiguous = False
    for r in reversed(records):
        m = len(keys)
        key = r.args_hash
        if r.outcome_kind == OUTCOME_VETO:
            if m >= k and key != keys[m - k]:
                if key != after:
                    break
                count += 1  # a retry: the model stays at this step of the cycle
                continue
            if m < k and key == after:
                ambiguous = True
                if retries_first:
                    count += 1
                    continue
        else:
            if r.result_hash is None:  # pending: its outcome is unknown
                break
            if one_tool and (r.mutating or r.outcome_kind == OUTCOME_WRITE_MUTATION):
                break  # a change to the world is progress
            if m >= k and key != keys[m - k]:
                break
            slot = m % k
            anchor = anchors[slot]
            if anchor is None:
                anchors[slot] = r.result_hash
            elif anchor != r.result_hash:
                break
        keys.append(key)
        if m < k:
            tools.append(r.tool_name)
            if m + 1 == k and ((len(set(tools)) == 1) != one_tool or not _primitive(keys)):
                # One tool cycling its arguments is OpenClaw's argument churn, warning-only by
                # design (and §i scenario 28); a shorter period is a repeat or a ping-pong.
                return NO_CYCLE, ambiguous
        count += 1
        after = key
    if len(keys) < 2 * k:
        return NO_CYCLE, ambiguous
    if one_tool and len({a for a in anchors if a is not None}) < 2:
        return NO_CYCLE, ambiguous  # one outcome for every variant: argument churn
    order = (0, *range(k - 1, 0, -1))  # this call, then the steps that follow it in the cycle
    return Cycle(count, tuple(keys[i] for i in order), tuple(tools[i] for i in order)), ambiguous


def _primitive(steps: Sequence[str]) -> bool:
    """True unless the steps are a shorter sequence repeated (a smaller period)."""
    k = len(steps)
    return not any(
        k % p == 0 and all(steps[i] == steps[i + p] for i in range(k - p)) for p in range(1, k)
    )


def unpaced_cycle(state: SessionState, run: str | None, call: Prospect, *,
                  one_tool: bool = False) -> Cycle:
    """``early``: a cycle with a pacing step (build, sleep, status, ...) waits on purpose; the
    paced poll is judged by its own streak, as a ping-pong with a pacing side is."""
    cycle = no_progress_cycle(state, run, call, one_tool=one_tool)
    if cycle.count and any(r.pacing for r in list(state.run_records(run))[-len(cycle.steps):]):
        return NO_CYCLE
    return cycle


# The fewest records a cycle's tail can hold, and how far back a retry (a veto) may hide a step.
_MIN_RECORDS = 2 * CYCLE_PERIODS[0] - 1
_VETO_REACH = CYCLE_PERIODS[-1] + 1


def cycle_possible(records: Sequence[CallRecord], cur: str, warning: int) -> bool:
    """Could ``cur`` continue a cycle of period k (in :data:`CYCLE_PERIODS`) that counts
    ``warning``? Such a cycle's tail holds at least 2k - 1 records, with this call k steps back
    and the newest record's call k + 1 steps back. A veto among the newest k + 1 records of the
    longest period may be a retry, which takes no step (the steps then reach further back):
    measure then. (The newest record is never a veto here: :meth:`CycleDetector.may_fire` has
    already said yes to that case.)"""
    n = len(records)
    if n < _MIN_RECORDS or n + 1 < warning:
        return False
    newest = records[-1].args_hash
    for k in CYCLE_PERIODS:
        if n < 2 * k - 1:
            break
        if cur == records[-k].args_hash and newest == records[-k - 1].args_hash:
            return True
    veto = OUTCOME_VETO  # (a deque: indexed, not sliced)
    return any(records[-i].outcome_kind == veto for i in range(2, min(n, _VETO_REACH) + 1))


class CycleDetector(Detector[Cycle]):
    """``cycle``, and the ``global_circuit_breaker`` for a cycle that insists."""

    __slots__ = ()
    wakes = WAKE_REPEAT
    name = "cycle"
    switches = (SWITCH,)
    empty = NO_CYCLE

    def may_fire(self, view: RunView, call: Prospect, limits: Limits) -> bool:
        """This call is in the run's window, and its newest records can close a cycle back to it
        (or end in a veto, a retry that keeps the cycle's place)."""
        # A cycle holds this call k steps back; a newest veto may be a retry (no step).
        if not view.by_key.get(call.args_hash):
            return False
        records = view.records
        return records[-1].outcome_kind == OUTCOME_VETO or cycle_possible(
            records, call.args_hash, limits.warning)

    def measure(self, state: SessionState, run: str | None, call: Prospect,
                limits: Limits) -> Cycle:
        """The no-progress cycle; ``early``: only an unpaced one, and none for a pacing call."""
        if not limits.progress:
            return no_progress_cycle(state, run, call)
        return NO_CYCLE if call.pacing else unpaced_cycle(state, run, call)

    def score(self, facts: Facts, limits: Limits) -> Score:
        """The cycle's count against both thresholds (its outcomes repeat by construction)."""
        count = facts[self].count  # outcomes identical by construction: it warns and blocks
        return Score(warning=count, critical=count)


CYCLE = CycleDetector()


def _text(f: Facts, n: int) -> str:
    cycle = f[CYCLE]
    steps = " \u2192 ".join(cycle.tools)
    return (
        f"You are repeating a cycle of {len(cycle.steps)} tool calls ({steps}) with "
        f"identical results ({n} consecutive calls)."
    )


def _key(f: Facts) -> str:
    """The same for every step and phase of one cycle: its smallest rotation."""
    steps = f[CYCLE].steps
    return "cycle:" + "|".join(min(steps[i:] + steps[:i] for i in range(len(steps))))


def _count(f: Facts, _: Limits) -> int:
    return f[CYCLE].count


# Blocked attempts keep counting, so an insistent model reaches the breaker, as a repeated call
# does.
BREAKER = Rule(
    CYCLE, "global_circuit_breaker", "critical",
    lambda f, lim: f[CYCLE].count >= lim.global_breaker,
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
    CYCLE, "cycle", "critical",
    lambda f, lim: f[CYCLE].count >= lim.critical,
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
    CYCLE, "cycle", "warning",
    lambda f, lim: f[CYCLE].count >= lim.warning,
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
