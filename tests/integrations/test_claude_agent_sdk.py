"""The Claude Agent SDK door, against the real ``claude_agent_sdk`` package.

Two levels: the hook callbacks called directly with the SDK's own hook input types, and a whole
``query()`` run in which :class:`ScriptedClaudeCode` — a :class:`claude_agent_sdk.Transport`
speaking Claude Code's control protocol — plays the CLI and a looping model, so the SDK itself
registers the callbacks, dispatches the hook requests and converts the answers.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    HookMatcher,
    PostToolUseFailureHookInput,
    PostToolUseHookInput,
    PreCompactHookInput,
    PreToolUseHookInput,
    ResultMessage,
    Transport,
    query,
)

from loopwarden import LoopDetectionConfig, LoopGuard, MemoryStore, SQLiteStore, warning_note
from loopwarden.integrations.claude_agent_sdk import hooks

SESSION = "0b0f4a52-6a43-4f5e-9d0c-6f3f5b1c2d11"
PROMPT = "5d3c1f0e-2b7a-4c1e-8f21-9a6e4d7b3c55"
BASE: dict[str, Any] = {
    "session_id": SESSION,
    "transcript_path": f"/home/user/.claude/projects/demo/{SESSION}.jsonl",
    "cwd": "/home/user/demo",
    "permission_mode": "default",
    "prompt_id": PROMPT,
}
POLL = ("mcp__jobs__job_status", {"job_id": "build-42"})
POLL_RESULT = [{"type": "text", "text": '{"status": "running", "progress": 0.5}'}]


def make_guard(**config: Any) -> LoopGuard:
    return LoopGuard(LoopDetectionConfig(enabled=True, **config))


def callback(mapping: dict[str, list[HookMatcher]], event: str) -> Callable[..., Any]:
    (matcher,) = mapping[event]  # type: ignore[index]
    (cb,) = matcher.hooks
    return cb


def pre_input(tool_use_id: str, tool: str = POLL[0], args: dict[str, Any] = POLL[1],
              **extra: Any) -> PreToolUseHookInput:
    return PreToolUseHookInput(**BASE, hook_event_name="PreToolUse", tool_name=tool,
                               tool_input=args, tool_use_id=tool_use_id, **extra)


def post_input(tool_use_id: str, response: Any = POLL_RESULT, tool: str = POLL[0],
               args: dict[str, Any] = POLL[1], **extra: Any) -> PostToolUseHookInput:
    return PostToolUseHookInput(**BASE, hook_event_name="PostToolUse", tool_name=tool,
                                tool_input=args, tool_response=response,
                                tool_use_id=tool_use_id, duration_ms=12, **extra)


async def one_call(mapping: dict[str, list[HookMatcher]], n: int, **extra: Any) -> tuple[Any, Any]:
    tid = f"toolu_{n:03d}"
    pre = await callback(mapping, "PreToolUse")(pre_input(tid, **extra), tid, {"signal": None})
    if pre.get("hookSpecificOutput", {}).get("permissionDecision") == "deny":
        return pre, None
    post = await callback(mapping, "PostToolUse")(post_input(tid, **extra), tid, {"signal": None})
    return pre, post


# -- the callbacks, called directly ---------------------------------------------------------------


def test_hooks_mapping_is_ready_for_claude_agent_options() -> None:
    mapping = hooks(make_guard(), matcher="Bash|mcp__.*", timeout=5)
    assert set(mapping) == {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact"}
    assert all(isinstance(m, HookMatcher) for ms in mapping.values() for m in ms)
    assert mapping["PreToolUse"][0].matcher == "Bash|mcp__.*"
    assert mapping["PreCompact"][0].matcher is None  # compaction is not a tool
    assert mapping["PostToolUse"][0].timeout == 5
    ClaudeAgentOptions(hooks=mapping)  # accepted as is


async def test_looping_poll_is_warned_at_11_and_denied_at_21() -> None:
    guard = make_guard()
    mapping = hooks(guard)
    answers = [await one_call(mapping, n) for n in range(1, 23)]

    contexts = {n: pre["hookSpecificOutput"].get("additionalContext")
                for n, (pre, _) in enumerate(answers, 1) if pre}
    assert {n: c for n, c in contexts.items() if c} == {11: warning_note(10)}
    denied = [n for n, (pre, post) in enumerate(answers, 1) if post is None]
    assert denied == [21, 22]
    deny = answers[20][0]["hookSpecificOutput"]
    assert deny["hookEventName"] == "PreToolUse"
    assert deny["permissionDecisionReason"].startswith("CRITICAL:")
    assert "allow" not in json.dumps(answers)  # never bypass Claude Code's permission checks
    history = guard.history(SESSION)
    assert {r.run_id for r in history} == {PROMPT}
    assert history[0].call_id == "toolu_001" and not history[0].pending


async def test_preset_and_overrides_guard_like_loopguard_keywords() -> None:
    """``hooks(preset=...)`` / ``hooks(critical_threshold=...)`` build an enabled guard, as
    ``LoopGuard(preset=..., **overrides)`` does, and deny sooner than the default."""
    mapping = hooks(preset="early")
    early = [await one_call(mapping, n) for n in range(1, 23)]
    assert next(n for n, (_, post) in enumerate(early, 1) if post is None) == 11
    mapping = hooks(warning_threshold=3, critical_threshold=6)
    sooner = [await one_call(mapping, n) for n in range(1, 23)]
    assert next(n for n, (_, post) in enumerate(sooner, 1) if post is None) == 7
    with pytest.raises(ValueError, match="preset"):
        hooks(make_guard(), preset="early")


async def test_tool_use_id_is_taken_from_the_callback_argument() -> None:
    guard = make_guard()
    payload = dict(pre_input("ignored"))
    del payload["tool_use_id"]
    await callback(hooks(guard), "PreToolUse")(payload, "toolu_from_sdk", {"signal": None})
    assert guard.history(SESSION)[-1].call_id == "toolu_from_sdk"


async def test_failures_are_recorded_as_outcomes() -> None:
    guard = make_guard()
    mapping = hooks(guard)
    for n in range(3):
        tid = f"toolu_f{n}"
        await callback(mapping, "PreToolUse")(pre_input(tid, "Bash", {"command": "make"}),
                                              tid, {"signal": None})
        failure = PostToolUseFailureHookInput(
            **BASE, hook_event_name="PostToolUseFailure", tool_name="Bash",
            tool_input={"command": "make"}, tool_use_id=tid,
            error="Exit code 2\nmake: *** No targets specified and no makefile found.  Stop.",
            is_interrupt=False,
        )
        assert await callback(mapping, "PostToolUseFailure")(failure, tid, {"signal": None}) == {}
    history = guard.history(SESSION)
    assert len(history) == 3 and not any(r.pending for r in history)
    assert len({r.result_hash for r in history}) == 1


async def test_pre_compact_arms_the_guard_and_a_surviving_loop_stops_claude() -> None:
    guard = make_guard()
    mapping = hooks(guard)
    for n in range(1, 5):
        await one_call(mapping, n)
    compact = PreCompactHookInput(**BASE, hook_event_name="PreCompact", trigger="auto",
                                  custom_instructions=None)
    assert await callback(mapping, "PreCompact")(compact, None, {"signal": None}) == {}

    posts = [(await one_call(mapping, n))[1] for n in range(5, 8)]
    assert posts[:2] == [{}, {}]
    # The SDK's spelling of Claude Code's "continue" (it renames continue_ on the wire).
    assert posts[2]["continue_"] is False
    assert posts[2]["stopReason"].startswith(
        f"CRITICAL: tool {POLL[0]} repeated 3 times with identical arguments and identical results")


async def test_sub_agents_are_separate_runs() -> None:
    guard = make_guard()
    mapping = hooks(guard)
    # Two parallel sub-agents alternate the same pair of calls: one ping-pong for a single
    # agent, two plain repeats when each sub-agent is its own run.
    for n in range(1, 13):
        agent = "a1" if n % 2 else "a2"
        tool = "Read" if n % 2 else "Grep"
        pre, _ = await one_call(mapping, n, tool=tool, args={"file_path": "/x"}, agent_id=agent,
                                agent_type="general-purpose")
        assert pre == {}
    runs = {r.run_id for r in guard.history(SESSION)}
    assert runs == {f"{PROMPT}/agent:a1", f"{PROMPT}/agent:a2"}


# -- a whole query() run through the SDK's control protocol ---------------------------------------


class ScriptedClaudeCode(Transport):
    """Plays the Claude Code CLI for the SDK: answers ``initialize``, and for the user's prompt
    runs a model that asks for ``calls`` one after another, sending every hook registered for
    the event (matcher honoured) and obeying its answer, as Claude Code does."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]],
                 tools: dict[str, Callable[[dict[str, Any]], Any]],
                 compact_after: int | None = None) -> None:
        self.calls, self.tools, self.compact_after = calls, tools, compact_after
        self.hooks: dict[str, list[dict[str, Any]]] = {}
        self.transcript: list[dict[str, Any]] = []  # what the model was shown, per call
        self.stopped: str | None = None
        self._out_send, self._out_recv = anyio.create_memory_object_stream[dict[str, Any]](100)
        self._answers: dict[str, anyio.Event] = {}
        self._results: dict[str, dict[str, Any]] = {}
        self._ids = 0

    async def connect(self) -> None:
        pass

    def is_ready(self) -> bool:
        return True

    async def end_input(self) -> None:
        pass

    async def close(self) -> None:
        self._out_send.close()

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        async with self._out_recv:
            async for message in self._out_recv:
                yield message

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            message = json.loads(line)
            if message["type"] == "control_request" and message["request"]["subtype"] == "initialize":
                self.hooks = message["request"]["hooks"] or {}
                await self._reply(message["request_id"], {"commands": []})
            elif message["type"] == "control_response":
                response = message["response"]
                self._results[response["request_id"]] = response
                self._answers[response["request_id"]].set()
            elif message["type"] == "user":
                self._start_turn()

    def _start_turn(self) -> None:
        async def run() -> None:
            try:
                await self._turn()
            finally:
                await self._out_send.send(_result_message(len(self.transcript)))
                self._out_send.close()

        # Claude Code works on the prompt while it keeps reading the SDK's answers.
        self._runner = asyncio.get_running_loop().create_task(run())

    async def _turn(self) -> None:
        for n, (tool, args) in enumerate(self.calls, 1):
            tid = f"toolu_{n:03d}"
            base = {**BASE, "tool_name": tool, "tool_input": args, "tool_use_id": tid}
            shown: dict[str, Any] = {"call": n, "context": []}
            self.transcript.append(shown)
            pre = await self._fire("PreToolUse", {**base, "hook_event_name": "PreToolUse"}, tool)
            denied = [o for o in pre if _specific(o).get("permissionDecision") == "deny"]
            shown["context"] += [_specific(o)["additionalContext"] for o in pre
                                 if _specific(o).get("additionalContext")]
            if denied:
                shown["result"] = _specific(denied[0])["permissionDecisionReason"]
                shown["is_error"] = True
            else:
                shown["result"] = self.tools[tool](args)
                post = await self._fire("PostToolUse", {**base, "hook_event_name": "PostToolUse",
                                                        "tool_response": shown["result"]}, tool)
                shown["context"] += [_specific(o)["additionalContext"] for o in post
                                     if _specific(o).get("additionalContext")]
                stop = next((o for o in post if o.get("continue") is False), None)
                if stop is not None:
                    self.stopped = stop["stopReason"]
                    return
            if n == self.compact_after:
                await self._fire("PreCompact", {**BASE, "hook_event_name": "PreCompact",
                                                "trigger": "auto", "custom_instructions": None},
                                 None)

    async def _fire(self, event: str, payload: dict[str, Any], tool: str | None) -> list[dict[str, Any]]:
        outputs = []
        for matcher in self.hooks.get(event, []):
            if tool is not None and not _matches(matcher.get("matcher"), tool):
                continue
            for callback_id in matcher["hookCallbackIds"]:
                outputs.append(await self._request({
                    "subtype": "hook_callback", "callback_id": callback_id, "input": payload,
                    "tool_use_id": payload.get("tool_use_id"),
                }))
        return outputs

    async def _request(self, request: dict[str, Any]) -> dict[str, Any]:
        self._ids += 1
        request_id = f"cli_{self._ids}"
        self._answers[request_id] = anyio.Event()
        await self._out_send.send({"type": "control_request", "request_id": request_id,
                                   "request": request})
        await self._answers[request_id].wait()
        response = self._results.pop(request_id)
        assert response["subtype"] == "success", response
        return dict(response["response"])

    async def _reply(self, request_id: str, response: dict[str, Any]) -> None:
        await self._out_send.send({"type": "control_response", "response": {
            "subtype": "success", "request_id": request_id, "response": response}})


