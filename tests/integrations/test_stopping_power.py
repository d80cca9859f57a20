"""Stopping power (issue 13): an insistent scripted model — it asks for its pattern whatever it
is told — is stopped by every door with the default guard, and the run ends by itself.

Each pattern runs three ways: the plain guard (an ``admit_batch`` agent loop), a LangChain
``create_agent`` (sync, stream, async, astream, with a checkpointer) and an OpenAI Agents SDK
``Runner.run``. Tool executions and model calls are counted by the tools and the models
themselves. The progressing variant of each pattern (every result new) is never blocked.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from loopwarden import (
    ConfigError,
    LoopBlockedError,
    LoopDetectionConfig,
    LoopGuard,
    LoopTerminatedError,
    ToolCall,
)
from loopwarden.guard import STOP_MESSAGE

MAX_EXECUTIONS = 25
MAX_MODEL_CALLS = 30
MAX_ERROR_EXECUTIONS = 15  # the error pattern, under the early preset
PROGRESS_TURNS = 40
STUCK_TURNS = 2 * MAX_MODEL_CALLS  # an insistent script outlasts any run that is stopped
FINAL = "Done: the task is finished."
NOTE_TEXT = "[System note: Tool-loop warning after"


# -- the patterns ---------------------------------------------------------------------------------

Call = tuple[str, dict[str, Any]]

READ: Call = ("read", {"path": "a.txt"})
GREP: Call = ("grep", {"pattern": "TODO"})
LS: Call = ("ls", {"dir": "src"})
STAT: Call = ("stat", {"path": "b.txt"})


def _cycle(*steps: Call) -> Callable[[int], list[Call]]:
    return lambda turn: [steps[turn % len(steps)]]


def _fetch(turn: int) -> list[Call]:
    return [("fetch", {"url": f"https://example.test/page/{turn}"})]


@dataclass(frozen=True)
class Pattern:
    name: str
    turn: Callable[[int], list[Call]]  # the calls of one assistant message (turn counts from 0)
    early: bool = False  # run under LoopDetectionConfig(preset="early")
    marks: tuple[Any, ...] = ()

    @property
    def max_executions(self) -> int:
        return MAX_ERROR_EXECUTIONS if self.early else MAX_EXECUTIONS

    def config(self) -> LoopDetectionConfig | None:
        # LoopGuard() defaults, except the error pattern, which is the early preset's
        # (an explicit config keeps OpenClaw's tri-state `enabled`, so it is switched on).
        return LoopDetectionConfig(preset="early", enabled=True) if self.early else None

    def guard(self, **kwargs: Any) -> LoopGuard:
        return LoopGuard(self.config(), **kwargs)


PATTERNS = [
    Pattern("identical", _cycle(READ)),
    # A-B (and [A, B] in parallel, which the history sees as A-B) stop only once blocked
    # attempts keep counting in ping-pong/cycle; today a veto resets the alternation.
    Pattern("a-b", _cycle(READ, GREP)),
    Pattern("a-b-c", _cycle(READ, GREP, LS)),
    Pattern("a-b-c-d", _cycle(READ, GREP, LS, STAT)),
    Pattern("parallel", lambda turn: [READ, GREP]),
    Pattern("same-error", _fetch, early=True),
]


def _params(patterns: list[Pattern], *, stuck: bool) -> list[Any]:
    return [pytest.param(p, id=p.name, marks=p.marks if stuck else ()) for p in patterns]


STUCK = _params(PATTERNS, stuck=True)
PROGRESSING = _params(PATTERNS, stuck=False)


class Workbench:
    """The tools' behaviour, shared by every door: ``stuck`` tools answer the same call the same
    way forever (``fetch`` always fails with the same error); progressing ones answer something
    new every time. ``executions`` counts real runs."""

    def __init__(self, *, stuck: bool) -> None:
        self.stuck = stuck
        self.executions = 0

    def run(self, tool: str, args: dict[str, Any]) -> str:
        self.executions += 1
        n = self.executions
        if tool == "fetch":
            raise RuntimeError("503 Service Unavailable" if self.stuck
                               else f"404 Not Found: no page named part-{n}")
        text = f"{tool} {sorted(args.items())}: nothing changed"
        return text if self.stuck else f"{text} (revision {n})"


# -- the plain guard: an admit_batch agent loop ---------------------------------------------------


@dataclass
class LoopOutcome:
    executions: int
    model_calls: int
    blocked: int
    final: str | None
    seen: list[list[str]] = field(default_factory=list)  # what the model got back, per turn


def _plain_loop(guard: LoopGuard, pattern: Pattern, bench: Workbench, *, turns: int,
                session: str = "s") -> LoopOutcome:
    """OpenClaw's agent loop in miniature: each assistant message's calls are admitted as one
    batch; a terminal admission ends the run with the stop message."""
    run = uuid.uuid4().hex
    outcome = LoopOutcome(0, 0, 0, None)
    ids = itertools.count()
    for turn in itertools.count():
        outcome.model_calls += 1
        if turn >= turns:  # the script is done: the model answers
            outcome.final = FINAL
            break
        calls = [ToolCall(name, dict(args), call_id=f"c{next(ids)}")
                 for name, args in pattern.turn(turn)]
        admission = guard.admit_batch(calls, session=session, run_id=run)
        if admission.terminal:
            outcome.blocked += len(calls)
            outcome.final = admission.stop_message
            break
        seen = []
        for call, verdict in zip(calls, admission.verdicts, strict=True):
            if verdict.action == "block":
                outcome.blocked += 1
                seen.append(verdict.message or "")
                continue
            ids_ = {"session": session, "run_id": run, "call_id": call.call_id}
            try:
                result: Any = bench.run(call.tool_name, call.args)
            except RuntimeError as exc:
                after = guard.after_tool_call(call.tool_name, call.args, error=exc, **ids_)
                result = str(exc)
            else:
                after = guard.after_tool_call(call.tool_name, call.args, result=result, **ids_)
            seen.append(after.annotate(verdict.annotate(result)))
        outcome.seen.append(seen)
    outcome.executions = bench.executions
    return outcome


@pytest.mark.parametrize("pattern", STUCK)
def test_plain_guard_stops_every_pattern(pattern: Pattern) -> None:
    bench = Workbench(stuck=True)
    out = _plain_loop(pattern.guard(), pattern, bench, turns=STUCK_TURNS)
    assert out.final == STOP_MESSAGE
    assert out.executions <= pattern.max_executions
    assert out.model_calls <= MAX_MODEL_CALLS


@pytest.mark.parametrize("pattern", PROGRESSING)
def test_plain_guard_never_blocks_progress(pattern: Pattern) -> None:
    bench = Workbench(stuck=False)
    out = _plain_loop(pattern.guard(), pattern, bench, turns=PROGRESS_TURNS)
    assert out.blocked == 0
    assert out.final == FINAL
    assert out.model_calls == PROGRESS_TURNS + 1


# -- guard defaults, the kill switch and the decorator door ----------------------------------------


def _repeat(guard: LoopGuard, n: int, **ids: Any) -> list[str]:
    actions = []
    for i in range(n):
        verdict = guard.before_tool_call("read", {"path": "a"}, call_id=f"c{i}", **ids)
        if verdict.action != "block":
            guard.after_tool_call("read", {"path": "a"}, result="same", call_id=f"c{i}", **ids)
        actions.append(verdict.action)
    return actions


def test_a_guard_without_config_guards() -> None:
    actions = _repeat(LoopGuard(), 21, session="s", run_id="r")
    assert actions[10] == "warn" and actions[20] == "block"
    # an explicit config keeps OpenClaw's tri-state `enabled` (unset: no rolling detection)
    assert set(_repeat(LoopGuard(LoopDetectionConfig()), 40, session="s")) == {"allow"}


def test_kill_switch_allows_everything_and_logs_once() -> None:
    code = """
