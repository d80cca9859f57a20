"""OpenTelemetry sink: every ``LoopEvent`` as a span event and a metric.

``LoopGuard(sinks=[OpenTelemetrySink()])`` adds a ``tool.loop`` event (with the event's fields as
``loopwarden.*`` attributes) to the span that is current when the guard decides — typically the
tool-call span your framework's instrumentation opened — and counts events in the
``loopwarden.tool_loop.events`` counter, by level, action, detector and tool. Uses the global
tracer/meter providers unless given others.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import metrics, trace

from ..guard.events import LoopEvent

__all__ = ["OpenTelemetrySink"]


class OpenTelemetrySink:
    """An event sink: each loop event becomes a ``tool.loop`` event on the current span and a
    count in ``loopwarden.tool_loop.events`` (``meter_provider``: the global one unless given)."""

    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        provider = meter_provider or metrics.get_meter_provider()
        meter = provider.get_meter("loopwarden")
        self._events = meter.create_counter(
            "loopwarden.tool_loop.events", unit="{event}",
            description="Tool-loop warnings, blocks and aborts issued by loopwarden",
        )

    def __call__(self, event: LoopEvent) -> None:
        span = trace.get_current_span()
        if span.is_recording():
            span.add_event("tool.loop", attributes=_attributes(event))
        self._events.add(1, {"level": event.level, "action": event.action,
                             "detector": event.detector, "tool": event.tool})


def _attributes(event: LoopEvent) -> dict[str, Any]:
    fields = {
        "session": event.session, "run": event.run, "agent": event.agent,
        "call_id": event.call_id, "tool": event.tool, "level": event.level,
        "action": event.action, "detector": event.detector, "count": event.count,
        "message": event.message, "paired_tool": event.paired_tool,
    }
    # OpenTelemetry attributes cannot be None.
    return {f"loopwarden.{key}": value for key, value in fields.items() if value is not None}
