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

The terminal stop (spec §f.1): the first critical of a run is denied and leaves the model one
recovery turn; a second critical in the same run is terminal. With ``exit_behavior="end"`` (the
default) the terminal call is denied *and* Claude is stopped: ``continue: false`` with
:data:`~loopwarden.guard.STOP_MESSAGE` as ``stopReason`` (shown to the user; Claude Code ends
the turn after the hooks ran, whatever the model wanted next). ``"error"`` answers the same way:
a hook cannot raise into the host (the Agent SDK turns a raising callback into a failed hook,
which Claude Code counts as no decision — the call would run), so stopping Claude with the stop
message is the error the host sees. ``"continue"`` only denies, as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from ..base.errors import LoopwardenError
from ..guard import (
    STOP_MESSAGE,
    TERMINAL_TEXT,
    CompactionLoopPersistedError,
    LoopGuard,
    Verdict,
)

__all__ = [
    "EXIT_BEHAVIORS",
    "HANDLED_EVENTS",
    "ClaudeCodeHook",
    "ExitBehavior",
    "HookPayloadError",
    "check_exit_behavior",
    "compaction_stop_output",
    "context_output",
    "pre_tool_use_output",
    "run_id_of",
]

HANDLED_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact")
"""The hook events loopwarden acts on; every other event gets an empty answer."""

Output = dict[str, Any]

ExitBehavior = Literal["end", "error", "continue"]
"""What a door does at the terminal stop (named like LangChain's ``ToolCallLimitMiddleware``)."""
EXIT_BEHAVIORS: tuple[str, ...] = get_args(ExitBehavior)


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
    SDK door renames them for the SDK. ``exit_behavior`` is what the terminal stop does (see
    the module docstring).
    """

    guard: LoopGuard
    agent_id: str | None = None
    exit_behavior: ExitBehavior = "end"

    def __post_init__(self) -> None:
        check_exit_behavior(self.exit_behavior)

    def handle(self, payload: Mapping[str, Any]) -> Output:
        """The hook output for ``payload`` (``{}`` for an event loopwarden does not handle);
        raises :class:`HookPayloadError` for a payload it cannot read."""
        plan = self._plan(payload)
        if plan is None:
            return {}
        try:
            return plan.reply(plan.call(**plan.kwargs))
        except CompactionLoopPersistedError as exc:
            return compaction_stop_output(exc)

    async def ahandle(self, payload: Mapping[str, Any]) -> Output:
        """Like :meth:`handle`, without blocking the event loop."""
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
            ending = self.exit_behavior
            return _GuardCall(g.before_tool_call, g.abefore_tool_call, call,
                              lambda v: pre_tool_use_output(v, exit_behavior=ending))
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


def check_exit_behavior(value: object) -> ExitBehavior:
    """``value`` as an :data:`~loopwarden.guard.ExitBehavior`; a ``ValueError`` else."""
    if value not in EXIT_BEHAVIORS:
        raise ValueError(f"exit_behavior must be one of {', '.join(EXIT_BEHAVIORS)}, not {value!r}")
    return cast(ExitBehavior, value)  # one of EXIT_BEHAVIORS, checked above


def pre_tool_use_output(verdict: Verdict, *, exit_behavior: ExitBehavior = "end") -> Output:
    """Deny a blocked call with the loop message; give a warning as context; else say nothing
    (never ``allow``, which would skip Claude Code's own permission checks). A terminal block
    also stops Claude (``continue: false``) unless ``exit_behavior`` is ``"continue"``."""
    if verdict.action != "block":
        return context_output("PreToolUse", verdict.note)
    reason = verdict.message or "tool call blocked by loopwarden"
    ending = verdict.terminate and exit_behavior != "continue"
    if ending and verdict.block_text is None:  # a one-call verdict: say what OpenClaw says
        reason = f"{reason}\n\n{TERMINAL_TEXT}"
    output: Output = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            # Denied as well: the call must not run even where continue is not honoured.
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        },
        "systemMessage": f"loopwarden blocked {verdict.tool_name}: {_headline(verdict)}",
    }
    if ending:
        output["continue"] = False
        output["stopReason"] = STOP_MESSAGE
    return output


def context_output(event: str, note: str | None) -> Output:
    """Hand ``note`` to the model as the ``event``'s ``additionalContext`` (``{}``: no note)."""
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
