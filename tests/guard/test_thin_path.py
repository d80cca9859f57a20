"""The path a call takes through the guard stays thin: an allowed ``before_tool_call`` runs
few loopwarden functions in few files, and a warned call computes its warning key once."""

from __future__ import annotations

import logging
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import loopwarden
from loopwarden import LoopGuard
from loopwarden.config import LoopDetectionConfig

PACKAGE = str(Path(loopwarden.__file__).parent)


class _Calls:
    """Every loopwarden function entered while the profile is on: (file, name) in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(PACKAGE):
            self.calls.append((frame.f_code.co_filename, frame.f_code.co_qualname))

    def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        sys.setprofile(self)
        try:
            return fn(*args, **kwargs)
        finally:
            sys.setprofile(None)


def _warm_guard() -> LoopGuard:
    guard = LoopGuard(LoopDetectionConfig(enabled=True))
    for n in range(3):  # some history, caches warm: the steady state of a session
        guard.before_tool_call("read_file", {"path": f"f{n}"}, session="s", call_id=f"c{n}")
        guard.after_tool_call("read_file", {"path": f"f{n}"}, session="s", call_id=f"c{n}",
                              result=f"text {n}")
    return guard


def _allowed_call() -> list[tuple[str, str]]:
    guard = _warm_guard()
    calls = _Calls()
    verdict = calls.run(guard.before_tool_call, "read_file", {"path": "new"}, session="s",
                        call_id="next")
    assert verdict.action == "allow"
    return calls.calls


def test_an_allowed_before_tool_call_gets_no_longer() -> None:
    """The ratchet: today's path (19 calls in 8 files: no detector is woken, so no pre-check is
    asked, and the tool's profile and name verbs are read once per tool name) may only get
    shorter."""
    calls = _allowed_call()
    assert len(calls) <= 19, calls
    assert len({f for f, _ in calls}) <= 8, sorted({f for f, _ in calls})


def test_an_allowed_before_tool_call_touches_at_most_8_files_and_20_calls() -> None:
    calls = _allowed_call()
    assert len(calls) <= 20, calls
    assert len({f for f, _ in calls}) <= 8, sorted({f for f, _ in calls})


def test_a_warned_call_computes_its_warning_key_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="loopwarden")  # the detector's log line is due
    guard = LoopGuard(LoopDetectionConfig(enabled=True))
    for n in range(10):
        guard.before_tool_call("poll", {"id": 1}, session="s", call_id=f"c{n}")
        guard.after_tool_call("poll", {"id": 1}, session="s", call_id=f"c{n}", result="same")
    calls = _Calls()
    verdict = calls.run(guard.before_tool_call, "poll", {"id": 1}, session="s", call_id="c10")
    assert verdict.action == "warn"
    names = Counter(name for _, name in calls.calls)
    assert names["warning_key"] == 1, names
    # The detector's line and the caller's line, each once.
    assert [r.getMessage() for r in caplog.records if r.name == "loopwarden.detection"] == [
        "Loop warning: poll called 10 times with identical arguments"]


def test_the_engine_never_logs(caplog: pytest.LogCaptureFixture) -> None:
    from loopwarden.engine import LoopDetector
    from loopwarden.engine.history import SessionState

    caplog.set_level(logging.DEBUG)
    detector = LoopDetector(LoopDetectionConfig(enabled=True))
    state = SessionState()
    found = None
    for _ in range(25):
        call = detector.prepare("poll", {"id": 1})
        found = detector.detect(state, call) or found
        detector.record(state, call)
        detector.record_outcome(state, call, result="same")
    assert found is not None and found.level == "critical"
    assert caplog.records == []


def test_the_guard_engine_and_base_floors_have_at_most_5_call_types() -> None:
    """A call is described by five classes: the host's (``ToolCall``), its fingerprint
    (``Prospect``), the engine's prepared call (``PreparedCall``), the history's record
    (``CallRecord``) and the guard's (``Call``: ids, fingerprint, outcome). A transaction *has*
    a call; it is none."""
    import ast

    found = set()
    for floor in ("base", "engine", "guard"):
        for path in (Path(PACKAGE) / floor).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.ClassDef) and "Error" not in node.name
                        and ("Call" in node.name or node.name in ("Prospect", "Named"))):
                    found.add(node.name)
    assert found == {"ToolCall", "Prospect", "PreparedCall", "CallRecord", "Call"}, found


def test_a_transaction_has_a_call_and_holds_no_rules() -> None:
    from loopwarden.engine import PreparedCall
    from loopwarden.guard.policy import Call, LoopPolicy
    from loopwarden.guard.transactions import Admit, Observe, Settle

    for kind in (Admit, Settle, Observe):
        assert "call" in kind.__slots__
        assert not issubclass(kind, (Call, PreparedCall, LoopPolicy))
    assert not issubclass(Call, PreparedCall)
    # The transactions hand their call to the policy: they detect, record, veto and stop
    # nothing themselves.
    source = (Path(PACKAGE) / "guard" / "transactions.py").read_text(encoding="utf-8")
    for rule in ("detect_prospect", ".detect(", "record_prospect", "mark_recovery", "stop_run",
                 "should_warn"):
        assert rule not in source, rule
