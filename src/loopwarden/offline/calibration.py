"""Thresholds from good runs, with a false-alarm bound (split-conformal calibration).

Each good run gets one *score* per threshold: the largest count the detectors behind that
threshold reached anywhere in the run. If a new good run is exchangeable with the ``n``
calibration runs, its score exceeds the ``ceil((n + 1)(1 - a))``-th smallest calibration score
with probability at most ``a`` — so a threshold one above that order statistic fires on at most
``a`` of good runs. The warning budget ``alpha`` is split over the thresholds that can warn, the
stricter block budget over those that can block (a union bound), so the guarantee holds for
"any warning" and "any block" in a run.

With the default budgets (``alpha`` 0.05, blocks ``alpha / 5``) warnings can be bounded from 60
good runs but blocks only from 199. With fewer runs and no explicit block budget, only the
thresholds that warn are calibrated; the blocking ones keep the starting config's values (raised
to stay above the warning threshold) and the result says that blocks were not bounded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..base.errors import CalibrationError
from ..base.types import ToolCall
from ..config import LoopDetectionConfig
from ..engine import LoopDetector
from ..engine.detectors import DETECTORS, SWITCHES, Facts, Limits, Prospect
from ..engine.history import SessionState

__all__ = ["CalibrationError", "calibrate", "score_run"]

MIN_WARNING = 3
MIN_UNKNOWN_TOOL = 2


@dataclass(frozen=True, slots=True)
class RunScores:
    """The largest count each threshold's detectors reached in one good run."""

    warning: int = 0  # generic repeat / known poll / ping-pong / cycle counts (warning threshold)
    critical: int = 0  # identical-outcome streaks, stable ping-pong, cycles (critical threshold)
    unknown_tool: int = 0
    error_repeat: int = 0


def score_run(calls: Iterable[ToolCall], config: LoopDetectionConfig | None = None,
              profiles: object = None) -> RunScores:
    """Measure one run with the real detectors, thresholds out of reach (nothing is blocked)."""
    base = config or LoopDetectionConfig()
    detector = LoopDetector(base.with_overrides(enabled=True, detectors={"errorRepeat": True}),
                            profiles)
    state = SessionState()
    scores = [0, 0, 0, 0]

    limits = Limits(progress=detector.limits.progress, switches=SWITCHES)

    def measure(prospect: Prospect, run: str | None) -> None:
        facts = Facts.measure(state, run, prospect, limits)
        for family in DETECTORS:  # each detector says what its rules compare (Detector.score)
            for slot, count in enumerate(family.score(facts, limits)):
                if count > scores[slot]:
                    scores[slot] = count

    for i, call in enumerate(calls):
        prepared = detector.prepare(call.tool_name, call.args, run_id=call.run_id)
        prospect, run = prepared.prospect, prepared.run_id
        measure(prospect, run)
        cid = f"cal-{i}"
        detector.record(state, prepared, call_id=cid)
        detector.record_outcome(state, prepared, result=call.result, error=call.error,
                                call_id=cid)
        if base.post_outcome_warnings:
            measure(prospect, run)  # the post-outcome check asks about the same call again
    return RunScores(*scores)


def _conformal_threshold(scores: Sequence[int], alpha: float, what: str) -> int:
    n = len(scores)
    rank = math.ceil((n + 1) * (1 - alpha))
    if rank > n:
        needed = math.ceil((1 - alpha) / alpha)
        raise CalibrationError(
            f"{n} good runs are too few to bound {what} at {alpha:.4g}: need at least {needed} "
            f"(the bound needs ceil((n+1)(1-a)) <= n). Add runs or raise --alpha/--block-alpha."
        )
    return sorted(scores)[rank - 1] + 1


@dataclass(frozen=True, slots=True)
class Calibration:
    """Calibrated thresholds, the budgets they were chosen with and what the false-alarm bound
    covers (see :func:`calibrate`)."""

    runs: int
    alpha: float
    block_alpha: float
    warning_threshold: int
    critical_threshold: int
    global_circuit_breaker_threshold: int
    unknown_tool_threshold: int
    error_repeat_threshold: int
    budgets: dict[str, float] = field(default_factory=dict)
    #: What the guarantee covers: ``("warnings", "blocks")``, or ``("warnings",)`` when there
    #: were too few runs for the default block budget.
    bounded: tuple[str, ...] = ("warnings", "blocks")
    #: Why blocks were not bounded (empty when they were).
    note: str = ""
    #: The history the thresholds need: at least the largest of them, so each can fire.
    history_size: int = 30
    #: The history the good runs were measured with (the bound is about counts within it).
    measured_history_size: int = 30

    def config_block(self) -> dict[str, Any]:
        """The ``tools.loopDetection`` block to paste into an OpenClaw/loopwarden config."""
        return {
            "enabled": True,
            "historySize": self.history_size,
            "warningThreshold": self.warning_threshold,
            "criticalThreshold": self.critical_threshold,
            "globalCircuitBreakerThreshold": self.global_circuit_breaker_threshold,
            "unknownToolThreshold": self.unknown_tool_threshold,
            "errorRepeatThreshold": self.error_repeat_threshold,
            "detectors": {"errorRepeat": True},
        }

    def config(self, base: LoopDetectionConfig | None = None) -> LoopDetectionConfig:
        """The thresholds as a config: ``base`` with :meth:`config_block` applied, or the block."""
        block = self.config_block()
        if base is None:
            return LoopDetectionConfig.model_validate(block)
        return base.with_overrides(**block)

    @property
    def guarantee(self) -> str:
        """The false-alarm bound in words, for the report (and, if blocks are not bounded, why)."""
        return self._bound + " " + self._fit

    @property
    def _fit(self) -> str:
        fit = (f"Every threshold is at most historySize {self.history_size}, so each can fire.")
        if self.history_size > self.measured_history_size:
            fit += (f" The good runs were measured with a history of "
                    f"{self.measured_history_size} calls and reached its end, so the bound "
                    f"holds for counts within {self.measured_history_size} calls only.")
        return fit

    @property
    def _bound(self) -> str:
        if "blocks" not in self.bounded:
            return (
                f"If a new good run is exchangeable with these {self.runs}, it gets any loop "
                f"warning with probability <= {self.alpha:g} (split-conformal quantiles, union "
                f"bound over thresholds). Blocks are NOT bounded: {self.note}"
            )
        return (
            f"If a new good run is exchangeable with these {self.runs}, it gets any loop warning "
            f"with probability <= {self.alpha:g} and any block with probability <= "
            f"{self.block_alpha:g} (split-conformal quantiles, union bound over thresholds)."
        )


