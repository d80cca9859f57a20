"""loopwarden's cycles: the run's newest calls repeat a sequence of 3 to 6 calls with the same
outcome at every step (period 2 is OpenClaw's ping-pong)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..history import OUTCOME_VETO, CallRecord, RunView, SessionState
from .base import NO_CYCLE, Cycle, Detector, Limits, Prospect, Score

if TYPE_CHECKING:
    from .rules import Facts

# Periods the cycle detector looks for: 1 is a plain repeat, 2 is OpenClaw's ping-pong.
CYCLE_PERIODS = (3, 4, 5, 6)


def no_progress_cycle(state: SessionState, run: str | None, call: Prospect) -> Cycle:
    """loopwarden's cycle: the run's newest calls repeat a sequence of k calls (k in 3..6, the
    prospective call being its next step; at least two tools), at least twice over, with the
    same outcome at each step in every repetition. Counted like ping-pong: the cycling tail
    plus this call.

    Loop vetoes are blocked attempts. Nothing ran, so a veto matches any outcome of its step;
    and a veto followed by the same call again is a retry that keeps the model's place in the
    cycle. Either way it counts, so a model that insists climbs from critical to the breaker
    instead of being let through after one block. A pending record (outcome unknown) ends the
    tail."""
    records = state.run_records(run)
    best = NO_CYCLE
    for k in CYCLE_PERIODS:
        if len(records) + 1 < 2 * k:
            break
        found, ambiguous = _cycle_walk(records, call, k, retries_first=False)
        if ambiguous:  # a veto among the newest k steps could be a retry or a blocked step
            other, _ = _cycle_walk(records, call, k, retries_first=True)
            if other.count > found.count:
                found = other
        if found.count > best.count:
            best = found
    return best


def _cycle_walk(
    records: Sequence[CallRecord], call: Prospect, k: int, *, retries_first: bool
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
            if m + 1 == k and (len(set(tools)) == 1 or not _primitive(keys)):
                # One tool cycling its arguments is OpenClaw's argument churn, warning-only by
                # design (and §i scenario 28); a shorter period is a repeat or a ping-pong.
                return NO_CYCLE, ambiguous
        count += 1
        after = key
    if len(keys) < 2 * k:
        return NO_CYCLE, ambiguous
    order = (0, *range(k - 1, 0, -1))  # this call, then the steps that follow it in the cycle
    return Cycle(count, tuple(keys[i] for i in order), tuple(tools[i] for i in order)), ambiguous


def _primitive(steps: Sequence[str]) -> bool:
    """True unless the steps are a shorter sequence repeated (a smaller period)."""
    k = len(steps)
    return not any(
        k % p == 0 and all(steps[i] == steps[i + p] for i in range(k - p)) for p in range(1, k)
    )


def _unpaced_cycle(state: SessionState, run: str | None, call: Prospect) -> Cycle:
    """``early``: a cycle with a pacing step (build, sleep, status, ...) waits on purpose; the
    paced poll is judged by its own streak, as a ping-pong with a pacing side is."""
    cycle = no_progress_cycle(state, run, call)
    if cycle.count and any(r.pacing for r in list(state.run_records(run))[-len(cycle.steps):]):
        return NO_CYCLE
    return cycle


def _cycle_possible(records: Sequence[CallRecord], cur: str, warning: int) -> bool:
    """Could ``cur`` continue a cycle of period k (3-6) that counts ``warning``? Such a cycle's
    tail holds at least 2k - 1 records, with this call k steps back and the newest record's
    call k + 1 steps back. A veto among the newest seven records may be a retry, which takes
    no step (the steps then reach further back): measure then. (The newest record is never a
    veto here: :meth:`CycleDetector.may_fire` has already said yes to that case.)"""
    n = len(records)
    if n < 5 or n + 1 < warning:
        return False
    # One look-up per record: this runs on every call that gets this far.
    newest = records[-1].args_hash
    r2, r3, r4, r5 = records[-2], records[-3], records[-4], records[-5]
    if cur == r3.args_hash and newest == r4.args_hash:
        return True
    veto = OUTCOME_VETO
    if n < 7:
        return veto in (r2.outcome_kind, r3.outcome_kind, r4.outcome_kind, r5.outcome_kind,
                        records[-6].outcome_kind if n == 6 else None)
    r6, r7 = records[-6], records[-7]
    if (
        (cur == r4.args_hash and newest == r5.args_hash)
        or (n >= 9 and cur == r5.args_hash and newest == r6.args_hash)
        or (n >= 11 and cur == r6.args_hash and newest == r7.args_hash)
    ):
        return True
    return veto in (r2.outcome_kind, r3.outcome_kind, r4.outcome_kind, r5.outcome_kind,
                    r6.outcome_kind, r7.outcome_kind)


class CycleDetector(Detector[Cycle]):
    """``cycle``, and the ``global_circuit_breaker`` for a cycle that insists."""

    __slots__ = ()
    name = "cycle"

    def enabled(self, limits: Limits) -> bool:
        """On with the ``cycle`` switch."""
        return limits.cycle

    def may_fire(self, view: RunView, call: Prospect, limits: Limits) -> bool:
        """This call is in the run's window, and its newest records can close a cycle back to it
        (or end in a veto, a retry that keeps the cycle's place)."""
        # A cycle holds this call k steps back; a newest veto may be a retry (no step).
        if not limits.cycle or not view.by_key.get(call.args_hash):
            return False
        records = view.records
        return records[-1].outcome_kind == OUTCOME_VETO or _cycle_possible(
            records, call.args_hash, limits.warning)

    def measure(self, state: SessionState, run: str | None, call: Prospect,
                limits: Limits) -> Cycle:
        """The no-progress cycle; ``early``: only an unpaced one, and none for a pacing call."""
        if not limits.cycle:
            return NO_CYCLE
        if not limits.progress:
            return no_progress_cycle(state, run, call)
        return NO_CYCLE if call.pacing else _unpaced_cycle(state, run, call)

    def score(self, facts: Facts, limits: Limits) -> Score:
        """The cycle's count against both thresholds (its outcomes repeat by construction)."""
        count = facts.cycle.count  # outcomes identical by construction: it warns and blocks
        return Score(warning=count, critical=count)


CYCLE = CycleDetector()
