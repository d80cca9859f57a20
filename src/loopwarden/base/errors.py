"""The one root of every loopwarden exception, so a host can catch ``LoopwardenError`` alone.

Exceptions that also carry a familiar meaning keep it as a second base (``ConfigError`` is a
``ValueError``); the rest subclass ``RuntimeError`` through this root, as they did before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..engine.detectors import Detection

__all__ = ["LoopTerminatedError", "LoopwardenError"]


class LoopwardenError(RuntimeError):
    """Base class of every exception loopwarden raises."""


class LoopTerminatedError(LoopwardenError):
    """A run ended by the terminal stop: a second critical loop in the same run, after the
    model had its one recovery turn (spec §f.1). ``detection`` is the critical that ended it;
    ``message`` is the stop message a door shows as the run's final answer."""

    def __init__(self, message: str, detection: Detection | None = None, *,
                 tool_name: str | None = None, session: str | None = None,
                 run_id: str | None = None, result: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.detection = detection
        self.tool_name = tool_name
        self.session = session
        self.run_id = run_id
        #: What the blocked call would have handed the model (an OpenClaw-shaped result).
        self.result = result