def _specific(output: dict[str, Any]) -> dict[str, Any]:
    return dict(output.get("hookSpecificOutput") or {})


def _matches(matcher: str | None, tool: str) -> bool:
    return matcher in (None, "", "*") or re.fullmatch(matcher, tool) is not None


def _result_message(turns: int) -> dict[str, Any]:
    return {"type": "result", "subtype": "success", "duration_ms": 1, "duration_api_ms": 1,
            "is_error": False, "num_turns": turns, "session_id": SESSION, "result": "done"}


class JobServer:
    """The real tool behind the poll: counts how often it actually ran."""

    def __init__(self) -> None:
        self.runs = 0

    def status(self, args: dict[str, Any]) -> Any:
        self.runs += 1
        return POLL_RESULT


async def run_query(guard: LoopGuard, cli: ScriptedClaudeCode, **options: Any) -> list[Any]:
    opts = ClaudeAgentOptions(hooks=hooks(guard, **options))
    return [m async for m in query(prompt="wait for build-42", options=opts, transport=cli)]


@pytest.fixture(params=["memory", "sqlite"])
def guard(request: pytest.FixtureRequest, tmp_path: Path) -> LoopGuard:
    store = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "lw.db")
    return LoopGuard(LoopDetectionConfig(enabled=True), store=store)


