"""LangChain v1 / LangGraph door: an ``AgentMiddleware`` for ``create_agent``.

```python
from langchain.agents import create_agent
from loopwarden import LoopGuard
from loopwarden.integrations.langchain import LoopGuardMiddleware

guard = LoopGuard()  # enabled, default thresholds
agent = create_agent(model, tools, middleware=[LoopGuardMiddleware(guard)])
agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "t1"}})
```

One assistant message's tool calls are admitted together, as one batch, right after the model
answered (``after_model``); each call that runs then has its outcome recorded
(``wrap_tool_call``). A warning reaches the model as the note appended to the call's
``ToolMessage``. A critical blocks the whole batch: no call of it runs, and each gets a
``ToolMessage`` with ``status="error"`` and the loop message (its ``artifact`` holds the
OpenClaw-shaped blocked result); the model gets one recovery turn. A second critical in the same
run is the terminal stop, handled by ``exit_behavior`` (named like LangChain's
``ToolCallLimitMiddleware``):

- ``"end"`` (default): every call of the batch is answered with its blocked ``ToolMessage``, an
  ``AIMessage`` with the stop message is added as the final answer, and the run jumps to its
  end. The thread stays consistent, so a later turn on it (with a checkpointer) works.
- ``"error"``: the same messages are written, then :class:`loopwarden.LoopTerminatedError` is
  raised at the end of the run (``after_agent``), carrying the detection.
- ``"continue"``: calls are only blocked (the recovery texts); the model decides when to stop.

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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import PrivateStateAttr, ToolCallRequest, hook_config
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import Command
from typing_extensions import NotRequired

from ..base.errors import LoopTerminatedError
from ..base.types import MISSING, ToolCall
from ..guard import (
    STOP_MESSAGE,
    BatchAdmission,
    Detection,
    EndOfRun,
    ExitBehavior,
    LoopGuard,
    Verdict,
    append_note,
    continuing,
    terminated_error,
)

__all__ = ["LoopGuardMiddleware", "LoopGuardState"]

RUN_KEY = "loopwarden_run_id"
SESSION_KEY = "loopwarden_session"
COMPACTION_KEY = "loopwarden_compaction_seen"
ADMITTED_KEY = "loopwarden_admitted"
STOP_KEY = "loopwarden_stop"
_SUMMARY_SOURCE = "summarization"  # how SummarizationMiddleware marks its summary message

ToolResponse = ToolMessage | Command[Any]
SessionSource = str | Callable[[Runtime[Any]], str] | None


class LoopGuardState(AgentState[Any]):
    """The private keys the middleware adds to the agent state (checkpointed with the thread,
    so a resumed run keeps its ids)."""

    loopwarden_run_id: NotRequired[Annotated[str, PrivateStateAttr]]
    loopwarden_session: NotRequired[Annotated[str, PrivateStateAttr]]
    loopwarden_compaction_seen: NotRequired[Annotated[str, PrivateStateAttr]]
    #: The last admitted assistant message: ``{"message": its id, "notes": {call id: the
    #: warning note for that call, or ""}}``; written once per model turn.
    loopwarden_admitted: NotRequired[Annotated[dict[str, Any], PrivateStateAttr]]
    #: The terminal stop of this run under ``exit_behavior="error"`` (raised by after_agent).
    loopwarden_stop: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]


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
    the agent on loop events. ``exit_behavior``: ``"end"`` (default), ``"error"`` or
    ``"continue"`` (see the module docs). Put it first in ``middleware=[...]`` so it sees every
    call before other tool wrappers retry or rewrite it (its ``after_model`` then runs last,
    on the calls other middleware left to run).
    """

    state_schema = LoopGuardState

    def __init__(
        self, guard: LoopGuard, *, session: SessionSource = None, agent_id: str | None = None,
        exit_behavior: ExitBehavior = "end",
    ) -> None:
        super().__init__()
        self.guard = guard
        self.session = session
        self.agent_id = agent_id
        self.end_of_run = EndOfRun(exit_behavior)
        self.exit_behavior = self.end_of_run.behavior
        self.tools = []

    # -- run ids --------------------------------------------------------------------------

    def before_agent(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Fix the run's ids at its start: the run id (the config's ``run_id``, else a new one)
        and the session."""
        run = _given_run_id(runtime) or uuid.uuid4().hex
        return {RUN_KEY: run, SESSION_KEY: self._session_for(runtime, run), STOP_KEY: None}

    async def abefore_agent(
        self, state: LoopGuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Like :meth:`before_agent`, which does no I/O: it does not block the event loop."""
        return self.before_agent(state, runtime)

    def _session_for(self, runtime: Any, run: str | None) -> str:
        if isinstance(self.session, str):
            return self.session
        if self.session is not None:
            return self.session(runtime)
        info = getattr(runtime, "execution_info", None)
        thread = getattr(info, "thread_id", None)
        return str(thread or run or "default")

    def _state_session(self, state: Any, runtime: Any) -> str:
        session = _get(state, SESSION_KEY)
        if session:
            return str(session)
        # A checkpoint written before this middleware was added has no stamped ids.
        return self._session_for(runtime, _get(state, RUN_KEY) or _given_run_id(runtime))

    # -- batch admission (and compaction) after each model call ----------------------------

    @hook_config(can_jump_to=["end"])
    def after_model(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Forward a new conversation summary as a compaction, then admit the model's tool calls
        as one batch (a critical blocks them all, the terminal stop jumps to the end)."""
        update: dict[str, Any] = {}
        summary = _new_summary(state)
        if summary is not None:
            self.guard.compaction_retried(session=self._state_session(state, runtime),
                                          run_id=_get(state, RUN_KEY))
            update[COMPACTION_KEY] = summary
        batch = self._batch(state, runtime)
        if batch is not None:
            message, calls = batch
            admission = self.guard.admit_batch(
                [ToolCall(c.tool, c.args, c.call_id) for c in calls], session=calls[0].session,
                run_id=calls[0].run, agent_id=self.agent_id)
            update.update(self._admitted(message, calls, admission))
        return update or None

    @hook_config(can_jump_to=["end"])
    async def aafter_model(
        self, state: LoopGuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Like :meth:`after_model`, without blocking the event loop."""
        update: dict[str, Any] = {}
        summary = _new_summary(state)
        if summary is not None:
            await self.guard.acompaction_retried(session=self._state_session(state, runtime),
                                                 run_id=_get(state, RUN_KEY))
            update[COMPACTION_KEY] = summary
        batch = self._batch(state, runtime)
        if batch is not None:
            message, calls = batch
            admission = await self.guard.aadmit_batch(
                [ToolCall(c.tool, c.args, c.call_id) for c in calls], session=calls[0].session,
                run_id=calls[0].run, agent_id=self.agent_id)
            update.update(self._admitted(message, calls, admission))
        return update or None

    def _batch(self, state: Any, runtime: Any) -> tuple[AIMessage, list[_Call]] | None:
        """The newest assistant message and its calls still to run, unless already admitted
        (a re-run node) or there are none."""
        found = _unanswered(_get(state, "messages") or [])
        if found is None:
            return None
        message, tool_calls = found
        admitted = _get(state, ADMITTED_KEY)
        if message.id and isinstance(admitted, Mapping) and admitted.get("message") == message.id:
            return None
        session = self._state_session(state, runtime)
        run = _get(state, RUN_KEY) or _given_run_id(runtime)
        return message, [_Call(str(c.get("name") or "tool"), c.get("args", {}), c.get("id"),
                               session, run) for c in tool_calls]

    def _admitted(self, message: AIMessage, calls: list[_Call],
                  admission: BatchAdmission) -> dict[str, Any]:
        """The state update for an admitted batch: the notes for the calls that run, or the
        blocked answers to every call (and, at the terminal stop, the end of the run)."""
        if admission.intervention is None:
            notes = {c.call_id: v.note or "" for c, v in zip(calls, admission.verdicts,
                                                            strict=True)}
            return {ADMITTED_KEY: {"message": message.id, "notes": notes}}
        verdicts: Sequence[Verdict] = admission.verdicts
        action = self.end_of_run.action(admission.terminal)
        if action in (None, "recover"):
            verdicts = [continuing(v) for v in verdicts]
        answers: list[AnyMessage] = [_blocked_message(c, v)
                                     for c, v in zip(calls, verdicts, strict=True)]
        update: dict[str, Any] = {ADMITTED_KEY: {"message": message.id, "notes": {}}}
        if action in ("end", "raise"):
            # Both end the run here; "raise" raises in after_agent (an after_model hook that
            # raised would leave the run's state unwritten).
            trigger = next(v for v in verdicts if v.detection is not None)
            answers.append(_stop_message())
            update["jump_to"] = "end"
            if action == "raise":
                update[STOP_KEY] = _stop_record(trigger, calls[0].session, calls[0].run)
        update["messages"] = answers
        return update

    # -- the terminal stop: a one-call block (before_model), "error" (after_agent) ---------

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """End the run when the last tool call, admitted on its own, hit the terminal stop
        (``exit_behavior="end"``)."""
        # Only a call admitted one by one (not by after_model) can leave a terminal block
        # here; a terminal batch already ended the run.
        if not self.end_of_run.ends_runs or not _ends_run(_get(state, "messages") or []):
            return None
        return {"messages": [_stop_message()], "jump_to": "end"}

    @hook_config(can_jump_to=["end"])
    async def abefore_model(
        self, state: LoopGuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Like :meth:`before_model`, which does no I/O: it does not block the event loop."""
        return self.before_model(state, runtime)

    def after_agent(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Raise the run's terminal stop as :class:`~loopwarden.LoopTerminatedError`
        (``exit_behavior="error"``)."""
        stop = _get(state, STOP_KEY)
        if stop and self.end_of_run.action(True) == "raise":
            raise _terminated(stop)
        return None

    async def aafter_agent(
        self, state: LoopGuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Like :meth:`after_agent`, which does no I/O: it does not block the event loop."""
        return self.after_agent(state, runtime)

    # -- tool calls -----------------------------------------------------------------------

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResponse]
    ) -> ToolResponse:
        """Run one tool call and record its outcome (or error); a call not admitted with its
        batch is checked alone first, and a warning's note goes on its ``ToolMessage``."""
        call = self._call(request)
        notes = _admitted_notes(request.state, call)
        if notes is None:  # not admitted with its message: ask for this call alone
            verdict = self.guard.before_tool_call(
                call.tool, call.args, session=call.session, run_id=call.run,
                call_id=call.call_id, agent_id=self.agent_id)
            if verdict.action == "block":
                return self._blocked(call, verdict)
            notes = [verdict.note] if verdict.note else []
        try:
            response = handler(request)
        except GraphBubbleUp:
            raise  # an interrupt is not an outcome; the resumed call reuses its call id
        except Exception as exc:
            self.guard.after_tool_call(call.tool, call.args, error=exc, **self._ids(call))
            raise
        after = self.guard.after_tool_call(call.tool, call.args, **_outcome(response, call),
                                           **self._ids(call))
        return _annotated(response, call, [*notes, *([after.note] if after.note else [])])

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResponse]],
    ) -> ToolResponse:
        """Like :meth:`wrap_tool_call`, without blocking the event loop."""
        call = self._call(request)
        notes = _admitted_notes(request.state, call)
        if notes is None:
            verdict = await self.guard.abefore_tool_call(
                call.tool, call.args, session=call.session, run_id=call.run,
                call_id=call.call_id, agent_id=self.agent_id)
            if verdict.action == "block":
                return self._blocked(call, verdict)
            notes = [verdict.note] if verdict.note else []
        try:
            response = await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            await self.guard.aafter_tool_call(call.tool, call.args, error=exc, **self._ids(call))
            raise
        after = await self.guard.aafter_tool_call(call.tool, call.args, **_outcome(response, call),
                                                  **self._ids(call))
        return _annotated(response, call, [*notes, *([after.note] if after.note else [])])

    def _blocked(self, call: _Call, verdict: Verdict) -> ToolMessage:
        """A call blocked on its own. At the terminal stop, "error" raises here (a tool node
        cannot write the stop to the state) and "end" marks the answer for before_model."""
        if self.end_of_run.action(verdict.terminate) == "raise":
            raise terminated_error(verdict, session=call.session, run_id=call.run)
        return _blocked_message(call, self.end_of_run.answer(verdict))

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


