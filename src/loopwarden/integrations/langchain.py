"""LangChain v1 / LangGraph door: an ``AgentMiddleware`` for ``create_agent``.

```python
agent = create_agent(model, tools, middleware=[LoopGuardMiddleware(preset="early")])
```

One assistant message's tool calls are admitted together, as one batch, right after the model
answered (``after_model``); each call that runs has its outcome recorded (``wrap_tool_call``).
A warning's note is appended to the call's ``ToolMessage``; a critical blocks the whole batch
(each call gets an error ``ToolMessage`` whose ``artifact`` is the blocked result) and leaves
the model one recovery turn. The terminal stop follows ``exit_behavior`` (named like
``ToolCallLimitMiddleware``'s): ``"end"`` (default) answers every call, adds the stop
``AIMessage`` and jumps to the end; ``"error"`` does the same, then raises
:class:`loopwarden.LoopTerminatedError` in ``after_agent``; ``"continue"`` only blocks;
``"ask"`` holds the batch and interrupts the run in ``before_model`` with a question shaped like
``HumanInTheLoopMiddleware``'s request: approve runs the batch with a fresh budget, reject ends
the run (without a checkpointer nobody can resume it: it ends as ``"end"``).

Ids: session = the thread id (else the run), run = one graph run (a resume continues it) or the
config's ``run_id``; both are fixed by ``before_agent`` in private state keys. A summary by
``SummarizationMiddleware`` is forwarded as a compaction. Each hook is written once, as a plan
(``_langchain_plans``) that its sync and async entry points both run; hooks that do no I/O are
sync only (LangGraph runs them so on the async path too). User docs: ``docs/doors/langchain.md``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import PrivateStateAttr, ToolCallRequest, hook_config
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from typing_extensions import NotRequired

from ..base.types import MISSING, ToolCall
from ..guard import (
    BatchAdmission,
    EndOfRun,
    ExitBehavior,
    LoopGuard,
    Question,
    Verdict,
    terminated_error,
)
from . import _langchain_messages as lc
from ._langchain_messages import Call, ToolResponse
from ._langchain_plans import Plan, Step, arun_plan, run_plan

__all__ = ["LoopGuardMiddleware", "LoopGuardState"]

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
    #: ``"ask"``: the question before_model puts to a human (an interrupt), with the batch.
    loopwarden_ask: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]


class LoopGuardMiddleware(AgentMiddleware[LoopGuardState, Any]):
    """Guard every tool call of a ``create_agent`` agent with ``guard``.

    Without a ``guard`` the middleware builds ``LoopGuard(preset=preset, **overrides)``
    (enabled; e.g. ``preset="early"``, ``warning_threshold=5, critical_threshold=8``); with
    one, those keywords belong to that guard and passing them here is a ``ConfigError``.
    ``session`` overrides the session id: a string, or a callable that receives the LangGraph
    ``Runtime`` (``context``, ``execution_info``, ``store``) once per run. ``agent_id`` names
    the agent on loop events. ``exit_behavior``: ``"end"`` (default), ``"error"``,
    ``"continue"`` or ``"ask"`` (with ``max_grants`` "continue" answers per run; see the module
    docs). Put it first in ``middleware=[...]`` so it sees every
    call before other tool wrappers retry or rewrite it (its ``after_model`` then runs last,
    on the calls other middleware left to run).
    """

    state_schema = LoopGuardState

    def __init__(
        self, guard: LoopGuard | None = None, *, session: SessionSource = None,
        agent_id: str | None = None, exit_behavior: ExitBehavior = "end", max_grants: int = 2,
        preset: str | None = None, **overrides: Any,
    ) -> None:
        super().__init__()
        self.guard = LoopGuard.of(guard, preset=preset, **overrides)
        self.session = session
        self.agent_id = agent_id
        self.end_of_run = EndOfRun(exit_behavior, max_grants=max_grants)
        self.exit_behavior = self.end_of_run.behavior
        self.tools = []

    # -- run ids --------------------------------------------------------------------------

    def before_agent(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Fix the run's ids at its start: the run id (the config's ``run_id``, else a new one)
        and the session."""
        run = lc.given_run_id(runtime) or uuid.uuid4().hex
        return {lc.RUN_KEY: run, lc.SESSION_KEY: self._session_for(runtime, run), lc.STOP_KEY: None,
                lc.ASK_KEY: None}

    def _session_for(self, runtime: Any, run: str | None) -> str:
        if isinstance(self.session, str):
            return self.session
        if self.session is not None:
            return self.session(runtime)
        thread = getattr(getattr(runtime, "execution_info", None), "thread_id", None)
        return str(thread or run or "default")

    def _ids(self, state: Any, runtime: Any) -> tuple[str, str | None]:
        """The session and run of this run (a checkpoint written before this middleware was
        added has no stamped ids: they are derived again)."""
        run = lc.get(state, lc.RUN_KEY) or lc.given_run_id(runtime)
        return str(lc.get(state, lc.SESSION_KEY) or self._session_for(runtime, run)), run

    # -- batch admission (and compaction) after each model call ----------------------------

    @hook_config(can_jump_to=["end", "model"])
    def after_model(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Forward a new conversation summary as a compaction, then admit the model's tool calls
        as one batch (a critical blocks them all, the terminal stop jumps to the end)."""
        return run_plan(self.guard, self._after_model(state, runtime))

    @hook_config(can_jump_to=["end", "model"])
    async def aafter_model(
        self, state: LoopGuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """:meth:`after_model` without blocking the event loop."""
        return await arun_plan(self.guard, self._after_model(state, runtime))

    def _after_model(self, state: Any, runtime: Any) -> Plan[dict[str, Any] | None]:
        update: dict[str, Any] = {}
        session, run = self._ids(state, runtime)
        summary = lc.new_summary(state)
        if summary is not None:
            yield Step("compaction_retried", (), {"session": session, "run_id": run})
            update[lc.COMPACTION_KEY] = summary
        found = lc.unanswered(lc.get(state, "messages") or [])
        admitted = lc.get(state, lc.ADMITTED_KEY) or {}
        if found is not None and not (found[0].id and admitted.get("message") == found[0].id):
            message, tool_calls = found  # (a re-run node finds its message admitted already)
            calls = [Call(str(c.get("name") or "tool"), c.get("args", {}), c.get("id"),
                          session, run) for c in tool_calls]
            admission = yield Step("admit_batch", (
                [ToolCall(c.tool, c.args, c.call_id) for c in calls],),
                {"session": session, "run_id": run, "agent_id": self.agent_id})
            update.update((yield from self._admitted(message, calls, admission)))
        return update or None

    def _admitted(self, message: AIMessage, calls: list[Call],
                  admission: BatchAdmission) -> Plan[dict[str, Any]]:
        """The state update for an admitted batch: the notes for the calls that run, or the
        blocked answers to every call (and, at the terminal stop, the end of the run or, under
        "ask", the question for before_model)."""
        if admission.intervention is None:
            notes = {c.call_id: v.note or "" for c, v in zip(calls, admission.verdicts,
                                                            strict=True)}
            return {lc.ADMITTED_KEY: {"message": message.id, "notes": notes}}
        action = self.end_of_run.action(admission.terminal, can_ask=lc.resumable())
        verdicts = [self.end_of_run.answer(v) for v in admission.verdicts]
        answers: list[AnyMessage] = [lc.blocked_message(c, v)
                                     for c, v in zip(calls, verdicts, strict=True)]
        update: dict[str, Any] = {lc.ADMITTED_KEY: {"message": message.id, "notes": {}}}
        trigger = next((c, v) for c, v in zip(calls, verdicts, strict=True) if v.detection)
        if action == "ask":
            question = yield self._ask(trigger[1], trigger[0])
            if question is not None:  # no answers yet: the calls run if the human says so
                return {**update, "jump_to": "model", lc.ASK_KEY: {
                    "question": question.to_dict(), "args": trigger[0].args, "answers": answers}}
        if action in ("end", "raise", "ask"):
            # All end the run here; "raise" raises in after_agent (an after_model hook that
            # raised would leave the run's state unwritten).
            answers.append(lc.stop_message())
            update["jump_to"] = "end"
            if action == "raise":
                update[lc.STOP_KEY] = lc.stop_record(trigger[1], calls[0].session, calls[0].run)
        update["messages"] = answers
        return update

    def _ask(self, verdict: Verdict, call: Call) -> Step:
        return Step("ask", (verdict,), {
            "session": call.session, "run_id": call.run, "agent_id": self.agent_id,
            "max_grants": self.end_of_run.max_grants, "channel": "langgraph-interrupt"})

    # -- the terminal stop: a one-call block (before_model), "error" (after_agent) ---------

    @hook_config(can_jump_to=["end", "tools"])
    def before_model(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """At a terminal stop left by the last step: under "ask", interrupt the run with the
        question and act on the answer; else end the run (a call admitted on its own)."""
        return run_plan(self.guard, self._before_model(state))

    @hook_config(can_jump_to=["end", "tools"])
    async def abefore_model(
        self, state: LoopGuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """:meth:`before_model` without blocking the event loop."""
        return await arun_plan(self.guard, self._before_model(state))

    def _before_model(self, state: Any) -> Plan[dict[str, Any] | None]:
        asked = lc.get(state, lc.ASK_KEY)  # a terminal batch (after_model)
        if not asked:  # or a call admitted on its own (its artifact has the question)
            block = lc.terminal_block(lc.get(state, "messages") or [])
            if block is None or not self.end_of_run.ends_runs:
                return None
            asked = block.get("loopwarden_ask")
            if not asked:
                return {"messages": [lc.stop_message()], "jump_to": "end"}
        # A resumed run re-runs this hook from its start: nothing above touches the guard.
        question = Question(**asked["question"])
        decision = lc.decision(interrupt(lc.review_request(question, asked.get("args"))))
        verdict = yield Step("answer", (question, decision), {
            "args": asked.get("args", MISSING), "agent_id": self.agent_id})
        if verdict.action == "block":
            return {"messages": [*asked.get("answers", ()), lc.stop_message()],
                    "jump_to": "end", lc.ASK_KEY: None}
        if "answers" not in asked:  # the lone call stays blocked; the model goes on
            return {lc.ASK_KEY: None}
        admitted = {"message": lc.get(state, lc.ADMITTED_KEY)["message"],
                    "notes": {question.call_id: verdict.note or ""}}
        return {lc.ASK_KEY: None, lc.ADMITTED_KEY: admitted, "jump_to": "tools"}

    def after_agent(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Raise the run's terminal stop as :class:`~loopwarden.LoopTerminatedError`
        (``exit_behavior="error"``)."""
        stop = lc.get(state, lc.STOP_KEY)
        if stop and self.end_of_run.action(True) == "raise":
            raise lc.terminated(stop)
        return None

    # -- tool calls -----------------------------------------------------------------------

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResponse]
    ) -> ToolResponse:
        """Run one tool call and record its outcome (or error); a call not admitted with its
        batch is checked alone first, and a warning's note goes on its ``ToolMessage``."""
        return run_plan(self.guard, self._tool_call(request), handler)

    async def awrap_tool_call(
        self, request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResponse]],
    ) -> ToolResponse:
        """:meth:`wrap_tool_call` without blocking the event loop."""
        return await arun_plan(self.guard, self._tool_call(request), handler)

    def _tool_call(self, request: ToolCallRequest) -> Plan[ToolResponse]:
        tool_call = request.tool_call
        session, run = self._ids(request.state, request.runtime)
        call = Call(str(tool_call.get("name") or (request.tool.name if request.tool else "tool")),
                    tool_call.get("args", {}), tool_call.get("id"), session, run)
        ids = {"session": session, "run_id": run, "call_id": call.call_id,
               "agent_id": self.agent_id}
        notes = lc.admitted_notes(request.state, call)
        if notes is None:  # not admitted with its message: ask for this call alone
            verdict = yield Step("before_tool_call", (call.tool, call.args), ids)
            if verdict.action == "block":
                return (yield from self._blocked(call, verdict))
            notes = [verdict.note] if verdict.note else []
        try:
            response = yield Step("", (request,), {})
        except GraphBubbleUp:
            raise  # an interrupt is not an outcome; the resumed call reuses its call id
        except Exception as exc:
            yield Step("after_tool_call", (call.tool, call.args), {"error": exc, **ids})
            raise
        after = yield Step("after_tool_call", (call.tool, call.args),
                            {**lc.outcome(response, call), **ids})
        return lc.annotated(response, call, [*notes, *([after.note] if after.note else [])])

    def _blocked(self, call: Call, verdict: Verdict) -> Plan[ToolMessage]:
        """A call blocked on its own. At the terminal stop, "error" raises here (a tool node
        cannot write the stop to the state), "end" and "ask" mark the answer for before_model
        (with the question under "ask")."""
        action = self.end_of_run.action(verdict.terminate, can_ask=lc.resumable())
        if action == "raise":
            raise terminated_error(verdict, session=call.session, run_id=call.run)
        message = lc.blocked_message(call, self.end_of_run.answer(verdict))
        question = (yield self._ask(verdict, call)) if action == "ask" else None
        if question is not None:
            message.artifact["loopwarden_ask"] = {"question": question.to_dict()}
        return message
