"""The OpenTelemetry sink against the real SDK: span events on the current span and a counter."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopwarden import LoopDetectionConfig, LoopGuard
from loopwarden.integrations.otel import OpenTelemetrySink


def test_warn_and_block_become_span_events_and_counts() -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = tracer_provider.get_tracer("test")
    reader = InMemoryMetricReader()
    guard = LoopGuard(LoopDetectionConfig(enabled=True),
                      sinks=[OpenTelemetrySink(MeterProvider(metric_readers=[reader]))])

    for i in range(21):
        with tracer.start_as_current_span(f"tool check_job #{i}"):
            verdict = guard.before_tool_call("check_job", {"id": 1}, session="s", run_id="r",
                                             call_id=f"c{i}")
            if verdict.action != "block":
                guard.after_tool_call("check_job", {"id": 1}, session="s", run_id="r",
                                      call_id=f"c{i}", result="still running")

    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert not spans["tool check_job #9"].events
    (warned,) = spans["tool check_job #10"].events
    assert warned.name == "tool.loop"
    assert warned.attributes["loopwarden.action"] == "warn"
    assert warned.attributes["loopwarden.count"] == 10
    assert warned.attributes["loopwarden.session"] == "s"
    (blocked,) = spans["tool check_job #20"].events
    assert blocked.attributes["loopwarden.action"] == "block"
    assert blocked.attributes["loopwarden.detector"] == "generic_repeat"

    points = [point for metric in reader.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics
              if metric.name == "loopwarden.tool_loop.events" for point in metric.data.data_points]
    counts = {point.attributes["action"]: point.value for point in points}
    assert counts == {"warn": 1, "block": 1}


def test_without_a_recording_span_only_counts() -> None:
    reader = InMemoryMetricReader()
    guard = LoopGuard(LoopDetectionConfig(enabled=True),
                      sinks=[OpenTelemetrySink(MeterProvider(metric_readers=[reader]))])
    for i in range(11):
        guard.before_tool_call("poll", {}, session="s", call_id=f"c{i}")
    metrics = reader.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics
    assert [m.name for m in metrics] == ["loopwarden.tool_loop.events"]
