"""Did the nudge work? For each warning, block and ask, whether the model changed course
within the next ``within`` calls of its run.

A *nudge* is a warning, block or ask at one call. Its *pattern* is what the loop was made of:
the nudged call's fingerprint (tool and args hash); for ``ping_pong`` also the call before it
(the other side of the alternation); for ``unknown_tool_repeat`` and ``argument_churn``, whose
arguments vary by nature, the tool name. Walking the run's next calls, up to ``within`` of
them, the nudge was

- ``heeded`` at the first call outside the pattern, or a pattern call whose result differs
  from the pattern's last known result (the same call, now making progress);
- ``ignored`` when every one of those calls repeats the pattern with the same result (the
  run may end before ``within`` calls: it repeated all the same);
- ``ended`` when the run has no later call at all (the run was stopped, or the transcript
  ends): it neither heeded nor ignored;
- ``unknown`` when the record no longer holds the nudged call (a store's bounded history).

The *rate* is heeded / (heeded + ignored). The same rule serves a replayed transcript
(``scan``), the warnings a transcript shows its model (OpenClaw's ``[System note: Tool-loop
warning …]`` and the loop messages loopwarden and OpenClaw put in tool results), and a
store's run record (``loopwarden runs``).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "DEFAULT_WITHIN",
    "NUDGE_ACTIONS",
    "SEEN_MARKERS_BYTES",
    "CallKey",
    "NudgeOutcome",
    "RunIndex",
    "efficacy",
    "judge",
    "live_outcomes",
    "rate_text",
    "seen_nudge",
]

#: How many later calls of its run a nudge has to show an effect.
DEFAULT_WITHIN = 3

#: The actions that nudge a model (answers to an ask, "continue" and "stop", do not).
NUDGE_ACTIONS = ("warn", "block", "ask")

# Detectors whose looping calls share a tool but not their arguments.
_TOOL_PATTERN_DETECTORS = frozenset({"unknown_tool_repeat", "argument_churn"})


@dataclass(frozen=True, slots=True)
class CallKey:
    """What judging needs of one call: its run, tool, args hash and result identity (None
    when unknown, e.g. a vetoed call)."""

    run: str | None
    tool: str
    args: str
    result: object = None


@dataclass(frozen=True, slots=True)
class NudgeOutcome:
    """One nudge and what the model did next."""

    index: int  # the nudged call's 0-based position in the call stream
    stage: str  # "warn" | "block" | "ask"
    detector: str
    tool: str
    outcome: str  # "heeded" | "ignored" | "ended" | "unknown"
    after: int | None = None  # later calls of the run until the course changed (heeded only)
    source: str = "replay"  # "replay" | "seen" (the transcript shows it) | "live" (a store)

    def to_json(self) -> dict[str, Any]:
        """The outcome as plain JSON data."""
        return {"index": self.index, "stage": self.stage, "detector": self.detector,
                "tool": self.tool, "source": self.source, "outcome": self.outcome,
                "after": self.after}


class RunIndex:
    """A call stream as judging walks it: each call's identity on demand (``call``), and the
    positions of each run's calls (runs may interleave in a shared session's history)."""

    def __init__(self, runs: Sequence[str | None], call: Callable[[int], CallKey]) -> None:
        self.call = call
        self._runs = runs
        self._positions: dict[str | None, list[int]] = {}
        for position, run in enumerate(runs):
            self._positions.setdefault(run, []).append(position)

    @classmethod
    def of(cls, calls: Sequence[CallKey]) -> RunIndex:
        """The index of a list of call identities."""
        return cls([call.run for call in calls], calls.__getitem__)

    def later(self, index: int, limit: int) -> list[int]:
        """Up to ``limit`` positions of the run of call ``index`` after it."""
        positions = self._positions.get(self._runs[index], [])
        start = bisect.bisect_right(positions, index)
        return positions[start:start + limit]

    def before(self, index: int) -> int | None:
        """The position of the run's call before ``index``, if any."""
        positions = self._positions.get(self._runs[index], [])
        start = bisect.bisect_left(positions, index)
        return positions[start - 1] if start > 0 else None


