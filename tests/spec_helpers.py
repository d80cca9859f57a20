"""The spec's §i notation as helpers: call / ok / fail / veto / detect on one SessionState."""

from __future__ import annotations

from typing import Any

from loopwarden import LoopDetectionConfig, LoopDetector, SessionState
from loopwarden.engine.detectors import Detection

ENABLED = LoopDetectionConfig(enabled=True)
R_SAME: dict[str, Any] = {"content": [{"type": "text", "text": "same output"}], "details": {"ok": True}}
POLL_ARGS: dict[str, Any] = {"action": "poll", "sessionId": "sess-1"}
POLL_RESULT: dict[str, Any] = {
    "content": [{"type": "text", "text": "(no new output)\n\nProcess still running."}],
    "details": {"status": "running", "aggregated": "steady"},
}
VETO_RESULT: dict[str, Any] = {
    "content": [{"type": "text", "text": "blocked"}],
    "details": {"status": "blocked", "deniedReason": "tool-loop"},
}


def text_result(text: str, **details: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "details": details}


class Spec:
    """One session under one detector, driven in the spec's notation."""

    def __init__(self, config: LoopDetectionConfig | None = None) -> None:
        self.detector = LoopDetector(config or ENABLED)
        self.state = SessionState()
        self._ids = 0

    def _next_id(self) -> str:
        self._ids += 1
        return f"call-{self._ids}"

    def call(self, tool: str, args: Any, call_id: str | None = None, run: str | None = None) -> Any:
        return self.detector.record_call(self.state, tool, args, call_id=call_id, run_id=run)

    def ok(self, tool: str, args: Any, result: Any, run: str | None = None) -> Any:
        cid = self._next_id()
        self.detector.record_call(self.state, tool, args, call_id=cid, run_id=run)
        return self.detector.record_outcome(self.state, tool, args, result=result, call_id=cid,
                                            run_id=run)

    def fail(self, tool: str, args: Any, error: Any, run: str | None = None) -> Any:
        cid = self._next_id()
        self.detector.record_call(self.state, tool, args, call_id=cid, run_id=run)
        return self.detector.record_outcome(self.state, tool, args, error=error, call_id=cid,
                                            run_id=run)

    def veto(self, tool: str, args: Any, run: str | None = None) -> Any:
        return self.detector.record_outcome(self.state, tool, args, result=VETO_RESULT, run_id=run)

    def detect(self, tool: str, args: Any, run: str | None = None) -> Detection | None:
        return self.detector.detect(self.state, tool, args, run_id=run)