import logging, sys
logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="%(message)s")
from loopwarden import LoopGuard, ToolCall
counts = []
for g in (LoopGuard(), LoopGuard()):
    for i in range(40):
        v = g.before_tool_call("read", {"p": 1}, session="s", run_id="r", call_id=f"c{i}")
        a = g.admit_batch([ToolCall("ls", {}, call_id=f"b{i}")], session="s", run_id="r")
        g.after_tool_call("read", {"p": 1}, session="s", run_id="r", call_id=f"c{i}", result=1)
        counts.append((v.action, a.verdicts[0].action, a.terminal))
    print("history", len(g.history("s")), g.stats.warnings, g.stats.blocks)
print("actions", sorted(set(counts)))
"""
    import os
    import subprocess
    import sys

    env = {**os.environ, "LOOPWARDEN_DISABLED": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.count("LOOPWARDEN_DISABLED=1") == 1  # logged once per process
    assert out.count("history 0 0 0") == 2
    assert "actions [('allow', 'allow', False)]" in out


def test_decorator_appends_the_note_to_what_the_model_sees(
        caplog: pytest.LogCaptureFixture) -> None:
    guard = LoopGuard()

    @guard.tool
    def status(job: str) -> str:
        return "running"

    @guard.tool
    def shaped(job: str) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "running"}], "details": {}}

    @guard.tool
    def number(job: str) -> int:
        return 7

    texts = [status("j") for _ in range(11)]
    assert texts[:10] == ["running"] * 10
    assert texts[10].startswith("running\n\n" + NOTE_TEXT)
    results = [shaped("j") for _ in range(11)]
    assert results[10]["content"][-1]["text"].startswith(NOTE_TEXT)
    assert len(results[9]["content"]) == 1
    with caplog.at_level("INFO", logger="loopwarden"):
        assert [number("j") for _ in range(11)] == [7] * 11  # other types: unchanged
    assert "no warning note added to the int result of number" in caplog.text


def test_decorator_session_and_run_from_the_call_arguments() -> None:
    guard = LoopGuard()

    @guard.tool(session=lambda args: f"user:{args['user']}",
                run_id=lambda args: args["ticket"])
    def lookup(user: str, ticket: str, verbose: bool = False) -> str:
        return "same"

    for _ in range(3):
        lookup("ada", "T-1")
        lookup(user="bob", ticket="T-2")
    assert {r.run_id for r in guard.history("user:ada")} == {"T-1"}
    assert len(guard.history("user:bob")) == 3


@pytest.mark.parametrize("on_block", ["raise", "return"])
def test_decorator_terminal_stop_raises_loop_terminated(on_block: Any) -> None:
    guard = LoopGuard()
    runs = 0

    @guard.tool(on_block=on_block, run_id="r1")
    def poll() -> str:
        nonlocal runs
        runs += 1
        return "same"

    for _ in range(20):
        poll()
    if on_block == "raise":  # the first critical: blocked, the caller may recover
        with pytest.raises(LoopBlockedError):
            poll()
    else:
        assert poll()["details"]["status"] == "blocked"
    with pytest.raises(LoopTerminatedError) as info:  # the second: the run is over
        poll()
    assert runs == 20
    assert str(info.value) == STOP_MESSAGE
    assert info.value.detection is not None and info.value.detection.level == "critical"
    assert (info.value.tool_name, info.value.session, info.value.run_id) == (
        "poll", "default", "r1")


async def test_decorator_continue_keeps_blocking_and_async_terminates() -> None:
    guard = LoopGuard()

    @guard.tool(exit_behavior="continue", session="c")
    async def keep() -> str:
        return "same"

    @guard.tool(session="e")
    async def stop() -> str:
        return "same"

    for _ in range(20):
        await keep()
        await stop()
    for _ in range(5):
        with pytest.raises(LoopBlockedError):
            await keep()
    with pytest.raises(LoopBlockedError):
        await stop()
    with pytest.raises(LoopTerminatedError):
        await stop()


def test_decorator_rejects_an_unknown_exit_behavior() -> None:
    with pytest.raises(ConfigError, match="exit_behavior"):
        LoopGuard().tool(exit_behavior="halt")  # type: ignore[arg-type]


# -- LangChain: create_agent with LoopGuardMiddleware ---------------------------------------------

langchain_agents = pytest.importorskip("langchain.agents")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.tools import BaseTool, StructuredTool, ToolException  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from langchain_parts import SkipToTools  # noqa: E402
from loopwarden.guard.verdicts import (  # noqa: E402
    RECOVERY_SIBLING_TEXT,
    RECOVERY_TEXT,
    TERMINAL_SIBLING_TEXT,
    TERMINAL_TEXT,
)
from loopwarden.integrations.langchain import LoopGuardMiddleware  # noqa: E402

NOTE = NOTE_TEXT


class Script:
    """An insistent model's replies: the pattern's calls for ``turns`` turns whatever it is
    told, then its final answer forever. ``calls`` counts the model calls."""

    def __init__(self, pattern: Pattern, turns: int) -> None:
        self.pattern, self.turns, self.calls = pattern, turns, 0

    def __iter__(self) -> Iterator[AIMessage]:
        return self

    def __next__(self) -> AIMessage:
        turn, self.calls = self.calls, self.calls + 1
        if turn >= self.turns:
            return AIMessage(content=FINAL)
        return AIMessage(content="", tool_calls=[
            {"name": name, "args": dict(args), "id": f"call-{uuid.uuid4().hex[:12]}"}
            for name, args in self.pattern.turn(turn)])


class ScriptedChatModel(GenericFakeChatModel):
    """langchain_core's fake chat model, made to accept tools (it ignores them)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self


