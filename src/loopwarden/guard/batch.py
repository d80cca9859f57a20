"""Batch admission: one assistant turn's calls admitted atomically (spec §f.1, V3).

Each call is judged as if its earlier siblings had already been made and blocked (OpenClaw's
projection); the first critical blocks the whole turn and leaves the model one recovery turn
per run, a second critical in the run is terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..base.text import optional_id, text_id
from ..base.types import ToolCall
from ..engine import PreparedCall
from ..engine.detectors import Detection
from ..engine.history import SessionState, normalize_run_id
from .core import (
    VETO,
    WarningSlot,
    as_vetoes,
    detect,
    in_flight,
    internal_error,
    loop_event,
    should_warn,
    stop_run,
    veto,
)
from .events import LoopEvent
from .transactions import Answered, CallContext, Step, Transaction
from .verdicts import (
    RECOVERY_SIBLING_TEXT,
    RECOVERY_TEXT,
    TERMINAL_SIBLING_TEXT,
    TERMINAL_TEXT,
    BatchAdmission,
    Intervention,
    Verdict,
)

if TYPE_CHECKING:
    from .core import GuardCore


class AdmitBatch(Transaction[BatchAdmission]):
    """``admit_batch``: the turn's calls with their ids normalised and their fingerprints,
    computed outside the store."""

    __slots__ = ("calls", "core", "counts_calls", "ctx", "prepared", "session")

    def __init__(self, core: GuardCore, calls: Sequence[ToolCall], session: Any, run_id: Any,
                 agent_id: Any) -> None:
        self.core = core
        self.calls = [_normal_call(c) for c in calls]
        run = normalize_run_id(run_id if run_id is not None else _common_run(self.calls))
        prepare = core.detector.prepare
        self.prepared = [prepare(c.tool_name, c.args, run_id=run) for c in self.calls]
        self.ctx = CallContext(text_id(session), run, None, optional_id(agent_id))
        self.session = self.ctx.session
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
            verdict = internal_error(core, "batch", exc)
            try:
                n = len(calls)
            except Exception:
                n = 0
            return Answered(BatchAdmission(tuple(verdict for _ in range(n))))

    def apply(self, state: SessionState) -> Step[BatchAdmission]:
        """The turn's verdicts, and the events of its warnings or its block."""
        return Step(*admit(self.core, state, self.calls, self.prepared, self.ctx))

    def fallback(self) -> BatchAdmission:
        """The failure policy's verdict for every call."""
        policy = self.core.store_health.policy
        return BatchAdmission(tuple(policy.admission(p.prospect.tool_name, c.call_id)
                                    for p, c in zip(self.prepared, self.calls, strict=True)))



def admit(
    core: GuardCore, state: SessionState, calls: Sequence[ToolCall],
    prepared: Sequence[PreparedCall], ctx: CallContext,
) -> tuple[BatchAdmission, list[LoopEvent]]:
    """Judge the turn: block it all at its first critical, else admit every call."""
    detector = core.detector
    detections: list[Detection | None] = []
    slots: list[WarningSlot | None] = []
    if core.rolling:
        # Earlier turns' calls still in flight count like this batch's earlier siblings.
        flights = in_flight(core, state, ctx.run_id, {p.prospect.args_hash for p in prepared})
        with as_vetoes(flights):
            projected = state.copy() if len(calls) > 1 else state
            for i, p in enumerate(prepared):
                if i:
                    detector.record_outcome(projected, prepared[i - 1], outcome=VETO)
                detection, slot = detect(core, projected, p)
                detections.append(detection)
                slots.append(slot)
    else:
        detections = [None] * len(calls)
        slots = [None] * len(calls)
    trigger = next((i for i, d in enumerate(detections) if d and d.level == "critical"), None)
    if trigger is None:
        return _admit_all(core, state, calls, prepared, detections, slots, ctx)
    detection = detections[trigger]
    assert detection is not None
    call = prepared[trigger].prospect
    terminal = not state.mark_recovery(ctx.run_id)
    if terminal and core.deny_after_stop:
        stop_run(state, ctx.run_id)
    for c, p in zip(calls, prepared, strict=True):
        if p.prospect.args_hash == call.args_hash:
            veto(core, state, p, c.call_id)
    intervention = Intervention(calls[trigger].call_id, call.tool_name, call.args_hash,
                                detection.detector, detection.count, detection.message)
    own = TERMINAL_TEXT if terminal else RECOVERY_TEXT
    sibling = TERMINAL_SIBLING_TEXT if terminal else RECOVERY_SIBLING_TEXT
    verdicts = tuple(
        Verdict("block", detection if i == trigger else None, p.prospect.tool_name, c.call_id,
                f"{detection.message}\n\n{own}" if i == trigger else sibling,
                intervention, terminal)
        for i, (c, p) in enumerate(zip(calls, prepared, strict=True))
    )
    tctx = ctx.for_call(calls[trigger].call_id)
    event = loop_event(tctx, call.tool_name, detection, "block", state, terminal=terminal)
    return BatchAdmission(verdicts, intervention, terminal), [event]


def _admit_all(
    core: GuardCore, state: SessionState, calls: Sequence[ToolCall],
    prepared: Sequence[PreparedCall], detections: Sequence[Detection | None],
    slots: Sequence[WarningSlot | None], ctx: CallContext,
) -> tuple[BatchAdmission, list[LoopEvent]]:
    verdicts: list[Verdict] = []
    events: list[LoopEvent] = []
    for c, p, d, slot in zip(calls, prepared, detections, slots, strict=True):
        tool = p.prospect.tool_name
        verdict = Verdict("allow", d, tool, c.call_id)
        if d is not None and should_warn(core, state, d, tool, ctx.run_id, slot):
            verdict = replace(verdict, action="warn")
            events.append(loop_event(ctx.for_call(c.call_id), tool, d, "warn", state))
        verdicts.append(verdict)
    if core.rolling:
        for c, p in zip(calls, prepared, strict=True):
            core.detector.record(state, p, call_id=c.call_id)
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
