"""Batch admission: one assistant turn's calls admitted atomically (spec §f.1, V3).

Each call is judged as if its earlier siblings had already been made and blocked (OpenClaw's
projection); the first critical blocks the whole turn and leaves the model one recovery turn
per run, a second critical in the run is terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..base.text import optional_id, text_id
from ..base.types import ToolCall
from ..engine.detectors import Detection
from ..engine.history import SessionState, normalize_run_id
from .core import GuardCore, internal_error
from .events import LoopEvent
from .policy import VETO, Call, Step, WarningSlot, as_vetoes
from .transactions import Answered, Transaction
from .verdicts import (
    RECOVERY_SIBLING_TEXT,
    RECOVERY_TEXT,
    TERMINAL_SIBLING_TEXT,
    TERMINAL_TEXT,
    BatchAdmission,
    Intervention,
    Verdict,
)


class AdmitBatch(Transaction[BatchAdmission]):
    """``admit_batch``: the turn's calls with their ids normalised and their fingerprints,
    computed outside the store."""

    __slots__ = ("calls", "core", "counts_calls", "session")

    def __init__(self, core: GuardCore, calls: Sequence[ToolCall], session: Any, run_id: Any,
                 agent_id: Any) -> None:
        self.core = core
        normal = [_normal_call(c) for c in calls]
        run = normalize_run_id(run_id if run_id is not None else _common_run(normal))
        self.session = text_id(session)
        agent = optional_id(agent_id)
        self.calls = [Call(core.detector, c.tool_name, c.args, self.session, run, c.call_id,
                           agent) for c in normal]
        self.counts_calls = len(self.calls)

    @classmethod
    def of(cls, core: GuardCore, calls: Sequence[ToolCall], session: Any, run_id: Any,
           agent_id: Any) -> Transaction[BatchAdmission]:
        """The transaction, or its answer without the store: every call allowed while the
        kill switch is on, or for input the guard cannot read (logged and counted)."""
        if core.disabled:
            return Answered(BatchAdmission(tuple(Verdict("allow", None, c.tool_name, c.call_id)
                                                 for c in calls)))
        try:
            return cls(core, calls, session, run_id, agent_id)
        except Exception as exc:
            verdict = internal_error(core.stats, "batch", exc)
            try:
                n = len(calls)
            except Exception:
                n = 0
            return Answered(BatchAdmission(tuple(verdict for _ in range(n))))

    def apply(self, state: SessionState) -> Step[BatchAdmission]:
        """The turn's verdicts, and the events of its warnings or its block."""
        return Step(*admit(self.core, state, self.calls))

    def fallback(self) -> BatchAdmission:
        """The failure policy's verdict for every call."""
        policy = self.core.store_health.policy
        return BatchAdmission(tuple(policy.admission(c.prospect.tool_name, c.call_id)
                                    for c in self.calls))



def admit(core: GuardCore, state: SessionState, calls: Sequence[Call]
          ) -> tuple[BatchAdmission, list[LoopEvent]]:
    """Judge the turn: block it all at its first critical, else admit every call."""
    policy = core.policy
    detector = core.detector
    run = calls[0].run_id if calls else None
    detections: list[Detection | None] = []
    slots: list[WarningSlot | None] = []
    if core.rolling:
        # Earlier turns' calls still in flight count like this batch's earlier siblings.
        flights = policy.in_flight(state, run, {c.prospect.args_hash for c in calls})
        with as_vetoes(flights):
            projected = state.copy() if len(calls) > 1 else state
            for i, c in enumerate(calls):
                if i:
                    before = calls[i - 1]
                    detector.record_prospect_outcome(projected, before.prospect, run, VETO)
                detection, slot = policy.detect(projected, c)
                detections.append(detection)
                slots.append(slot)
    else:
        detections = [None] * len(calls)
        slots = [None] * len(calls)
    trigger = next((i for i, d in enumerate(detections) if d and d.level == "critical"), None)
    if trigger is None:
        return _admit_all(core, state, calls, detections, slots)
    detection = detections[trigger]
    assert detection is not None
    blocked = calls[trigger]
    call = blocked.prospect
    terminal = not state.mark_recovery(run)
    if terminal and core.deny_after_stop:
        policy.stop_run(state, run)
    for c in calls:
        if c.prospect.args_hash == call.args_hash:
            policy.veto(state, c)
    intervention = Intervention(blocked.call_id, call.tool_name, call.args_hash,
                                detection.detector, detection.count, detection.message)
    own = TERMINAL_TEXT if terminal else RECOVERY_TEXT
    sibling = TERMINAL_SIBLING_TEXT if terminal else RECOVERY_SIBLING_TEXT
    verdicts = tuple(
        Verdict("block", detection if i == trigger else None, c.prospect.tool_name, c.call_id,
                f"{detection.message}\n\n{own}" if i == trigger else sibling,
                intervention, terminal)
        for i, c in enumerate(calls)
    )
    event = policy.event(blocked, detection, "block", state, terminal=terminal)
    return BatchAdmission(verdicts, intervention, terminal), [event]


def _admit_all(
    core: GuardCore, state: SessionState, calls: Sequence[Call],
    detections: Sequence[Detection | None], slots: Sequence[WarningSlot | None],
) -> tuple[BatchAdmission, list[LoopEvent]]:
    policy = core.policy
    verdicts: list[Verdict] = []
    events: list[LoopEvent] = []
    for c, d, slot in zip(calls, detections, slots, strict=True):
        tool = c.prospect.tool_name
        verdict = Verdict("allow", d, tool, c.call_id)
        if d is not None and policy.should_warn(state, d, tool, c.run_id, slot):
            verdict = replace(verdict, action="warn")
            events.append(policy.event(c, d, "warn", state))
        verdicts.append(verdict)
    if core.rolling:
        for c in calls:
            core.detector.record_prospect(state, c.prospect, c.run_id, c.call_id)
    return BatchAdmission(tuple(verdicts)), events


def _normal_call(call: ToolCall) -> ToolCall:
    """``call`` with its tool name and ids as plain text (see _text), itself when they are."""
    tool, call_id, run_id = call.tool_name, call.call_id, call.run_id
    if (type(tool) is str and (call_id is None or type(call_id) is str)
            and (run_id is None or type(run_id) is str)):
        return call
    return ToolCall(text_id(tool), call.args, optional_id(call_id), optional_id(run_id),
                    call.result, call.error)


def _common_run(calls: Sequence[ToolCall]) -> str | None:
    return next((c.run_id for c in calls if c.run_id), None)
