"""LangChain v1 door: a real ``create_agent`` graph driven by a scripted chat model."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from langchain_parts import JobTool
from loopwarden import CompactionLoopPersistedError, ConfigError, LoopDetectionConfig, LoopGuard
from loopwarden.guard import STOP_MESSAGE
from loopwarden.integrations.langchain import LoopGuardMiddleware

NOTE = "[System note: Tool-loop warning after"
FINAL = "I give up on this job."


class ScriptedChatModel(BaseChatModel):
    """Asks for the same tool call ``repeats`` times, then answers; keeps what it was sent."""

    tool_name: str = "check_job"
    args: dict[str, Any] = Field(default_factory=lambda: {"job": "build-7"})
    repeats: int = 25
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        turn = len(self.seen)
        if turn <= self.repeats:
            reply = AIMessage(content="", tool_calls=[
                {"name": self.tool_name, "args": dict(self.args), "id": f"call-{uuid.uuid4().hex}"}])
        else:
            reply = AIMessage(content=FINAL)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _guard() -> LoopGuard:
    return LoopGuard(LoopDetectionConfig(enabled=True))


def _tool_messages(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def _assert_warn_then_block(out: dict[str, Any], model: ScriptedChatModel, runs: int) -> None:
    assert runs == 20  # the tool's own counter: it stopped running at the critical threshold
    results = _tool_messages(out["messages"])
    assert len(results) == 25
    assert all(m.status != "error" for m in results[:20])
    noted = [i for i, m in enumerate(results) if NOTE in m.text]
    assert noted == [10]  # the 11th result, once per warning bucket
    assert results[10].text.startswith("build-7: still running\n\n")
    assert "after 10 repeated calls" in results[10].text
    # what the model actually received on its next turn
    assert model.seen[11][-1].text == results[10].text
    for blocked in results[20:]:
        assert blocked.status == "error"
        assert blocked.text.startswith("CRITICAL:")
        assert blocked.artifact["details"]["status"] == "blocked"
        assert blocked.artifact["details"]["deniedReason"] == "tool-loop"
    assert "CRITICAL:" in model.seen[21][-1].text
    assert out["messages"][-1].text == FINAL


def test_warns_at_eleventh_and_blocks_at_twenty_first_call() -> None:
    guard, job, model = _guard(), JobTool(), ScriptedChatModel()
    # "continue": the run goes on past the terminal stop (the default "end" stops at call 22)
    agent = create_agent(model, [job.sync],
                         middleware=[LoopGuardMiddleware(guard, exit_behavior="continue")],
                         checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [("user", "wait for build-7")]},
                       {"configurable": {"thread_id": "t1"}, "recursion_limit": 200})
    _assert_warn_then_block(out, model, job.runs)
    assert guard.stats.warnings == 1 and guard.stats.blocks == 5


async def test_async_path_warns_and_blocks() -> None:
    guard, job, model = _guard(), JobTool(), ScriptedChatModel()
    agent = create_agent(model, [job.async_],
                         middleware=[LoopGuardMiddleware(guard, exit_behavior="continue")],
                         checkpointer=InMemorySaver())
    out = await agent.ainvoke({"messages": [("user", "wait for build-7")]},
                              {"configurable": {"thread_id": "t1"}, "recursion_limit": 200})
    _assert_warn_then_block(out, model, job.runs)


def test_sessions_are_thread_ids_and_isolated() -> None:
    guard = _guard()
    middleware = LoopGuardMiddleware(guard)
    for thread in ("t1", "t2"):
        job, model = JobTool(), ScriptedChatModel(repeats=15)
        agent = create_agent(model, [job.sync], middleware=[middleware],
                             checkpointer=InMemorySaver())
        out = agent.invoke({"messages": [("user", "go")]},
                           {"configurable": {"thread_id": thread}, "recursion_limit": 100})
        assert job.runs == 15
        # each thread warns at its own 11th call: t1's calls never count for t2
        noted = [i for i, m in enumerate(_tool_messages(out["messages"])) if NOTE in m.text]
        assert noted == [10]
    t1, t2 = guard.history("t1"), guard.history("t2")
    assert len(t1) == len(t2) == 15
    assert {r.call_id for r in t1}.isdisjoint({r.call_id for r in t2})


def test_each_invoke_is_its_own_run_within_the_thread() -> None:
    guard, job = _guard(), JobTool()
    middleware = LoopGuardMiddleware(guard)
    saver = InMemorySaver()
    given = uuid.uuid4()
    for config_run in (None, given):
        model = ScriptedChatModel(repeats=12)
        agent = create_agent(model, [job.sync], middleware=[middleware], checkpointer=saver)
        config: dict[str, Any] = {"configurable": {"thread_id": "t1"}, "recursion_limit": 100}
        if config_run is not None:
            config["run_id"] = config_run
        out = agent.invoke({"messages": [("user", "go")]}, config)
        this_run = [m for m in _tool_messages(out["messages"])][-12:]
        # run scoping: the second run starts from zero and warns at its own 11th call
        assert [i for i, m in enumerate(this_run) if NOTE in m.text] == [10]
    runs = [r.run_id for r in guard.history("t1")]
    assert len(set(runs)) == 2 and None not in runs
    assert runs[-1] == str(given)  # a run id passed in the config is the guard's run id
    assert job.runs == 24


def test_explicit_session_callable_receives_the_runtime() -> None:
    guard, job = _guard(), JobTool()
    middleware = LoopGuardMiddleware(guard, session=lambda rt: f"user:{rt.context['user']}")
    agent = create_agent(ScriptedChatModel(repeats=3), [job.sync], middleware=[middleware],
                         context_schema=dict)
    agent.invoke({"messages": [("user", "go")]}, context={"user": "ada"})
    assert len(guard.history("user:ada")) == 3


def test_failing_tool_records_error_outcomes_and_is_blocked() -> None:
    guard = _guard()
    runs = 0

    @tool
    def check_job(job: str) -> str:
        """Report the status of a build job."""
        nonlocal runs
        runs += 1
        raise RuntimeError("scheduler unavailable")

    # the error must reach the guard even though the exception ends the run
    agent = create_agent(ScriptedChatModel(repeats=1), [check_job],
                         middleware=[LoopGuardMiddleware(guard, session="s-err")])
    with pytest.raises(RuntimeError, match="scheduler unavailable"):
        agent.invoke({"messages": [("user", "go")]})
    (record,) = guard.history("s-err")
    assert record.result_hash is not None and record.result_hash.startswith("error:")
    assert runs == 1


def test_invalid_arguments_become_error_outcomes() -> None:
    guard, job = _guard(), JobTool()
    model = ScriptedChatModel(repeats=22, args={"wrong": 1})
    agent = create_agent(model, [job.sync], middleware=[LoopGuardMiddleware(guard)],
                         checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [("user", "go")]},
                       {"configurable": {"thread_id": "bad-args"}, "recursion_limit": 100})
    results = _tool_messages(out["messages"])
    assert job.runs == 0
    assert all(m.status == "error" for m in results)
    assert all(r.result_hash and r.result_hash.startswith("error:")
               for r in guard.history("bad-args")[:20])
    assert results[20].text.startswith("CRITICAL:")


def test_summarization_arms_the_post_compaction_guard() -> None:
    guard, job = _guard(), JobTool()
    summarizer = SummarizationMiddleware(
        FakeListChatModel(responses=["The agent keeps checking build-7."]),
        trigger=("messages", 8), keep=("messages", 2))
    agent = create_agent(ScriptedChatModel(repeats=15), [job.sync],
                         middleware=[LoopGuardMiddleware(guard), summarizer],
                         checkpointer=InMemorySaver())
    with pytest.raises(CompactionLoopPersistedError) as info:
        agent.invoke({"messages": [("user", "go")]},
                     {"configurable": {"thread_id": "t1"}, "recursion_limit": 100})
    assert info.value.detector == "compaction_loop_persisted"
    assert info.value.count == 3
    # 4 calls before the summary, then the window of 3 identical calls ends the run
    assert job.runs == 7



def _stopped_after(middleware: LoopGuardMiddleware) -> tuple[int, int, str]:
    """Run an insistent model to its end: (tool executions, model calls, last message)."""
    job, model = JobTool(), ScriptedChatModel(repeats=40)
    agent = create_agent(model, [job.sync], middleware=[middleware],
                         checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [("user", "wait for build-7")]},
                       {"configurable": {"thread_id": "t1"}, "recursion_limit": 200})
    return job.runs, len(model.seen), out["messages"][-1].text


def test_preset_early_stops_an_insistent_loop_sooner_than_the_default() -> None:
    default = _stopped_after(LoopGuardMiddleware())
    early = _stopped_after(LoopGuardMiddleware(preset="early"))
    assert default == (20, 22, STOP_MESSAGE)  # guards, enabled, with the default thresholds
    assert early[2] == STOP_MESSAGE and early[0] < default[0] and early[1] < default[1]
    assert LoopGuardMiddleware(preset="early").guard.config == LoopGuard(preset="early").config


def test_threshold_overrides_guard_like_loopguard_keywords() -> None:
    middleware = LoopGuardMiddleware(warning_threshold=5, critical_threshold=8)
    assert middleware.guard.config.enabled is True
    assert _stopped_after(middleware) == (8, 10, STOP_MESSAGE)


def test_preset_next_to_a_given_guard_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="preset"):
        LoopGuardMiddleware(LoopGuard(), preset="early")
    with pytest.raises(ConfigError, match="warning_threshold"):
        LoopGuardMiddleware(LoopGuard(), warning_threshold=5)
    with pytest.raises(ConfigError, match="sesion"):  # a misspelt keyword is never dropped
        LoopGuardMiddleware(sesion="s1")
