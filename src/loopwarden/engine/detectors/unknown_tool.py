"""``unknown_tool_repeat`` (§d.5): the same missing tool called again and again. Always on."""

from __future__ import annotations

from ..history import OUTCOME_VETO, RunView, SessionState
from .base import WAKE_TAIL, Detector, Facts, Limits, Prospect, Rule, Score
from .streaks import NO_STREAK, Streak, unknown_tool_streak


class UnknownToolDetector(Detector[Streak]):
    """``unknown_tool_repeat``: the same missing tool called again and again."""

    __slots__ = ()
    wakes = WAKE_TAIL
    name = "unknown_tool"
    empty = NO_STREAK

    def may_fire(self, view: RunView, call: Prospect, limits: Limits) -> bool:
        """The newest record is this tool's unknown-tool failure, or a veto (which it skips)."""
        # The streak skips vetoes of any tool, so a newest veto may hide one.
        last = view.records[-1]
        return last.outcome_kind == OUTCOME_VETO or (
            last.tool_name == call.tool_name and last.unknown_tool_name is not None)

    def measure(self, state: SessionState, run: str | None, call: Prospect,
                limits: Limits) -> Streak:
        """The streak of this tool's unknown-tool failures (§d.5)."""
        return unknown_tool_streak(state, run, call.tool_name)

    def score(self, facts: Facts, limits: Limits) -> Score:
        """The streak against the unknown-tool threshold."""
        return Score(unknown_tool=facts[self].count)


UNKNOWN_TOOL = UnknownToolDetector()


def unknown_tool_message(name: str, n: int) -> str:
    """The ``unknown_tool_repeat`` message. ``name`` is the missing tool as the error text
    named it, which the model wrote, possibly into an argument: logs use the called tool's
    name instead (:class:`~loopwarden.events.LoggingSink`)."""
    return (f"CRITICAL: attempted unavailable tool {name} {n} times. "
            "Stop retrying that missing tool and answer without it.")


CRITICAL = Rule(
    UNKNOWN_TOOL, "unknown_tool_repeat", "critical",
    lambda f, lim: f[UNKNOWN_TOOL].count >= lim.unknown_tool,
    lambda f, _: f[UNKNOWN_TOOL].count,
    lambda f, n: unknown_tool_message(f[UNKNOWN_TOOL].name or f.call.tool_name, n),
    lambda f: f"unknown-tool:{f.call.tool_name}:{f[UNKNOWN_TOOL].name or 'unknown'}",
    None,  # (the guard's LoggingSink logs it, with the called tool's name)
)
