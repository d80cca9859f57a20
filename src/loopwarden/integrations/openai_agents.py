"""OpenAI Agents SDK door: tool guardrails and run hooks for ``Runner.run``.

```python
from agents import Agent, Runner, function_tool
from loopwarden import LoopGuard
from loopwarden.integrations.openai_agents import loop_guardrails

guard = LoopGuard()  # enabled, default thresholds
rails = loop_guardrails(guard)
agent = rails.protect(Agent(name="ops", tools=[check_job, deploy]))
result = await Runner.run(agent, "...", hooks=rails.hooks)
```

``rails.hooks`` sees each model response: its function calls (those of tools ``protect`` guards)
are admitted together, as one batch, before any of them runs. The input guardrail then answers
each call from that admission (a call the hooks did not see is asked of the guard alone); a
blocked call is rejected (``reject_content``) so the model receives the loop message instead of
a result. The output guardrail records the outcome (without outcomes no critical can fire) and,
for a warned call, hands the model the result with the warning note appended (through
``reject_content``, the SDK's only way to change a tool's output; the note travels as
``output_info`` too). A tool that failed with the SDK's default failure message is recorded as
an error outcome.

A critical blocks the whole batch and leaves the model one recovery turn; a second critical in
the same run is the terminal stop, handled by ``exit_behavior``:

- ``"end"`` (default): the batch's calls are rejected with the terminal texts and the run ends
  after that turn with ``result.final_output == STOP_MESSAGE``, through the agent's
  ``tool_use_behavior`` (the SDK's own way to end a run from tool results, like
  ``StopAtTools``). ``protect(agent)`` installs it, wrapping the agent's own behaviour, and so
  do the hooks on every agent they see (handoffs included).
- ``"error"``: :class:`AgentsLoopTerminatedError` (a :class:`loopwarden.LoopTerminatedError`
  and an ``AgentsException``, so ``Runner.run`` re-raises it as is) is raised from the input
  guardrail; no call of the batch runs.
- ``"continue"``: calls are only blocked (the recovery texts); the model decides when to stop.

Ids: run = one ``Runner.run`` (its run context; a run resumed from a serialized ``RunState`` is
a new run); session = ``session=`` (a string, or a callable given the ``ToolContext``), else the
run config's ``group_id`` (the SDK's conversation/thread grouping), else the run itself. The
agent's name is the agent id. ``rails.hooks`` also forwards a server-side compaction (a
``compaction`` output item) to the guard, which arms the post-compaction guard;
:class:`loopwarden.CompactionLoopPersistedError` then ends the run (raised as
:class:`AgentsCompactionLoopPersistedError`, a subclass the SDK does not wrap).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from agents import (
    Agent,
    AgentsException,
    FunctionTool,
    FunctionToolResult,
    ModelResponse,
    RunContextWrapper,
    RunHooks,
    Tool,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolOutputFileContent,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
    ToolOutputImage,
    ToolOutputText,
    ToolsToFinalOutputResult,
    default_tool_error_function,
)
from agents.tool_context import ToolContext

from ..base.errors import LoopTerminatedError
from ..base.types import ToolCall
from ..guard import (
    STOP_MESSAGE,
    BatchAdmission,
    CompactionLoopPersistedError,
    EndOfRun,
    ExitBehavior,
    LoopGuard,
    Verdict,
    terminated_error,
)

__all__ = [
    "AgentsCompactionLoopPersistedError",
    "AgentsLoopTerminatedError",
    "LoopGuardHooks",
    "LoopGuardrails",
    "loop_guardrails",
]

GUARDRAIL_NAME = "loopwarden"

SessionSource = str | Callable[[ToolContext[Any]], str] | None
A = TypeVar("A", bound=Agent[Any])

# What the SDK hands the model (and the output guardrail) when a tool raised and no
# failure_error_function was given; fixed text, whatever the exception.
_DEFAULT_FAILURE = default_tool_error_function(cast(Any, None), Exception())


class AgentsCompactionLoopPersistedError(CompactionLoopPersistedError, AgentsException):
    """:class:`~loopwarden.CompactionLoopPersistedError` as an SDK exception, so ``Runner.run``
    re-raises it as is instead of wrapping it in a ``UserError``."""

    def __init__(self, error: CompactionLoopPersistedError) -> None:
        CompactionLoopPersistedError.__init__(
            self, error.message, count=error.count, tool_name=error.tool_name)
        self.run_data = None


class AgentsLoopTerminatedError(LoopTerminatedError, AgentsException):
    """:class:`~loopwarden.LoopTerminatedError` as an SDK exception (``exit_behavior="error"``),
    so ``Runner.run`` re-raises it as is; the SDK fills ``run_data``."""

    def __init__(self, error: LoopTerminatedError) -> None:
        LoopTerminatedError.__init__(
            self, error.message, error.detection, tool_name=error.tool_name,
            session=error.session, run_id=error.run_id, result=error.result)
        self.run_data = None


@dataclass(slots=True)
class _Batch:
    """One model response's guarded calls, admitted together by the first guardrail to ask."""

    calls: dict[str, ToolCall]  # by call id
    admission: asyncio.Future[BatchAdmission] | None = None


