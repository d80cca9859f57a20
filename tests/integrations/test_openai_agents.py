"""OpenAI Agents SDK door: real ``Runner.run`` driven by the SDK's own ``ScriptedModel``."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import (
    Agent,
    RunConfig,
    Runner,
    ToolGuardrailFunctionOutput,
    function_tool,
    tool_input_guardrail,
    tool_output_guardrail,
)
from agents.testing import ScriptedModel, assistant_message, function_call
from openai.types.responses import ResponseCompactionItem

from loopwarden import CompactionLoopPersistedError, LoopDetectionConfig, LoopGuard
from loopwarden.integrations.openai_agents import (
    AgentsCompactionLoopPersistedError,
    LoopGuardrails,
    loop_guardrails,
)

NOTE = "[System note: Tool-loop warning after"
FINAL = "I give up on this job."


class JobTool:
    """A function tool that reports the same status forever and counts its real runs."""

    def __init__(self, output: Any = None) -> None:
        self.runs = 0

        @function_tool
        def check_job(job: str) -> Any:
            """Report the status of a build job."""
            self.runs += 1
            return output if output is not None else f"{job}: still running"

        self.tool = check_job


def _script(repeats: int, *, compaction_at: int | None = None) -> ScriptedModel:
    steps: list[Any] = []
    for i in range(repeats):
        call = function_call("check_job", {"job": "build-7"}, call_id=f"call-{i}")
        if i == compaction_at:
            item = ResponseCompactionItem(id=f"cmp-{i}", encrypted_content="...", type="compaction")
            steps.append([item, call])
        else:
            steps.append([call])
    steps.append([assistant_message(FINAL)])
    return ScriptedModel(steps)


def _config(group_id: str | None = None) -> RunConfig:
    return RunConfig(tracing_disabled=True, group_id=group_id)


def _guard() -> LoopGuard:
    return LoopGuard(LoopDetectionConfig(enabled=True))


def _last_output(model: ScriptedModel, turn: int) -> Any:
    """The tool result the model received at the start of ``turn`` (0-based)."""
    item = model.calls[turn].input[-1]
    assert item["type"] == "function_call_output"
    return item["output"]


async def _run(rails: LoopGuardrails, job: JobTool, model: ScriptedModel,
               group_id: str | None = None, **kwargs: Any) -> Any:
    agent = Agent(name="ops", model=model, tools=rails.protect([job.tool]))
    return await Runner.run(agent, "wait for build-7", max_turns=60, hooks=rails.hooks,
                            run_config=_config(group_id), **kwargs)


async def test_warns_at_eleventh_and_blocks_at_twenty_first_call() -> None:
    guard, job, model = _guard(), JobTool(), _script(25)
    # "continue": the run goes on past the terminal stop (the default "end" stops at call 22)
    result = await _run(loop_guardrails(guard, exit_behavior="continue"), job, model)
    assert job.runs == 20  # the tool's own counter: it stopped at the critical threshold
    assert result.final_output == FINAL
    outputs = [_last_output(model, turn) for turn in range(1, 26)]
    assert [i for i, out in enumerate(outputs) if NOTE in out] == [10]
    assert outputs[10] == ("build-7: still running\n\n[System note: Tool-loop warning after 10 "
                           "repeated calls. Change your approach or stop if you are not making "
                           "progress.]")
    assert all(out == "build-7: still running" for out in outputs[:10] + outputs[11:20])
    assert all(out.startswith("CRITICAL:") for out in outputs[20:])
    rejected = [r.output for r in result.tool_input_guardrail_results
                if r.output.behavior["type"] == "reject_content"]
    assert len(rejected) == 5
    # the call was admitted with its model response (a batch): OpenClaw's V3 blocked result
    details = rejected[0].output_info["details"]
    assert (details["status"], details["deniedReason"]) == ("blocked", "tool-loop")
    assert outputs[20].startswith(details["intervention"]["reason"])
    assert details["intervention"]["count"] == 20
    assert guard.stats.warnings == 1 and guard.stats.blocks == 5


def test_run_sync_path() -> None:
    guard, job, model = _guard(), JobTool(), _script(21)
    rails = loop_guardrails(guard, session="sync")
    agent = Agent(name="ops", model=model, tools=rails.protect([job.tool]))
    Runner.run_sync(agent, "go", max_turns=60, hooks=rails.hooks, run_config=_config())
    assert job.runs == 20
    assert _last_output(model, 21).startswith("CRITICAL:")
    run_ids = {r.run_id for r in guard.history("sync")}
    assert len(run_ids) == 1 and None not in run_ids


async def test_sessions_from_group_id_are_isolated_and_runs_are_scoped() -> None:
    guard = _guard()
    rails = loop_guardrails(guard)
    for group in ("thread-1", "thread-2", "thread-1"):
        job, model = JobTool(), _script(12)
        await _run(rails, job, model, group_id=group)
        # every run counts from zero: its own 11th call is the warned one
        outputs = [_last_output(model, turn) for turn in range(1, 13)]
        assert [i for i, out in enumerate(outputs) if NOTE in out] == [10]
    first, second = guard.history("thread-1"), guard.history("thread-2")
    assert len(second) == 12 and len(first) == 24
    assert len({r.run_id for r in first}) == 2
    assert not {r.run_id for r in first} & {r.run_id for r in second}


async def test_without_group_id_each_run_is_its_own_session() -> None:
    events: list[Any] = []
    guard = LoopGuard(LoopDetectionConfig(enabled=True), sinks=[events.append])
    rails = loop_guardrails(guard)
    for _ in range(2):
        await _run(rails, JobTool(), _script(11))
    assert [e.action for e in events] == ["warn", "warn"]
    assert all(e.session == e.run for e in events)
    assert events[0].session != events[1].session
    assert len(guard.history(events[0].session)) == 11


async def test_session_callable_reads_the_run_context() -> None:
    events: list[Any] = []
    guard, job = LoopGuard(LoopDetectionConfig(enabled=True), sinks=[events.append]), JobTool()
    rails = loop_guardrails(guard, session=lambda ctx: f"user:{ctx.context['user']}",
                            agent_id="ops-agent")
    await _run(rails, job, _script(11), context={"user": "ada"})
    assert len(guard.history("user:ada")) == 11
    assert [(e.session, e.agent, e.action) for e in events] == [("user:ada", "ops-agent", "warn")]


async def test_structured_outputs_keep_their_shape_with_the_note() -> None:
    guard = _guard()
    job = JobTool(output={"status": "running", "job": "build-7"})
    model = _script(11)
    await _run(loop_guardrails(guard), job, model)
    noted = _last_output(model, 11)
    assert noted.startswith("{'status': 'running', 'job': 'build-7'}\n\n[System note:")


async def test_compaction_item_arms_the_post_compaction_guard() -> None:
    guard, job = _guard(), JobTool()
    with pytest.raises(CompactionLoopPersistedError) as info:
        await _run(loop_guardrails(guard), job, _script(15, compaction_at=4), group_id="g")
    assert isinstance(info.value, AgentsCompactionLoopPersistedError)  # not wrapped by the SDK
    assert info.value.detector == "compaction_loop_persisted"
    assert info.value.count == 3
    # 4 calls before the compaction, then 3 identical ones end the run
    assert job.runs == 7


def test_protect_attaches_once_and_keeps_other_guardrails() -> None:
    rails = loop_guardrails(_guard())
    job = JobTool()

    @tool_input_guardrail
    def audit_in(data: Any) -> ToolGuardrailFunctionOutput:
        return ToolGuardrailFunctionOutput.allow()

    @tool_output_guardrail
    def redact_out(data: Any) -> ToolGuardrailFunctionOutput:
        return ToolGuardrailFunctionOutput.allow()

    job.tool.tool_input_guardrails = [audit_in]
    job.tool.tool_output_guardrails = [redact_out]
    rails.protect([job.tool])
    rails.protect([job.tool])
    # the loop check runs first on input; the user's output checks run before the note
    assert job.tool.tool_input_guardrails == [rails.input, audit_in]
    assert job.tool.tool_output_guardrails == [redact_out, rails.output]


def test_the_door_is_one_translation_of_at_most_300_lines() -> None:
    # #20: the door module is small, its hooks written once (the SDK runs them for both
    # Runner.run and Runner.run_sync), with no sync/async twins (`x` and `ax` side by side).
    from pathlib import Path

    from loopwarden.integrations import _openai_agents_sdk, openai_agents

    sources = [Path(m.__file__ or "").read_text(encoding="utf-8")
               for m in (openai_agents, _openai_agents_sdk)]
    assert len(sources[0].splitlines()) <= 300
    for source in sources:
        names = set(re.findall(r"^\s*(?:async )?def (\w+)", source, re.M))
        assert not {n for n in names if f"a{n}" in names}, "sync/async twins"