def _unanswered(messages: Sequence[AnyMessage]) -> tuple[AIMessage, list[Any]] | None:
    """The last assistant message and its tool calls that have no ``ToolMessage`` answer yet
    (other middleware may have answered some already), or ``None``."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, AIMessage):
            answered = {m.tool_call_id for m in messages[i + 1:] if isinstance(m, ToolMessage)}
            calls = [c for c in message.tool_calls if c.get("id") not in answered]
            return (message, calls) if calls else None
    return None


def _ends_run(messages: Sequence[AnyMessage]) -> bool:
    """Whether the last assistant message's answers include a terminal loopwarden block."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return False
        if isinstance(message, ToolMessage) and _is_terminal_block(message.artifact):
            return True
    return False


def _is_terminal_block(artifact: Any) -> bool:
    if not isinstance(artifact, Mapping) or artifact.get("terminate") is not True:
        return False
    details = artifact.get("details")
    return isinstance(details, Mapping) and details.get("deniedReason") == "tool-loop"


def _admitted_notes(state: Any, call: _Call) -> list[str] | None:
    """The warning notes of a call admitted with its message, or ``None`` if it was not."""
    admitted = _get(state, ADMITTED_KEY)
    notes = admitted.get("notes") if isinstance(admitted, Mapping) else None
    if not isinstance(notes, Mapping) or call.call_id not in notes:
        return None
    note = notes[call.call_id]
    return [note] if note else []