@dataclass(slots=True)
class _Run:
    """What the door remembers about one ``Runner.run``."""

    run_id: str
    pending: dict[str, Verdict] = field(default_factory=dict)  # before-verdicts by call id
    compacted: bool = False
    batch: _Batch | None = None
    stopped: bool = False  # the terminal stop under "end": tool_use_behavior ends the run
    failures: dict[str, Exception] = field(default_factory=dict)  # by call id, see _Failures


class _Runs:
    """Per-run records keyed by the run's ``Usage`` object: the SDK creates one per run
    context and shares it with every tool context of that run. Entries die with the run."""

    def __init__(self) -> None:
        self._runs: dict[int, tuple[weakref.ref[Any], _Run]] = {}

    def get(self, ctx: RunContextWrapper[Any]) -> _Run:
        anchor = ctx.usage
        key = id(anchor)
        entry = self._runs.get(key)
        if entry is not None and entry[0]() is anchor:
            return entry[1]
        run = _Run(uuid.uuid4().hex)
        self._runs[key] = (weakref.ref(anchor, lambda _ref: self._forget(key, run)), run)
        return run

    def _forget(self, key: int, run: _Run) -> None:
        entry = self._runs.get(key)
        if entry is not None and entry[1] is run:
            del self._runs[key]


class LoopGuardrails:
    """The input and output tool guardrails (and the run hooks) that connect one
    :class:`~loopwarden.LoopGuard` to the Agents SDK. Build it with :func:`loop_guardrails`."""

    def __init__(
        self, guard: LoopGuard, *, session: SessionSource = None, agent_id: str | None = None,
        exit_behavior: ExitBehavior = "end",
    ) -> None:
        self.guard = guard
        self.session = session
        self.agent_id = agent_id
        self.end_of_run = EndOfRun(exit_behavior)
        self.exit_behavior = self.end_of_run.behavior
        self._runs = _Runs()
        self.input: ToolInputGuardrail[Any] = ToolInputGuardrail(self._before, GUARDRAIL_NAME)
        self.output: ToolOutputGuardrail[Any] = ToolOutputGuardrail(self._after, GUARDRAIL_NAME)
        self.hooks = LoopGuardHooks(self)

    def protect(self, tools: Iterable[Tool] | A) -> Any:
        """Attach both guardrails to every ``FunctionTool`` (in place, once); other tool kinds
        are passed through unguarded. Given tools, returns them as a list; given an ``Agent``,
        guards its tools, installs the terminal stop (``exit_behavior="end"``) in its
        ``tool_use_behavior`` and returns the agent."""
        if isinstance(tools, Agent):
            self.protect(tools.tools)
            self.install_stop(tools)
            return tools
        tools = list(tools)
        for tool in tools:
            if isinstance(tool, FunctionTool):
                # First on input: a blocked call stops before other checks. Last on output: the
                # SDK stops at the first rejecting guardrail, and the warning note is one.
                tool.tool_input_guardrails = _with(tool.tool_input_guardrails, self.input, 0)
                tool.tool_output_guardrails = _with(tool.tool_output_guardrails, self.output)
                self._record_failures(tool)
        return tools

    def _record_failures(self, tool: FunctionTool) -> None:
        """Let the door see the exception behind a tool's ``failure_error_function`` output.

        Only a tool with its own formatter is wrapped (the SDK keeps that flag, so nothing else
        changes); the SDK's default formatter's fixed text is recognised in :meth:`_after`."""
        inner = getattr(tool, "_failure_error_function", None)
        if getattr(tool, "_use_default_failure_error_function", True) or not callable(inner):
            return
        if isinstance(inner, _Failures) and inner.rails is self:
            return
        tool._failure_error_function = _Failures(self, inner)

    def install_stop(self, agent: Agent[Any]) -> None:
        """Let ``agent`` end a run at the terminal stop (``exit_behavior="end"``): its
        ``tool_use_behavior`` is wrapped, once; outside a terminal stop it behaves as before."""
        if not self.end_of_run.ends_runs:
            return
        behavior = agent.tool_use_behavior
        if isinstance(behavior, _StopAtLoop) and behavior.rails is self:
            return
        agent.tool_use_behavior = _StopAtLoop(self, behavior)

    def compaction_happened(self, ctx: RunContextWrapper[Any]) -> None:
        """Note that this run's context was compacted; the guard is armed right before the
        run's next tool call, where the session is known."""
        self._runs.get(ctx).compacted = True

    def response_received(self, ctx: RunContextWrapper[Any], agent: Agent[Any],
                          response: ModelResponse) -> None:
        """Remember the response's guarded function calls: they are admitted as one batch."""
        calls = _guarded_calls(agent, self.input, response.output)
        by_id = {c.call_id: c for c in calls if c.call_id}
        self._runs.get(ctx).batch = _Batch(by_id) if by_id else None

    # -- guardrail functions --------------------------------------------------------------

    async def _before(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx, run = data.context, self._runs.get(data.context)
        session = self._session(ctx, run)
        if run.compacted:
            run.compacted = False
            await self.guard.acompaction_retried(session=session, run_id=run.run_id)
        agent_id = self._agent_id(data.agent)
        verdict, trigger = await self._admitted(ctx, run, session, agent_id)
        if verdict is None:  # not in a response the hooks saw: this call alone
            verdict = trigger = await self.guard.abefore_tool_call(
                _tool_name(ctx), _args(ctx), session=session, run_id=run.run_id,
                call_id=ctx.tool_call_id, agent_id=agent_id)
        if verdict.action == "block":
            return self._blocked(run, session, verdict, trigger)
        run.pending[ctx.tool_call_id] = verdict
        return ToolGuardrailFunctionOutput.allow()

    async def _admitted(
        self, ctx: ToolContext[Any], run: _Run, session: str, agent_id: str | None,
    ) -> tuple[Verdict | None, Verdict | None]:
        """This call's verdict from its batch, and the batch's trigger (the verdict with the
        critical detection), or ``(None, None)`` when the call is not in the batch."""
        batch = run.batch
        call = batch.calls.get(ctx.tool_call_id) if batch is not None else None
        if batch is None or call is None or call.tool_name != _tool_name(ctx):
            return None, None
        if batch.admission is None:
            # The batch's guardrails run concurrently: the first starts the admission and
            # every one awaits the same result.
            batch.admission = asyncio.ensure_future(self.guard.aadmit_batch(
                list(batch.calls.values()), session=session, run_id=run.run_id,
                agent_id=agent_id))
        admission = await batch.admission
        verdicts = {v.call_id: v for v in admission.verdicts}
        trigger = next((v for v in admission.verdicts if v.detection is not None
                        and v.action == "block"), None)
        return verdicts.get(ctx.tool_call_id), trigger

    def _blocked(self, run: _Run, session: str, verdict: Verdict,
                 trigger: Verdict | None) -> ToolGuardrailFunctionOutput:
        action = self.end_of_run.action(verdict.terminate)
        if action == "raise":
            error = terminated_error(trigger or verdict, session=session, run_id=run.run_id)
            raise AgentsLoopTerminatedError(error)
        if action == "end":
            run.stopped = True
        verdict = self.end_of_run.answer(verdict)
        return ToolGuardrailFunctionOutput.reject_content(
            verdict.message or "", output_info=verdict.blocked_result())

    async def _after(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx, run = data.context, self._runs.get(data.context)
        before = run.pending.pop(ctx.tool_call_id, None)
        error: Any = run.failures.pop(ctx.tool_call_id, None)
        if error is None and isinstance(data.output, str) and data.output == _DEFAULT_FAILURE:
            error = data.output
        outcome = {"result": data.output} if error is None else {"error": error}
        try:
            after = await self.guard.aafter_tool_call(
                _tool_name(ctx), _args(ctx), session=self._session(ctx, run), run_id=run.run_id,
                call_id=ctx.tool_call_id, agent_id=self._agent_id(data.agent), **outcome)
        except CompactionLoopPersistedError as exc:
            raise AgentsCompactionLoopPersistedError(exc) from exc
        notes = [v.note for v in (before, after) if v is not None and v.note]
        if not notes:
            return ToolGuardrailFunctionOutput.allow()
        output = data.output
        for note in notes:
            output = _with_note(output, note)
        info = {"loopwarden": "tool-loop-warning", "notes": notes}
        return ToolGuardrailFunctionOutput(
            output_info=info, behavior={"type": "reject_content", "message": cast(str, output)})

    def _session(self, ctx: ToolContext[Any], run: _Run) -> str:
        if isinstance(self.session, str):
            return self.session
        if self.session is not None:
            return self.session(ctx)
        group = getattr(ctx.run_config, "group_id", None)
        return str(group) if group else run.run_id

    def _agent_id(self, agent: Agent[Any]) -> str | None:
        return self.agent_id or getattr(agent, "name", None)


class _Failures:
    """A tool's ``failure_error_function``, unchanged, that first tells the door which call
    failed with which exception (the output guardrail then records an error outcome)."""

    def __init__(self, rails: LoopGuardrails, inner: Callable[..., Any]) -> None:
        self.rails = rails
        self.inner = inner

    def __call__(self, ctx: RunContextWrapper[Any], error: Exception) -> Any:
        call_id = getattr(ctx, "tool_call_id", None)
        if call_id:
            self.rails._runs.get(ctx).failures[call_id] = error
        return self.inner(ctx, error)


class _StopAtLoop:
    """An agent's ``tool_use_behavior`` that ends the run with the stop message after a turn
    that hit the terminal stop, and otherwise does what the agent's own behaviour does."""

    def __init__(self, rails: LoopGuardrails, inner: Any) -> None:
        self.rails = rails
        self.inner = inner

    async def __call__(self, ctx: RunContextWrapper[Any],
                       results: list[FunctionToolResult]) -> ToolsToFinalOutputResult:
        if self.rails._runs.get(ctx).stopped:
            return ToolsToFinalOutputResult(is_final_output=True, final_output=STOP_MESSAGE)
        inner = self.inner
        # (The SDK's own evaluation of the four kinds of tool_use_behavior.)
        if inner == "stop_on_first_tool" and results:
            return ToolsToFinalOutputResult(is_final_output=True, final_output=results[0].output)
        if isinstance(inner, Mapping):
            names = inner.get("stop_at_tool_names", [])
            for result in results:
                if result.tool.name in names or result.tool.qualified_name in names:
                    return ToolsToFinalOutputResult(is_final_output=True,
                                                    final_output=result.output)
        elif callable(inner):
            decided = inner(ctx, results)
            if inspect.isawaitable(decided):
                decided = await decided
            return cast(ToolsToFinalOutputResult, decided)
        return ToolsToFinalOutputResult(is_final_output=False, final_output=None)


class LoopGuardHooks(RunHooks[Any]):
    """``RunHooks`` that hand each model response's function calls to the guard as one batch,
    install the terminal stop on the agents they see, and forward a server-side compaction (a
    ``compaction`` item in a model response). Subclass it to add your own hooks, calling
    ``super()``."""

    def __init__(self, rails: LoopGuardrails) -> None:
        self.rails = rails

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        """After each model response: forward a compaction item, install the terminal stop on
        ``agent``, and note the response's function calls for batch admission."""
        if any(_item_type(item) == "compaction" for item in response.output):
            self.rails.compaction_happened(context)
        self.rails.install_stop(agent)
        self.rails.response_received(context, agent, response)


def loop_guardrails(
    guard: LoopGuard, *, session: SessionSource = None, agent_id: str | None = None,
    exit_behavior: ExitBehavior = "end",
) -> LoopGuardrails:
    """Tool guardrails for ``guard``: call ``.protect(agent)`` (or ``.protect(tools)``, or
    attach ``.input`` / ``.output`` to ``function_tool``s) and pass ``.hooks`` to
    ``Runner.run``: the hooks admit each response's calls as one batch.

    ``session``: a fixed session id, or a callable that derives it from the ``ToolContext``
    (e.g. ``lambda ctx: ctx.context.user_id``); by default the run config's ``group_id``, else
    each run is its own session. ``agent_id``: defaults to the agent's name.
    ``exit_behavior``: ``"end"`` (default), ``"error"`` or ``"continue"`` at the terminal stop.
    """
    return LoopGuardrails(guard, session=session, agent_id=agent_id, exit_behavior=exit_behavior)


# -- translation helpers (no detection here) ---------------------------------------------------


def _with(guardrails: list[Any] | None, guardrail: Any, at: int | None = None) -> list[Any]:
    current = list(guardrails or [])
    if guardrail not in current:
        current.insert(len(current) if at is None else at, guardrail)
    return current


def _tool_name(ctx: ToolContext[Any]) -> str:
    return ctx.qualified_tool_name


def _call_name(item: Any) -> str:
    """A function call item's name as its ``ToolContext.qualified_tool_name`` will be:
    ``namespace.name``, except for the SDK's synthetic namespace equal to the name."""
    name = str(_field(item, "name") or "")
    namespace = _field(item, "namespace")
    if isinstance(namespace, str) and namespace and namespace != name:
        return f"{namespace}.{name}"
    return name


def _guarded_calls(agent: Agent[Any], guardrail: Any, output: Iterable[Any]) -> list[ToolCall]:
    """The function calls in ``output`` whose tool carries ``guardrail`` (other calls, e.g.
    handoffs, hosted or unguarded tools, never reach the guard)."""
    guarded: set[str] = set()
    for tool in getattr(agent, "tools", None) or ():
        if isinstance(tool, FunctionTool) and guardrail in (tool.tool_input_guardrails or ()):
            guarded.update((tool.name, tool.qualified_name))
    calls = []
    for item in output:
        if _item_type(item) != "function_call":
            continue
        name = _call_name(item)
        if name in guarded:
            calls.append(ToolCall(name, _decoded(_field(item, "arguments")),
                                  call_id=_field(item, "call_id")))
    return calls


def _args(ctx: ToolContext[Any]) -> Any:
    """The call's arguments as the model sent them, decoded when they are JSON."""
    return _decoded(ctx.tool_arguments)


def _decoded(raw: Any) -> Any:
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return raw


def _item_type(item: Any) -> Any:
    return _field(item, "type")


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def _is_structured(item: Any) -> bool:
    """Whether the SDK sends ``item`` to the model as a structured output part."""
    if isinstance(item, (ToolOutputText, ToolOutputImage, ToolOutputFileContent)):
        return True
    return isinstance(item, Mapping) and isinstance(item.get("type"), str)


def _with_note(output: Any, note: str) -> Any:
    """``output`` with ``note`` appended in the shape the SDK will send to the model: text for
    plain values (the SDK stringifies them), one more text part for structured outputs."""
    if isinstance(output, str):
        return f"{output}\n\n{note}" if output else note
    part = {"type": "text", "text": note}
    if isinstance(output, (list, tuple)) and output and all(map(_is_structured, output)):
        return [*output, part]
    if _is_structured(output):
        return [output, part]
    return f"{output}\n\n{note}"
