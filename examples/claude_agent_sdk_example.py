"""loopwarden + the Claude Agent SDK, without an LLM or the Claude Code CLI: a scripted stand-in
for Claude Code keeps polling the same job; loopwarden's hooks warn Claude at the 11th call,
deny the 21st (Claude's one recovery turn) and end the run at the 22nd (``exit_behavior="end"``,
the default: the hook answers ``continue: false`` with a stop reason, as Claude Code obeys).

Run: python examples/claude_agent_sdk_example.py   (needs: pip install ".[claude]" from a clone)

``FakeClaudeCode`` speaks the SDK's control protocol the way the CLI does (it sends each hook
request and obeys the answer), so the part that matters is real: ``ClaudeAgentOptions(hooks=...)``
and ``query()``. In real use, drop ``transport=`` and the SDK starts Claude Code.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, Transport, query

from loopwarden import LoopDetectionConfig, LoopGuard
from loopwarden.integrations.claude_agent_sdk import hooks

IDS = {"session_id": "demo-session", "prompt_id": "prompt-1", "transcript_path": "", "cwd": "."}
POLL = {"tool_name": "mcp__ci__job_status", "tool_input": {"job": "build-7"}}
runs = 0


def job_status() -> list[dict[str, Any]]:
    """The real tool behind the poll."""
    global runs
    runs += 1
    return [{"type": "text", "text": "build-7: still running"}]


class FakeClaudeCode(Transport):
    """Claude Code stuck in a polling loop: up to 25 identical tool calls in one prompt. Like
    the CLI, it obeys a hook's ``continue: false``: it stops and reports the stop reason."""

    def __init__(self) -> None:
        self.out, self.inbox = anyio.create_memory_object_stream[dict[str, Any]](100)
        self.hooks: dict[str, list[dict[str, Any]]] = {}
        self.answers: dict[str, asyncio.Future[dict[str, Any]]] = {}

    async def connect(self) -> None: ...
    async def end_input(self) -> None: ...
    async def close(self) -> None: self.out.close()
    def is_ready(self) -> bool: return True

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        async for message in self.inbox:
            yield message

    async def write(self, data: str) -> None:
        msg = json.loads(data)
        if msg["type"] == "control_request":  # initialize: remember the hook callback ids
            self.hooks = msg["request"]["hooks"]
            await self.out.send({"type": "control_response", "response": {
                "subtype": "success", "request_id": msg["request_id"], "response": {}}})
        elif msg["type"] == "control_response":
            self.answers.pop(msg["response"]["request_id"]).set_result(msg["response"]["response"])
        elif msg["type"] == "user":
            self.task = asyncio.create_task(self.work())

    async def hook(self, event: str, payload: dict[str, Any]) -> dict[str, Any]:
        (callback_id,) = self.hooks[event][0]["hookCallbackIds"]
        request_id = f"{event}-{payload['tool_use_id']}"
        self.answers[request_id] = asyncio.get_running_loop().create_future()
        await self.out.send({"type": "control_request", "request_id": request_id, "request": {
            "subtype": "hook_callback", "callback_id": callback_id,
            "input": {**payload, "hook_event_name": event}}})
        return await self.answers[request_id]

    async def work(self) -> None:
        result, turns = "Giving up.", 25
        for n in range(1, 26):
            call = {**IDS, **POLL, "tool_use_id": f"toolu_{n:02d}"}
            answer = await self.hook("PreToolUse", call)
            pre = answer.get("hookSpecificOutput", {})
            if answer.get("continue") is False:  # the hook stops Claude: no more turns
                print(f"call {n:2}: STOPPED -> the user sees: {answer.get('stopReason')!r}")
                result, turns = answer.get("stopReason", ""), n
                break
            if pre.get("permissionDecision") == "deny":
                print(f"call {n:2}: DENIED -> Claude sees: {pre['permissionDecisionReason']!r}")
                continue
            if "additionalContext" in pre:
                print(f"call {n:2}: WARNED -> Claude sees: {pre['additionalContext']!r}")
            await self.hook("PostToolUse", {**call, "tool_response": job_status()})
        await self.out.send({"type": "result", "subtype": "success", "duration_ms": 0,
                             "duration_api_ms": 0, "is_error": False, "num_turns": turns,
                             "session_id": IDS["session_id"], "result": result})
        self.out.close()


async def main() -> None:
    guard = LoopGuard(LoopDetectionConfig(enabled=True))
    options = ClaudeAgentOptions(hooks=hooks(guard))
    async for message in query(prompt="Wait until build-7 is done.", options=options,
                               transport=FakeClaudeCode()):
        if isinstance(message, ResultMessage):
            print(f"the tool really ran {runs} times in {message.num_turns} calls; "
                  f"final answer: {message.result!r}")


if __name__ == "__main__":
    asyncio.run(main())
