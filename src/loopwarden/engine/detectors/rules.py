"""The precedence: every detector's :class:`~.base.Rule` rows in one ordered list, ``RULES``,
first match wins, in OpenClaw's order (§d); :func:`evaluate` turns the first row that fires
into a :class:`~.base.Detection`.

A new detector is its module plus one line here per row, at its place in the order. The
detectors (``DETECTORS``), their switches (``SWITCHES``), the engine's O(1) gate
(:func:`gates_for`) and calibration's scores all follow from this list, so a row is never left
out of any of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from ..history import RunView
from . import (
    churn,
    cycle,
    error_repeat,
    failure_repeat,
    no_progress,
    one_tool_cycle,
    pingpong,
    unknown_tool,
)
from .base import Detection, Detector, Facts, Limits, Prospect, Rule

RULES: tuple[Rule, ...] = (
    unknown_tool.CRITICAL,
    no_progress.BREAKER,
    no_progress.POLL_CRITICAL,
    no_progress.POLL_WARNING,
    pingpong.CRITICAL,
    # loopwarden's cycles rank right after ping-pong (period 2).
    cycle.BREAKER,
    cycle.CRITICAL,
    one_tool_cycle.BREAKER,
    one_tool_cycle.CRITICAL,
    pingpong.WARNING,
    no_progress.GENERIC_CRITICAL,
    no_progress.EQUIVALENT_CRITICAL,
    error_repeat.CRITICAL,
    failure_repeat.CRITICAL,
    # Below every critical, so that a cycle's warning never turns an existing block into a
    # warning.
    cycle.WARNING,
    one_tool_cycle.WARNING,
    churn.WARNING,
    no_progress.GENERIC_WARNING,
    no_progress.EQUIVALENT_WARNING,
    error_repeat.WARNING,
    failure_repeat.WARNING,
)

#: The detectors, in the order of their first rule: every family of ``RULES``, and no other.
DETECTORS: tuple[Detector[Any], ...] = tuple(dict.fromkeys(rule.family for rule in RULES))

#: Every detector switch (the snake_case keys of the config's ``detectors``).
SWITCHES: frozenset[str] = frozenset(rule.switch for rule in RULES if rule.switch is not None)


def _rows_on(switches: frozenset[str], rules: Iterable[Rule]) -> tuple[Rule, ...]:
    """The rows whose switch is on, in precedence order (where the switches are read)."""
    return tuple(r for r in rules if r.switch is None or r.switch in switches)


@lru_cache(maxsize=64)
def _precedence_on(switches: frozenset[str]) -> tuple[Rule, ...]:
    return _rows_on(switches, RULES)


def evaluate(facts: Facts, limits: Limits, rules: Iterable[Rule] = RULES) -> Detection | None:
    """The first row that is switched on and fires, as a :class:`Detection` (spec §d
    precedence)."""
    rows = _precedence_on(limits.switches) if rules is RULES else _rows_on(limits.switches, rules)
    for rule in rows:
        if not rule.fires(facts, limits):
            continue
        count = rule.count(facts, limits)
        liveness = None
        if rule.liveness and rule.level == "warning":
            liveness = churn.liveness_signal(facts, limits)
        return Detection(
            level=rule.level,
            detector=rule.detector,
            count=count,
            message=rule.message(facts, count),
            paired_tool_name=None if rule.paired is None else rule.paired(facts),
            warning_key=rule.key(facts),
            liveness_signal=liveness,
        )
    return None


def switched_on(limits: Limits, switch: str) -> bool:
    """Whether ``limits`` turn on a row with this switch (what a switch that changes how
    calls are fingerprinted, rather than which detector measures, is read by)."""
    return any(rule.switch == switch for rule in _precedence_on(limits.switches))


def enabled_detectors(limits: Limits) -> tuple[Detector[Any], ...]:
    """The detectors with at least one row that ``limits``' switches leave on."""
    return tuple(d for d in DETECTORS if d.enabled(limits))


Gate = Callable[[RunView, Prospect, Limits], bool]


def gates_for(limits: Limits) -> tuple[tuple[int, Gate], ...]:
    """What wakes each detector that ``limits``' switches leave on (the others' rules cannot
    fire), with its ``may_fire``: when none of them says yes, no rule fires and the call needs
    no measuring."""
    return tuple((d.wakes, d.may_fire) for d in enabled_detectors(limits))
