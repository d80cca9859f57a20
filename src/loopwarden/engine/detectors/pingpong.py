"""Ping-pong (§d.4): the run's newest calls alternate between two calls. Off with
``detectors.pingPong``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

from ...config.switches import detector_switch
from ..history import OUTCOME_VETO, CallRecord, RunView, SessionState
from .base import WAKE_REPEAT, Detector, Facts, Limits, Prospect, Rule, Score

#: ``detectors.pingPong``: this detector's switch.
SWITCH = detector_switch("ping_pong")


@dataclass(frozen=True, slots=True)
class PingPong:
    """An A-B alternation ending before this call (§d.4): its length with this call, the other
    side, and whether both sides' outcomes held still."""

    count: int = 0
    paired_tool_name: str | None = None
    paired_signature: str | None = None
    no_progress_evidence: bool = False


NO_PING_PONG = PingPong()


def ping_pong(state: SessionState, run: str | None, cur: str) -> PingPong:
    """§d.4: the A-B-A-B tail, counted as if ``cur`` were the next call."""
    records = state.run_records(run)
    if not records:
        return NO_PING_PONG
    last = records[-1]
    other: CallRecord | None = None
    for r in reversed(records):
        if r.args_hash != last.args_hash:
            other = r
            break
    if other is None or cur != other.args_hash:
        return NO_PING_PONG
    tail: list[CallRecord] = []
    expected = last.args_hash
    # Walked newest first with the next older record alongside, without copying the run:
    # the walk stops where the alternation does, so its cost is the tail's, not the window's.
    older_records = islice(reversed(records), 1, None)
    for r in reversed(records):
        if r.args_hash != expected:
            break
        tail.append(r)
        older = next(older_records, None)
        if r.outcome_kind == OUTCOME_VETO and older is not None and older.args_hash == expected:
            # A blocked retry of the call before it (a batch admission vetoes the trigger
            # right after its own earlier run): it keeps the model's place in the alternation.
            continue
        expected = other.args_hash if expected == last.args_hash else last.args_hash
    if len(tail) < 2:
        return NO_PING_PONG
    return PingPong(len(tail) + 1, last.tool_name, last.args_hash, _stable_sides(tail))


def _stable_sides(tail: list[CallRecord]) -> bool:
    """Both sides of the alternation have one outcome each. A loop veto (a blocked attempt:
    nothing ran) matches its side's outcome, so a model that keeps alternating after a block
    stays blocked and climbs to the terminal stop; in OpenClaw the veto hid the evidence and
    the alternation was allowed again until the veto left the window."""
    sides: dict[str, str] = {}
    for r in tail:
        if r.outcome_kind == OUTCOME_VETO:
            continue
        if r.result_hash is None:
            return False
        seen = sides.setdefault(r.args_hash, r.result_hash)
        if seen != r.result_hash:
            return False
    return len(sides) == 2


def _alternation_in_place(records: Sequence[CallRecord], call: Prospect, tail: int) -> bool:
    """Whether the records hold an alternation of ``tail`` records ending before ``call``,
    without blocked retries: the record before the newest is this call, and the tail's
    third and oldest records hold the calls the alternation puts there."""
    if len(records) < 2 or records[-2].args_hash != call.args_hash or len(records) < tail:
        return False
    last = records[-1]
    if tail >= 3 and records[-3].args_hash != last.args_hash:
        return False
    oldest = call.args_hash if tail % 2 == 0 else last.args_hash
    return tail < 1 or records[-tail].args_hash == oldest


def _pacing_in_tail(records: Sequence[CallRecord]) -> bool:
    """Whether either side of the newest alternation is a pacing call (poll, sleep, poll ...).
    Indexed from the end: a deque reads its last items in O(1), a copy would cost the run."""
    return records[-1].pacing or (len(records) > 1 and records[-2].pacing)


class PingPongDetector(Detector[PingPong]):
    """``ping_pong``: A-B-A-B with this call as the next A."""

    __slots__ = ()
    wakes = WAKE_REPEAT
    name = "ping_pong"
    switches = (SWITCH,)
    empty = NO_PING_PONG

    def may_fire(self, view: RunView, call: Prospect, limits: Limits) -> bool:
        """A count of ``warning`` is an alternating tail of ``warning - 1`` records plus this
        call (see :func:`_alternation_in_place`), unless a blocked retry shifted it.

        Only a blocked retry among those newest ``warning - 1`` records can shift them (one
        further back shifts older records only), so only they are looked at: the cost is the
        threshold's, whatever the history size (and nothing when the run holds fewer)."""
        tail = limits.warning - 1
        if not view.by_key.get(call.args_hash) or len(view.records) < tail:
            # This call is the alternation's other side, so it is in the run; and the
            # alternation's records are the run's, so it cannot be longer than the run.
            return False
        return _alternation_in_place(view.records, call, tail) or any(
            # A blocked retry keeps its side's place, shifting the rest (rare: measure).
            r.outcome_kind == OUTCOME_VETO
            for r in islice(reversed(view.records), max(tail, 2)))

    def measure(self, state: SessionState, run: str | None, call: Prospect,
                limits: Limits) -> PingPong:
        """``early``: an alternation with a pacing call (poll, sleep, poll ...) is no ping-pong."""
        if not limits.progress:
            return ping_pong(state, run, call.args_hash)
        if call.pacing:
            return NO_PING_PONG
        pp = ping_pong(state, run, call.args_hash)
        if pp.count and _pacing_in_tail(state.run_records(run)):
            return NO_PING_PONG
        return pp

    def score(self, facts: Facts, limits: Limits) -> Score:
        """The alternation's count against the warning threshold, and against the critical one
        when both sides' outcomes held still."""
        pp = facts[self]
        return Score(warning=pp.count, critical=pp.count if pp.no_progress_evidence else 0)


PING_PONG = PingPongDetector()


def _key(f: Facts) -> str:
    pp = f[PING_PONG]
    if pp.paired_signature is None:
        return f"pingpong:{f.call.tool_name}:{f.call.args_hash}"
    return "pingpong:" + "|".join(sorted((f.call.args_hash, pp.paired_signature)))


def _warns(f: Facts, lim: Limits) -> bool:
    # At lowered thresholds an alternation warns only with evidence of no progress.
    return not lim.progress or f[PING_PONG].no_progress_evidence


def _count(f: Facts, _: Limits) -> int:
    return f[PING_PONG].count


def _paired(f: Facts) -> str | None:
    return f[PING_PONG].paired_tool_name


CRITICAL = Rule(
    PING_PONG, "ping_pong", "critical",
    lambda f, lim: f[PING_PONG].count >= lim.critical and f[PING_PONG].no_progress_evidence,
    _count,
    lambda f, n: (
        f"CRITICAL: You are alternating between repeated tool-call patterns ({n} consecutive "
        "calls) with no progress. This appears to be a stuck ping-pong loop. Session "
        "execution blocked to prevent resource waste."
    ),
    _key,
    "Critical ping-pong loop detected: alternating calls count={n} currentTool={tool}",
    switch=SWITCH,
    paired=_paired,
)
WARNING = Rule(
    PING_PONG, "ping_pong", "warning",
    lambda f, lim: f[PING_PONG].count >= lim.warning and _warns(f, lim),
    _count,
    lambda f, n: (
        f"WARNING: You are alternating between repeated tool-call patterns ({n} consecutive "
        "calls). This looks like a ping-pong loop; stop retrying and report the task as "
        "failed."
    ),
    _key,
    "Ping-pong loop warning: alternating calls count={n} currentTool={tool}",
    switch=SWITCH,
    liveness=True,
    paired=_paired,
)
