"""Codex CLI hooks, translated for the guard: one hook payload in, one hook output out.

Codex CLI runs command hooks on Claude Code's layout (``hooks.json`` or ``[[hooks.*]]`` tables
in ``config.toml``) with Claude-shaped payloads, observed in Codex 0.171.0: the shell tool is
``tool_name: "Bash"`` with ``tool_input.command``, MCP tools are ``mcp__<server>__<tool>``,
every call has a ``tool_use_id`` and every turn a ``turn_id``.

Ids: session = ``session_id`` (Codex's thread), run = ``turn_id`` (one user prompt's turn),
call id = ``tool_use_id``. The Bash tool's ``tool_response`` is the command's output text
without its exit code, so a failure reaches the guard only as the text it printed.
``apply_patch``'s is a text with an ``Exit code``, the patch's output and a ``Wall time: N
seconds`` line that changes with the machine's load: masked, or no two results of the same
patch would be identical. An MCP tool's ``tool_response`` is the MCP result object; when the
server sits behind ``loopwarden mcp-proxy``, the proxy's own warning note rides in its
``content`` (from the warned call on): dropped, or the note alone would make that outcome new
and restart the streak the hook counts, so the hook would never block a loop the proxy warned.

What reaches the model: a blocked call is denied (``permissionDecision: "deny"``), which Codex
hands to the model as "Command blocked by PreToolUse hook: <reason>"; a warning goes out as
``additionalContext``, which Codex adds to the conversation as a developer message.

The terminal stop: Codex cannot end a run from a tool hook — a PreToolUse answer carrying
``continue: false`` is rejected whole and the call runs. So the terminal call is denied with
the terminal text, and the guard keeps the run stopped
(:attr:`~loopwarden.guard.LoopGuard.deny_after_stop`): every later call of the turn is denied
with :data:`~loopwarden.guard.STOP_MESSAGE`, none runs, and the model is left to answer.

``exit_behavior="ask"`` cannot ask here: Codex 0.171.0 has no ask answer for a hook (it logs
"PreToolUse hook returned unsupported permissionDecision:ask" and runs the call), so the
terminal stop is the one above, with a warning on stderr saying the run was not asked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..base.lazy_re import lazy_pattern
from ..guard import (
    TERMINAL_TEXT,
    CompactionLoopPersistedError,
    EndOfRun,
    ExitBehavior,
    LoopGuard,
    Verdict,
)
from .claude_code_hook import (
    context_output,
    handled_event,
    optional_str,
    required_str,
    without_proxy_notes,
)

__all__ = [
    "HANDLED_EVENTS",
    "CodexHook",
]

HANDLED_EVENTS = ("PreToolUse", "PostToolUse")
"""The Codex hook events loopwarden acts on; every other event gets an empty answer."""

Output = dict[str, Any]

# (Compiled on first use: loopwarden.base.lazy_re; every Claude Code hook imports this module.)
_WALL_TIME_LINE = lazy_pattern(r"^Wall time: [0-9.]+ seconds$", re.MULTILINE)


@dataclass(slots=True)
class CodexHook:
    """Answers Codex CLI hook payloads with a :class:`~loopwarden.LoopGuard` (which it sets to
    deny every call of a run after its terminal stop: Codex cannot end the run).

    ``agent_id`` is the OpenClaw agent whose config applies; it is attached to the events.
    ``exit_behavior`` changes nothing but the log: Codex's terminal stop is always the same
    (``"ask"`` says on stderr that no one was asked)."""

    guard: LoopGuard
    agent_id: str | None = None
    exit_behavior: ExitBehavior = "end"
    end_of_run: EndOfRun = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.guard.deny_after_stop = True
        self.end_of_run = EndOfRun(self.exit_behavior)

    def handle(self, payload: Mapping[str, Any]) -> Output:
        """The hook output for ``payload`` (``{}`` for an event loopwarden does not handle);
        raises :class:`~loopwarden.integrations.claude_code_hook.HookPayloadError` for a
        payload it cannot read."""
        event = handled_event(payload, HANDLED_EVENTS)
        if event is None:
            return {}
        call: dict[str, Any] = {
            "session": required_str(payload, "session_id"),
            "run_id": optional_str(payload.get("turn_id")),
            "tool_name": required_str(payload, "tool_name"),
            "args": payload.get("tool_input") or {},
            "call_id": optional_str(payload.get("tool_use_id")),
            "agent_id": self.agent_id,
        }
        if event == "PreToolUse":
            verdict = self.guard.before_tool_call(**call)
            if verdict.terminate:
                self.end_of_run.action(True, can_ask=False)  # "ask": logs that no one is asked
            return pre_tool_use_output(verdict)
        try:
            verdict = self.guard.after_tool_call(**call,
                                                 result=_masked(payload.get("tool_response")))
        except CompactionLoopPersistedError as exc:
            # Nothing a tool hook sends ends a Codex run: tell the model and the user.
            message = str(exc)
            return {**context_output(event, message), "systemMessage": f"loopwarden: {message}"}
        return context_output(event, verdict.note)


def pre_tool_use_output(verdict: Verdict) -> Output:
    """Deny a blocked call with the loop message (the terminal one with the terminal text);
    give a warning as context; else say nothing. Never ``continue: false``, which Codex
    rejects together with the deny."""
    if verdict.action != "block":
        return context_output("PreToolUse", verdict.note)
    reason = verdict.message or "tool call blocked by loopwarden"
    if verdict.terminate and verdict.block_text is None:
        reason = f"{reason}\n\n{TERMINAL_TEXT}"
    detection = verdict.detection
    headline = (f"tool loop ({detection.detector}, {detection.count} calls)"
                if detection is not None else reason)
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        },
        "systemMessage": f"loopwarden blocked {verdict.tool_name}: {headline}",
    }


def _masked(response: object) -> object:
    """A tool's response as the tool gave it: its wall time masked (``apply_patch``'s text
    carries one), the MCP proxy's warning notes taken out of an MCP result's ``content``."""
    if isinstance(response, str):
        return _WALL_TIME_LINE().sub("Wall time: <time>", response)
    return without_proxy_notes(response)
