"""OpenClaw session JSONL (``~/.openclaw/agents/<agent>/sessions/<id>.jsonl``).

One record per line; ``{"type": "message", "message": {...}}`` records carry the conversation:
assistant messages hold ``toolCall`` blocks (``id``, ``name``, ``arguments``) and each result is
its own ``toolResult`` message (``toolCallId``, ``toolName``, ``content``, ``details``,
``isError``). Other record types (session header, model changes, compaction, custom) are
skipped.

Rules:
- ``result`` is OpenClaw's own shape, ``{"content": [...], "details": {...}}`` (``details`` only
  when the record has it), because the detectors hash exec ``details.status`` and friends.
- ``isError: true`` sets ``error`` to the result's text; ``result`` keeps the shape.
- A result whose call is not in the file (providers that drop the ``toolCall`` block) is still a
  call the agent made: it is emitted at the result's position with ``args={}``.
- Each user message opens a new run: ``run_id`` is ``"u<n>"`` for the n-th user message (``"u0"``
  before the first one).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwarden.base.types import ToolCall
from loopwarden.offline.transcripts._common import CallQueue, Reporter, iter_json_lines

from ...base.text import content_text

_CALL_BLOCK_TYPES = frozenset({"toolCall", "tool_use", "toolUse", "functionCall"})
_RECORD_TYPES = frozenset(
    {"session", "model_change", "thinking_level_change", "compaction", "branch_summary", "custom"}
)


def sniff(record: dict[str, Any]) -> bool:
    """True when one parsed JSONL record looks like an OpenClaw session record."""
    kind = record.get("type")
    if kind == "session":
        return "version" in record or "cwd" in record
    if isinstance(kind, str) and kind in _RECORD_TYPES:
        return "parentId" in record or "timestamp" in record
    if kind == "message" and "uuid" not in record:
        message = record.get("message")
        return isinstance(message, dict) and "role" in message
    return False


def read(path: Path, report: Reporter) -> Iterator[ToolCall]:
    """The tool calls of an OpenClaw session file, in call order; problems go to ``report``."""
    queue = CallQueue()
    user_turns = 0
    run_id = "u0"
    for lineno, record in iter_json_lines(path, report):
        if record.get("type") != "message":
            continue
        message = record.get("message")
        if type(message) is not dict:
            report(lineno, "message record without a message object")
            continue
        role = message.get("role")
        if role == "assistant":
            content = message.get("content")
            if type(content) is list:
                _add_calls(content, run_id, queue, lineno, report)
        elif role == "toolResult":
            _add_result(message, run_id, queue, lineno, report)
            yield from queue.ready()  # only a result can settle the head of the queue
        elif role == "user":
            user_turns += 1
            run_id = f"u{user_turns}"
    yield from queue.drain()


def _add_calls(
    content: list[Any], run_id: str, queue: CallQueue, lineno: int, report: Reporter
) -> None:
    for block in content:
        if type(block) is not dict:
            continue
        kind = block.get("type")
        if type(kind) is not str or kind not in _CALL_BLOCK_TYPES:
            continue
        name = block.get("name")
        if not name or type(name) is not str:
            report(lineno, "tool call without a tool name")
            continue
        args = block.get("arguments", block.get("input", {}))
        call_id = block.get("id")
        if call_id is not None and type(call_id) is not str:
            call_id = str(call_id)
        queue.add(ToolCall(name, {} if args is None else args, call_id, run_id))


def _add_result(
    message: dict[str, Any], run_id: str, queue: CallQueue, lineno: int, report: Reporter
) -> None:
    content = message.get("content")
    result: dict[str, Any] = {"content": content}
    if "details" in message:
        result["details"] = message["details"]
    error = (content_text(content) or "error") if message.get("isError") is True else None
    call_id = _str_or_none(message.get("toolCallId"))
    if queue.settle(call_id, result, error):
        return
    name = message.get("toolName")
    if not isinstance(name, str) or not name:
        report(lineno, "tool result without a matching call or a tool name")
        return
    queue.add(ToolCall(name, {}, call_id, run_id, result, error), settled=True)


def _str_or_none(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return str(value)
