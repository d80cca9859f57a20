"""The detectors: pure functions over one run's history, and their precedence in one table.

Each :class:`Detector` object (``DETECTORS``) measures one pattern for a prospective call (spec
§d.2–§d.8), has an O(1) pre-check that tells when none of its rules can fire, and says what
calibration reads of its measurement. The ``RULES`` table (:mod:`.rules`) turns the
measurements into at most one :class:`Detection`, first match wins, in OpenClaw's order (§d);
each rule names the detector it reads. Nothing here mutates state or does I/O.

One module per detector: :mod:`.streaks` (unknown tool, the no-progress streak behind generic
repeat, known poll and the global breaker, error repeat), :mod:`.pingpong`, :mod:`.cycle`,
:mod:`.churn`; :mod:`.base` holds what they share.
"""

from __future__ import annotations

from .base import (
    NO_CHURN,
    NO_CYCLE,
    NO_PING_PONG,
    NO_STREAK,
    Churn,
    Cycle,
    Detection,
    Detector,
    Level,
    Limits,
    PingPong,
    Prospect,
    Score,
    Streak,
)
from .churn import ARGUMENT_CHURN, CHURN_MIN_REPEATS, ChurnDetector, argument_churn, write_churn
from .cycle import CYCLE, CYCLE_PERIODS, CycleDetector, no_progress_cycle
from .pingpong import PING_PONG, PingPongDetector, ping_pong
from .rules import (
    DETECTORS,
    RULES,
    Count,
    Facts,
    Gate,
    Rule,
    evaluate,
    gates_for,
    unknown_tool_message,
)
from .streaks import (
    BACKOFF_GROWTH,
    BACKOFF_WINDOW,
    ERROR_REPEAT,
    MIN_PACE_MS,
    NO_PROGRESS,
    UNKNOWN_TOOL,
    ErrorRepeatDetector,
    NoProgressDetector,
    UnknownToolDetector,
    error_streak,
    fresh_mutation,
    no_progress_streak,
    progress_streak,
    repeat_count,
    unknown_tool_streak,
)

__all__ = [
    "ARGUMENT_CHURN",
    "BACKOFF_GROWTH",
    "BACKOFF_WINDOW",
    "CHURN_MIN_REPEATS",
    "CYCLE",
    "CYCLE_PERIODS",
    "DETECTORS",
    "ERROR_REPEAT",
    "MIN_PACE_MS",
    "NO_CHURN",
    "NO_CYCLE",
    "NO_PING_PONG",
    "NO_PROGRESS",
    "NO_STREAK",
    "PING_PONG",
    "RULES",
    "UNKNOWN_TOOL",
    "Churn",
    "ChurnDetector",
    "Count",
    "Cycle",
    "CycleDetector",
    "Detection",
    "Detector",
    "ErrorRepeatDetector",
    "Facts",
    "Gate",
    "Level",
    "Limits",
    "NoProgressDetector",
    "PingPong",
    "PingPongDetector",
    "Prospect",
    "Rule",
    "Score",
    "Streak",
    "UnknownToolDetector",
    "argument_churn",
    "error_streak",
    "evaluate",
    "fresh_mutation",
    "gates_for",
    "no_progress_cycle",
    "no_progress_streak",
    "ping_pong",
    "progress_streak",
    "repeat_count",
    "unknown_tool_message",
    "unknown_tool_streak",
    "write_churn",
]
