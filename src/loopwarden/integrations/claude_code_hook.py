"""Claude Code hooks, translated for the guard: one hook payload in, one hook output out.

Claude Code gives every hook the same JSON payload, whether the hook is a ``settings.json``
command (``loopwarden claude-hook``) or a Claude Agent SDK callback, and reads the same output
fields back. :class:`ClaudeCodeHook` is that translation, shared by both doors so they cannot
drift apart. It needs neither the SDK nor any other optional package.

Ids: session = ``session_id``; run = ``prompt_id`` (the user prompt being processed — Claude
Code's closest thing to a run), suffixed with the sub-agent's ``agent_id`` inside a sub-agent,
because parallel sub-agents' hooks interleave in one session and must not look like one
ping-pong; call id = ``tool_use_id``. Tool names (``Bash``, ``mcp__server__tool``) pass as
they are.

What reaches the model: a blocked call is denied (``permissionDecision: "deny"``) with the loop
message as reason, which Claude Code hands to the model as the tool's error result; a warning
goes out as ``additionalContext``; a loop that survived compaction stops Claude
(``continue: false``) with the abort message as ``stopReason``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..compaction import CompactionLoopPersistedError
from ..errors import LoopwardenError
from ..guard import LoopGuard, Verdict

__all__ = [
    "HANDLED_EVENTS",
    "ClaudeCodeHook",
    "HookPayloadError",
    "compaction_stop_output",
    "context_output",
    "pre_tool_use_output",
    "run_id_of",
]

HANDLED_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact")
"""The hook events loopwarden acts on; every other event gets an empty answer."""

Output = dict[str, Any]


class HookPayloadError(LoopwardenError, ValueError):
    """The hook payload is not a Claude Code hook input loopwarden can read."""


@dataclass(frozen=True, slots=True)
class _GuardCall:
    """One planned guard call, runnable sync or async, and how to answer the hook with it."""

    call: Callable[..., Any]
    acall: Callable[..., Awaitable[Any]]
    kwargs: dict[str, Any]
    reply: Callable[[Any], Output]


@dataclass(slots=True)
class ClaudeCodeHook:
    """Answers Claude Code hook payloads with a :class:`~loopwarden.LoopGuard`.

    ``agent_id`` is the OpenClaw agent whose config applies; it is attached to the events.
    ``handle`` returns the output with Claude Code's own key names (``continue``); the Agent
    SDK door renames them for the SDK.
    """

    guard: LoopGuard
    agent_id: str | None = None

    def handle(self, payload: Mapping[str, Any]) -> Output:
        plan = self._plan(payload)
        if plan is None:
            return {}
        try:
            return plan.reply(plan.call(**plan.kwargs))
        except CompactionLoopPersistedError as exc:
            return compaction_stop_output(exc)

    async def ahandle(self, payload: Mapping[str, Any]) -> Output:
        plan = self._plan(payload)
        if plan is None:
            return {}
        try:
            return plan.reply(await plan.acall(**plan.kwargs))
        except CompactionLoopPersistedError as exc:
            return compaction_stop_output(exc)

    def _plan(self, payload: Mapping[str, Any]) -> _GuardCall | None:
        if not isinstance(payload, Mapping):
            raise HookPayloadError(f"a hook payload must be a JSON object, got {type(payload).__name__}")
        event = payload.get("hook_event_name")
        if event not in HANDLED_EVENTS:
            return None
        g = self.guard
        ids = {"session": _required_str(payload, "session_id"), "run_id": run_id_of(payload)}
        if event == "PreCompact":
            return _GuardCall(g.compaction_retried, g.acompaction_retried, ids, lambda _: {})
        call = {
            **ids,
            "tool_name": _required_str(payload, "tool_name"),
            "args": payload.get("tool_input") or {},
            "call_id": _optional_str(payload.get("tool_use_id")),
            "agent_id": self.agent_id,
        }
        if event == "PreToolUse":
            return _GuardCall(g.before_tool_call, g.abefore_tool_call, call, pre_tool_use_output)
        if event == "PostToolUse":
            call["result"] = payload.get("tool_response")
        else:
            call["error"] = payload.get("error") or "tool failed"
        return _GuardCall(g.after_tool_call, g.aafter_tool_call, call,
                          lambda v: context_output(event, v.note))


def run_id_of(payload: Mapping[str, Any]) -> str | None:
    """The run a hook belongs to: the user prompt, per sub-agent inside a sub-agent."""
    prompt = _optional_str(payload.get("prompt_id"))
    agent = _optional_str(payload.get("agent_id"))
    if agent is None:
        return prompt
    return f"{prompt or ''}/agent:{agent}"


def pre_tool_use_output(verdict: Verdict) -> Output:
    """Deny a blocked call with the loop message; give a warning as context; else say nothing
    (never ``allow``, which would skip Claude Code's own permission checks)."""
    if verdict.action == "block":
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": verdict.message or "tool call blocked by loopwarden",
            },
            "systemMessage": f"loopwarden blocked {verdict.tool_name}: {_headline(verdict)}",
        }
    return context_output("PreToolUse", verdict.note)


def context_output(event: str, note: str | None) -> Output:
    if not note:
        return {}
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": note}}


def compaction_stop_output(error: CompactionLoopPersistedError) -> Output:
    """Stop Claude: the loop survived compaction, the run must end (spec §g)."""
    message = str(error)
    return {"continue": False, "stopReason": message, "systemMessage": f"loopwarden: {message}"}


def _headline(verdict: Verdict) -> str:
    d = verdict.detection
    if d is None:
        return verdict.message or "tool loop"
    return f"tool loop ({d.detector}, {d.count} calls)"


def _required_str(payload: Mapping[str, Any], key: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str) or not value:
        raise HookPayloadError(f"hook payload has no {key!r}")
    return value


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
