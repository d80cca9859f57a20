"""OpenAI Agents SDK door: tool guardrails, run hooks and tool approvals for ``Runner.run``.

``rails = loop_guardrails(preset="early")`` (or ``loop_guardrails(LoopGuard(...))``);
``agent = rails.protect(Agent(...))``; ``Runner.run(agent, ..., hooks=rails.hooks)``. The hooks
admit each model response's guarded calls as one batch; the input guardrail answers each call
from it (a block is a ``reject_content``); the output guardrail records the outcome and appends
the warning note. The terminal stop is the guard's :class:`~loopwarden.EndOfRun`, translated:
``"end"`` through the agent's ``tool_use_behavior`` (final output ``STOP_MESSAGE``), ``"error"``
as :class:`AgentsLoopTerminatedError`, ``"ask"`` as a tool approval (``needs_approval``: the
run returns ``interruptions``; ``RunState.approve`` = continue, ``reject`` = stop). User guide:
``docs/doors/openai-agents.md``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from functools import reduce
from typing import Any, TypeVar

from agents import (
    Agent,
    FunctionTool,
    FunctionToolResult,
    ModelResponse,
    RunContextWrapper,
    RunHooks,
    Tool,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
)
from agents.tool_context import ToolContext

from ..guard import (
    CompactionLoopPersistedError,
    EndOfRun,
    ExitBehavior,
    LoopGuard,
    Question,
    Verdict,
    continuing,
    terminated_error,
)
from ._openai_agents_sdk import (
    DEFAULT_FAILURE,
    AgentsCompactionLoopPersistedError,
    AgentsLoopTerminatedError,
    ApprovalFirst,
    FailureFirst,
    RunRecord,
    Runs,
    StopFirst,
    Wrapped,
    decoded,
    field_of,
    guarded_calls,
    with_guardrail,
    with_note,
)

__all__ = ["AgentsCompactionLoopPersistedError", "AgentsLoopTerminatedError", "LoopGuardHooks",
           "LoopGuardrails", "loop_guardrails"]

GUARDRAIL_NAME = "loopwarden"
ASK_CHANNEL = "openai-agents:needs_approval"
SessionSource = str | Callable[[ToolContext[Any]], str] | None
A = TypeVar("A", bound=Agent[Any])


class LoopGuardrails:
    """The tool guardrails, run hooks and approvals that connect a :class:`~loopwarden.LoopGuard`
    to the Agents SDK: ``guard``, or a new ``LoopGuard(preset=..., **overrides)`` (enabled, e.g.
    ``preset="early", critical_threshold=12``). Call ``.protect(agent)``; pass ``.hooks`` to
    ``Runner.run`` (they admit each response's calls as one batch).

    ``session``: a fixed id, or a callable given the ``ToolContext``; by default the run
    config's ``group_id``, else each run is its own session. ``agent_id``: defaults to the
    agent's name. ``exit_behavior``: ``"end"`` (default), ``"error"``, ``"continue"`` or
    ``"ask"`` (a tool approval at the terminal stop; ``max_grants`` "continue" answers per run).
    """

    def __init__(
        self, guard: LoopGuard | None = None, *, session: SessionSource = None,
        agent_id: str | None = None, exit_behavior: ExitBehavior = "end", max_grants: int = 2,
        preset: str | None = None, **overrides: object,
    ) -> None:
        self.guard = LoopGuard.of(guard, preset=preset, **overrides)
        self.session = session
        self.agent_id = agent_id
        self.end_of_run = EndOfRun(exit_behavior, max_grants=max_grants)
        self.exit_behavior = self.end_of_run.behavior
        self.input: ToolInputGuardrail[Any] = ToolInputGuardrail(self._before, GUARDRAIL_NAME)
        self.output: ToolOutputGuardrail[Any] = ToolOutputGuardrail(self._after, GUARDRAIL_NAME)
        self.hooks = LoopGuardHooks(self)
        self._run = Runs()
        self._asked: dict[str, Question] = {}  # by call id, until the human's answer comes

    def protect(self, tools: Iterable[Tool] | A) -> Any:
        """Attach both guardrails (and, under ``"ask"``, the approval) to every ``FunctionTool``
        (in place, once); other tool kinds pass unguarded. Given an ``Agent``, also installs
        the terminal stop in its ``tool_use_behavior`` and returns it; given tools, a list."""
        if isinstance(tools, Agent):
            self.protect(tools.tools)
            self.install_stop(tools)
            return tools
        tools = list(tools)
        for tool in tools:
            if isinstance(tool, FunctionTool):
                # First on input: a blocked call stops before other checks. Last on output: the
                # SDK stops at the first rejecting guardrail, and the warning note is one.
                tool.tool_input_guardrails = with_guardrail(
                    tool.tool_input_guardrails, self.input, first=True)
                tool.tool_output_guardrails = with_guardrail(
                    tool.tool_output_guardrails, self.output)
                # Only a tool's own failure formatter hides the exception from the door.
                if not getattr(tool, "_use_default_failure_error_function", True):
                    self._wrap(tool, "_failure_error_function", FailureFirst, self._run)
                if self.end_of_run.action(True) == "ask":
                    self._wrap(tool, "needs_approval", ApprovalFirst, self._ask)
        return tools

    def install_stop(self, agent: Agent[Any]) -> None:
        """Let ``agent`` end a run at the terminal stop: its ``tool_use_behavior`` is wrapped,
        once; outside a terminal stop it behaves as before."""
        if self.end_of_run.ends_runs:
            self._wrap(agent, "tool_use_behavior", StopFirst, self._stop)

    def _wrap(self, owner: Any, attr: str, kind: type[Wrapped], hook: Callable[..., Any]) -> None:
        inner = getattr(owner, attr, None)
        if not (isinstance(inner, kind) and inner.owner is self):
            setattr(owner, attr, kind(self, inner, hook))

    def question(self, item: Any) -> Question | None:
        """The guard's question behind an approval ``item`` of ``result.interruptions`` (its
        ``.text`` is what to show the human), or None when loopwarden did not ask for it."""
        return self._asked.get(str(field_of(item, "raw_item", "call_id")))

    def response_received(self, ctx: RunContextWrapper[Any], agent: Agent[Any],
                          response: ModelResponse) -> None:
        """Note a compaction item (the guard is armed before the run's next call, where the
        session is known) and the response's guarded calls: they are admitted as one batch."""
        run = self._run(ctx)
        run.compacted |= any(field_of(item, "type") == "compaction" for item in response.output)
        run.batch = {c.call_id: c for c in guarded_calls(agent, self.input, response.output)
                     if c.call_id}
        run.batch_agent, run.admission = self._agent_id(agent), None

    async def _admitted(self, run: RunRecord, session: str, call_id: str, tool_name: str | None
                        ) -> tuple[Verdict | None, Verdict | None]:
        """This call's verdict from its batch and the batch's trigger (the verdict with the
        critical detection); ``(None, None)`` when the call is not in the batch."""
        if run.compacted:
            run.compacted = False
            await self.guard.acompaction_retried(session=session, run_id=run.run_id)
        call = run.batch.get(call_id)
        if call is None or tool_name not in (None, call.tool_name):
            return None, None
        if run.admission is None:  # the first of the batch's calls admits it for all
            run.admission = asyncio.ensure_future(self.guard.aadmit_batch(
                list(run.batch.values()), session=session, run_id=run.run_id,
                agent_id=run.batch_agent))
        verdicts = (await run.admission).verdicts
        trigger = next((v for v in verdicts if v.detection and v.action == "block"), None)
        return next((v for v in verdicts if v.call_id == call_id), None), trigger

    async def _ask(self, ctx: RunContextWrapper[Any], call_id: str) -> bool:
        """``needs_approval`` under ``"ask"``: True exactly when this call is the trigger of a
        terminal stop and the run has grants left (the guard's question is then kept)."""
        run = self._run(ctx)
        if run.session is None:  # no guarded call yet in this run: it cannot be terminal
            return False
        verdict, trigger = await self._admitted(run, run.session, call_id, None)
        if verdict is None or verdict is not trigger or not verdict.terminate:
            return False
        question = await self.guard.aask(
            verdict, session=run.session, run_id=run.run_id, agent_id=run.batch_agent,
            max_grants=self.end_of_run.max_grants, channel=ASK_CHANNEL)
        if question is not None:
            self._asked[call_id] = question
        return question is not None

    async def _before(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx, call_id, agent_id = data.context, data.context.tool_call_id, self._agent_id(data.agent)
        run, question = self._run(ctx), self._asked.get(call_id)
        if question is not None:
            if not ctx.is_tool_approved(ctx.tool_name, call_id):
                return ToolGuardrailFunctionOutput.allow()  # (checked before approval) ask
            del self._asked[call_id]  # approved: the resumed run is the asked one, going on
            run.run_id, run.session = question.run_id or run.run_id, question.session
            run.pending[call_id] = await self.guard.aanswer(
                question, "continue", args=_args(ctx), agent_id=agent_id)
            return ToolGuardrailFunctionOutput.allow()
        session = run.session = self._session(ctx, run)
        verdict, trigger = await self._admitted(run, session, call_id, ctx.qualified_tool_name)
        alone = verdict is None
        if verdict is None:  # not in a response the hooks saw: this call alone
            verdict = trigger = await self.guard.abefore_tool_call(
                ctx.qualified_tool_name, _args(ctx), session=session, run_id=run.run_id,
                call_id=call_id, agent_id=agent_id)
        elif trigger is not None and trigger.call_id in self._asked:
            verdict = continuing(verdict)  # its batch waits for the human's answer
        if verdict.action == "block":
            # "ask" in a batch means the run's grants are used up: the run ends as with "end"
            action = self.end_of_run.action(verdict.terminate, can_ask=not alone)
            if action == "raise":
                raise AgentsLoopTerminatedError(terminated_error(
                    trigger or verdict, session=session, run_id=run.run_id))
            run.stopped |= action in ("end", "ask")
            verdict = self.end_of_run.answer(verdict)
            return ToolGuardrailFunctionOutput.reject_content(
                verdict.message or "", output_info=verdict.blocked_result())
        run.pending[call_id] = verdict
        return ToolGuardrailFunctionOutput.allow()

    async def _after(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx, run = data.context, self._run(data.context)
        before = run.pending.pop(ctx.tool_call_id, None)
        error: Any = run.failures.pop(ctx.tool_call_id, None)
        if error is None and isinstance(data.output, str) and data.output == DEFAULT_FAILURE:
            error = data.output
        outcome = {"result": data.output} if error is None else {"error": error}
        try:
            after = await self.guard.aafter_tool_call(
                ctx.qualified_tool_name, _args(ctx), session=self._session(ctx, run),
                run_id=run.run_id, call_id=ctx.tool_call_id, agent_id=self._agent_id(data.agent),
                **outcome)
        except CompactionLoopPersistedError as exc:
            raise AgentsCompactionLoopPersistedError(exc) from exc
        notes = [v.note for v in (before, after) if v is not None and v.note]
        if not notes:
            return ToolGuardrailFunctionOutput.allow()
        output = reduce(with_note, notes, data.output)
        return ToolGuardrailFunctionOutput(
            output_info={"loopwarden": "tool-loop-warning", "notes": notes},
            behavior={"type": "reject_content", "message": output})

    async def _stop(self, ctx: RunContextWrapper[Any], results: list[FunctionToolResult]
                    ) -> bool:
        """Whether the run ends after these results: a terminal stop, or a human's "stop"
        (a rejected approval: the asked call never reached the input guardrail)."""
        run = self._run(ctx)
        for result in results:
            question = self._asked.pop(str(field_of(result.run_item, "raw_item", "call_id")), None)
            if question is not None:
                await self.guard.aanswer(question, "stop")
                run.stopped = True
        return run.stopped

    def _session(self, ctx: ToolContext[Any], run: RunRecord) -> str:
        if self.session is None:
            group = getattr(ctx.run_config, "group_id", None)
            return str(group) if group else run.run_id
        return self.session if isinstance(self.session, str) else self.session(ctx)

    def _agent_id(self, agent: Agent[Any]) -> str | None:
        return self.agent_id or getattr(agent, "name", None)


class LoopGuardHooks(RunHooks[Any]):
    """``RunHooks`` that hand each model response's guarded calls (and a ``compaction`` item) to
    the rails and install the terminal stop on the agents they see; subclass with ``super()``."""

    def __init__(self, rails: LoopGuardrails) -> None:
        self.rails = rails

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        """After each model response: install the stop on ``agent``, note the response."""
        self.rails.install_stop(agent)
        self.rails.response_received(context, agent, response)


#: ``loop_guardrails(guard, ...)`` / ``loop_guardrails(preset="early")``: see LoopGuardrails.
loop_guardrails = LoopGuardrails


def _args(ctx: ToolContext[Any]) -> Any:
    return decoded(ctx.tool_arguments)
