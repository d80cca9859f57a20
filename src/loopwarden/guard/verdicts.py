"""The guard's answers: :class:`Verdict` for one call, :class:`BatchAdmission` for a turn, the
texts the model sees, and the small helpers doors use to hand them on (notes, terminal stops).

Pure values and text: nothing here touches a store, so every door can import it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from ..base.errors import LoopTerminatedError
from ..base.log import get_logger
from ..base.types import MISSING
from ..engine.detectors import Detection

log = get_logger("loopwarden")

Action = Literal["allow", "warn", "block"]
#: What a door does at the terminal stop (named like LangChain's ``ToolCallLimitMiddleware``):
#: ``"end"`` ends the run with :data:`STOP_MESSAGE`, ``"error"`` raises
#: :class:`LoopTerminatedError`, ``"continue"`` only blocks calls, ``"ask"`` asks a human
#: through the door's own channel (see ``asking.py``) and ends the run where no one can answer.
ExitBehavior = Literal["end", "error", "continue", "ask"]
EXIT_BEHAVIORS: tuple[ExitBehavior, ...] = ("end", "error", "continue", "ask")

RECOVERY_TEXT = (
    "Do not repeat this exact tool action. Reassess the task. You may answer the user, ask for "
    "clarification, or continue with a different tool or different arguments."
)
RECOVERY_SIBLING_TEXT = (
    "This tool was not executed because another call in the batch triggered critical tool-loop "
    "recovery. Reassess the task before choosing the next action."
)
TERMINAL_TEXT = (
    "Critical tool-loop recovery failed because another critical loop was detected. This run is "
    "stopping now."
)
TERMINAL_SIBLING_TEXT = (
    "This tool was not executed because another call in the batch repeated a critical tool loop. "
    "This run is stopping now."
)
STOP_MESSAGE = (
    "loopwarden stopped this run because tool-loop recovery encountered another critical loop. "
    "No blocked tool action was executed."
)


def warning_note(count: int) -> str:
    """The model-visible note OpenClaw appends to a warned tool result (spec §f.2)."""
    return (
        f"[System note: Tool-loop warning after {count} repeated calls. Change your approach or "
        "stop if you are not making progress.]"
    )


@dataclass(frozen=True, slots=True)
class Intervention:
    """The first critical of an admitted batch (OpenClaw's ``critical-tool-loop``)."""

    tool_call_id: str | None
    tool_name: str
    action_key: str
    detector: str
    count: int
    reason: str
    kind: str = "critical-tool-loop"

    def to_dict(self) -> dict[str, Any]:
        """The intervention as OpenClaw's camelCase JSON (in a blocked result's ``details``)."""
        return {"kind": self.kind, "toolCallId": self.tool_call_id, "toolName": self.tool_name,
                "actionKey": self.action_key, "detector": self.detector, "count": self.count,
                "reason": self.reason}


# Not frozen: two are built per guarded call, and a frozen dataclass costs twice as much to
# build (each field goes through object.__setattr__). Treat verdicts as values all the same.
@dataclass(slots=True)
class Verdict:
    """The guard's answer for one call: ``allow``, ``warn`` (run it, then annotate the result)
    or ``block`` (do not run it; hand :meth:`blocked_result` to the model instead)."""

    action: Action
    detection: Detection | None = None
    tool_name: str = ""
    call_id: str | None = None
    block_text: str | None = None
    intervention: Intervention | None = None
    terminate: bool = False

    @property
    def message(self) -> str | None:
        """The text the model sees for a block: the block text, else the detection's message."""
        if self.block_text is not None:
            return self.block_text
        return self.detection.message if self.detection else None

    @property
    def note(self) -> str | None:
        """The warning note for the model, for a ``warn`` verdict."""
        if self.action != "warn" or self.detection is None:
            return None
        return warning_note(self.detection.count)

    def blocked_result(self) -> dict[str, Any]:
        """An OpenClaw-shaped tool result for a blocked call."""
        text = self.message or ""
        if self.intervention is None:
            return {"content": [{"type": "text", "text": text}],
                    "details": {"status": "blocked", "deniedReason": "tool-loop", "reason": text}}
        result: dict[str, Any] = {
            "content": [{"type": "text", "text": text}],
            "isError": True,
            "executionStarted": False,
            "details": {"status": "blocked", "deniedReason": "tool-loop",
                        "intervention": self.intervention.to_dict()},
        }
        if self.terminate:
            result["terminate"] = True
        return result

    def annotate(self, result: Any) -> Any:
        """``result`` with the warning note appended, in the result's own shape (an
        OpenClaw/MCP content list, a list of blocks, or text); other values are returned
        unchanged — their door delivers :attr:`note` its own way."""
        note = self.note
        if note is None:
            return result
        return append_note(result, note)


def append_note(result: Any, note: str) -> Any:
    """``result`` with ``note`` added in its own shape (see :meth:`Verdict.annotate`); a value of
    another shape is returned unchanged."""
    block = {"type": "text", "text": note}
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        return {**result, "content": [*result["content"], block]}
    if isinstance(result, list):
        return [*result, block]
    if isinstance(result, str):
        return f"{result}\n\n{note}" if result else note
    if result is None or result is MISSING:
        return note
    return result


@dataclass(frozen=True, slots=True)
class BatchAdmission:
    """One assistant turn's calls, admitted atomically (spec §f.1, V3)."""

    verdicts: tuple[Verdict, ...]
    intervention: Intervention | None = None
    terminal: bool = False

    @property
    def stop_message(self) -> str | None:
        """:data:`STOP_MESSAGE` when the turn ends the run (:attr:`terminal`), else None."""
        return STOP_MESSAGE if self.terminal else None

    @property
    def warnings(self) -> list[dict[str, Any]]:
        """The turn's ``tool-loop-warning`` entries, one per warned call (spec §f.2, V3)."""
        return [{"kind": "tool-loop-warning", "toolCallId": v.call_id, "count": v.detection.count}
                for v in self.verdicts if v.action == "warn" and v.detection is not None]


def check_exit_behavior(value: object) -> ExitBehavior:
    """``value`` as an :data:`ExitBehavior`; a :class:`ConfigError` (a ``ValueError``) else."""
    if value not in EXIT_BEHAVIORS:
        from ..config import ConfigError  # (pydantic loads only when a value is wrong)

        raise ConfigError(f"must be one of {', '.join(map(repr, EXIT_BEHAVIORS))}",
                          path="exit_behavior", value=value)
    return value


def continuing(verdict: Verdict) -> Verdict:
    """A terminal block as ``exit_behavior="continue"`` hands it to the model: the run goes on,
    so the texts are the recovery ones and the result carries no ``terminate``."""
    if not verdict.terminate:
        return verdict
    if verdict.intervention is None:  # a one-call door's block: its text is the detection's
        return replace(verdict, terminate=False)
    # In a batch the trigger carries the detection, its siblings do not.
    text = (f"{verdict.detection.message}\n\n{RECOVERY_TEXT}" if verdict.detection is not None
            else RECOVERY_SIBLING_TEXT)
    return replace(verdict, block_text=text, terminate=False)


#: What a door does with a terminal verdict: ``"recover"`` hands the model the recovery texts
#: and the run goes on, ``"end"`` ends the run with :data:`STOP_MESSAGE`, ``"raise"`` raises
#: :func:`terminated_error`'s :class:`LoopTerminatedError`, ``"ask"`` puts the guard's
#: question (``LoopGuard.ask``) before a human and acts on the answer (``LoopGuard.answer``).
TerminalAction = Literal["recover", "end", "raise", "ask"]


class EndOfRun:
    """The end-of-run policy every door asks instead of re-implementing it: for a verdict,
    what the door does (:meth:`action`) and what the model is told (:meth:`answer`). An
    ``exit_behavior`` is one branch of :meth:`action`; the doors only translate the action
    into their host's means (a jump to the end, a final output, an exception)."""

    __slots__ = ("behavior", "fallback_logged", "max_grants")

    def __init__(self, exit_behavior: object, *, max_grants: int = 2) -> None:
        self.behavior: ExitBehavior = check_exit_behavior(exit_behavior)
        if type(max_grants) is not int or max_grants < 0:
            from ..config import ConfigError

            raise ConfigError("must be a whole number of 0 or more", path="max_grants",
                              value=max_grants)
        #: ``"ask"``: how many "continue" answers one run may get; the next stop ends it.
        self.max_grants = max_grants
        self.fallback_logged = False

    def action(self, terminal: bool, *, can_ask: bool = True) -> TerminalAction | None:
        """None unless the verdict (or batch) is ``terminal``; else what the door does.
        ``can_ask``: whether the door has a human to ask now (a checkpointer to resume from, a
        client that takes elicitations, an interactive host); without one ``"ask"`` ends the
        run, and says so in the log once."""
        if not terminal:
            return None
        behavior = self.behavior
        if behavior == "end":
            return "end"
        if behavior == "continue":
            return "recover"
        if behavior == "error":
            return "raise"
        if can_ask:
            return "ask"
        if not self.fallback_logged:
            self.fallback_logged = True
            log.warning('loopwarden: exit_behavior="ask" but no human can be asked here; '
                        'ending the run at its terminal stop instead, as "end" does')
        return "end"

    @property
    def ends_runs(self) -> bool:
        """Whether a terminal verdict may end a run (the door installs its stop)."""
        return self.behavior in ("end", "ask")

    def answer(self, verdict: Verdict) -> Verdict:
        """``verdict`` as the model gets it: with the recovery texts when the run goes on."""
        return continuing(verdict) if self.action(verdict.terminate) == "recover" else verdict


def terminated_error(
    verdict: Verdict, *, session: str | None = None, run_id: str | None = None,
) -> LoopTerminatedError:
    """The :class:`LoopTerminatedError` for a terminal ``verdict`` (``terminate=True``)."""
    return LoopTerminatedError(STOP_MESSAGE, verdict.detection, tool_name=verdict.tool_name,
                               session=session, run_id=run_id, result=verdict.blocked_result())


@dataclass(slots=True)
class GuardStats:
    """A guard's counters: calls checked, outcomes recorded, warnings, blocks and aborts, and the
    store failures and internal errors it absorbed."""

    calls: int = 0
    outcomes: int = 0
    warnings: int = 0
    blocks: int = 0
    aborts: int = 0
    store_failures: int = 0
    internal_errors: int = 0


