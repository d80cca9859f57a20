"""Argument churn (§d.8): one tool cycling argument variants with one stable outcome, or
rewriting one write target again and again (warning-only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...fingerprint.outcomes import OUTCOME_WRITE_MUTATION
from ..history import CallRecord, RunView, SessionState
from .base import NO_CHURN, Churn, Detector, Limits, Prospect, Score
from .streaks import tool_tail_may_reach

if TYPE_CHECKING:
    from .rules import Facts

CHURN_MIN_REPEATS = 3


def argument_churn(state: SessionState, run: str | None, call: Prospect) -> Churn:
    """§d.8: the same tool cycling argument variants with one stable no-progress outcome, or
    rewriting one write target with new variants (warning-only)."""
    semantic = _semantic_churn(state, run, call)
    return semantic if semantic.count else write_churn(state, run, call)


def _semantic_churn(state: SessionState, run: str | None, call: Prospect) -> Churn:
    per_args: dict[str, list[object]] = {}
    for r in state.reversed_run(run):
        if r.tool_name != call.tool_name:
            break
        if r.result_hash is None:
            continue
        if not r.no_progress:
            break
        entry = per_args.get(r.args_hash)
        if entry is None:
            per_args[r.args_hash] = [r.result_hash, 1]
            continue
        if entry[0] != r.result_hash:
            break
        entry[1] = int(entry[1]) + 1  # type: ignore[call-overload]
    counts = {h: int(v[1]) for h, v in per_args.items()}  # type: ignore[call-overload]
    stable = [h for h, n in counts.items() if n >= CHURN_MIN_REPEATS]
    total = sum(counts.values())
    ok = (
        len(stable) > 1
        and sum(counts[h] for h in stable) == total
        and len({per_args[h][0] for h in stable}) == 1
        and counts.get(call.args_hash, 0) >= CHURN_MIN_REPEATS
    )
    return Churn(total, len(stable)) if ok else NO_CHURN


def write_churn(
    state: SessionState, run: str | None, call: Prospect, *, skip: CallRecord | None = None
) -> Churn:
    """§d.8's write half: ``write`` calls rewriting one target with new variants and no repeat,
    newest first (``skip``: a record left out of the walk)."""
    if call.tool_name != "write" or call.mutation_target_hash is None:
        return NO_CHURN
    variants: list[str] = []
    seen: dict[str, int] = {}
    for r in state.reversed_run(run):
        if r is skip:
            continue
        if (
            r.tool_name != "write"
            or r.outcome_kind != OUTCOME_WRITE_MUTATION
            or r.mutation_target_hash != call.mutation_target_hash
        ):
            break
        if r.args_hash in seen:
            del variants[seen[r.args_hash] + 1 :]
            break
        seen[r.args_hash] = len(variants)
        variants.append(r.args_hash)
    if call.args_hash in variants:
        return NO_CHURN
    return Churn(len(variants), len(variants), True) if variants else NO_CHURN


class ChurnDetector(Detector[Churn]):
    """``argument_churn`` (warning only); other warnings also report it as a liveness signal."""

    __slots__ = ()
    name = "argument_churn"

    def enabled(self, limits: Limits) -> bool:
        """On with the ``argument_churn`` switch."""
        return limits.argument_churn

    def may_fire(self, view: RunView, call: Prospect, limits: Limits) -> bool:
        """Both churn walks need the newest ``warning`` records to be this tool's
        (:func:`tool_tail_may_reach`)."""
        # Both walks go back from the newest record through records of this tool only.
        return limits.argument_churn and tool_tail_may_reach(
            view.records, call.tool_name, limits.warning)

    def measure(self, state: SessionState, run: str | None, call: Prospect,
                limits: Limits) -> Churn:
        """Semantic churn, else write churn; ``early``: a pacing call is neutral."""
        if not limits.argument_churn or (limits.progress and call.pacing):  # ``early``: neutral
            return NO_CHURN
        return argument_churn(state, run, call)

    def score(self, facts: Facts, limits: Limits) -> Score:
        """Churn only warns: its count against the warning threshold."""
        return Score(warning=facts.churn.count)


ARGUMENT_CHURN = ChurnDetector()
