"""Detection presets: the thresholds a config leaves out, and the features each preset turns on.

``openclaw`` is exactly OpenClaw's behaviour (spec §a.5); ``early`` is loopwarden's stricter
detection. Everything a preset decides is one field of :class:`Preset`, so a new preset is one
new table row, and the config reads its switches from the row instead of comparing names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

PresetName = Literal["openclaw", "early"]

# The numeric keys a preset gives defaults for, in the order of the config's fields.
_THRESHOLD_FIELDS: Final = (
    "history_size",
    "warning_threshold",
    "critical_threshold",
    "unknown_tool_threshold",
    "global_circuit_breaker_threshold",
    "error_repeat_threshold",
)


@dataclass(frozen=True, slots=True)
class Preset:
    """One preset: threshold defaults and feature switches.

    The switches are what ``LoopDetectionConfig``'s properties of the same names report (a
    config's ``detectors.errorRepeat`` still overrides ``error_repeat``).
    """

    name: str
    history_size: int
    warning_threshold: int
    critical_threshold: int
    unknown_tool_threshold: int
    global_circuit_breaker_threshold: int
    error_repeat_threshold: int
    #: Whether the error-repeat detector runs when ``detectors.errorRepeat`` is not set.
    error_repeat: bool
    #: Judge a repeat once its outcome is known, and warn on that result.
    post_outcome_warnings: bool
    #: Mask timestamps, durations, ids and pids in every outcome (profiles may override).
    mask_volatile: bool
    #: Learn, per tool, result fields that change on every otherwise-identical outcome.
    learn_volatile: bool
    #: Count a repeat as loop evidence only without progress: identical outcomes, no fresh
    #: mutation in between, pacing calls neutral, back-off honoured, errors inside results.
    progress_aware: bool
    #: Recognise other frameworks' "tool not found" wordings and namespaced tool names.
    extended_unknown_tools: bool

    def thresholds(self) -> dict[str, int]:
        """The threshold defaults, by snake_case field name."""
        return {name: getattr(self, name) for name in _THRESHOLD_FIELDS}


# Keep every number here: the accuracy work tunes "early" in this table only.
_PRESET_TABLE: Final[Mapping[str, Preset]] = MappingProxyType({
    "openclaw": Preset(
        name="openclaw",
        history_size=30,
        warning_threshold=10,
        critical_threshold=20,
        unknown_tool_threshold=10,
        global_circuit_breaker_threshold=30,
        error_repeat_threshold=10,
        error_repeat=False,
        post_outcome_warnings=False,
        mask_volatile=False,
        learn_volatile=False,
        progress_aware=False,
        extended_unknown_tools=False,
    ),
    "early": Preset(
        name="early",
        history_size=30,
        # A loop is 6+ no-progress calls; post-outcome checks warn on the 6th call's result.
        warning_threshold=6,
        critical_threshold=10,
        unknown_tool_threshold=5,
        global_circuit_breaker_threshold=20,
        error_repeat_threshold=6,
        error_repeat=True,
        post_outcome_warnings=True,
        mask_volatile=True,
        learn_volatile=True,
        progress_aware=True,
        extended_unknown_tools=True,
    ),
})

# Defaults for threshold keys the user did not set, by preset: the public view of the table.
PRESETS: Final[dict[str, dict[str, int]]] = {
    name: preset.thresholds() for name, preset in _PRESET_TABLE.items()
}

_WARNING_ORDER_MESSAGE: Final = (
    "tools.loopDetection.warningThreshold must be lower than criticalThreshold."
)
_CRITICAL_ORDER_MESSAGE: Final = (
    "tools.loopDetection.criticalThreshold must be lower than globalCircuitBreakerThreshold."
)

# (lower, upper, message when a single object sets both out of order), checked in this order.
_THRESHOLD_ORDER: Final = (
    ("warning_threshold", "critical_threshold", _WARNING_ORDER_MESSAGE),
    ("critical_threshold", "global_circuit_breaker_threshold", _CRITICAL_ORDER_MESSAGE),
)

# The thresholds a perTool entry may set, lowest first.
_TOOL_THRESHOLDS: Final = (
    "warning_threshold", "critical_threshold", "global_circuit_breaker_threshold"
)
