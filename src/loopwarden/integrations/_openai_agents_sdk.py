"""The OpenAI Agents SDK's shapes for its door (``openai_agents``): its exceptions as SDK ones, a
record per run, a response's guarded calls, a note on a tool output, and the SDK callables the
door wraps. Translation only: the door's hooks decide, these hand their decisions on."""

from __future__ import annotations

import asyncio
import inspect
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
    FunctionToolResult,
    RunContextWrapper,
    ToolOutputFileContent,
    ToolOutputImage,
    ToolOutputText,
    ToolsToFinalOutputResult,
    default_tool_error_function,
)

from ..base.errors import LoopTerminatedError
from ..base.types import ToolCall
from ..guard import STOP_MESSAGE, BatchAdmission, CompactionLoopPersistedError, Verdict, append_note

#: What the SDK hands the model (and the output guardrail) when a tool raised and no
#: ``failure_error_function`` was given: one fixed text, whatever the exception.
DEFAULT_FAILURE = default_tool_error_function(cast(Any, None), Exception())


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
class RunRecord:
    """What the door remembers about one ``Runner.run``."""

    run_id: str
    session: str | None = None  # the last one a guardrail resolved
    pending: dict[str, Verdict] = field(default_factory=dict)  # before-verdicts by call id
    failures: dict[str, Exception] = field(default_factory=dict)  # see FailureFirst
    # The last response's guarded calls by id, admitted together by the first to ask.
    batch: dict[str, ToolCall] = field(default_factory=dict)
    batch_agent: str | None = None
    admission: asyncio.Future[BatchAdmission] | None = None
    compacted: bool = False
    stopped: bool = False  # the terminal stop under "end": tool_use_behavior ends the run


class Runs(dict[int, RunRecord]):
    """The records of live runs, keyed by the run's ``Usage`` object: the SDK creates one per
    run context and shares it with every tool context of that run. Entries die with the run."""

    def __call__(self, ctx: RunContextWrapper[Any]) -> RunRecord:
        """The record of ``ctx``'s run (a new one for a new run)."""
        anchor = ctx.usage
        run = self.get(id(anchor))
        if run is None:
            run = self[id(anchor)] = RunRecord(uuid.uuid4().hex)
            weakref.finalize(anchor, self.pop, id(anchor), None)
        return run


def with_guardrail(guardrails: list[Any] | None, guardrail: Any, *, first: bool = False
                   ) -> list[Any]:
    """``guardrails`` with ``guardrail`` added first or last, unless it is there already."""
    current = list(guardrails or [])
    return current if guardrail in current else (
        [guardrail, *current] if first else [*current, guardrail])


def guarded_calls(agent: Agent[Any], guardrail: Any, output: Iterable[Any]) -> list[ToolCall]:
    """The function calls in ``output`` whose tool carries ``guardrail`` (others, e.g.
    handoffs, hosted or unguarded tools, never reach the guard), named as their
    ``ToolContext.qualified_tool_name`` will be (``namespace.name``, except for the SDK's
    synthetic namespace equal to the name)."""
    guarded = {name for tool in getattr(agent, "tools", None) or ()
               if isinstance(tool, FunctionTool) and guardrail in (tool.tool_input_guardrails or ())
               for name in (tool.name, tool.qualified_name)}
    calls = []
    for item in output:
        name, namespace = str(field_of(item, "name") or ""), field_of(item, "namespace")
        if isinstance(namespace, str) and namespace and namespace != name:
            name = f"{namespace}.{name}"
        if field_of(item, "type") == "function_call" and name in guarded:
            calls.append(ToolCall(name, decoded(field_of(item, "arguments")),
                                  call_id=field_of(item, "call_id")))
    return calls


def decoded(raw: Any) -> Any:
    """A call's arguments as the model sent them, decoded when they are JSON."""
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return raw


def field_of(item: Any, *path: str) -> Any:
    """A field (or a field's field...) of an SDK item, which may be a model object or a plain
    mapping; None where one is missing."""
    for name in path:
        item = item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)
    return item


def _is_structured(item: Any) -> bool:
    """Whether the SDK sends ``item`` to the model as a structured output part."""
    return isinstance(item, (ToolOutputText, ToolOutputImage, ToolOutputFileContent)) or (
        isinstance(item, Mapping) and isinstance(item.get("type"), str))


def with_note(output: Any, note: str) -> Any:
    """``output`` with ``note`` appended as the SDK will send it: one more text part for
    structured outputs, else text (the SDK stringifies other values)."""
    if isinstance(output, (list, tuple)) and output and all(map(_is_structured, output)):
        return [*output, {"type": "text", "text": note}]
    if _is_structured(output):
        return [output, {"type": "text", "text": note}]
    return append_note(output if isinstance(output, str) else str(output), note)


async def tool_use_result(behavior: Any, ctx: RunContextWrapper[Any],
                          results: list[FunctionToolResult]) -> ToolsToFinalOutputResult:
    """What an agent's ``tool_use_behavior`` decides for a turn's results, as the SDK reads it
    (``"run_llm_again"``, ``"stop_on_first_tool"``, ``StopAtTools`` or a function)."""
    if behavior == "stop_on_first_tool" and results:
        return ToolsToFinalOutputResult(is_final_output=True, final_output=results[0].output)
    if isinstance(behavior, Mapping):
        names = behavior.get("stop_at_tool_names", [])
        for result in results:
            if result.tool.name in names or result.tool.qualified_name in names:
                return ToolsToFinalOutputResult(is_final_output=True, final_output=result.output)
    elif callable(behavior):
        decided = behavior(ctx, results)
        return cast(ToolsToFinalOutputResult,
                    await decided if inspect.isawaitable(decided) else decided)
    return ToolsToFinalOutputResult(is_final_output=False, final_output=None)


@dataclass(eq=False)
class Wrapped:
    """A host callable the door wraps, once per ``owner`` (its rails): ``inner`` is the
    original, ``hook`` the door's part."""

    owner: object
    inner: Any
    hook: Callable[..., Any]


class FailureFirst(Wrapped):
    """A tool's ``failure_error_function``, unchanged, that first notes which call failed with
    which exception in the run's record (``hook(ctx)``), for the output guardrail."""

    def __call__(self, ctx: RunContextWrapper[Any], error: Exception) -> Any:
        call_id = getattr(ctx, "tool_call_id", None)
        if call_id:
            self.hook(ctx).failures[call_id] = error
        return self.inner(ctx, error)


class ApprovalFirst(Wrapped):
    """A tool's ``needs_approval`` (a bool or a callable) that first asks the door's
    ``hook(ctx, call_id)`` whether the call needs a human's approval."""

    async def __call__(self, ctx: RunContextWrapper[Any], params: Any, call_id: str) -> bool:
        if await self.hook(ctx, call_id):
            return True
        decided = self.inner(ctx, params, call_id) if callable(self.inner) else self.inner
        return bool(await decided if inspect.isawaitable(decided) else decided)


class StopFirst(Wrapped):
    """An agent's ``tool_use_behavior`` that ends the run with the stop message after a turn the
    door's ``hook(ctx, results)`` says is stopped; otherwise the agent's own behaviour."""

    async def __call__(self, ctx: RunContextWrapper[Any],
                       results: list[FunctionToolResult]) -> ToolsToFinalOutputResult:
        if await self.hook(ctx, results):
            return ToolsToFinalOutputResult(is_final_output=True, final_output=STOP_MESSAGE)
        return await tool_use_result(self.inner, ctx, results)
