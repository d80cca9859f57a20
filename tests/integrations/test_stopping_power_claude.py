"""Stopping power of the Claude doors (issue 13): an insistent scripted model — it asks for its
pattern again whatever it is told — is stopped, and the run ends by itself.

The Claude Agent SDK hooks are driven as the SDK drives them (the callbacks with the SDK's hook
inputs, and one whole ``query()`` whose transport plays Claude Code and obeys ``continue:
false`` wherever a hook returns it); ``loopwarden claude-hook`` is run on PreToolUse /
PostToolUse payloads, as Claude Code runs it. No LLM anywhere.

Patterns: one identical call; A-B; A-B-C; A-B-C-D (identical results at every step); one tool
with new arguments and the same error every turn (``preset="early"``). With the default
thresholds each must be stopped within 25 tool executions (15 for the error pattern) and the
run must end (``continue: false``) within 30 turns; the same patterns with results that change
(progress) must never be blocked.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    HookMatcher,
    PostToolUseFailureHookInput,
    PostToolUseHookInput,
    PreToolUseHookInput,
    ResultMessage,
    Transport,
    query,
)
from typer.testing import CliRunner

from loopwarden import LoopDetectionConfig, LoopGuard
from loopwarden.cli import app
from loopwarden.guard import STOP_MESSAGE, TERMINAL_TEXT
from loopwarden.integrations.claude_agent_sdk import hooks
from loopwarden.integrations.claude_code_hook import ClaudeCodeHook, pre_tool_use_output

SESSION = "7c1d2e3f-0a4b-4c5d-8e6f-1a2b3c4d5e6f"
PROMPT = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"
BASE: dict[str, Any] = {
    "session_id": SESSION,
    "transcript_path": f"/home/user/.claude/projects/demo/{SESSION}.jsonl",
    "cwd": "/home/user/demo",
    "permission_mode": "default",
    "prompt_id": PROMPT,
}
TURNS = 60  # the model would go on this long; the run must end within 30

Step = tuple[str, dict[str, Any]]


def default_guard(**config: Any) -> LoopGuard:
    # ``LoopGuard()`` is enabled by default once r-doors1 is merged; until then the tests say
    # enabled=True explicitly (the thresholds are the defaults either way).
    guard = LoopGuard(LoopDetectionConfig(enabled=True, **config))
    guard.sinks.clear()
    return guard


# -- the insistent model and its tools -----------------------------------------------------------


CYCLE_STEPS: list[Step] = [
    ("Read", {"file_path": "/home/user/demo/app.py"}),
    ("Grep", {"pattern": "def main", "path": "/home/user/demo"}),
    ("Glob", {"pattern": "**/*.py"}),
    ("Bash", {"command": "git status --short"}),
]


@dataclass(frozen=True)
class Pattern:
    name: str
    step: Callable[[int], Step]  # the call the model insists on at turn n (1-based)
    error: str | None = None  # every execution fails with this error
    preset: str = "openclaw"
    max_executions: int = 25


def cycle(k: int) -> Callable[[int], Step]:
    return lambda n: CYCLE_STEPS[(n - 1) % k]


SAME_ERROR = Pattern(
    "same error, new args", lambda n: ("Bash", {"command": f"pytest tests/test_{n}.py"}),
    error="Error: connect ECONNREFUSED 127.0.0.1:5432", preset="early", max_executions=15)
PATTERNS = [Pattern("one identical call", cycle(1)), Pattern("A-B", cycle(2)),
            Pattern("A-B-C", cycle(3)), Pattern("A-B-C-D", cycle(4)), SAME_ERROR]
PATTERN_IDS = ["one identical call", "A-B", "A-B-C", "A-B-C-D", "same error"]
# A-B is stopped because ping-pong vetoes keep counting, A-B-C and A-B-C-D by the cycle
# detector: before, 49 and 60 of 60 executions.
STOPPED = [pytest.param(p, id=i) for p, i in zip(PATTERNS, PATTERN_IDS, strict=True)]


def tool_result(tool: str, args: dict[str, Any], turn: int, *, progress: bool) -> Any:
    """What the tool answers: the same for the same call, unless the work progresses."""
    text = f"{tool} {json.dumps(args, sort_keys=True)}: unchanged"
    if progress:
        text = f"{tool}: step {turn} done, {turn * 3} lines changed"
    return [{"type": "text", "text": text}]


@dataclass
class Run:
    executions: int = 0
    turns: int = 0
    denied: list[int] = field(default_factory=list)
    warned: list[int] = field(default_factory=list)
    stop: dict[str, Any] | None = None  # the hook output that stopped Claude


def _specific(output: dict[str, Any]) -> dict[str, Any]:
    return dict(output.get("hookSpecificOutput") or {})


def _callback(mapping: dict[str, list[HookMatcher]], event: str) -> Callable[..., Any]:
    (matcher,) = mapping[event]  # type: ignore[index]
    (cb,) = matcher.hooks
    return cb


async def drive(guard: LoopGuard, pattern: Pattern, *, progress: bool = False,
                exit_behavior: str = "end", turns: int = TURNS) -> Run:
    """Claude Code's loop over the SDK callbacks: PreToolUse, then (unless denied) the tool
    and PostToolUse / PostToolUseFailure; a ``continue_: False`` from any hook ends the run."""
    mapping = hooks(guard, exit_behavior=exit_behavior)  # type: ignore[arg-type]
    run = Run()
    for n in range(1, turns + 1):
        run.turns = n
        tool, args = pattern.step(n)
        tid = f"toolu_{n:03d}"
        pre = await _callback(mapping, "PreToolUse")(
            PreToolUseHookInput(**BASE, hook_event_name="PreToolUse", tool_name=tool,
                                tool_input=args, tool_use_id=tid), tid, {"signal": None})
        if _specific(pre).get("additionalContext"):
            run.warned.append(n)
        if pre.get("continue_") is False:
            run.stop = pre
            return run
        if _specific(pre).get("permissionDecision") == "deny":
            run.denied.append(n)
            continue
        run.executions += 1
        if pattern.error is not None and not progress:
            post_input: Any = PostToolUseFailureHookInput(
                **BASE, hook_event_name="PostToolUseFailure", tool_name=tool, tool_input=args,
                tool_use_id=tid, error=pattern.error, is_interrupt=False)
            post = await _callback(mapping, "PostToolUseFailure")(post_input, tid,
                                                                  {"signal": None})
        else:
            post_input = PostToolUseHookInput(
                **BASE, hook_event_name="PostToolUse", tool_name=tool, tool_input=args,
                tool_response=tool_result(tool, args, n, progress=progress), tool_use_id=tid,
                duration_ms=5)
            post = await _callback(mapping, "PostToolUse")(post_input, tid, {"signal": None})
        if _specific(post).get("additionalContext"):
            run.warned.append(n)
        if post.get("continue_") is False:
            run.stop = post
            return run
    return run


# -- the Claude Agent SDK hooks: every pattern is stopped and the run ends --------------------


@pytest.mark.parametrize("pattern", STOPPED)
async def test_insistent_model_is_stopped_and_the_run_ends(pattern: Pattern) -> None:
    run = await drive(default_guard(preset=pattern.preset), pattern)
    assert run.stop is not None, f"{pattern.name}: never stopped ({run.executions} executions)"
    assert run.executions <= pattern.max_executions
    assert run.turns <= 30
    assert run.stop["stopReason"] == STOP_MESSAGE
    # The call that ended the run is denied too, and the model reads why.
    assert _specific(run.stop)["permissionDecision"] == "deny"
    assert _specific(run.stop)["permissionDecisionReason"].startswith("CRITICAL:")
    assert _specific(run.stop)["permissionDecisionReason"].endswith(TERMINAL_TEXT)
    # One recovery turn: exactly one denied call before the terminal one.
    assert len(run.denied) == 1 and run.denied[0] == run.turns - 1


@pytest.mark.parametrize("pattern", PATTERNS, ids=PATTERN_IDS)
async def test_progressing_variants_are_never_blocked(pattern: Pattern) -> None:
    run = await drive(default_guard(preset=pattern.preset), pattern, progress=True)
    assert run.stop is None and run.denied == []
    assert run.executions == TURNS


async def test_one_identical_call_numbers() -> None:
    run = await drive(default_guard(), Pattern("one", cycle(1)))
    # Warned before call 11, 20 executions, call 21 denied (recovery turn), call 22 ends it.
    assert (run.executions, run.denied, run.turns) == (20, [21], 22)
    assert 11 in run.warned


async def test_same_error_numbers_under_early() -> None:
    run = await drive(default_guard(preset="early"), SAME_ERROR)
    assert (run.executions, run.denied, run.turns) == (10, [11], 12)


async def test_exit_behavior_continue_only_denies() -> None:
    run = await drive(default_guard(), Pattern("one", cycle(1)), exit_behavior="continue")
    assert run.stop is None
    assert run.executions == 20 and run.denied == list(range(21, TURNS + 1))


async def test_exit_behavior_error_stops_like_end() -> None:
    # A raising callback would reach Claude Code as a failed hook (no decision: the call
    # would run), so "error" stops Claude the same way "end" does.
    end = await drive(default_guard(), Pattern("one", cycle(1)))
    error = await drive(default_guard(), Pattern("one", cycle(1)), exit_behavior="error")
    assert error.stop == end.stop and error.turns == end.turns == 22


def test_unknown_exit_behavior_is_refused() -> None:
    with pytest.raises(ValueError, match="exit_behavior: must be one of 'end', 'error', 'continue', 'ask'"):
        hooks(default_guard(), exit_behavior="stop")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ClaudeCodeHook(default_guard(), exit_behavior="halt")  # type: ignore[arg-type]


async def test_a_new_prompt_is_a_new_run_with_its_own_recovery_turn() -> None:
    guard = default_guard()
    first = await drive(guard, Pattern("one", cycle(1)))
    assert first.stop is not None
    # The user writes again: Claude Code gives the prompt a new id, so the run starts fresh.
    handler = ClaudeCodeHook(guard)
    verdicts = []
    for n in range(1, 22):
        payload = {**BASE, "prompt_id": "second-prompt", "hook_event_name": "PreToolUse",
                   "tool_name": "Read", "tool_input": CYCLE_STEPS[0][1], "tool_use_id": f"p2_{n}"}
        verdicts.append(await handler.ahandle(payload))
        await handler.ahandle({**payload, "hook_event_name": "PostToolUse",
                               "tool_response": tool_result("Read", CYCLE_STEPS[0][1], n,
                                                            progress=False)})
    assert all("continue" not in v for v in verdicts)
    assert _specific(verdicts[-1]).get("permissionDecision") == "deny"


def test_non_terminal_blocks_do_not_stop_claude() -> None:
    guard = default_guard(warning_threshold=1, critical_threshold=2,
                          global_circuit_breaker_threshold=3)
    for _ in range(2):
        guard.before_tool_call("Read", {}, session="s", run_id="r")
        guard.after_tool_call("Read", {}, session="s", run_id="r", result="same")
    first = guard.before_tool_call("Read", {}, session="s", run_id="r")
    assert first.action == "block" and not first.terminate
    assert "continue" not in pre_tool_use_output(first)
    second = guard.before_tool_call("Read", {}, session="s", run_id="r")
    assert second.terminate
    assert pre_tool_use_output(second)["continue"] is False
    assert "continue" not in pre_tool_use_output(second, exit_behavior="continue")


# -- a whole query() run: the SDK carries continue: false to Claude Code -------------------------


class InsistentClaudeCode(Transport):
    """Plays the Claude Code CLI for ``query()``: a model that asks for ``step(n)`` turn after
    turn, every registered hook fired through the SDK's control protocol, and a ``continue:
    false`` from any hook obeyed (the turn ends, a result message follows)."""

    def __init__(self, step: Callable[[int], Step], tool: Callable[[str, dict[str, Any], int], Any],
                 turns: int = TURNS) -> None:
        self.step, self.tool, self.turns = step, tool, turns
        self.hooks: dict[str, list[dict[str, Any]]] = {}
        self.executions = 0
        self.model_turns = 0
        self.stop_reason: str | None = None
        self._send, self._recv = anyio.create_memory_object_stream[dict[str, Any]](100)
        self._answers: dict[str, tuple[anyio.Event, list[dict[str, Any]]]] = {}
        self._ids = 0

    async def connect(self) -> None:
        pass

    def is_ready(self) -> bool:
        return True

    async def end_input(self) -> None:
        pass

    async def close(self) -> None:
        self._send.close()

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        async with self._recv:
            async for message in self._recv:
                yield message

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            message = json.loads(line)
            if message["type"] == "control_request" and message["request"]["subtype"] == "initialize":
                self.hooks = message["request"]["hooks"] or {}
                await self._send.send({"type": "control_response", "response": {
                    "subtype": "success", "request_id": message["request_id"],
                    "response": {"commands": []}}})
            elif message["type"] == "control_response":
                event, box = self._answers.pop(message["response"]["request_id"])
                box.append(message["response"])
                event.set()
            elif message["type"] == "user":
                self._runner = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            for n in range(1, self.turns + 1):
                self.model_turns = n
                tool, args = self.step(n)
                base = {**BASE, "tool_name": tool, "tool_input": args,
                        "tool_use_id": f"toolu_{n:03d}"}
                pre = await self._fire("PreToolUse", {**base, "hook_event_name": "PreToolUse"})
                if self._stopped(pre):
                    return
                if any(_specific(o).get("permissionDecision") == "deny" for o in pre):
                    continue
                self.executions += 1
                post = await self._fire("PostToolUse", {**base, "hook_event_name": "PostToolUse",
                                                        "tool_response": self.tool(tool, args, n)})
                if self._stopped(post):
                    return
        finally:
            await self._send.send({"type": "result", "subtype": "success", "duration_ms": 1,
                                   "duration_api_ms": 1, "is_error": False,
                                   "num_turns": self.model_turns, "session_id": SESSION,
                                   "result": self.stop_reason or "done"})
            self._send.close()

    def _stopped(self, outputs: list[dict[str, Any]]) -> bool:
        stop = next((o for o in outputs if o.get("continue") is False), None)  # the wire name
        if stop is not None:
            self.stop_reason = stop["stopReason"]
        return stop is not None

    async def _fire(self, event: str, payload: dict[str, Any]) -> list[dict[str, Any]]:
        outputs = []
        for matcher in self.hooks.get(event, []):
            for callback_id in matcher["hookCallbackIds"]:
                self._ids += 1
                request_id = f"cli_{self._ids}"
                done, box = anyio.Event(), []
                self._answers[request_id] = (done, box)
                await self._send.send({"type": "control_request", "request_id": request_id,
                                       "request": {"subtype": "hook_callback",
                                                   "callback_id": callback_id, "input": payload,
                                                   "tool_use_id": payload["tool_use_id"]}})
                await done.wait()
                assert box[0]["subtype"] == "success", box[0]
                outputs.append(dict(box[0]["response"]))
        return outputs


async def test_query_run_ends_at_the_terminal_stop() -> None:
    cli = InsistentClaudeCode(cycle(1), lambda t, a, n: tool_result(t, a, n, progress=False))
    options = ClaudeAgentOptions(hooks=hooks(default_guard()))
    messages = [m async for m in query(prompt="fix the bug", options=options, transport=cli)]
    assert isinstance(messages[-1], ResultMessage)
    assert (cli.executions, cli.model_turns) == (20, 22)
    assert cli.stop_reason == STOP_MESSAGE


# -- loopwarden claude-hook ----------------------------------------------------------------------


def _payloads(n: int, tool: str = "Read", args: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    args = {"file_path": "/home/user/demo/app.py"} if args is None else args
    base = {**BASE, "tool_name": tool, "tool_input": args, "tool_use_id": f"toolu_{n:03d}"}
    return ({**base, "hook_event_name": "PreToolUse"},
            {**base, "hook_event_name": "PostToolUse",
             "tool_response": {"type": "text", "file": {"content": "unchanged"}}})


def _cli(payload: dict[str, Any], *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["claude-hook", *args], input=json.dumps(payload))
    assert result.exit_code == 0, result.output
    out = result.stdout.strip()
    return json.loads(out) if out else {}


def _cli_run(*args: str, turns: int = 40) -> tuple[int, int, list[int], dict[str, Any] | None]:
    executions, denied = 0, []
    for n in range(1, turns + 1):
        pre, post = _payloads(n)
        answer = _cli(pre, *args)
        if answer.get("continue") is False:
            return executions, n, denied, answer
        if _specific(answer).get("permissionDecision") == "deny":
            denied.append(n)
            continue
        executions += 1
        assert _cli(post, *args) == {}
    return executions, turns, denied, None


def test_claude_hook_ends_the_run_with_default_thresholds(tmp_path: Path) -> None:
    executions, turns, denied, stop = _cli_run("--db", str(tmp_path / "hook.db"))
    assert (executions, turns, denied) == (20, 22, [21])
    assert stop is not None and stop["stopReason"] == STOP_MESSAGE
    assert _specific(stop)["permissionDecision"] == "deny"


def test_claude_hook_exit_behavior_continue_only_denies(tmp_path: Path) -> None:
    executions, _, denied, stop = _cli_run("--db", str(tmp_path / "hook.db"),
                                           "--exit-behavior", "continue", turns=25)
    assert stop is None and executions == 20 and denied == [21, 22, 23, 24, 25]


def test_claude_hook_rejects_an_unknown_exit_behavior(tmp_path: Path) -> None:
    pre, _ = _payloads(1)
    result = CliRunner().invoke(app, ["claude-hook", "--db", str(tmp_path / "h.db"),
                                      "--exit-behavior", "stop"], input=json.dumps(pre))
    # A usage error, and non-blocking like every hook failure (Claude Code reads 2 as "block").
    assert result.exit_code == 1
    assert "invalid choice: 'stop'" in result.output


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    if env.get("PYTHONPATH"):  # relative (src): made absolute for a child in another cwd
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    return env


def test_claude_hook_command_prints_continue_false_at_the_terminal_stop(tmp_path: Path) -> None:
    # As Claude Code runs it: one process per hook event, JSON on stdin, JSON on stdout. Low
    # thresholds keep the number of processes small: 3 executions, a recovery turn, the end.
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps({"tools": {"loopDetection": {
        "warningThreshold": 2, "criticalThreshold": 3, "globalCircuitBreakerThreshold": 4}}}))
    argv = [sys.executable, "-m", "loopwarden.cli", "claude-hook", "--db",
            str(tmp_path / "hook.db"), "--config", str(config)]

    def hook(payload: dict[str, Any]) -> dict[str, Any]:
        done = subprocess.run(argv, input=json.dumps(payload), capture_output=True, text=True,
                              timeout=120, env=_child_env(), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else {}

    answers = []
    for n in range(1, 6):
        pre, post = _payloads(n)
        answers.append(hook(pre))
        if _specific(answers[-1]).get("permissionDecision") != "deny":
            hook(post)
    assert [_specific(a).get("permissionDecision") for a in answers] == [
        None, None, None, "deny", "deny"]
    assert "continue" not in answers[3]  # the first critical: the model's recovery turn
    assert answers[4]["continue"] is False
    assert answers[4]["stopReason"] == STOP_MESSAGE
