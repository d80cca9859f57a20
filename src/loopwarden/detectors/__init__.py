"""The detectors: pure functions over one run's history, and their precedence in one table.

Each measurement (``*_streak``, :func:`ping_pong`, :func:`no_progress_cycle`,
:func:`argument_churn`) measures one pattern for a prospective call (spec §d.2–§d.8); the
``RULES`` table (:mod:`.rules`) turns those measurements into at most one :class:`Detection`,
first match wins, in OpenClaw's order (§d). Nothing here mutates state or does I/O.
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
    Level,
    Limits,
    PingPong,
    Prospect,
    Streak,
)
from .churn import CHURN_MIN_REPEATS, argument_churn, write_churn
from .cycle import CYCLE_PERIODS, no_progress_cycle
from .pingpong import ping_pong
from .rules import RULES, Count, Facts, Rule, evaluate, repeat_count, unknown_tool_message
from .streaks import (
    BACKOFF_GROWTH,
    BACKOFF_WINDOW,
    MIN_PACE_MS,
    error_streak,
    fresh_mutation,
    no_progress_streak,
    progress_streak,
    unknown_tool_streak,
)

__all__ = [
    "BACKOFF_GROWTH",
    "BACKOFF_WINDOW",
    "CHURN_MIN_REPEATS",
    "CYCLE_PERIODS",
    "MIN_PACE_MS",
    "NO_CHURN",
    "NO_CYCLE",
    "NO_PING_PONG",
    "NO_STREAK",
    "RULES",
    "Churn",
    "Count",
    "Cycle",
    "Detection",
    "Facts",
    "Level",
    "Limits",
    "PingPong",
    "Prospect",
    "Rule",
    "Streak",
    "argument_churn",
    "error_streak",
    "evaluate",
    "fresh_mutation",
    "no_progress_cycle",
    "no_progress_streak",
    "ping_pong",
    "progress_streak",
    "repeat_count",
    "unknown_tool_message",
    "unknown_tool_streak",
    "write_churn",
]
