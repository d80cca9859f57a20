"""OpenAI Agents SDK door: ``preset=`` / overrides, and ``exit_behavior="ask"`` through the SDK's
own tool approvals (``needs_approval``, ``result.interruptions``, ``RunState.approve`` /
``reject``), with the SDK's ``ScriptedModel`` and a scripted human."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, function_tool
from agents.run_config import ToolExecutionConfig
from agents.testing import ScriptedModel, assistant_message, function_call

from loopwarden import LoopEvent, LoopGuard
from loopwarden.guard import STOP_MESSAGE
from loopwarden.integrations.openai_agents import LoopGuardrails, loop_guardrails

pytestmark = pytest.mark.integration

FINAL = "I give up on this job."
CONFIG = RunConfig(tracing_disabled=True)


class Job:
    """A tool that reports the same status forever, counting its real runs."""

    def __init__(self) -> None:
        self.runs = 0

        @function_tool
        def check_job(job: str) -> str:
            """Report the status of a build job."""
            self.runs += 1
            return f"{job}: still running"

        self.tool = check_job


def _insistent(calls: int = 200) -> ScriptedModel:
    """A model that asks for the same check ``calls`` times, then gives up."""
    steps: list[Any] = [[function_call("check_job", {"job": "build-7"}, call_id=f"call-{i}")]
                        for i in range(calls)]
    return ScriptedModel([*steps, [assistant_message(FINAL)]])


def _agent(rails: LoopGuardrails, job: Job, model: ScriptedModel) -> Agent[Any]:
    return rails.protect(Agent(name="ops", model=model, tools=[job.tool]))


class Human:
    """Answers every question with the next of ``answers`` (the last one repeats), through
    ``RunState.approve`` (continue) / ``reject`` (stop); records what it was shown."""

    def __init__(self, rails: LoopGuardrails, *answers: str) -> None:
        self.rails, self.answers, self.shown = rails, list(answers), []  # type: ignore[var-annotated]

    def answer(self, result: Any) -> Any:
        """The run state to resume, with every interruption answered."""
        state = result.to_state()
        for item in result.interruptions:
            question = self.rails.question(item)
            assert question is not None and item.tool_name == "check_job"
            self.shown.append(question)
            answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
            (state.approve if answer == "continue" else state.reject)(item)
        return state


async def _run_async(rails: LoopGuardrails, human: Human, job: Job, model: ScriptedModel,
                     config: RunConfig = CONFIG) -> Any:
    agent = _agent(rails, job, model)
    result = await Runner.run(agent, "wait for build-7", max_turns=500, hooks=rails.hooks,
                              run_config=config)
    while result.interruptions:
        result = await Runner.run(agent, human.answer(result), max_turns=500,
                                  hooks=rails.hooks, run_config=config)
    return result


def _run_sync(rails: LoopGuardrails, human: Human, job: Job, model: ScriptedModel) -> Any:
    agent = _agent(rails, job, model)
    result = Runner.run_sync(agent, "wait for build-7", max_turns=500, hooks=rails.hooks,
                             run_config=CONFIG)
    while result.interruptions:
        result = Runner.run_sync(agent, human.answer(result), max_turns=500,
                                 hooks=rails.hooks, run_config=CONFIG)
    return result


def _decisions(events: list[LoopEvent]) -> list[str]:
    return [e.action for e in events if e.action in ("ask", "continue", "stop")]


# -- preset= and threshold overrides -------------------------------------------------------------


async def test_preset_early_stops_an_insistent_loop_sooner() -> None:
    runs = {}
    for preset in (None, "early"):
        job = Job()
        rails = loop_guardrails(preset=preset) if preset else loop_guardrails()
        result = await _run_async(rails, Human(rails, "stop"), job, _insistent())
        assert result.final_output == STOP_MESSAGE
        runs[preset] = job.runs
    assert runs[None] == 20  # the enabled default: critical at 20
    assert runs["early"] < runs[None]


async def test_threshold_overrides_guard_like_loop_guard() -> None:
    events: list[LoopEvent] = []
    job, rails = Job(), loop_guardrails(warning_threshold=3, critical_threshold=6,
                                        sinks=[events.append])
    result = await _run_async(rails, Human(rails, "stop"), job, _insistent())
    assert result.final_output == STOP_MESSAGE and job.runs == 6
    assert rails.guard.config.enabled is True
    assert [e.action for e in events][:1] == ["warn"]


def test_a_guard_and_a_preset_together_are_refused() -> None:
    with pytest.raises(ValueError, match="set it on the LoopGuard you pass"):
        loop_guardrails(LoopGuard(), preset="early")


# -- exit_behavior="ask" ---------------------------------------------------------------------------


async def test_approve_goes_on_and_the_same_pattern_is_asked_again_up_to_max_grants() -> None:
    events: list[LoopEvent] = []
    job = Job()
    rails = loop_guardrails(LoopGuard(sinks=[events.append]), exit_behavior="ask")
    human = Human(rails, "continue")
    result = await _run_async(rails, human, job, _insistent())
    # two grants (the default max_grants), each after a terminal stop; the third stop ends
    assert [q.grants_used for q in human.shown] == [0, 1]
    assert {(q.tool_name, q.detector) for q in human.shown} == {("check_job", "generic_repeat")}
    assert "`check_job`" in human.shown[0].text and "Continue" in human.shown[0].text
    assert _decisions(events) == ["ask", "continue", "ask", "continue"]
    assert {e.answered_by for e in events if e.action == "continue"} == {"human"}
    assert result.final_output == STOP_MESSAGE
    # each approved call ran, and the count started over: three budgets of 20 calls (+ the
    # two approved calls), far more than the 20 of one run without a human
    assert 55 <= job.runs <= 65
    # one run throughout: the resumed legs carry the asked run's id
    assert len({e.run for e in events}) == 1


async def test_reject_ends_the_run_as_end_does() -> None:
    events: list[LoopEvent] = []
    job = Job()
    rails = loop_guardrails(LoopGuard(sinks=[events.append]), exit_behavior="ask")
    human = Human(rails, "stop")
    model = _insistent()
    result = await _run_async(rails, human, job, model)
    assert len(human.shown) == 1 and job.runs == 20
    assert result.final_output == STOP_MESSAGE
    assert _decisions(events) == ["ask", "stop"]
    assert len(model.calls) == 22  # the model is not asked again after the human said stop


async def test_max_grants_bounds_a_human_who_always_continues() -> None:
    job = Job()
    rails = loop_guardrails(exit_behavior="ask", max_grants=1)
    human = Human(rails, "continue")
    result = await _run_async(rails, human, job, _insistent())
    assert len(human.shown) == 1 and result.final_output == STOP_MESSAGE
    assert 38 <= job.runs <= 43


def test_run_sync_approve_then_reject() -> None:
    events: list[LoopEvent] = []
    job = Job()
    rails = loop_guardrails(LoopGuard(sinks=[events.append]), exit_behavior="ask")
    human = Human(rails, "continue", "stop")
    result = _run_sync(rails, human, job, _insistent())
    assert [q.grants_used for q in human.shown] == [0, 1]
    assert _decisions(events) == ["ask", "continue", "ask", "stop"]
    assert result.final_output == STOP_MESSAGE
    assert 38 <= job.runs <= 43


async def test_guardrails_checked_before_approval_leave_the_question_to_the_human() -> None:
    events: list[LoopEvent] = []
    job = Job()
    rails = loop_guardrails(LoopGuard(sinks=[events.append]), exit_behavior="ask")
    config = RunConfig(tracing_disabled=True, tool_execution=ToolExecutionConfig(
        pre_approval_tool_input_guardrails=True))
    result = await _run_async(rails, Human(rails, "continue", "stop"), job, _insistent(), config)
    assert _decisions(events) == ["ask", "continue", "ask", "stop"]
    assert result.final_output == STOP_MESSAGE and 38 <= job.runs <= 43


async def test_ask_keeps_the_tools_own_approval() -> None:
    job = Job()
    job.tool.needs_approval = lambda ctx, params, call_id: call_id == "call-2"
    rails = loop_guardrails(exit_behavior="ask")
    human = Human(rails, "continue")
    agent = _agent(rails, job, _insistent(5))
    result = await Runner.run(agent, "go", hooks=rails.hooks, run_config=CONFIG)
    # the tool's own rule asks at the third call; loopwarden has no question for it
    assert [i.raw_item.call_id for i in result.interruptions] == ["call-2"]
    assert rails.question(result.interruptions[0]) is None
    assert human.shown == [] and job.runs == 2
