"""Spec §i group 12 (caller scenarios 86–91) and the guard's policy: dampening, notes, events."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from loopwarden import (
    LoopDetectionConfig,
    LoopEvent,
    LoopGuard,
    ToolCall,
    warning_note,
)
from spec_helpers import POLL_ARGS, POLL_RESULT

ON = LoopDetectionConfig(enabled=True)
UNCHANGED: dict[str, Any] = {"content": [{"type": "text", "text": "unchanged"}], "details": {}}


def _run_tool(guard: LoopGuard, tool: str, args: Any, result: Any, i: int, *, session: str = "s",
              run: str | None = "r") -> Any:
    verdict = guard.before_tool_call(tool, args, session=session, run_id=run, call_id=f"c{i}")
    if verdict.action == "block":
        return verdict
    guard.after_tool_call(tool, args, session=session, run_id=run, call_id=f"c{i}", result=result)
    return verdict


def test_s86_twenty_polls_then_blocked_result(caplog: pytest.LogCaptureFixture) -> None:
    guard = LoopGuard(ON)
    for i in range(20):
        assert _run_tool(guard, "process", POLL_ARGS, POLL_RESULT, i).action != "block"
    with caplog.at_level(logging.ERROR, logger="loopwarden"):
        verdict = guard.before_tool_call("process", POLL_ARGS, session="s", run_id="r", call_id="c20")
    assert verdict.action == "block"
    blocked = verdict.blocked_result()
    assert "CRITICAL" in blocked["content"][0]["text"]
    assert blocked["details"]["status"] == "blocked"
    assert blocked["details"]["deniedReason"] == "tool-loop"
    assert "CRITICAL" in blocked["details"]["reason"]
    assert "Blocking process due to critical loop: CRITICAL" in caplog.text
    assert "tool loop: sessionId=s sessionKey=s tool=process level=critical action=block" in caplog.text


def test_s87_disabled_guard_runs_everything() -> None:
    guard = LoopGuard(LoopDetectionConfig(enabled=False))
    assert all(_run_tool(guard, "process", POLL_ARGS, POLL_RESULT, i).action == "allow"
               for i in range(25))


def test_s88_one_warning_then_intervention() -> None:
    events: list[LoopEvent] = []
    guard = LoopGuard(ON, sinks=[events.append])
    warnings_at = []
    for i in range(20):
        admission = guard.admit_batch([ToolCall("probe", {"q": 1}, call_id=f"c{i}")],
                                      session="s", run_id="r")
        assert admission.intervention is None
        if admission.warnings:
            warnings_at.append((i, admission.warnings))
        guard.after_tool_call("probe", {"q": 1}, session="s", run_id="r", call_id=f"c{i}",
                              result=UNCHANGED)
    assert warnings_at == [(10, [{"kind": "tool-loop-warning", "toolCallId": "c10", "count": 10}])]
    assert [(e.action, e.count) for e in events] == [("warn", 10)]
    history = guard.history("s")
    assert len(history) == 20 and len({r.result_hash for r in history}) == 1
    admission = guard.admit_batch([ToolCall("probe", {"q": 1}, call_id="c20")], session="s",
                                  run_id="r")
    assert admission.intervention is not None
    assert admission.intervention.kind == "critical-tool-loop"


def test_s89_note_appended_only_to_warned_result() -> None:
    guard = LoopGuard(ON)
    for i in range(10):
        _run_tool(guard, "read", {"path": "warned"}, UNCHANGED, i)
    admission = guard.admit_batch([ToolCall("read", {"path": "warned"}, call_id="w"),
                                   ToolCall("list", {"dir": "."}, call_id="sib")],
                                  session="s", run_id="r")
    warned, sibling = admission.verdicts
    original = {"content": [{"type": "text", "text": "data"}, {"type": "text", "text": "hook"}]}
    assert warned.annotate(original)["content"] == [
        *original["content"],
        {"type": "text", "text": "[System note: Tool-loop warning after 10 repeated calls. "
                                 "Change your approach or stop if you are not making progress.]"},
    ]
    assert sibling.annotate(original) == original
    assert original["content"][-1]["text"] == "hook"  # the raw result is not mutated


def _loop_until_critical(guard: LoopGuard, run: str) -> None:
    for i in range(20):
        guard.admit_batch([ToolCall("read", {"path": "x"}, call_id=f"{run}-{i}")], session="s",
                          run_id=run)
        guard.after_tool_call("read", {"path": "x"}, session="s", run_id=run, call_id=f"{run}-{i}",
                              result=UNCHANGED)


def test_s90_recovery_turn_then_terminal() -> None:
    guard = LoopGuard(ON)
    _loop_until_critical(guard, "r")
    first = guard.admit_batch([ToolCall("read", {"path": "x"}, call_id="t1")], session="s", run_id="r")
    assert first.intervention is not None and not first.terminal
    blocked = first.verdicts[0].blocked_result()
    assert blocked["isError"] is True and blocked["executionStarted"] is False
    assert blocked["content"][0]["text"].endswith("or continue with a different tool or different arguments.")
    recovery = guard.admit_batch([ToolCall("list", {"dir": "."}, call_id="t2")], session="s", run_id="r")
    assert recovery.intervention is None and recovery.verdicts[0].action == "allow"
    guard.after_tool_call("list", {"dir": "."}, session="s", run_id="r", call_id="t2", result=UNCHANGED)
    second = guard.admit_batch([ToolCall("read", {"path": "x"}, call_id="t3")], session="s", run_id="r")
    assert second.terminal and second.stop_message is not None
    result = second.verdicts[0].blocked_result()
    assert result["terminate"] is True
    assert "This run is stopping now." in result["content"][0]["text"]
    # a new run (a new prompt) has its own recovery budget
    _loop_until_critical(guard, "r2")
    fresh = guard.admit_batch([ToolCall("read", {"path": "x"}, call_id="n1")], session="s", run_id="r2")
    assert fresh.intervention is not None and not fresh.terminal


def test_s91_no_sibling_executes_when_recovery_fails() -> None:
    guard = LoopGuard(ON)
    _loop_until_critical(guard, "r")
    guard.admit_batch([ToolCall("read", {"path": "x"}, call_id="t1")], session="s", run_id="r")
    batch = guard.admit_batch([ToolCall("list", {"dir": "."}, call_id="safe"),
                               ToolCall("read", {"path": "x"}, call_id="loop")],
                              session="s", run_id="r")
    assert batch.terminal
    assert [v.action for v in batch.verdicts] == ["block", "block"]
    assert "another call in the batch repeated a critical tool loop" in batch.verdicts[0].message


def test_batch_siblings_projected_as_vetoes() -> None:
    guard = LoopGuard(ON)
    for i in range(18):
        _run_tool(guard, "read", {"path": "x"}, UNCHANGED, i)
    batch = guard.admit_batch([ToolCall("read", {"path": "x"}, call_id=f"b{i}") for i in range(3)],
                              session="s", run_id="r")
    assert batch.intervention is not None and batch.intervention.tool_call_id == "b2"
    assert batch.intervention.count == 20


# -- dampening and notes --------------------------------------------------------------------------


def test_warning_once_per_bucket_of_warning_threshold() -> None:
    events: list[LoopEvent] = []
    guard = LoopGuard(LoopDetectionConfig(enabled=True, warning_threshold=3, critical_threshold=50,
                                          global_circuit_breaker_threshold=60), sinks=[events.append])
    actions = [_run_tool(guard, "read", {"p": 1}, {"t": i}, i).action for i in range(10)]
    # counts 3..5 share bucket 1, 6..8 bucket 2, 9 bucket 3: a warning below 10 is never lost
    assert [i for i, a in enumerate(actions) if a == "warn"] == [3, 6, 9]
    assert [e.count for e in events] == [3, 6, 9]


def test_annotate_shapes() -> None:
    guard = LoopGuard(ON)
    for i in range(10):
        _run_tool(guard, "read", {"p": 1}, UNCHANGED, i)
    v = guard.before_tool_call("read", {"p": 1}, session="s", run_id="r", call_id="x")
    assert v.action == "warn" and v.note == warning_note(10)
    assert v.annotate("text") == f"text\n\n{warning_note(10)}"
    assert v.annotate([{"type": "text", "text": "a"}])[-1]["text"] == warning_note(10)
    assert v.annotate(None) == warning_note(10)
    obj = object()
    assert v.annotate(obj) is obj


def test_runs_are_isolated_in_one_session() -> None:
    guard = LoopGuard(ON)
    for i in range(10):
        _run_tool(guard, "read", {"p": 1}, UNCHANGED, i, run="heartbeat-1")
    assert guard.before_tool_call("read", {"p": 1}, session="s", run_id="heartbeat-2").action == "allow"


def test_sessions_are_isolated() -> None:
    guard = LoopGuard(ON)
    for i in range(20):
        _run_tool(guard, "read", {"p": 1}, UNCHANGED, i, session="a")
    assert guard.before_tool_call("read", {"p": 1}, session="b", run_id="r").action == "allow"
    assert guard.before_tool_call("read", {"p": 1}, session="a", run_id="r").action == "block"


def test_failing_sink_never_reaches_agent() -> None:
    def broken(event: LoopEvent) -> None:
        raise RuntimeError("sink down")

    guard = LoopGuard(ON, sinks=[broken])
    for i in range(12):
        _run_tool(guard, "read", {"p": 1}, UNCHANGED, i)
    assert guard.stats.warnings == 1


def test_retried_hook_does_not_count_twice() -> None:
    guard = LoopGuard(ON)
    for i in range(10):
        # Every hook delivered twice. (Not the pair before, after, before, after: once its
        # outcome is recorded a call id is free again, as hosts that number calls per turn
        # reuse it; see tests/guard/test_guard_hostile_hosts.py.)
        for _ in range(2):
            guard.before_tool_call("read", {"p": 1}, session="s", run_id="r", call_id=f"c{i}")
        for _ in range(2):
            guard.after_tool_call("read", {"p": 1}, session="s", run_id="r", call_id=f"c{i}",
                                  result=UNCHANGED)
    assert len(guard.history("s")) == 10


@pytest.mark.parametrize("enabled", [None, False])
def test_s74_changed_writes_with_detection_off_raise_nothing(enabled: bool | None) -> None:
    events: list[LoopEvent] = []
    guard = LoopGuard(LoopDetectionConfig(enabled=enabled), sinks=[events.append])
    for i in range(11):
        args = {"path": "/tmp/notes.md", "content": f"version {i}"}
        verdict = guard.before_tool_call("write", args, session="s", run_id="r", call_id=f"w{i}")
        after = guard.after_tool_call("write", args, session="s", run_id="r", call_id=f"w{i}",
                                      result={"content": [{"type": "text", "text": "wrote"}],
                                              "details": {"changed": True, "diff": f"+{i}"}})
        assert verdict.action == after.action == "allow"
        assert verdict.detection is None
    assert events == []