def calibrate(scores: Sequence[RunScores], *, alpha: float = 0.05,
              block_alpha: float | None = None,
              base: LoopDetectionConfig | None = None) -> Calibration:
    """Thresholds such that at most ``alpha`` of good runs warn and ``block_alpha`` (default
    ``alpha / 5``) block.

    When ``block_alpha`` is left to its default and the runs are too few for it, the warning
    thresholds are calibrated alone and the blocking ones come from ``base`` (default: the
    ``openclaw`` preset), kept above the calibrated warning threshold; an explicit
    ``block_alpha`` that cannot be met is refused."""
    if not scores:
        raise CalibrationError("no good runs to calibrate on")
    if not 0 < alpha < 1:
        raise CalibrationError(f"alpha must be between 0 and 1 (got {alpha})")
    beta = alpha / 5 if block_alpha is None else block_alpha
    if not 0 < beta <= alpha:
        raise CalibrationError(f"block alpha must be in (0, alpha] (got {beta})")
    # Thresholds that can raise a warning: the shared warning threshold, error repeat, and
    # unknown-tool (which blocks without warning first). Blocks: critical and unknown-tool.
    budgets = {
        "warningThreshold": alpha / 3,
        "errorRepeatThreshold": alpha / 3,
        "unknownToolThreshold": min(alpha / 3, beta / 2),
        "criticalThreshold": beta / 2,
    }
    warning = _conformal_threshold([s.warning for s in scores], budgets["warningThreshold"],
                                   "warnings")
    errors = _conformal_threshold([s.error_repeat for s in scores],
                                  budgets["errorRepeatThreshold"], "error-repeat warnings")
    warning = max(warning, MIN_WARNING)
    error_repeat = max(errors, MIN_WARNING)
    try:
        unknown = _conformal_threshold([s.unknown_tool for s in scores],
                                       budgets["unknownToolThreshold"], "unknown-tool blocks")
        critical = _conformal_threshold([s.critical for s in scores],
                                        budgets["criticalThreshold"], "blocks")
    except CalibrationError as exc:
        if block_alpha is not None:
            raise
        return _warnings_only(scores, alpha, beta, budgets, warning, error_repeat, base, exc)
    # Floors keep the config sane (two identical reads are not a loop); raising a threshold
    # only makes alarms rarer, so the bound still holds. A critical stays above the warning.
    critical = max(critical, warning + 1)
    return Calibration(
        runs=len(scores), alpha=alpha, block_alpha=beta,
        warning_threshold=warning, critical_threshold=critical,
        global_circuit_breaker_threshold=max(critical + 1, critical * 3 // 2),
        unknown_tool_threshold=max(unknown, MIN_UNKNOWN_TOOL),
        error_repeat_threshold=error_repeat, budgets=budgets,
        history_size=_needed_history(base, max(critical + 1, critical * 3 // 2)),
        measured_history_size=(base or LoopDetectionConfig()).history_size,
    )


def _warnings_only(scores: Sequence[RunScores], alpha: float, beta: float,
                   budgets: dict[str, float], warning: int, error_repeat: int,
                   base: LoopDetectionConfig | None, why: CalibrationError) -> Calibration:
    start = base or LoopDetectionConfig()
    critical = max(start.critical_threshold, warning + 1)
    breaker = max(start.global_circuit_breaker_threshold, critical + 1)
    needed = math.ceil((1 - beta / 2) / (beta / 2))
    note = (f"{len(scores)} runs are too few for the block budget {beta:g} (need {needed}); "
            f"criticalThreshold {critical}, globalCircuitBreakerThreshold {breaker} and "
            f"unknownToolThreshold {start.unknown_tool_threshold} are kept from the starting "
            f"config (preset {start.preset}). Pass --block-alpha to bound blocks with fewer runs.")
    del why  # the note says the same in terms of this fallback
    return Calibration(
        runs=len(scores), alpha=alpha, block_alpha=beta,
        warning_threshold=warning, critical_threshold=critical,
        global_circuit_breaker_threshold=breaker,
        unknown_tool_threshold=start.unknown_tool_threshold,
        error_repeat_threshold=error_repeat,
        budgets={k: v for k, v in budgets.items() if k in ("warningThreshold", "errorRepeatThreshold")},
        bounded=("warnings",), note=note, history_size=_needed_history(start, breaker),
        measured_history_size=start.history_size,
    )


def _needed_history(base: LoopDetectionConfig | None, largest: int) -> int:
    """The history the thresholds need: the measured one, raised to the largest threshold."""
    return max((base or LoopDetectionConfig()).history_size, largest)