def judge(runs: RunIndex, index: int, detector: str,
          within: int = DEFAULT_WITHIN, *, own_result: bool = True) -> tuple[str, int | None]:
    """``(outcome, after)`` for a nudge at call ``index`` (see the module doc).

    ``own_result=False`` when the nudge is part of the call's result (a note appended to it):
    the pattern's result is then that of the run's previous call of the pattern, as the guard
    that appended the note recorded it before the note.
    """
    call_at = runs.call
    nudged = call_at(index)
    by_tool = detector in _TOOL_PATTERN_DETECTORS
    last_result: dict[str, object] = {}

    def key(call: CallKey) -> str:
        return call.tool if by_tool else f"{call.tool}\x00{call.args}"

    if detector == "ping_pong":
        previous = runs.before(index)
        if previous is not None:
            other = call_at(previous)
            last_result[key(other)] = other.result
    last_result[key(nudged)] = nudged.result if own_result else _earlier_result(
        runs, index, key)
    later = runs.later(index, within)
    if not later:
        return "ended", None
    for step, position in enumerate(later, start=1):
        call = call_at(position)
        name = key(call)
        if name not in last_result:
            return "heeded", step
        before = last_result[name]
        if before is not None and call.result is not None and call.result != before:
            return "heeded", step
        if call.result is not None:
            last_result[name] = call.result
    return "ignored", None


def _earlier_result(runs: RunIndex, index: int, key: Callable[[CallKey], str]) -> object:
    """The result of the run's last call before ``index`` with the same pattern key."""
    wanted = key(runs.call(index))
    position = runs.before(index)
    while position is not None:
        call = runs.call(position)
        if key(call) == wanted:
            return call.result
        position = runs.before(position)
    return None


# The loop messages a model reads in a tool result: OpenClaw's note on a warned result, and
# the warning and block texts OpenClaw and loopwarden share (and loopwarden's question when it
# asks). Most specific first: the first match names the stage and detector.
_SEEN: tuple[tuple[str, str, str], ...] = (
    ("[System note: Tool-loop warning", "warn", "tool_loop_note"),
    ("loopwarden stopped a loop: `", "ask", "ask"),
    ("with identical arguments and no progress", "", "known_poll_no_progress"),
    ("stuck polling loop", "block", "known_poll_no_progress"),
    ("You are alternating between repeated tool-call patterns", "", "ping_pong"),
    ("attempted unavailable tool", "block", "unknown_tool_repeat"),
    ("global circuit breaker", "block", "global_circuit_breaker"),
    ("repeated argument patterns", "", "argument_churn"),
    ("distinct argument variants", "warn", "argument_churn"),
    ("times with identical arguments.", "warn", "generic_repeat"),
    ("with identical outcomes", "block", "generic_repeat"),
    ("with identical arguments and identical outcomes", "block", "generic_repeat"),
)
_PREFIXES = ("WARNING: ", "CRITICAL: ", "[System note: Tool-loop", "loopwarden stopped a loop")
#: The same prefixes as bytes, to pass over JSON outputs without decoding them.
SEEN_MARKERS_BYTES = tuple(prefix.encode() for prefix in _PREFIXES)
_ASK_TAIL = re.compile(r"Continue \(.*\) or stop the run\?")


def seen_nudge(text: str) -> tuple[str, str] | None:
    """``(stage, detector)`` of a loop message the text shows the model, or None."""
    if not any(prefix in text for prefix in _PREFIXES):
        return None
    for marker, stage, detector in _SEEN:
        if marker not in text:
            continue
        if detector == "ask" and not _ASK_TAIL.search(text):
            continue
        if not stage:
            stage = "block" if "CRITICAL: " in text else "warn"
        return stage, detector
    return None


