"""Gemini CLI hooks, translated for the guard: one hook payload in, one hook output out.

Gemini CLI runs command hooks from ``settings.json`` (``hooksConfig.enabled`` and
``hooks.BeforeTool`` / ``AfterTool`` / ``PreCompress``), observed in Gemini CLI 0.61.0. Its
payloads differ from Claude Code's: the shell tool is ``run_shell_command``, MCP tools are
``mcp_<server>_<tool>``, there is **no call id** and no per-prompt id, and a tool's
``tool_response`` is ``{llmContent, returnDisplay}``.

Ids: session = ``session_id``; run = the session (Gemini sends no per-prompt id); no call id:
the guard pairs an outcome with the pending call of the same tool and arguments. A shell
command's ``llmContent`` ends with ``Exit Code: N`` when it failed (read here as the call's
error) and a ``Process Group PGID: N`` line that changes on every call (masked, or no two
results would ever be the same).

What reaches the model: a blocked call is denied (``decision: "deny"``; Gemini ignores Claude's
``permissionDecision``), which Gemini hands to the model as "Tool execution blocked: <reason>".
Gemini takes context from a hook only after a call (``AfterTool``'s ``additionalContext``,
wrapped in ``<hook_context>``), so the guard is asked for its warning there: whether the same
call, made next, would continue a loop (the post-outcome check). A warning found before a call
goes to the user only (``systemMessage``).

The terminal stop: the terminal call is denied and Gemini is stopped (``continue: false`` with
:data:`~loopwarden.guard.STOP_MESSAGE` as ``stopReason``): Gemini ends the run at once.
``exit_behavior="continue"`` only denies. ``"ask"`` ends the run as ``"end"`` does, with a
warning on stderr: Gemini CLI has an ask answer (``decision: "ask"``, the user confirms the
call in its prompt) but gives a hook nothing that tells an interactive session from ``gemini
-p``, where that answer waits for a confirmation no one can give and the run hangs (observed
in 0.61.0).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..base.lazy_re import lazy_pattern
from ..base.types import MISSING
from ..guard import (
    STOP_MESSAGE,
    TERMINAL_TEXT,
    CompactionLoopPersistedError,
    EndOfRun,
    ExitBehavior,
    LoopGuard,
    Verdict,
)
from .claude_code_hook import handled_event, required_str, without_proxy_notes

__all__ = [
    "HANDLED_EVENTS",
    "GeminiCliHook",
    "outcome_of",
]

HANDLED_EVENTS = ("BeforeTool", "AfterTool", "PreCompress")
"""The Gemini CLI hook events loopwarden acts on; every other event gets an empty answer."""

Output = dict[str, Any]

# (Compiled on first use: loopwarden.base.lazy_re; every Claude Code hook imports this module.)
_PGID_LINE = lazy_pattern(r"^Process Group PGID: .*$", re.MULTILINE)
_EXIT_CODE = lazy_pattern(r"^Exit Code: (-?\d+)\s*$", re.MULTILINE)


@dataclass(slots=True)
class GeminiCliHook:
    """Answers Gemini CLI hook payloads with a :class:`~loopwarden.LoopGuard` (which it sets to
    warn after a call, the only place Gemini takes a hook's context).

    ``agent_id`` is the OpenClaw agent whose config applies; ``exit_behavior`` is what the
    terminal stop does (``end``/``error``/``ask``: end the run; ``continue``: only deny)."""

    guard: LoopGuard
    agent_id: str | None = None
    exit_behavior: ExitBehavior = "end"
    end_of_run: EndOfRun = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.end_of_run = EndOfRun(self.exit_behavior)
        self.guard.post_outcome = self.guard.rolling

    def handle(self, payload: Mapping[str, Any]) -> Output:
        """The hook output for ``payload`` (``{}`` for an event loopwarden does not handle);
        raises :class:`~loopwarden.integrations.claude_code_hook.HookPayloadError` for a
        payload it cannot read."""
        event = handled_event(payload, HANDLED_EVENTS)
        if event is None:
            return {}
        session = required_str(payload, "session_id")
        if event == "PreCompress":
            self.guard.compaction_retried(session=session)
            return {}
        call: dict[str, Any] = {"session": session, "tool_name": required_str(payload, "tool_name"),
                                "args": payload.get("tool_input") or {},
                                "agent_id": self.agent_id}
        if event == "BeforeTool":
            verdict = self.guard.before_tool_call(**call)
            # "ask" cannot ask here (see the module docstring): it ends the run, and says so.
            action = self.end_of_run.action(verdict.terminate, can_ask=False)
            return before_tool_output(verdict, end_run=action != "recover")
        result, error = outcome_of(payload.get("tool_response"))
        try:
            verdict = self.guard.after_tool_call(**call, result=result, error=error)
        except CompactionLoopPersistedError as exc:
            message = str(exc)
            return {"continue": False, "stopReason": message,
                    "systemMessage": f"loopwarden: {message}"}
        if verdict.note is None:
            return {}
        return {"hookSpecificOutput": {"hookEventName": "AfterTool",
                                       "additionalContext": verdict.note}}


def before_tool_output(verdict: Verdict, *, end_run: bool = True) -> Output:
    """Deny a blocked call with the loop message, ending the run at the terminal stop when
    ``end_run``; tell the user about a warning; else say nothing."""
    if verdict.action == "warn":
        return {"systemMessage": f"loopwarden: {_headline(verdict)} in {verdict.tool_name}"}
    if verdict.action != "block":
        return {}
    reason = verdict.message or "tool call blocked by loopwarden"
    ending = verdict.terminate and end_run
    if ending and verdict.block_text is None:
        reason = f"{reason}\n\n{TERMINAL_TEXT}"
    output: Output = {"decision": "deny", "reason": reason,
                      "systemMessage": f"loopwarden blocked {verdict.tool_name}: "
                                       f"{_headline(verdict)}"}
    if ending:
        output["continue"] = False
        output["stopReason"] = STOP_MESSAGE
    return output


def outcome_of(response: object) -> tuple[Any, Any]:
    """``(result, error)`` for the guard from an AfterTool ``tool_response``: the model's text
    (``llmContent``) with the PGID line masked; an error when the response carries one or the
    text ends in a non-zero ``Exit Code``. An MCP result's parts lose the warning notes of
    loopwarden's MCP proxy (:func:`~.claude_code_hook.without_proxy_notes`)."""
    response = without_proxy_notes(response)
    if not isinstance(response, Mapping):
        return response, MISSING
    content = response.get("llmContent", response)
    if isinstance(content, str):
        content = _PGID_LINE().sub("Process Group PGID: <pgid>", content)
    error = response.get("error")
    if error:
        return MISSING, error
    if isinstance(content, str):
        code = _EXIT_CODE().search(content)
        if code is not None and int(code.group(1)) != 0:
            return MISSING, content
    return content, MISSING


def _headline(verdict: Verdict) -> str:
    d = verdict.detection
    if d is None:
        return verdict.message or "tool loop"
    return f"tool loop ({d.detector}, {d.count} calls)"

