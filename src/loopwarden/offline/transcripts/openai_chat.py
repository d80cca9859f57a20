"""OpenAI chat-completions message lists (also tau-bench trajectories).

Accepted shapes:
- a JSON list of messages, or ``{"messages": [...]}`` (a request body), or a tau-bench result
  ``{"task_id", "traj": [...], ...}``;
- a JSON list of such conversations (tau-bench's results file);
- JSONL with one message per line, or one conversation object per line.

Assistant messages carry ``tool_calls`` (``id``, ``function.name``, ``function.arguments`` as a
JSON string) or the legacy ``function_call``; results are ``role: "tool"`` messages
(``tool_call_id``) or legacy ``role: "function"`` messages, paired in order.

Rules:
- ``args`` are the decoded ``arguments`` (the raw string when it is not valid JSON).
- ``result`` is the tool message's ``content`` as written. The format has no error flag, so a
  result is an error when its text starts with ``"Error:"`` (how tau-bench and most tool
  runners report a raised exception) or the message says ``is_error``/``isError: true`` or
  ``status: "error"`` (LangChain); ``error`` is then the result's text.
- A tool message whose call is missing becomes a call at its position with ``args={}`` when it
  names its tool, else it is reported.
- Each user message opens a new run, ``run_id="u<n>"``; in a file holding several
  conversations, runs are prefixed with the conversation: ``"c<k>.u<n>"``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwarden.base.types import ToolCall
from loopwarden.offline.transcripts._common import (
    Reporter,
    Turns,
    iter_json_lines,
    parse_json_args,
    read_lines_or_document,
)

from ...base.text import content_text

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_CONVERSATION_KEYS = ("traj", "messages")


def sniff(value: Any) -> bool:
    """True when a parsed JSON value (a record or a whole document) is chat messages."""
    if isinstance(value, list):
        first = next((item for item in value if isinstance(item, dict)), None)
        return first is not None and sniff(first)
    if not isinstance(value, dict):
        return False
    if _has_role(value):
        return True
    return any(_is_message_list(value.get(key)) for key in _CONVERSATION_KEYS)


def _is_message_list(value: Any) -> bool:
    return isinstance(value, list) and any(
        isinstance(item, dict) and _has_role(item) for item in value[:5]
    )


def _has_role(message: dict[str, Any]) -> bool:
    role = message.get("role")
    return isinstance(role, str) and role in _ROLES


def read(path: Path, report: Reporter) -> Iterator[ToolCall]:
    """The tool calls of an OpenAI chat transcript (JSON or JSONL); problems go to ``report``."""
    return read_lines_or_document(path, report, _read_jsonl, _read_document)


def _read_document(document: Any, report: Reporter) -> Iterator[ToolCall]:
    conversations = _conversations(document)
    if conversations is None:
        report(None, "no chat messages found (expected a message list, 'messages' or 'traj')")
        return
    many = len(conversations) > 1
    for index, messages in enumerate(conversations, 1):
        yield from _conversation(messages, report, f"c{index}." if many else "", None)


def _conversations(document: Any) -> list[list[Any]] | None:
    """The message lists in a document: one for a conversation, several for a results file."""
    if isinstance(document, dict):
        messages = _messages_of(document)
        return None if messages is None else [messages]
    if not isinstance(document, list):
        return None
    if all(isinstance(item, dict) and "role" in item for item in document):
        return [document]
    found = [_messages_of(item) for item in document if isinstance(item, dict)]
    lists = [messages for messages in found if messages is not None]
    return lists or None


def _messages_of(record: dict[str, Any]) -> list[Any] | None:
    for key in _CONVERSATION_KEYS:
        value = record.get(key)
        if isinstance(value, list):
            return value
    return None


def _read_jsonl(path: Path, report: Reporter) -> Iterator[ToolCall]:
    chat = _Chat(report, "")
    conversations = 0
    held: tuple[list[Any], int] | None = None  # waits until we know if it is the only one
    for lineno, record in iter_json_lines(path, report):
        messages = _messages_of(record)
        if messages is None:
            yield from chat.message(record, lineno, None)
            continue
        if held is not None:
            yield from _conversation(held[0], report, f"c{conversations}.", held[1])
        conversations += 1
        held = (messages, lineno)
    if held is not None:
        prefix = f"c{conversations}." if conversations > 1 else ""
        yield from _conversation(held[0], report, prefix, held[1])
    yield from chat.finish()


def _conversation(
    messages: list[Any], report: Reporter, prefix: str, lineno: int | None
) -> Iterator[ToolCall]:
    chat = _Chat(report, prefix)
    for position, message in enumerate(messages):
        yield from chat.message(message, lineno, position)
    yield from chat.finish()


class _Chat(Turns):
    """One conversation: pairs tool messages with the calls of earlier assistant messages."""

    __slots__ = ()

    def message(self, message: Any, lineno: int | None, position: int | None) -> Iterator[ToolCall]:
        if not isinstance(message, dict):
            self._problem(lineno, position, f"message is a {type(message).__name__}, not an object")
            return
        role = message.get("role")
        if role == "user":
            self.user_turns += 1
        elif role == "assistant":
            self._calls(message, lineno, position)
        elif role in ("tool", "function"):
            self._result(message, lineno, position)
        yield from self.queue.ready()

    def _calls(self, message: dict[str, Any], lineno: int | None, position: int | None) -> None:
        tool_calls = message.get("tool_calls")
        if isinstance(tool_calls, list):
            for call in tool_calls:
                self._call(call, lineno, position)
        function_call = message.get("function_call")
        if isinstance(function_call, dict):
            name = function_call.get("name")
            self._call({"function": function_call}, lineno, position, key=_legacy_key(name))

    def _call(
        self, call: Any, lineno: int | None, position: int | None, key: str | None = None
    ) -> None:
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name or not isinstance(function, dict):
            self._problem(lineno, position, "tool call without a function name")
            return
        call_id = call.get("id")
        self.queue.add(
            ToolCall(
                name,
                parse_json_args(function.get("arguments")),
                call_id if isinstance(call_id, str) else None,
                self.run_id,
            ),
            key=key,
        )

    def _result(self, message: dict[str, Any], lineno: int | None, position: int | None) -> None:
        content = message.get("content")
        error = _error_text(message, content)
        key = message.get("tool_call_id")
        if message.get("role") == "function" and key is None:
            key = _legacy_key(message.get("name"))
        if self.queue.settle(key if isinstance(key, str) else None, content, error):
            return
        name = message.get("name")
        if not isinstance(name, str) or not name:
            self._problem(lineno, position, f"tool message for unknown call id {key!r}")
            return
        call_id = message.get("tool_call_id")
        self.queue.add(
            ToolCall(
                name, {}, call_id if isinstance(call_id, str) else None, self.run_id, content, error
            ),
            settled=True,
        )

    def _problem(self, lineno: int | None, position: int | None, message: str) -> None:
        where = "" if position is None else f"message {position}: "
        self.report(lineno, where + message)


def _error_text(message: dict[str, Any], content: Any) -> str | None:
    flagged = (
        message.get("is_error") is True
        or message.get("isError") is True
        or message.get("status") == "error"
    )
    text = content_text(content)
    if flagged:
        return text or "error"
    return text if text.startswith("Error:") else None


def _legacy_key(name: Any) -> str:
    # Legacy function calls have no ids: a "function" message answers the oldest open call of
    # the same name. The NUL prefix keeps these keys apart from real call ids.
    return f"\0function:{name}"