def _model(script: Script) -> ScriptedChatModel:
    # (GenericFakeChatModel's own streaming drops tool calls; invoke-only keeps them.)
    return ScriptedChatModel(messages=script, disable_streaming=True)


def _lc_tools(bench: Workbench) -> list[BaseTool]:
    def run(name: str, **args: Any) -> str:
        try:
            return bench.run(name, args)
        except RuntimeError as exc:  # an error ToolMessage, not a crashed run
            raise ToolException(str(exc)) from exc

    def read(path: str) -> str:
        """Read a file."""
        return run("read", path=path)

    def grep(pattern: str) -> str:
        """Search the files."""
        return run("grep", pattern=pattern)

    def ls(dir: str) -> str:
        """List a directory."""
        return run("ls", dir=dir)

    def stat(path: str) -> str:
        """Describe a file."""
        return run("stat", path=path)

    def fetch(url: str) -> str:
        """Fetch a web page."""
        return run("fetch", url=url)

    tools = [StructuredTool.from_function(f) for f in (read, grep, ls, stat, fetch)]
    for t in tools:
        t.handle_tool_error = True
    return tools


MODES = ["invoke", "stream", "ainvoke", "astream"]


async def _drive(agent: Any, mode: str, text: str, config: dict[str, Any]) -> dict[str, Any]:
    inputs = {"messages": [("user", text)]}
    if mode == "invoke":
        return agent.invoke(inputs, config)
    if mode == "ainvoke":
        return await agent.ainvoke(inputs, config)
    states: list[dict[str, Any]] = []
    if mode == "stream":
        states.extend(agent.stream(inputs, config, stream_mode="values"))
    else:
        states.extend([s async for s in agent.astream(inputs, config, stream_mode="values")])
    return states[-1]


