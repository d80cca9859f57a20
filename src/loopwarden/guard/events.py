"""``LoopEvent``s and the sinks they flow through (logging, callbacks, the store's run record)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..base.log import get_logger
from ..base.text import log_repr, log_text
from ..engine.detectors.unknown_tool import unknown_tool_message
from ..engine.history import now_ms

__all__ = ["LoggingSink", "LoopEvent"]

log = get_logger("loopwarden")

_LOG_MESSAGE_LIMIT = 2000


@dataclass(frozen=True, slots=True)
class LoopEvent:
    """One warn, block or abort, shaped like OpenClaw's ``tool.loop`` diagnostic event; with
    ``exit_behavior="ask"`` also an ``ask`` put before a human and its answer (``continue`` /
    ``stop``), naming who answered and how many grants the run has had."""

    session: str
    tool: str
    level: str  # "warning" | "critical"
    action: str  # "warn" | "block" | "abort" | "ask" | "continue" | "stop"
    detector: str
    count: int
    message: str
    run: str | None = None
    agent: str | None = None
    call_id: str | None = None
    paired_tool: str | None = None
    learned: tuple[str, ...] = ()  # the tool's learned volatile result fields (early preset)
    terminal: bool = False  # a block that is the terminal stop: it ends the run
    answered_by: str | None = None  # ask: the channel asked; continue / stop: who answered
    grants: int | None = None  # ask: the run's grants so far; continue / stop: after the answer
    timestamp: int = field(default_factory=now_ms)
    type: str = "tool.loop"

    def to_dict(self) -> dict[str, Any]:
        """The event as plain data, one key per field."""
        return asdict(self)


EventSink = Callable[[LoopEvent], Any]


class LoggingSink:
    """OpenClaw's caller and diagnostic log lines, on the ``loopwarden`` logger."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or log

    def __call__(self, event: LoopEvent) -> None:
        level = logging.ERROR if event.level == "critical" else logging.WARNING
        if not self.logger.isEnabledFor(level):
            return
        tool, message = log_text(event.tool), log_text(_loggable_message(event),
                                                        _LOG_MESSAGE_LIMIT)
        if event.action == "block":
            self.logger.error("Blocking %s due to critical loop: %s", tool, message)
        elif event.action == "warn":
            self.logger.warning("Loop warning for %s: %s", tool, message)
        elif event.action == "ask":
            self.logger.error("Asking a human whether %s may go on (%s): %s", tool,
                              log_text(event.answered_by or "the door's channel"), message)
        elif event.action in ("continue", "stop"):
            self.logger.error("Loop stop for %s answered %s by %s (grants: %s)", tool,
                              event.action, log_text(event.answered_by or "a human"),
                              event.grants)
        paired = f" pairedTool={log_text(event.paired_tool)}" if event.paired_tool else ""
        session = log_text(event.session) if event.session else "unknown"
        self.logger.log(
            level,
            'tool loop: sessionId=%s sessionKey=%s tool=%s level=%s action=%s detector=%s '
            'count=%d%s message="%s"',
            session, session, tool, log_text(event.level), log_text(event.action),
            log_text(event.detector), event.count, paired, message,
        )


def _loggable_message(event: LoopEvent) -> str:
    """The event's message without text taken from a tool's result: every detector's message
    is made of tool names and counts, except ``unknown_tool_repeat``'s, which names the tool
    an error text said was missing (an error may quote the call's arguments, secrets
    included). Its log line names the tool that was called instead."""
    if event.detector == "unknown_tool_repeat":
        return unknown_tool_message(event.tool, event.count)
    return event.message


def deliver(events: Sequence[LoopEvent], sinks: Iterable[EventSink]) -> None:
    """Hand every event to every sink; a failing sink is logged and never reaches the agent."""
    if not events:
        return
    for sink in sinks:
        for event in events:
            try:
                sink(event)
            except Exception as exc:  # a sink is user code: it must not break the agent
                log.warning("loopwarden event sink %s failed: %s", log_repr(sink), log_text(exc))
