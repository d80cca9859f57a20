"""LangChain door, ``exit_behavior="ask"``: the terminal stop interrupts the run with a
``HumanInTheLoopMiddleware``-shaped request, and a scripted human resumes it with
``Command(resume=...)``. Real ``create_agent`` graphs, a scripted chat model."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import Field

from langchain_parts import JobTool, SkipToTools
from loopwarden import LoopEvent, LoopGuard
from loopwarden.guard import STOP_MESSAGE
from loopwarden.integrations.langchain import LoopGuardMiddleware

FINAL = "I give up on this job."
APPROVE: dict[str, Any] = {"decisions": [{"type": "approve"}]}
REJECT: dict[str, Any] = {"decisions": [{"type": "reject", "message": "enough"}]}


class InsistentModel(BaseChatModel):
    """Asks for the same calls (``jobs``: one call per job, in one message) every turn for
    ``repeats`` turns, whatever it is told, then answers."""

    jobs: list[str] = Field(default_factory=lambda: ["build-7"])
    repeats: int = 60
    turns: int = 0

    @property
    def _llm_type(self) -> str:
        return "insistent"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> InsistentModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.turns += 1
        if self.turns > self.repeats:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=FINAL))])
        calls = [{"name": "check_job", "args": {"job": job}, "id": f"call-{uuid.uuid4().hex}"}
                 for job in self.jobs]
        return ChatResult(generations=[ChatGeneration(
            message=AIMessage(content="", tool_calls=calls))])


class Human:
    """Answers each interrupt with the next of ``answers`` (the last one forever) and keeps
    the interrupt values it was shown."""

    def __init__(self, *answers: Any) -> None:
        self.answers: list[Any] = list(answers)
        self.shown: list[Any] = []

    def __call__(self, value: Any) -> Any:
        self.shown.append(value)
        return self.answers[min(len(self.shown), len(self.answers)) - 1]


def _parts(**model: Any) -> tuple[JobTool, InsistentModel, list[LoopEvent]]:
    return JobTool(), InsistentModel(**model), []


def _guard(events: list[LoopEvent]) -> LoopGuard:
    # critical at 5: 5 runs, the 6th call blocked (the recovery turn), the 7th is the stop
    return LoopGuard(warning_threshold=3, critical_threshold=5, sinks=[events.append])


def _agent(jobs: JobTool, model: InsistentModel, events: list[LoopEvent], *,
           asynchronous: bool = False, checkpointer: bool = True, guard: LoopGuard | None = None,
           **options: Any) -> Any:
    guard = guard or _guard(events)
    return create_agent(model, [jobs.async_ if asynchronous else jobs.sync],
                        middleware=[LoopGuardMiddleware(guard, exit_behavior="ask", **options)],
                        checkpointer=InMemorySaver() if checkpointer else None)


def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": "t1"}, "recursion_limit": 500}


def _pending(agent: Any, config: dict[str, Any]) -> Any:
    interrupts = agent.get_state(config).interrupts
    assert len(interrupts) <= 1  # one interrupt per stop, whatever the batch's size
    return interrupts[0].value if interrupts else None


def _drive(agent: Any, human: Callable[[Any], Any], mode: str = "invoke") -> dict[str, Any]:
    config, value = _config(), None
    payload: Any = {"messages": [("user", "wait for the builds")]}
    while True:
        if mode == "stream":
            for _ in agent.stream(payload, config, stream_mode="updates"):
                pass
        else:
            agent.invoke(payload, config)
        value = _pending(agent, config)
        if value is None:
            return agent.get_state(config).values  # type: ignore[no-any-return]
        payload = Command(resume=human(value))


async def _adrive(agent: Any, human: Callable[[Any], Any], mode: str) -> dict[str, Any]:
    config = _config()
    payload: Any = {"messages": [("user", "wait for the builds")]}
    while True:
        if mode == "astream":
            async for _ in agent.astream(payload, config, stream_mode="updates"):
                pass
        else:
            await agent.ainvoke(payload, config)
        interrupts = (await agent.aget_state(config)).interrupts
        if not interrupts:
            return (await agent.aget_state(config)).values  # type: ignore[no-any-return]
        assert len(interrupts) == 1
        payload = Command(resume=human(interrupts[0].value))


def _actions(events: list[LoopEvent]) -> list[str]:
    return [e.action for e in events if e.action in ("block", "ask", "continue", "stop")]


def _consistent(messages: list[BaseMessage]) -> None:
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    for message in messages:
        if isinstance(message, AIMessage):
            assert {c["id"] for c in message.tool_calls} <= answered


@pytest.mark.parametrize("mode", ["invoke", "stream"])
def test_continue_goes_on_and_is_asked_again_until_the_grants_are_used(mode: str) -> None:
    jobs, model, events = _parts()
    human = Human(APPROVE)
    out = _drive(_agent(jobs, model, events), human, mode)
    # asked at each stop; max_grants=2 "continue" answers, then the next stop ends the run
    assert len(human.shown) == 2
    first, second = (v["loopwarden"] for v in human.shown)
    assert (first["grants_used"], second["grants_used"]) == (0, 1)
    assert first["detector"] == second["detector"] == "generic_repeat"  # the same pattern
    assert _actions(events) == ["block", "block", "ask", "continue", "block", "block", "ask",
                                "continue", "block", "block"]
    # each "continue" ran the asked call and gave the run a fresh budget: 5 + 1 + 4, twice,
    # then 5 more before the stop ended it (the count is honest across the resumes)
    assert jobs.runs == 5 + 5 + 5
    assert out["messages"][-1].text == STOP_MESSAGE
    _consistent(out["messages"])


def test_the_interrupt_follows_human_in_the_loop_requests() -> None:
    jobs, model, events = _parts()
    human = Human(REJECT)
    _drive(_agent(jobs, model, events), human)
    (value,) = human.shown
    (action,) = value["action_requests"]
    assert action["name"] == "check_job" and action["args"] == {"job": "build-7"}
    assert action["description"] == value["loopwarden"]["text"]
    assert "`check_job`" in action["description"] and "Continue" in action["description"]
    assert value["review_configs"] == [
        {"action_name": "check_job", "allowed_decisions": ["approve", "reject"]}]


@pytest.mark.parametrize("answer", [REJECT, "stop"])
def test_stop_ends_the_run(answer: Any) -> None:
    jobs, model, events = _parts()
    human, guard = Human(answer), _guard(events)
    out = _drive(_agent(jobs, model, events, guard=guard), human)
    assert len(human.shown) == 1 and jobs.runs == 5 and model.turns == 7
    # the resume re-ran the interrupted hook: still one record per call, none admitted twice
    records = guard.history("t1")
    assert len(records) == 7 and len({r.call_id for r in records}) == 7
    assert _actions(events) == ["block", "block", "ask", "stop"]
    assert out["messages"][-1].text == STOP_MESSAGE
    _consistent(out["messages"])
    assert [e.answered_by for e in events if e.action == "stop"] == ["human"]


def test_plain_continue_and_max_grants() -> None:
    jobs, model, events = _parts()
    human = Human("continue")
    out = _drive(_agent(jobs, model, events, max_grants=1), human)
    assert len(human.shown) == 1 and jobs.runs == 5 + 5
    assert out["messages"][-1].text == STOP_MESSAGE


@pytest.mark.parametrize("mode", ["ainvoke", "astream"])
async def test_async_continue_then_stop(mode: str) -> None:
    jobs, model, events = _parts()
    human = Human(APPROVE, "stop")
    out = await _adrive(_agent(jobs, model, events, asynchronous=True), human, mode)
    assert len(human.shown) == 2 and jobs.runs == 5 + 5
    assert _actions(events) == ["block", "block", "ask", "continue", "block", "block", "ask",
                                "stop"]
    assert out["messages"][-1].text == STOP_MESSAGE
    _consistent(out["messages"])


def test_parallel_calls_ask_once_per_stop_and_run_together_on_continue() -> None:
    jobs, model, events = _parts(jobs=["build-7", "build-8"])
    human = Human(APPROVE, REJECT)
    out = _drive(_agent(jobs, model, events), human)
    assert len(human.shown) == 2
    assert all(len(v["action_requests"]) == 1 for v in human.shown)  # the batch's trigger
    turns_before_ask = model.turns
    assert turns_before_ask > 2
    # the approved batch ran both of its calls (the asked one and its sibling)
    tool_messages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    ran = [m for m in tool_messages if m.status != "error"]
    assert len(ran) == jobs.runs and jobs.runs % 2 == 0
    assert out["messages"][-1].text == STOP_MESSAGE
    _consistent(out["messages"])


def test_without_a_checkpointer_ask_falls_back_to_end(caplog: pytest.LogCaptureFixture) -> None:
    jobs, model, events = _parts()
    agent = _agent(jobs, model, events, checkpointer=False)
    with caplog.at_level(logging.WARNING, logger="loopwarden"):
        out = agent.invoke({"messages": [("user", "wait")]}, {"recursion_limit": 500})
    assert "__interrupt__" not in out
    assert out["messages"][-1].text == STOP_MESSAGE and jobs.runs == 5
    assert "no human can be asked" in caplog.text
    assert _actions(events) == ["block", "block"]


def test_an_unreadable_answer_stops_the_run(caplog: pytest.LogCaptureFixture) -> None:
    jobs, model, events = _parts()
    with caplog.at_level(logging.WARNING, logger="loopwarden"):
        out = _drive(_agent(jobs, model, events), Human({"decisions": [{"type": "edit"}]}))
    assert out["messages"][-1].text == STOP_MESSAGE and jobs.runs == 5
    assert "must approve or reject" in caplog.text


def test_a_call_admitted_alone_is_asked_about_before_the_next_model_call() -> None:
    jobs, model, events = _parts()
    guard = LoopGuard(warning_threshold=3, critical_threshold=5, sinks=[events.append])
    agent = create_agent(model, [jobs.sync], checkpointer=InMemorySaver(), middleware=[
        LoopGuardMiddleware(guard, exit_behavior="ask"), SkipToTools()])
    human = Human("continue", "stop")
    out = _drive(agent, human)
    assert len(human.shown) == 2
    assert _actions(events) == ["block", "block", "ask", "continue", "block", "block", "ask",
                                "stop"]
    # the asked call stays blocked (it was answered before the question); the fresh budget
    # lets 5 more run
    assert jobs.runs == 5 + 5
    assert out["messages"][-1].text == STOP_MESSAGE
    _consistent(out["messages"])


def test_another_worker_can_resume_the_question() -> None:
    """The question lives in the checkpointed state, not in the middleware: a second agent
    built on the same checkpointer and guard store answers it."""
    jobs, model, events = _parts()
    guard, saver, config = _guard(events), InMemorySaver(), _config()

    def build() -> Any:
        return create_agent(model, [jobs.sync], checkpointer=saver, middleware=[
            LoopGuardMiddleware(guard, exit_behavior="ask")])

    build().invoke({"messages": [("user", "wait")]}, config)
    assert _pending(build(), config)["loopwarden"]["grants_used"] == 0
    out = build().invoke(Command(resume="stop"), config)
    assert out["messages"][-1].text == STOP_MESSAGE and jobs.runs == 5
    assert _actions(events) == ["block", "block", "ask", "stop"]