def _lc_config(thread: str = "t1") -> dict[str, Any]:
    # generous: the run must end by itself, not by LangGraph's recursion limit
    return {"configurable": {"thread_id": thread}, "recursion_limit": 2000}


def _assert_consistent(messages: list[BaseMessage]) -> None:
    """Every tool call of every assistant message has its ToolMessage answer."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    for message in messages:
        if isinstance(message, AIMessage):
            assert {c["id"] for c in message.tool_calls} <= answered


def _blocked(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage) and isinstance(m.artifact, dict)
            and m.artifact.get("details", {}).get("status") == "blocked"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pattern", STUCK)
async def test_langchain_ends_every_stuck_run(pattern: Pattern, mode: str) -> None:
    bench, script, saver = Workbench(stuck=True), Script(pattern, STUCK_TURNS), InMemorySaver()
    middleware = LoopGuardMiddleware(pattern.guard())
    agent = create_agent(_model(script), _lc_tools(bench), middleware=[middleware],
                         checkpointer=saver)
    out = await _drive(agent, mode, "tidy the repo", _lc_config())
    messages = out["messages"]
    assert isinstance(messages[-1], AIMessage) and messages[-1].text == STOP_MESSAGE
    assert bench.executions <= pattern.max_executions
    assert script.calls <= MAX_MODEL_CALLS
    _assert_consistent(messages)
    # the thread is still usable: a later turn on it runs normally (a new run, a new budget)
    follow = Script(pattern, 0)
    again = create_agent(_model(follow), _lc_tools(bench), middleware=[middleware],
                         checkpointer=saver)
    out = await _drive(again, mode, "just answer", _lc_config())
    assert out["messages"][-1].text == FINAL and follow.calls == 1
    _assert_consistent(out["messages"])


@pytest.mark.parametrize("mode", ["invoke", "astream"])
@pytest.mark.parametrize("pattern", PROGRESSING)
async def test_langchain_never_blocks_progress(pattern: Pattern, mode: str) -> None:
    bench, script = Workbench(stuck=False), Script(pattern, PROGRESS_TURNS)
    agent = create_agent(_model(script), _lc_tools(bench),
                         middleware=[LoopGuardMiddleware(pattern.guard())],
                         checkpointer=InMemorySaver())
    out = await _drive(agent, mode, "tidy the repo", _lc_config())
    assert _blocked(out["messages"]) == []
    assert out["messages"][-1].text == FINAL
    assert script.calls == PROGRESS_TURNS + 1
    assert bench.executions == sum(len(pattern.turn(t)) for t in range(PROGRESS_TURNS))


IDENTICAL, PARALLEL = PATTERNS[0], PATTERNS[4]


def test_langchain_warn_block_and_terminal_messages() -> None:
    """What the model and the user see: the note on the 11th result, the blocked 21st call with
    the recovery text, the 22nd call blocked with the terminal text, the stop message."""
    bench, script = Workbench(stuck=True), Script(IDENTICAL, STUCK_TURNS)
    agent = create_agent(_model(script), _lc_tools(bench),
                         middleware=[LoopGuardMiddleware(LoopGuard())])
    out = agent.invoke({"messages": [("user", "read a.txt")]}, _lc_config())
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(results) == 22 and bench.executions == 20 and script.calls == 22
    assert [i for i, m in enumerate(results) if NOTE in m.text] == [10]
    assert results[10].text.startswith("read [('path', 'a.txt')]: nothing changed\n\n")
    first, last = results[20], results[21]
    assert first.status == last.status == "error"
    assert first.text.startswith("CRITICAL:") and first.text.endswith(RECOVERY_TEXT)
    assert "terminate" not in first.artifact
    assert last.text.endswith(TERMINAL_TEXT) and last.artifact["terminate"] is True
    assert last.artifact["details"]["intervention"]["kind"] == "critical-tool-loop"
    assert out["messages"][-1].text == STOP_MESSAGE


def test_langchain_parallel_batch_is_blocked_together() -> None:
    bench, script = Workbench(stuck=True), Script(PARALLEL, STUCK_TURNS)
    agent = create_agent(_model(script), _lc_tools(bench),
                         middleware=[LoopGuardMiddleware(LoopGuard())])
    out = agent.invoke({"messages": [("user", "scan")]}, _lc_config())
    blocked = _blocked(out["messages"])
    # the first critical blocks both calls of its message (one recovery turn), the second ends
    # the run; the texts say which call triggered it
    assert len(blocked) == 4
    first_turn, last_turn = blocked[:2], blocked[-2:]
    assert sorted(m.text.endswith(RECOVERY_TEXT) for m in first_turn) == [False, True]
    assert sorted(m.text == RECOVERY_SIBLING_TEXT for m in first_turn) == [False, True]
    assert sorted(m.text.endswith(TERMINAL_TEXT) for m in last_turn) == [False, True]
    assert sorted(m.text == TERMINAL_SIBLING_TEXT for m in last_turn) == [False, True]
    assert out["messages"][-1].text == STOP_MESSAGE


async def test_langchain_error_raises_and_keeps_the_thread_consistent() -> None:
    bench, script, saver = Workbench(stuck=True), Script(IDENTICAL, STUCK_TURNS), InMemorySaver()
    middleware = LoopGuardMiddleware(LoopGuard(), exit_behavior="error")
    agent = create_agent(_model(script), _lc_tools(bench), middleware=[middleware],
                         checkpointer=saver)
    with pytest.raises(LoopTerminatedError) as info:
        await agent.ainvoke({"messages": [("user", "read a.txt")]}, _lc_config("e1"))
    error = info.value
    assert error.detection is not None and error.detection.level == "critical"
    assert error.detection.detector == "generic_repeat" and error.tool_name == "read"
    assert error.session == "e1" and error.run_id
    assert error.result["terminate"] is True
    assert bench.executions == 20 and script.calls == 22
    state = agent.get_state(_lc_config("e1")).values
    assert state["messages"][-1].text == STOP_MESSAGE
    _assert_consistent(state["messages"])
    follow = Script(IDENTICAL, 0)
    again = create_agent(_model(follow), _lc_tools(bench), middleware=[middleware],
                         checkpointer=saver)
    out = await again.ainvoke({"messages": [("user", "just answer")]}, _lc_config("e1"))
    assert out["messages"][-1].text == FINAL


def test_langchain_continue_only_blocks() -> None:
    bench, script = Workbench(stuck=True), Script(IDENTICAL, 30)
    agent = create_agent(_model(script), _lc_tools(bench),
                         middleware=[LoopGuardMiddleware(LoopGuard(), exit_behavior="continue")])
    out = agent.invoke({"messages": [("user", "read a.txt")]}, _lc_config())
    blocked = _blocked(out["messages"])
    assert bench.executions == 20 and len(blocked) == 10 and script.calls == 31
    assert all(m.text.endswith(RECOVERY_TEXT) and "terminate" not in m.artifact for m in blocked)
    assert out["messages"][-1].text == FINAL


@pytest.mark.parametrize("exit_behavior", ["end", "error"])
def test_langchain_calls_admitted_one_by_one_still_end_the_run(exit_behavior: Any) -> None:
    bench, script = Workbench(stuck=True), Script(IDENTICAL, STUCK_TURNS)
    middleware = LoopGuardMiddleware(LoopGuard(), exit_behavior=exit_behavior)
    agent = create_agent(_model(script), _lc_tools(bench),
                         middleware=[middleware, SkipToTools()], checkpointer=InMemorySaver())
    config = _lc_config("one-by-one")
    if exit_behavior == "error":
        with pytest.raises(LoopTerminatedError) as info:
            agent.invoke({"messages": [("user", "read a.txt")]}, config)
        assert info.value.detection is not None and info.value.tool_name == "read"
        assert "intervention" not in info.value.result["details"]  # admitted alone
    else:
        out = agent.invoke({"messages": [("user", "read a.txt")]}, config)
        assert out["messages"][-1].text == STOP_MESSAGE
        _assert_consistent(out["messages"])
        last = _blocked(out["messages"])[-1]
        assert last.artifact["terminate"] is True
        assert "intervention" not in last.artifact["details"]  # admitted alone
    assert bench.executions == 20 and script.calls == 22


def test_langchain_rejects_an_unknown_exit_behavior() -> None:
    with pytest.raises(ValueError, match="exit_behavior"):
        LoopGuardMiddleware(LoopGuard(), exit_behavior="stop")  # type: ignore[arg-type]


# -- OpenAI Agents SDK: Runner.run with loop_guardrails -------------------------------------------

pytest.importorskip("agents")

from agents import Agent, AgentsException, RunConfig, Runner, function_tool  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

from loopwarden.integrations.openai_agents import (  # noqa: E402
    AgentsLoopTerminatedError,
    loop_guardrails,
)


def _sdk_model(pattern: Pattern, turns: int) -> ScriptedModel:
    """The SDK's own scripted model: the pattern for ``turns`` responses, then the answer."""
    steps: list[Any] = [
        [function_call(name, args, call_id=f"call-{turn}-{i}")
         for i, (name, args) in enumerate(pattern.turn(turn))]
        for turn in range(turns)]
    steps.append([assistant_message(FINAL)])
    return ScriptedModel(steps)


