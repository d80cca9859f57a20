"""LangChain v1 / LangGraph door: an ``AgentMiddleware`` for ``create_agent``.

```python
from langchain.agents import create_agent
from loopwarden import LoopDetectionConfig, LoopGuard
from loopwarden.integrations.langchain import LoopGuardMiddleware

guard = LoopGuard(LoopDetectionConfig(enabled=True))
agent = create_agent(model, tools, middleware=[LoopGuardMiddleware(guard)])
agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "t1"}})
```

Every tool call is asked of the guard before it runs and its outcome recorded after. A warning
reaches the model as the note appended to the call's ``ToolMessage``; a blocked call does not
run and the model gets a ``ToolMessage`` with the loop message and ``status="error"`` (its
``artifact`` holds the OpenClaw-shaped blocked result).

Ids: session = the LangGraph thread id (``configurable.thread_id``), or the run when there is
none; run = one graph run (one ``invoke``/``stream``; a resume after an interrupt continues it),
the ``run_id`` you pass in the config when you pass one. Both are fixed by ``before_agent`` and
kept in private state keys. A conversation summary written by ``SummarizationMiddleware`` is
forwarded to the guard as a compaction (it arms the post-compaction guard);
:class:`loopwarden.CompactionLoopPersistedError` ends the run.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import PrivateStateAttr, ToolCallRequest
from langchain_core.messages import AnyMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import Command
from typing_extensions import NotRequired

from ..guard import LoopGuard, Verdict
from ..types import MISSING

__all__ = ["LoopGuardMiddleware", "LoopGuardState"]

RUN_KEY = "loopwarden_run_id"
SESSION_KEY = "loopwarden_session"
COMPACTION_KEY = "loopwarden_compaction_seen"
_SUMMARY_SOURCE = "summarization"  # how SummarizationMiddleware marks its summary message

ToolResponse = ToolMessage | Command[Any]
SessionSource = str | Callable[[Runtime[Any]], str] | None


class LoopGuardState(AgentState[Any]):
    """The private keys the middleware adds to the agent state (checkpointed with the thread,
    so a resumed run keeps its ids)."""

    loopwarden_run_id: NotRequired[Annotated[str, PrivateStateAttr]]
    loopwarden_session: NotRequired[Annotated[str, PrivateStateAttr]]
    loopwarden_compaction_seen: NotRequired[Annotated[str, PrivateStateAttr]]


@dataclasses.dataclass(frozen=True, slots=True)
class _Call:
    tool: str
    args: Any
    call_id: str | None
    session: str
    run: str | None


class LoopGuardMiddleware(AgentMiddleware[LoopGuardState, Any]):
    """Guard every tool call of a ``create_agent`` agent with ``guard``.

    ``session`` overrides the session id: a string, or a callable that receives the LangGraph
    ``Runtime`` (``context``, ``execution_info``, ``store``) once per run. ``agent_id`` names
    the agent on loop events. Put it first in ``middleware=[...]`` so it sees every call before
    other tool wrappers retry or rewrite it.
    """

    state_schema = LoopGuardState

    def __init__(
        self, guard: LoopGuard, *, session: SessionSource = None, agent_id: str | None = None
    ) -> None:
        super().__init__()
        self.guard = guard
        self.session = session
        self.agent_id = agent_id
        self.tools = []

    # -- run ids --------------------------------------------------------------------------

    def before_agent(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        run = _given_run_id(runtime) or uuid.uuid4().hex
        return {RUN_KEY: run, SESSION_KEY: self._session_for(runtime, run)}

    async def abefore_agent(
        self, state: LoopGuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)

    def _session_for(self, runtime: Any, run: str | None) -> str:
        if isinstance(self.session, str):
            return self.session
        if self.session is not None:
            return self.session(runtime)
        info = getattr(runtime, "execution_info", None)
        thread = getattr(info, "thread_id", None)
        return str(thread or run or "default")

    # -- compaction -----------------------------------------------------------------------

    def after_model(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        summary = _new_summary(state)
        if summary is None:
            return None
        self.guard.compaction_retried(session=self._state_session(state, runtime),
                                      run_id=_get(state, RUN_KEY))
        return {COMPACTION_KEY: summary}

    async def aafter_model(
        self, state: LoopGuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        summary = _new_summary(state)
        if summary is None:
            return None
        await self.guard.acompaction_retried(session=self._state_session(state, runtime),
                                             run_id=_get(state, RUN_KEY))
        return {COMPACTION_KEY: summary}

    def _state_session(self, state: Any, runtime: Any) -> str:
        session = _get(state, SESSION_KEY)
        if session:
            return str(session)
        # A checkpoint written before this middleware was added has no stamped ids.
        return self._session_for(runtime, _get(state, RUN_KEY) or _given_run_id(runtime))

    # -- tool calls -----------------------------------------------------------------------

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResponse]
    ) -> ToolResponse:
        call = self._call(request)
        verdict = self.guard.before_tool_call(
            call.tool, call.args, session=call.session, run_id=call.run, call_id=call.call_id,
            agent_id=self.agent_id)
        if verdict.action == "block":
            return _blocked_message(call, verdict)
        try:
            response = handler(request)
        except GraphBubbleUp:
            raise  # an interrupt is not an outcome; the resumed call reuses its call id
        except Exception as exc:
            self.guard.after_tool_call(call.tool, call.args, error=exc, **self._ids(call))
            raise
        after = self.guard.after_tool_call(call.tool, call.args, **_outcome(response, call),
                                           **self._ids(call))
        return _annotated(response, call, verdict, after)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResponse]],
    ) -> ToolResponse:
        call = self._call(request)
        verdict = await self.guard.abefore_tool_call(
            call.tool, call.args, session=call.session, run_id=call.run, call_id=call.call_id,
            agent_id=self.agent_id)
        if verdict.action == "block":
            return _blocked_message(call, verdict)
        try:
            response = await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            await self.guard.aafter_tool_call(call.tool, call.args, error=exc, **self._ids(call))
            raise
        after = await self.guard.aafter_tool_call(call.tool, call.args, **_outcome(response, call),
                                                  **self._ids(call))
        return _annotated(response, call, verdict, after)

    def _call(self, request: ToolCallRequest) -> _Call:
        tool_call = request.tool_call
        run = _get(request.state, RUN_KEY) or _given_run_id(request.runtime)
        return _Call(
            tool=str(tool_call.get("name") or (request.tool.name if request.tool else "tool")),
            args=tool_call.get("args", {}),
            call_id=tool_call.get("id"),
            session=self._state_session(request.state, request.runtime),
            run=run,
        )

    def _ids(self, call: _Call) -> dict[str, Any]:
        return {"session": call.session, "run_id": call.run, "call_id": call.call_id,
                "agent_id": self.agent_id}


# -- translation helpers (no detection here) ---------------------------------------------------


def _get(state: Any, key: str) -> Any:
    if isinstance(state, Mapping):
        return state.get(key)
    return getattr(state, key, None)


def _given_run_id(runtime: Any) -> str | None:
    """The ``run_id`` the caller put in the config, when there is one."""
    info = getattr(runtime, "execution_info", None)
    run = getattr(info, "run_id", None)
    return str(run) if run else None


def _new_summary(state: Any) -> str | None:
    """The id of a summary message not yet forwarded as a compaction, if any."""
    messages: list[AnyMessage] = _get(state, "messages") or []
    for message in reversed(messages):
        if message.additional_kwargs.get("lc_source") == _SUMMARY_SOURCE and message.id:
            return None if message.id == _get(state, COMPACTION_KEY) else message.id
    return None


def _blocked_message(call: _Call, verdict: Verdict) -> ToolMessage:
    return ToolMessage(
        content=verdict.message or "",
        tool_call_id=call.call_id or "",
        name=call.tool,
        status="error",
        artifact=verdict.blocked_result(),
    )


def _tool_message(response: Any, call: _Call) -> ToolMessage | None:
    """The ``ToolMessage`` answering this call: the response itself, or the one inside a
    ``Command``'s ``messages`` update."""
    if isinstance(response, ToolMessage):
        return response
    if isinstance(response, Command) and isinstance(response.update, Mapping):
        for message in response.update.get("messages") or ():
            if isinstance(message, ToolMessage) and message.tool_call_id == call.call_id:
                return message
    return None