def _blocked_message(call: _Call, verdict: Verdict) -> ToolMessage:
    artifact = verdict.blocked_result()
    if verdict.terminate:
        artifact["terminate"] = True  # (a batch's result has it already; a lone call's not)
    return ToolMessage(
        content=verdict.message or "",
        tool_call_id=call.call_id or "",
        name=call.tool,
        status="error",
        artifact=artifact,
    )


def _stop_message() -> AIMessage:
    """The run's final answer at the terminal stop."""
    return AIMessage(content=STOP_MESSAGE, response_metadata={"loopwarden": "terminated"})


def _stop_record(verdict: Verdict, session: str, run: str | None) -> dict[str, Any]:
    """The terminal stop as plain data (the state is checkpointed), for after_agent."""
    detection = verdict.detection
    return {
        "tool": verdict.tool_name, "session": session, "run": run,
        "result": verdict.blocked_result(),
        "detection": None if detection is None else {
            "level": detection.level, "detector": detection.detector, "count": detection.count,
            "message": detection.message, "paired_tool_name": detection.paired_tool_name,
            "warning_key": detection.warning_key},
    }


def _terminated(stop: Mapping[str, Any]) -> LoopTerminatedError:
    found = stop.get("detection")
    detection = Detection(**found) if isinstance(found, Mapping) else None
    return LoopTerminatedError(STOP_MESSAGE, detection, tool_name=stop.get("tool"),
                               session=stop.get("session"), run_id=stop.get("run"),
                               result=stop.get("result"))


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


def _annotated(response: ToolResponse, call: _Call, notes: Sequence[str]) -> ToolResponse:
    """The response with the warning note(s) appended to the call's ``ToolMessage``."""
    if not notes:
        return response
    message = _tool_message(response, call)
    if message is None:
        return response
    content: Any = message.content
    for note in notes:
        content = append_note(content, note)
    noted = message.model_copy(update={"content": content})
    if isinstance(response, ToolMessage):
        return noted
    assert isinstance(response.update, Mapping)
    messages = [noted if m is message else m for m in response.update["messages"]]
    return dataclasses.replace(response, update={**response.update, "messages": messages})