def _show_error(ctx: Any, error: Exception) -> str:
    return f"fetch failed: {error}"


def _sdk_tools(bench: Workbench, *, default_failure: bool = False) -> list[Any]:
    @function_tool
    def read(path: str) -> str:
        """Read a file."""
        return bench.run("read", {"path": path})

    @function_tool
    def grep(pattern: str) -> str:
        """Search the files."""
        return bench.run("grep", {"pattern": pattern})

    @function_tool
    def ls(dir: str) -> str:
        """List a directory."""
        return bench.run("ls", {"dir": dir})

    @function_tool
    def stat(path: str) -> str:
        """Describe a file."""
        return bench.run("stat", {"path": path})

    def fetch(url: str) -> str:
        """Fetch a web page."""
        return bench.run("fetch", {"url": url})

    # The model sees the error through a failure_error_function (progress shows); with the
    # SDK's default one it sees one fixed text for every failure.
    failing = function_tool(fetch) if default_failure else function_tool(
        fetch, failure_error_function=_show_error)
    return [read, grep, ls, stat, failing]


async def _sdk_run(pattern: Pattern, bench: Workbench, model: ScriptedModel, *,
                   streamed: bool = False, exit_behavior: Any = "end",
                   default_failure: bool = False) -> Any:
    rails = loop_guardrails(pattern.guard(), exit_behavior=exit_behavior)
    tools = _sdk_tools(bench, default_failure=default_failure)
    agent = rails.protect(Agent(name="ops", model=model, tools=tools))
    kwargs: dict[str, Any] = {"max_turns": 500, "hooks": rails.hooks,
                              "run_config": RunConfig(tracing_disabled=True)}
    if not streamed:
        return await Runner.run(agent, "tidy the repo", **kwargs)
    result = Runner.run_streamed(agent, "tidy the repo", **kwargs)
    async for _ in result.stream_events():
        pass
    return result


