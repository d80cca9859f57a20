"""OpenAI Agents SDK door: tool guardrails (and run hooks) for ``Runner.run``.

```python
from agents import Agent, Runner, function_tool
from loopwarden import LoopDetectionConfig, LoopGuard
from loopwarden.integrations.openai_agents import loop_guardrails

guard = LoopGuard(LoopDetectionConfig(enabled=True))
rails = loop_guardrails(guard)
agent = Agent(name="ops", tools=rails.protect([check_job, deploy]))
await Runner.run(agent, "...", hooks=rails.hooks)   # hooks: only to forward compaction
```

The input guardrail asks the guard before a function tool runs; a blocked call is rejected
(``reject_content``) so the model receives the loop message instead of a result. The output
guardrail records the outcome (without outcomes no critical can fire) and, for a warned call,
hands the model the result with the warning note appended (through ``reject_content``, the
SDK's only way to change a tool's output; the note travels as ``output_info`` too).

Ids: run = one ``Runner.run`` (its run context; a run resumed from a serialized ``RunState`` is
a new run); session = ``session=`` (a string, or a callable given the ``ToolContext``), else the
run config's ``group_id`` (the SDK's conversation/thread grouping), else the run itself. The
agent's name is the agent id. ``rails.hooks`` forwards a server-side compaction (a
``compaction`` output item) to the guard, which arms the post-compaction guard;
:class:`loopwarden.CompactionLoopPersistedError` then ends the run (raised as
:class:`AgentsCompactionLoopPersistedError`, a subclass the SDK does not wrap).
"""

from __future__ import annotations

import json
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from agents import (
    Agent,
    AgentsException,
    FunctionTool,
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
)
from agents.tool_context import ToolContext

from ..compaction import CompactionLoopPersistedError
from ..guard import LoopGuard, Verdict

__all__ = [
    "AgentsCompactionLoopPersistedError",
    "LoopGuardHooks",
    "LoopGuardrails",
    "loop_guardrails",
]

GUARDRAIL_NAME = "loopwarden"

SessionSource = str | Callable[[ToolContext[Any]], str] | None


class AgentsCompactionLoopPersistedError(CompactionLoopPersistedError, AgentsException):
    """:class:`~loopwarden.CompactionLoopPersistedError` as an SDK exception, so ``Runner.run``
    re-raises it as is instead of wrapping it in a ``UserError``."""

    def __init__(self, error: CompactionLoopPersistedError) -> None:
        CompactionLoopPersistedError.__init__(
            self, error.message, count=error.count, tool_name=error.tool_name)
        self.run_data = None


@dataclass(slots=True)
class _Run:
    """What the door remembers about one ``Runner.run``."""

    run_id: str
    pending: dict[str, Verdict] = field(default_factory=dict)  # before-verdicts by call id
    compacted: bool = False


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
        self, guard: LoopGuard, *, session: SessionSource = None, agent_id: str | None = None
    ) -> None:
        self.guard = guard
        self.session = session
        self.agent_id = agent_id
        self._runs = _Runs()
        self.input: ToolInputGuardrail[Any] = ToolInputGuardrail(self._before, GUARDRAIL_NAME)
        self.output: ToolOutputGuardrail[Any] = ToolOutputGuardrail(self._after, GUARDRAIL_NAME)
        self.hooks = LoopGuardHooks(self)

    def protect(self, tools: Iterable[Tool]) -> list[Tool]:
        """Attach both guardrails to every ``FunctionTool`` in ``tools`` (in place, once) and
        return the tools as a list; other tool kinds are passed through unguarded."""
        tools = list(tools)
        for tool in tools:
            if isinstance(tool, FunctionTool):
                # First on input: a blocked call stops before other checks. Last on output: the
                # SDK stops at the first rejecting guardrail, and the warning note is one.
                tool.tool_input_guardrails = _with(tool.tool_input_guardrails, self.input, 0)
                tool.tool_output_guardrails = _with(tool.tool_output_guardrails, self.output)
        return tools

    def compaction_happened(self, ctx: RunContextWrapper[Any]) -> None:
        """Note that this run's context was compacted; the guard is armed right before the
        run's next tool call, where the session is known."""
        self._runs.get(ctx).compacted = True

    # -- guardrail functions --------------------------------------------------------------

    async def _before(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx, run = data.context, self._runs.get(data.context)
        session = self._session(ctx, run)
        if run.compacted:
            run.compacted = False
            await self.guard.acompaction_retried(session=session, run_id=run.run_id)
        verdict = await self.guard.abefore_tool_call(
            _tool_name(ctx), _args(ctx), session=session, run_id=run.run_id,
            call_id=ctx.tool_call_id, agent_id=self._agent_id(data.agent))
        if verdict.action == "block":
            return ToolGuardrailFunctionOutput.reject_content(
                verdict.message or "", output_info=verdict.blocked_result())
        run.pending[ctx.tool_call_id] = verdict
        return ToolGuardrailFunctionOutput.allow()

    async def _after(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx, run = data.context, self._runs.get(data.context)
        before = run.pending.pop(ctx.tool_call_id, None)
        try:
            after = await self.guard.aafter_tool_call(
                _tool_name(ctx), _args(ctx), result=data.output, session=self._session(ctx, run),
                run_id=run.run_id, call_id=ctx.tool_call_id, agent_id=self._agent_id(data.agent))
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


class LoopGuardHooks(RunHooks[Any]):
    """``RunHooks`` that forward a server-side compaction (a ``compaction`` item in a model
    response) to the guard. Subclass it to add your own hooks, calling ``super()``."""

    def __init__(self, rails: LoopGuardrails) -> None:
        self.rails = rails

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        if any(_item_type(item) == "compaction" for item in response.output):
            self.rails.compaction_happened(context)


def loop_guardrails(
    guard: LoopGuard, *, session: SessionSource = None, agent_id: str | None = None
) -> LoopGuardrails:
    """Tool guardrails for ``guard``: attach ``.input`` / ``.output`` to ``function_tool``s
    (or call ``.protect(tools)``) and pass ``.hooks`` to ``Runner.run`` to forward compaction.

    ``session``: a fixed session id, or a callable that derives it from the ``ToolContext``
    (e.g. ``lambda ctx: ctx.context.user_id``); by default the run config's ``group_id``, else
    each run is its own session. ``agent_id``: defaults to the agent's name.
    """
    return LoopGuardrails(guard, session=session, agent_id=agent_id)


# -- translation helpers (no detection here) ---------------------------------------------------


def _with(guardrails: list[Any] | None, guardrail: Any, at: int | None = None) -> list[Any]:
    current = list(guardrails or [])
    if guardrail not in current:
        current.insert(len(current) if at is None else at, guardrail)
    return current


def _tool_name(ctx: ToolContext[Any]) -> str:
    return ctx.qualified_tool_name


def _args(ctx: ToolContext[Any]) -> Any:
    """The call's arguments as the model sent them, decoded when they are JSON."""
    raw = ctx.tool_arguments
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return raw


def _item_type(item: Any) -> Any:
    return item.get("type") if isinstance(item, Mapping) else getattr(item, "type", None)


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
