"""Argument churn (§d.8): one tool cycling argument variants with one stable outcome, or
rewriting one write target again and again (warning-only). Off with ``detectors.argumentChurn``;
other warnings report it as their liveness signal (:attr:`~.base.Rule.liveness`)."""

from __future__ import annotations

from dataclasses import dataclass

from ...config.switches import detector_switch
from ...fingerprint.outcomes import OUTCOME_WRITE_MUTATION
from ..history import CallRecord, RunView, SessionState
from .base import WAKE_TAIL, Detector, Facts, Limits, Prospect, Rule, Score
from .streaks import tool_tail_may_reach

#: ``detectors.argumentChurn``: this detector's switch.
SWITCH = detector_switch("argument_churn")


CHURN_MIN_REPEATS = 3


@dataclass(frozen=True, slots=True)
class Churn:
    """Argument churn (§d.8): the calls churning, their distinct argument variants, and whether
    it is a write target rewritten."""

    count: int = 0
    variant_count: int = 0
    write_mutation: bool = False


NO_CHURN = Churn()


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
    wakes = WAKE_TAIL
    name = "argument_churn"
    switches = (SWITCH,)
    empty = NO_CHURN

    def may_fire(self, view: RunView, call: Prospect, limits: Limits) -> bool:
        """Both churn walks need the newest ``warning`` records to be this tool's
        (:func:`tool_tail_may_reach`)."""
        # Both walks go back from the newest record through records of this tool only.
        return tool_tail_may_reach(view.records, call.tool_name, limits.warning)

    def measure(self, state: SessionState, run: str | None, call: Prospect,
                limits: Limits) -> Churn:
        """Semantic churn, else write churn; ``early``: a pacing call is neutral."""
        if limits.progress and call.pacing:  # ``early``: neutral
            return NO_CHURN
        return argument_churn(state, run, call)

    def score(self, facts: Facts, limits: Limits) -> Score:
        """Churn only warns: its count against the warning threshold."""
        return Score(warning=facts[self].count)


ARGUMENT_CHURN = ChurnDetector()


def _message(f: Facts, n: int) -> str:
    t, churn = f.call.tool_name, f[ARGUMENT_CHURN]
    if churn.write_mutation:
        return (
            f"WARNING: {t} has changed the same target with {churn.variant_count} distinct "
            "argument variants and no intervening verification. Continued rewriting is treated "
            "as stalled run activity, but this tool call remains allowed. Read or verify the "
            "current result before rewriting it again."
        )
    return (
        f"WARNING: {t} has cycled through {churn.variant_count} repeated argument patterns "
        f"with the same stable outcome {n} times. Continued churn is treated as stalled run "
        "activity, but this tool call remains allowed."
    )


def _key(f: Facts) -> str:
    if f[ARGUMENT_CHURN].write_mutation:
        return f"argument-churn:{f.call.tool_name}:write-mutation:{f.call.mutation_target_hash or 'unknown'}"
    return f"argument-churn:{f.call.tool_name}"


def liveness_signal(f: Facts, lim: Limits) -> str | None:
    """What a liveness warning (:attr:`~.base.Rule.liveness`) reports: ``argument_churn``
    while the tool churns at the warning threshold."""
    return "argument_churn" if f[ARGUMENT_CHURN].count >= lim.warning else None


WARNING = Rule(
    ARGUMENT_CHURN, "argument_churn", "warning",
    lambda f, lim: f[ARGUMENT_CHURN].count >= lim.warning,
    lambda f, _: f[ARGUMENT_CHURN].count,
    _message,
    _key,
    "Argument churn warning: {tool} cycled through stable argument patterns",
    switch=SWITCH,
    liveness=True,
)