def _sdk_consistent(result: Any) -> None:
    """Every function call the run made has its output in the history."""
    items = result.to_input_list()
    calls = {i["call_id"] for i in items if i.get("type") == "function_call"}
    outputs = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
    assert calls == outputs


def _sdk_blocked(result: Any) -> list[Any]:
    return [r.output for r in result.tool_input_guardrail_results
            if r.output.behavior["type"] == "reject_content"]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
@pytest.mark.parametrize("pattern", STUCK)
async def test_openai_agents_ends_every_stuck_run(pattern: Pattern, streamed: bool) -> None:
    bench, model = Workbench(stuck=True), _sdk_model(pattern, STUCK_TURNS)
    result = await _sdk_run(pattern, bench, model, streamed=streamed)
    assert result.final_output == STOP_MESSAGE
    assert bench.executions <= pattern.max_executions
    assert len(model.calls) <= MAX_MODEL_CALLS
    _sdk_consistent(result)


@pytest.mark.parametrize("pattern", PROGRESSING)
async def test_openai_agents_never_blocks_progress(pattern: Pattern) -> None:
    bench, model = Workbench(stuck=False), _sdk_model(pattern, PROGRESS_TURNS)
    result = await _sdk_run(pattern, bench, model)
    assert _sdk_blocked(result) == []
    assert result.final_output == FINAL
    assert len(model.calls) == PROGRESS_TURNS + 1
    assert bench.executions == sum(len(pattern.turn(t)) for t in range(PROGRESS_TURNS))


