"""Claude Agent SDK door: hook callbacks for ``ClaudeAgentOptions(hooks=...)``.

```python
from claude_agent_sdk import ClaudeAgentOptions, query
from loopwarden import LoopDetectionConfig, LoopGuard
from loopwarden.integrations.claude_agent_sdk import hooks

guard = LoopGuard(LoopDetectionConfig(enabled=True))
options = ClaudeAgentOptions(hooks=hooks(guard))            # exit_behavior="end"
```

``PreToolUse`` asks the guard before each tool runs and denies a blocked call with the loop
message as reason; ``PostToolUse`` / ``PostToolUseFailure`` record the outcome (without outcomes
no critical can fire) and add a warning as ``additionalContext``; ``PreCompact`` arms the
post-compaction guard. Ids and outputs are mapped exactly as for the ``loopwarden claude-hook``
command (see :mod:`loopwarden.integrations.claude_code_hook`).

``exit_behavior`` decides the terminal stop (a second critical in the same prompt's run):
``"end"`` (default) denies the call and returns ``continue_=False`` with the stop message as
``stopReason``, so Claude Code ends the run and ``query()`` finishes with its result message;
``"error"`` does the same — the SDK answers a callback that raises with a failed hook, which
Claude Code treats as no decision and would run the call, so no exception can reach the
caller through the SDK; ``"continue"`` only denies.
"""

from __future__ import annotations

from typing import Any, cast

from claude_agent_sdk import HookContext, HookInput, HookJSONOutput, HookMatcher
from claude_agent_sdk.types import HookCallback, HookEvent

from ..guard import LoopGuard
from .claude_code_hook import HANDLED_EVENTS, ClaudeCodeHook, ExitBehavior, check_exit_behavior

__all__ = ["hooks"]

# Claude Code's JSON keys that are Python keywords; the SDK wants them with an underscore.
_SDK_KEYS = {"continue": "continue_", "async": "async_"}


def hooks(
    guard: LoopGuard | None = None,
    *,
    agent_id: str | None = None,
    matcher: str | None = None,
    timeout: float | None = None,
    exit_behavior: ExitBehavior = "end",
    preset: str | None = None,
    **overrides: Any,
) -> dict[HookEvent, list[HookMatcher]]:
    """The ``hooks=`` mapping for ``ClaudeAgentOptions``: ``PreToolUse``, ``PostToolUse``,
    ``PostToolUseFailure`` and ``PreCompact``.

    ``matcher`` limits the tool hooks to some tools (Claude Code's matcher syntax, e.g.
    ``"Bash|mcp__.*"``); by default every tool is guarded. ``agent_id`` names the OpenClaw
    agent on the events. ``exit_behavior`` (``"end"``, ``"error"`` or ``"continue"``) is what
    the terminal stop does (module docstring); ``"ask"`` ends the run as ``"end"`` does and
    logs why: an SDK session's permission prompts go to your program, not to a user.
    Merge with your own hooks by extending the lists. Without a ``guard`` the hooks use a new
    enabled ``LoopGuard(preset=preset, **overrides)`` (e.g. ``hooks(preset="early")``).
    """
    handler = ClaudeCodeHook(LoopGuard.of(guard, preset=preset, **overrides), agent_id=agent_id,
                             exit_behavior=check_exit_behavior(exit_behavior))
    callback = _callback(handler)
    return {
        cast(HookEvent, event): [HookMatcher(
            matcher=None if event == "PreCompact" else matcher,
            hooks=[callback],
            timeout=timeout,
        )]
        for event in HANDLED_EVENTS
    }


def _callback(handler: ClaudeCodeHook) -> HookCallback:
    async def loopwarden_hook(
        input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        payload: dict[str, Any] = dict(input_data)
        if tool_use_id and not payload.get("tool_use_id"):
            payload["tool_use_id"] = tool_use_id
        output = await handler.ahandle(payload)
        return cast(HookJSONOutput, {_SDK_KEYS.get(k, k): v for k, v in output.items()})

    return loopwarden_hook
