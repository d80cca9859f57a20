"""OpenHands event histories.

Accepted shapes: a JSON list of events (a saved trajectory), an evaluation record with a
``history`` list (``output.jsonl``, one record per line, or one record per file), JSONL with one
event per line, and the old evaluation format where ``history`` holds ``[action, observation]``
pairs.

An action event (``{"id", "source": "agent", "action": "run", "args": {...},
"tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": ...}}``) is a tool call;
its observation names it in ``cause``.

Rules:
- ``tool_name`` is the function the model called (``tool_call_metadata.function_name``), or the
  action name for histories recorded without function calling; chat messages, system prompts,
  recalls and agent state changes are not tool calls.
- ``args`` are the action's ``args`` without the agent's free-text reasoning and OpenHands'
  bookkeeping (``thought``, ``confirmation_state``, ``hidden``, ``security_risk``), which change
  on every call and would hide a repeat.
- ``result`` is the observation's ``content``; an ``error`` observation also sets ``error`` to
  that text. Error observations that answer no action (rejected malformed calls) are not calls.
- Each user message opens a new run, ``run_id="u<n>"``; in a file of several evaluation
  records, runs are prefixed with the record: ``"c<k>.u<n>"``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwarden.base.types import MISSING, ToolCall
from loopwarden.offline.transcripts._common import (
    Reporter,
    Turns,
    iter_json_lines,
    read_lines_or_document,
)

from ...base.text import content_text

_NOT_TOOLS = frozenset(
    {"message", "system", "recall", "change_agent_state", "null", "initialize", "start"}
)
_DROPPED_ARGS = frozenset({"thought", "confirmation_state", "hidden", "security_risk"})


def sniff(value: Any) -> bool:
    """True when a parsed JSON value (an event, a record or a whole history) is OpenHands'."""
    if isinstance(value, list):
        first = next((item for item in value if isinstance(item, (dict, list))), None)
        return first is not None and sniff(first)
    if not isinstance(value, dict):
        return False
    history = value.get("history")
    if isinstance(history, list) and ("instance_id" in value or "metadata" in value):
        return not history or sniff(history[0])
    return _is_event(value)


def _is_event(value: Any) -> bool:
    if isinstance(value, list) and len(value) == 2:  # an old [action, observation] pair
        return _is_event(value[0])
    if not isinstance(value, dict) or "source" not in value:
        return False
    return isinstance(value.get("action"), str) or isinstance(value.get("observation"), str)


def read(path: Path, report: Reporter) -> Iterator[ToolCall]:
    """The tool calls of an OpenHands history (JSON or JSONL); problems go to ``report``."""
    return read_lines_or_document(path, report, _read_jsonl, _read_document)


def _read_document(document: Any, report: Reporter) -> Iterator[ToolCall]:
    if isinstance(document, dict) and isinstance(document.get("history"), list):
        yield from _History(report, "").read(document["history"], None)
    elif isinstance(document, list):
        yield from _History(report, "").read(document, None)
    else:
        report(None, "expected a list of events or a record with a 'history' list")


def _read_jsonl(path: Path, report: Reporter) -> Iterator[ToolCall]:
    events = _History(report, "")
    records = 0
    held: tuple[list[Any], int] | None = None  # a record waits until we know if it is alone
    for lineno, record in iter_json_lines(path, report):
        history = record.get("history")
        if not isinstance(history, list):
            yield from events.event(record, lineno)
            continue
        if held is not None:
            yield from _History(report, f"c{records}.").read(*held)
        records += 1
        held = (history, lineno)
    if held is not None:
        # A one-record output.jsonl is one trajectory: its runs need no record prefix.
        yield from _History(report, f"c{records}." if records > 1 else "").read(*held)
    yield from events.finish()


class _History(Turns):
    """One history: pairs observations with their actions by ``cause``."""

    __slots__ = ()

    def read(self, history: list[Any], lineno: int | None) -> Iterator[ToolCall]:
        for index, item in enumerate(history):
            if isinstance(item, list) and len(item) == 2:
                yield from self._pair(item, lineno, index)
            elif isinstance(item, dict):
                yield from self.event(item, lineno)
            else:
                self.report(lineno, f"history[{index}] is not an event")
        yield from self.finish()

    def event(self, event: dict[str, Any], lineno: int | None) -> Iterator[ToolCall]:
        action = event.get("action")
        if isinstance(action, str):
            self._action(event, action)
        elif isinstance(event.get("observation"), str):
            self._observation(event)
        yield from self.queue.ready()

    def _pair(self, pair: list[Any], lineno: int | None, index: int) -> Iterator[ToolCall]:
        action, observation = pair
        if not isinstance(action, dict) or not isinstance(observation, dict):
            self.report(lineno, f"history[{index}] is not an [action, observation] pair")
            return
        call = self._call(action, action.get("action"))
        if call is not None:
            self.queue.add(call, settled=True)
            call.result, call.error = _outcome(observation)
        elif action.get("source") == "user" and action.get("action") == "message":
            self.user_turns += 1
        yield from self.queue.ready()

    def _action(self, event: dict[str, Any], action: str) -> None:
        if event.get("source") == "user" and action == "message":
            self.user_turns += 1
            return
        call = self._call(event, action)
        if call is not None:
            self.queue.add(call, key=_key(event.get("id")))

    def _call(self, event: dict[str, Any], action: Any) -> ToolCall | None:
        if event.get("source") not in (None, "agent") or not isinstance(action, str):
            return None
        metadata = event.get("tool_call_metadata")
        name = metadata.get("function_name") if isinstance(metadata, dict) else None
        call_id = metadata.get("tool_call_id") if isinstance(metadata, dict) else None
        if not isinstance(name, str) or not name:
            if action in _NOT_TOOLS:
                return None
            name = action
        args = event.get("args")
        if isinstance(args, dict):
            args = {key: value for key, value in args.items() if key not in _DROPPED_ARGS}
        elif args is None:
            args = {}
        return ToolCall(
            name,
            args,
            call_id if isinstance(call_id, str) else None,
            self.run_id,
        )

    def _observation(self, event: dict[str, Any]) -> None:
        result, error = _outcome(event)
        if self.queue.settle(_key(event.get("cause")), result, error):
            return
        metadata = event.get("tool_call_metadata")
        if not isinstance(metadata, dict):
            return  # answers no tool call: state changes, recalls, rejected calls
        call_id = metadata.get("tool_call_id")
        name = metadata.get("function_name")
        if isinstance(name, str) and name:
            call = ToolCall(
                name,
                {},
                call_id if isinstance(call_id, str) else None,
                self.run_id,
                result,
                error,
            )
            self.queue.add(call, settled=True)


def _outcome(observation: dict[str, Any]) -> tuple[Any, str | None]:
    content = observation.get("content", MISSING)
    if observation.get("observation") == "error":
        return content, content_text(content) or "error"
    return content, None


def _key(event_id: Any) -> str | None:
    # Event ids are ints in saved trajectories and strings in some evaluation outputs.
    if event_id is None or isinstance(event_id, bool):
        return None
    return str(event_id)