def _sdk_output(model: ScriptedModel, turn: int) -> list[str]:
    """The tool outputs the model received at the start of ``turn`` (0-based)."""
    return [item["output"] for item in model.calls[turn].input
            if item.get("type") == "function_call_output"
            and item["call_id"].startswith(f"call-{turn - 1}-")]


async def test_openai_agents_warn_block_and_terminal_outputs() -> None:
    bench, model = Workbench(stuck=True), _sdk_model(IDENTICAL, STUCK_TURNS)
    result = await _sdk_run(IDENTICAL, bench, model)
    assert bench.executions == 20 and len(model.calls) == 22
    (noted,) = _sdk_output(model, 11)
    assert noted.startswith("read [('path', 'a.txt')]: nothing changed\n\n" + NOTE)
    (first,) = _sdk_output(model, 21)
    assert first.startswith("CRITICAL:") and first.endswith(RECOVERY_TEXT)
    blocked = _sdk_blocked(result)
    assert len(blocked) == 2
    assert blocked[-1].behavior["message"].endswith(TERMINAL_TEXT)
    assert blocked[-1].output_info["terminate"] is True
    # the terminal turn's output is the last history item; no model call follows it
    assert result.to_input_list()[-1]["output"].endswith(TERMINAL_TEXT)
    assert result.final_output == STOP_MESSAGE


