"""The guard package's one core: every async twin runs the same transaction as its sync hook.

The drift the split removed: ``aadmit_batch`` skipped the ``LOOPWARDEN_DISABLED`` kill switch
that ``admit_batch`` honours, so an async host with loop detection turned off still had its
turns recorded and blocked.
"""

from __future__ import annotations

import asyncio

import pytest

from loopwarden import LoopDetectionConfig, LoopGuard, ToolCall


def _turns(guard: LoopGuard) -> list[str]:
    actions: list[str] = []
    for i in range(25):
        calls = [ToolCall("read", {"path": "a.py"}, f"c{i}")]
        admission = asyncio.run(guard.aadmit_batch(calls, session="s", run_id="r"))
        actions.extend(v.action for v in admission.verdicts)
    return actions


def test_aadmit_batch_honours_the_kill_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPWARDEN_DISABLED", "1")
    guard = LoopGuard(LoopDetectionConfig(enabled=True))
    assert _turns(guard) == ["allow"] * 25
    assert guard.history("s") == []  # nothing recorded, as admit_batch records nothing
    assert guard.stats.calls == 0


def test_aadmit_batch_still_guards_when_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOOPWARDEN_DISABLED", raising=False)
    guard = LoopGuard(LoopDetectionConfig(enabled=True))
    assert "block" in _turns(guard)
    assert guard.history("s")


def test_the_sync_and_async_hooks_answer_alike() -> None:
    def run(use_async: bool) -> list[tuple[str, str]]:
        guard = LoopGuard(LoopDetectionConfig(enabled=True))
        seen: list[tuple[str, str]] = []
        for i in range(25):
            kw = {"session": "s", "run_id": "r", "call_id": f"c{i}"}
            if use_async:
                before = asyncio.run(guard.abefore_tool_call("read", {"p": 1}, **kw))
                after = asyncio.run(guard.aafter_tool_call("read", {"p": 1}, result="x", **kw))
            else:
                before = guard.before_tool_call("read", {"p": 1}, **kw)
                after = guard.after_tool_call("read", {"p": 1}, result="x", **kw)
            seen.append((before.action, after.action))
        return seen

    assert run(True) == run(False)
    assert ("block", "allow") in run(False)
