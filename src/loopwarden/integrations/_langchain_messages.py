"""The LangChain door's translation between the guard's values and LangGraph's state and
messages (no detection here): which calls a turn left to run, the blocked and stop messages, a
tool response as an outcome, a warning note on a ``ToolMessage``."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.config import get_config
from langgraph.types import Command

from ..base.errors import LoopTerminatedError
from ..base.types import MISSING
from ..guard import STOP_MESSAGE, Detection, Question, Verdict, append_note
from ..guard.asking import Decision

RUN_KEY = "loopwarden_run_id"
SESSION_KEY = "loopwarden_session"
COMPACTION_KEY = "loopwarden_compaction_seen"
ADMITTED_KEY = "loopwarden_admitted"
STOP_KEY = "loopwarden_stop"
ASK_KEY = "loopwarden_ask"
_SUMMARY_SOURCE = "summarization"  # how SummarizationMiddleware marks its summary message

ToolResponse = ToolMessage | Command[Any]
log = logging.getLogger("loopwarden")


@dataclasses.dataclass(frozen=True, slots=True)
class Call:
    """One tool call as the guard sees it, with the ids of its session and run."""

    tool: str
    args: Any
    call_id: str | None
    session: str
    run: str | None


def get(state: Any, key: str) -> Any:
    """``state[key]`` for a dict state, the attribute for a dataclass-like one, else None."""
    if isinstance(state, Mapping):
        return state.get(key)
    return getattr(state, key, None)


def given_run_id(runtime: Any) -> str | None:
    """The ``run_id`` the caller put in the config, when there is one."""
    run = getattr(getattr(runtime, "execution_info", None), "run_id", None)
    return str(run) if run else None


def new_summary(state: Any) -> str | None:
    """The id of a summary message not yet forwarded as a compaction, if any."""
    for message in reversed(get(state, "messages") or []):
        if message.additional_kwargs.get("lc_source") == _SUMMARY_SOURCE and message.id:
            return None if message.id == get(state, COMPACTION_KEY) else str(message.id)
    return None


def unanswered(messages: Sequence[AnyMessage]) -> tuple[AIMessage, list[Any]] | None:
    """The last assistant message and its tool calls that have no ``ToolMessage`` answer yet
    (other middleware may have answered some already), or ``None``."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, AIMessage):
            answered = {m.tool_call_id for m in messages[i + 1:] if isinstance(m, ToolMessage)}
            calls = [c for c in message.tool_calls if c.get("id") not in answered]
            return (message, calls) if calls else None
    return None


def terminal_block(messages: Sequence[AnyMessage]) -> Mapping[str, Any] | None:
    """The artifact of a terminal loopwarden block among the last assistant message's answers
    (a call admitted on its own hit the terminal stop), or None."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return None
        found = message.artifact if isinstance(message, ToolMessage) else None
        if isinstance(found, Mapping) and found.get("terminate") is True and isinstance(
                found.get("details"), Mapping) and found["details"].get("deniedReason") == "tool-loop":
            return found
    return None


def resumable() -> bool:
    """Whether this graph run can be resumed after an interrupt: it has a checkpointer."""
    try:
        # (LangGraph hands a node's checkpointer in its config under this internal key)
        return get_config()["configurable"].get("__pregel_checkpointer") is not None
    except (RuntimeError, KeyError):
        return False


def review_request(question: Question, args: Any) -> dict[str, Any]:
    """The interrupt value: ``HumanInTheLoopMiddleware``'s request shape (one action, approve or
    reject), so agent UIs render it; ``loopwarden`` holds the question as plain data."""
    return {"action_requests": [{"name": question.tool_name, "args": args if isinstance(
                args, Mapping) else {}, "description": question.text}],
            "review_configs": [{"action_name": question.tool_name,
                                "allowed_decisions": ["approve", "reject"]}],
            "loopwarden": question.to_dict()}


def decision(resume: Any) -> Decision:
    """A resume value as a decision: ``HumanInTheLoopMiddleware``'s ``{"decisions": [{"type":
    "approve"}]}`` (``"reject"`` stops), or a plain ``"continue"`` / ``"stop"``. Anything else
    stops the run (logged): an unreadable answer never lets a loop go on."""
    found = resume
    if isinstance(found, Mapping) and isinstance(found.get("decisions"), Sequence):
        found = next(iter(found["decisions"]), None)
    if isinstance(found, Mapping):
        found = found.get("type")
    answer = {"approve": "continue", "continue": "continue", "reject": "stop", "stop": "stop"}
    if found not in answer:
        log.warning("loopwarden: an answer to the loop question must approve or reject (or be "
                    '"continue" / "stop"), got %.80r; stopping the run', resume)
        return "stop"
    return answer[found]  # type: ignore[return-value]


def admitted_notes(state: Any, call: Call) -> list[str] | None:
    """The warning notes of a call admitted with its message, or ``None`` if it was not."""
    admitted = get(state, ADMITTED_KEY)
    notes = admitted.get("notes") if isinstance(admitted, Mapping) else None
    if not isinstance(notes, Mapping) or call.call_id not in notes:
        return None
    note = notes[call.call_id]
    return [note] if note else []


def blocked_message(call: Call, verdict: Verdict) -> ToolMessage:
    """The error ``ToolMessage`` answering a blocked call; its artifact is the blocked result."""
    artifact = verdict.blocked_result()
    if verdict.terminate:
        artifact["terminate"] = True  # (a batch's result has it already; a lone call's not)
    return ToolMessage(content=verdict.message or "", tool_call_id=call.call_id or "",
                       name=call.tool, status="error", artifact=artifact)


def stop_message() -> AIMessage:
    """The run's final answer at the terminal stop."""
    return AIMessage(content=STOP_MESSAGE, response_metadata={"loopwarden": "terminated"})


def stop_record(verdict: Verdict, session: str, run: str | None) -> dict[str, Any]:
    """The terminal stop as plain data (the state is checkpointed), for after_agent."""
    detection = verdict.detection
    return {"tool": verdict.tool_name, "session": session, "run": run,
            "result": verdict.blocked_result(),
            "detection": None if detection is None else dataclasses.asdict(detection)}


def terminated(stop: Mapping[str, Any]) -> LoopTerminatedError:
    """The :class:`LoopTerminatedError` a :func:`stop_record` describes."""
    found = stop.get("detection")
    return LoopTerminatedError(STOP_MESSAGE, Detection(**found) if found else None,
                               tool_name=stop.get("tool"), session=stop.get("session"),
                               run_id=stop.get("run"), result=stop.get("result"))


def _tool_message(response: Any, call: Call) -> ToolMessage | None:
    """The ``ToolMessage`` answering this call: the response itself, or the one inside a
    ``Command``'s ``messages`` update."""
    if isinstance(response, ToolMessage):
        return response
    if isinstance(response, Command) and isinstance(response.update, Mapping):
        for message in response.update.get("messages") or ():
            if isinstance(message, ToolMessage) and message.tool_call_id == call.call_id:
                return message
    return None


def outcome(response: Any, call: Call) -> dict[str, Any]:
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
        content = message.content
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        return {"result": {"content": blocks, "details": message.artifact}}
    return {"result": message.content}


def annotated(response: ToolResponse, call: Call, notes: Sequence[str]) -> ToolResponse:
    """The response with the warning note(s) appended to the call's ``ToolMessage``."""
    message = _tool_message(response, call) if notes else None
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