async def test_openai_agents_parallel_batch_is_blocked_together() -> None:
    bench, model = Workbench(stuck=True), _sdk_model(PARALLEL, STUCK_TURNS)
    result = await _sdk_run(PARALLEL, bench, model)
    texts = [b.behavior["message"] for b in _sdk_blocked(result)]
    assert len(texts) == 4
    assert sorted(t == RECOVERY_SIBLING_TEXT for t in texts[:2]) == [False, True]
    assert sorted(t == TERMINAL_SIBLING_TEXT for t in texts[2:]) == [False, True]
    assert result.final_output == STOP_MESSAGE


async def test_openai_agents_error_raises_an_sdk_exception() -> None:
    bench, model = Workbench(stuck=True), _sdk_model(IDENTICAL, STUCK_TURNS)
    with pytest.raises(LoopTerminatedError) as info:
        await _sdk_run(IDENTICAL, bench, model, exit_behavior="error")
    error = info.value
    assert isinstance(error, AgentsLoopTerminatedError) and isinstance(error, AgentsException)
    assert error.detection is not None and error.detection.detector == "generic_repeat"
    assert error.tool_name == "read" and error.result["terminate"] is True
    assert error.run_data is not None  # filled by the SDK, which re-raised it unwrapped
    assert bench.executions == 20 and len(model.calls) == 22


async def test_openai_agents_continue_only_blocks() -> None:
    bench, model = Workbench(stuck=True), _sdk_model(IDENTICAL, 30)
    result = await _sdk_run(IDENTICAL, bench, model, exit_behavior="continue")
    blocked = _sdk_blocked(result)
    assert bench.executions == 20 and len(blocked) == 10 and len(model.calls) == 31
    assert all(b.behavior["message"].endswith(RECOVERY_TEXT) for b in blocked)
    assert all("terminate" not in b.output_info for b in blocked)
    assert result.final_output == FINAL


def test_openai_agents_run_sync_ends_the_run() -> None:
    bench, model = Workbench(stuck=True), _sdk_model(IDENTICAL, STUCK_TURNS)
    rails = loop_guardrails(LoopGuard())
    # protect(tools) and the hooks: the hooks install the stop on the agent they see
    agent = Agent(name="ops", model=model, tools=rails.protect(_sdk_tools(bench)))
    result = Runner.run_sync(agent, "go", max_turns=500, hooks=rails.hooks,
                             run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == STOP_MESSAGE and bench.executions == 20


async def test_openai_agents_stop_keeps_the_agents_own_tool_use_behavior() -> None:
    bench = Workbench(stuck=True)
    rails = loop_guardrails(LoopGuard())
    agent = rails.protect(Agent(name="ops", model=_sdk_model(IDENTICAL, 3),
                                tools=_sdk_tools(bench), tool_use_behavior="stop_on_first_tool"))
    result = await Runner.run(agent, "go", hooks=rails.hooks,
                              run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == "read [('path', 'a.txt')]: nothing changed"
    assert bench.executions == 1


async def test_openai_agents_default_failure_text_counts_as_the_same_error() -> None:
    pattern = PATTERNS[-1]
    bench, model = Workbench(stuck=True), _sdk_model(pattern, STUCK_TURNS)
    result = await _sdk_run(pattern, bench, model, default_failure=True)
    assert result.final_output == STOP_MESSAGE
    assert bench.executions <= MAX_ERROR_EXECUTIONS and len(model.calls) <= MAX_MODEL_CALLS