def _cell(outcomes: Sequence[NudgeOutcome]) -> dict[str, Any]:
    counts = {name: sum(1 for o in outcomes if o.outcome == name)
              for name in ("heeded", "ignored", "ended", "unknown")}
    decided = counts["heeded"] + counts["ignored"]
    return {"nudges": len(outcomes), **counts,
            "rate": round(counts["heeded"] / decided, 4) if decided else None}


def efficacy(outcomes: Iterable[NudgeOutcome],
             within: int = DEFAULT_WITHIN) -> dict[str, Any]:
    """The heeded rate overall, per stage and per detector (JSON data)."""
    listed = list(outcomes)
    by_stage: dict[str, list[NudgeOutcome]] = {}
    by_detector: dict[str, list[NudgeOutcome]] = {}
    for outcome in listed:
        by_stage.setdefault(outcome.stage, []).append(outcome)
        by_detector.setdefault(outcome.detector, []).append(outcome)
    return {
        "within": within,
        "all": _cell(listed),
        "by_stage": {stage: _cell(by_stage[stage]) for stage in NUDGE_ACTIONS
                     if stage in by_stage},
        "by_detector": {name: _cell(by_detector[name]) for name in sorted(by_detector)},
    }


def rate_text(cell: Mapping[str, Any], verb: str = "heeded") -> str:
    """``"2 of 3 heeded (67%)"``, or ``"-"`` when none was decided."""
    decided = cell["heeded"] + cell["ignored"]
    if not decided:
        return "-"
    return f"{cell['heeded']} of {decided} {verb} ({cell['heeded'] / decided:.0%})"


class _Event(Protocol):
    """What judging reads of a ``LoopEvent``."""

    @property
    def run(self) -> str | None: ...
    @property
    def call_id(self) -> str | None: ...
    @property
    def tool(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def detector(self) -> str: ...
    @property
    def count(self) -> int: ...


class _Record(Protocol):
    """What judging reads of a history ``CallRecord``."""

    @property
    def run_id(self) -> str | None: ...
    @property
    def call_id(self) -> str | None: ...
    @property
    def tool_name(self) -> str: ...
    @property
    def args_hash(self) -> str: ...
    @property
    def result_hash(self) -> str | None: ...


def live_outcomes(events: Sequence[_Event], history: Sequence[_Record],
                  within: int = DEFAULT_WITHIN) -> list[NudgeOutcome]:
    """Whether the model changed course after each warn, block and ask of one session's run
    record (``events``, oldest first), judged on the session's call history as a store keeps
    it. A nudge whose call the history no longer holds (it keeps the newest calls only, and a
    "continue" answer clears its run's) is judged from the events that followed it: the same
    detector on the same tool again within ``within`` counts is ``ignored``; a "stop" answer
    to an ask is ``ended``; anything else ``unknown``."""
    calls = [CallKey(r.run_id, r.tool_name, r.args_hash, r.result_hash) for r in history]
    runs = RunIndex.of(calls)
    position = {record.call_id: index for index, record in enumerate(history) if record.call_id}
    outcomes: list[NudgeOutcome] = []
    for number, event in enumerate(events):
        if event.action not in NUDGE_ACTIONS:
            continue
        index = position.get(event.call_id) if event.call_id else None
        if index is not None:
            outcome, after = judge(runs, index, event.detector, within)
        else:
            outcome, after = _from_events(event, events[number + 1:], within), None
        outcomes.append(NudgeOutcome(-1 if index is None else index, event.action,
                                     event.detector, event.tool, outcome, after, "live"))
    return outcomes


def _from_events(event: _Event, later: Sequence[_Event], within: int) -> str:
    for other in later:
        if other.run != event.run:
            continue
        if event.action == "ask" and other.call_id == event.call_id and other.action == "stop":
            return "ended"
        if (other.action in NUDGE_ACTIONS and other.tool == event.tool
                and other.detector == event.detector
                and 0 < other.count - event.count <= within):
            return "ignored"
    return "unknown"
