"""``replay``: drive the real :class:`LoopGuard` over a recorded call stream.

Used by ``loopwarden scan`` and ``eval``: what would the guard have said at each call? A blocked
call is still taken as having happened (its real outcome replaces the veto), so the report
follows the transcript as it was.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ..base.types import ToolCall
from ..config import LoopDetectionConfig
from ..guard import LoopGuard
from ..guard.events import LoopEvent
from ..guard.stores.memory import MemoryStore

__all__ = ["Finding", "replay"]

_SESSION = "replay"


@dataclass(frozen=True, slots=True)
class Finding:
    """A warning or block the guard issued at one call of a transcript."""

    index: int
    call_id: str | None
    tool: str
    level: str
    action: str
    detector: str
    count: int
    message: str
    run_id: str | None = None
    timing: str = "before"  # "before" the call ran, or "after" its outcome (post-outcome warning)
    learned: tuple[str, ...] = ()  # the tool's learned volatile fields at that point
    terminal: bool = False  # the terminal stop: a second critical in the run, which ends it

    @property
    def call_number(self) -> int:
        """The call's number as a person counts it, from 1 (``index`` counts from 0)."""
        return self.index + 1

    def to_dict(self) -> dict[str, Any]:
        """The finding as plain data, one key per field."""
        return asdict(self)


def replay(
    calls: Iterable[ToolCall],
    config: LoopDetectionConfig | None = None,
    profiles: object = None,
    outcomes: list[str | None] | None = None,
) -> list[Finding]:
    """Findings for a call stream, in call order (``index`` is the call's 0-based position).

    ``outcomes``, when given, receives each call's outcome as the guard recorded it (its result
    hash, volatile fields stripped; None when it recorded none): whether a later call "made
    progress" is judged by the same identity the detectors use.
    """
    events: list[LoopEvent] = []
    store = MemoryStore(idle_ttl=None, max_sessions=None)
    guard = LoopGuard(config, store=store, profiles=profiles)
    guard.sinks[:] = [events.append]  # a replay reports findings; it does not log like a live agent
    findings: list[Finding] = []
    for index, call in enumerate(calls):
        call_id = f"replay-{index}"  # unique: transcripts may reuse ids, which would dedupe
        before, _ = guard.observe_call(call.tool_name, call.args, session=_SESSION,
                                       result=call.result, error=call.error,
                                       run_id=call.run_id, call_id=call_id)
        if outcomes is not None:
            outcomes.append(_recorded_outcome(store, call_id))
        if events:  # a warn or block before the call emits one event; later ones are post-outcome
            _collect(findings, events, index, call, 1 if before.action != "allow" else 0,
                     terminal=before.terminate)
    return findings


def _recorded_outcome(store: MemoryStore, call_id: str) -> str | None:
    state = store.load(_SESSION)
    if state is None:
        return None
    for record in reversed(state.history[-4:]):  # the call's record is the newest, or nearly
        if record.call_id == call_id:
            return record.result_hash
    return None


def _collect(findings: list[Finding], events: list[LoopEvent], index: int, call: ToolCall,
             before: int, *, terminal: bool = False) -> None:
    for position, event in enumerate(events):
        timing = "before" if position < before else "after"
        findings.append(Finding(
            index=index, call_id=call.call_id, tool=event.tool, level=event.level,
            action=event.action, detector=event.detector, count=event.count,
            message=event.message, run_id=call.run_id, timing=timing, learned=event.learned,
            terminal=terminal and timing == "before" and event.action == "block",
        ))
    events.clear()
