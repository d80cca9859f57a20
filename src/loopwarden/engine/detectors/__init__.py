"""The detectors: pure functions over one run's history, and their precedence in one list.

Each :class:`Detector` object measures one pattern for a prospective call (spec §d.2–§d.8),
has an O(1) pre-check that tells when none of its rows can fire, and says what calibration
reads of its measurement. Its :class:`Rule` rows (level, when it fires, count, message, warning
key, log line, switch, liveness) live in its module; ``RULES`` (:mod:`.rules`) is their
precedence, first match wins, in OpenClaw's order (§d). Nothing here mutates state or does I/O.

One module per detector: :mod:`.unknown_tool`, :mod:`.no_progress` (generic repeat, known poll
and the global breaker), :mod:`.pingpong`, :mod:`.cycle`, :mod:`.error_repeat`, :mod:`.churn`;
:mod:`.streaks` holds the history walks they share, :mod:`.base` the interface and value types.
"""

from __future__ import annotations

from .base import Detection, Detector, Facts, Limits, Prospect, Rule, Score
from .rules import DETECTORS, RULES, SWITCHES, evaluate, gates_for

__all__ = [
    "DETECTORS",
    "RULES",
    "SWITCHES",
    "Detection",
    "Detector",
    "Facts",
    "Limits",
    "Prospect",
    "Rule",
    "Score",
    "evaluate",
    "gates_for",
]