def _outcome(response: Any, call: _Call) -> dict[str, Any]:
    """``result=`` or ``error=`` for ``after_tool_call``. An error ``ToolMessage`` (e.g. bad
    arguments caught by the ToolNode) is an error outcome; a dict ``artifact`` becomes the
    OpenClaw ``details`` so built-in tool profiles can read it."""
    message = _tool_message(response, call)
    if message is None:
        update = response.update if isinstance(response, Command) else response
        return {"result": update if update is not None else MISSING}
    if message.status == "error":
        return {"error": str(message.text) or str(message.content)}
    if isinstance(message.artifact, Mapping):
        return {"result": {"content": _blocks(message.content), "details": message.artifact}}
    return {"result": message.content}


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def _annotated(response: ToolResponse, call: _Call, *verdicts: Verdict) -> ToolResponse:
    """The response with the warning note(s) appended to the call's ``ToolMessage``."""
    if not any(v.note for v in verdicts):
        return response
    message = _tool_message(response, call)
    if message is None:
        return response
    content: Any = message.content
    for verdict in verdicts:
        content = verdict.annotate(content)
    noted = message.model_copy(update={"content": content})
    if isinstance(response, ToolMessage):
        return noted
    assert isinstance(response.update, Mapping)
    messages = [noted if m is message else m for m in response.update["messages"]]
    return dataclasses.replace(response, update={**response.update, "messages": messages})