async def test_query_run_through_the_sdk_warns_then_denies(guard: LoopGuard) -> None:
    jobs = JobServer()
    cli = ScriptedClaudeCode([POLL] * 25, {POLL[0]: jobs.status})
    messages = await run_query(guard, cli)

    assert isinstance(messages[-1], ResultMessage)
    assert jobs.runs == 20
    warned = [t["call"] for t in cli.transcript if t["context"]]
    assert warned == [11]
    assert cli.transcript[10]["context"] == [warning_note(10)]
    assert [t["call"] for t in cli.transcript if t.get("is_error")] == list(range(21, 26))
    assert cli.transcript[20]["result"].startswith(
        f"CRITICAL: Called {POLL[0]} with identical outcomes 20 times")


async def test_query_run_matcher_limits_the_guarded_tools(guard: LoopGuard) -> None:
    jobs = JobServer()
    cli = ScriptedClaudeCode([POLL] * 25, {POLL[0]: jobs.status})
    await run_query(guard, cli, matcher="Bash")
    assert jobs.runs == 25
    assert guard.history(SESSION) == []


async def test_query_run_stops_when_the_loop_survives_compaction(guard: LoopGuard) -> None:
    jobs = JobServer()
    cli = ScriptedClaudeCode([POLL] * 12, {POLL[0]: jobs.status}, compact_after=5)
    messages = await run_query(guard, cli)

    assert isinstance(messages[-1], ResultMessage)
    assert jobs.runs == 8  # 5 before compaction, then the 3 identical ones the guard watches
    assert cli.stopped is not None and "after auto-compaction" in cli.stopped
