"""The MCP proxy's reading and writing of single JSON-RPC messages: no state, no transport.

What :class:`~loopwarden.integrations._mcp_guard.McpLoopGuard` and the stdio transport both
need to know about a message (its id, whether it is a request, a final tool result or a
created task) and the responses the proxy makes up itself (a blocked call, a failed call
carrying its warning). Part of :mod:`loopwarden.integrations.mcp_proxy`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from ..base.text import content_text
from ..base.types import MISSING
from ..guard import Verdict


def blocked_response(request_id: Any, verdict: Verdict) -> dict[str, Any]:
    """The JSON-RPC response for a blocked ``tools/call``: a tool result the model reads, not a
    protocol error (MCP reserves those for calls that could not be made at all)."""
    blocked = verdict.blocked_result()
    details = dict(blocked.get("details", {}))
    if verdict.detection is not None:
        details.update(detector=verdict.detection.detector, count=verdict.detection.count,
                       level=verdict.detection.level)
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {
            "content": blocked["content"],
            "isError": True,
            # Required on the 2026-07-28 wire; earlier protocol versions ignore it.
            "resultType": "complete",
            "_meta": {"loopwarden/blocked": details},
        },
    }


def _notes(before: Verdict | None, after: Verdict) -> list[str]:
    notes = [v.note for v in (before, after) if v is not None and v.note]
    return list(dict.fromkeys(notes))  # the same note twice says nothing new


def _annotate_error(message: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """A failed call still carries its warning: in the error message, the only text a client
    shows the model for a JSON-RPC error."""
    error = message["error"]
    if not notes or not isinstance(error, dict):
        return message
    text = str(error.get("message", ""))
    for note in notes:
        text = f"{text}\n\n{note}" if text else note
    return {**message, "error": {**error, "message": text}}


def _is_final(result: Any) -> TypeGuard[dict[str, Any]]:
    return (isinstance(result, dict) and isinstance(result.get("content"), list)
            and result.get("resultType", "complete") == "complete")


def _created_task(result: Any) -> str | None:
    """The ``taskId`` of a ``CreateTaskResult`` (the answer to a task-augmented request)."""
    task = result.get("task") if isinstance(result, dict) else None
    task_id = task.get("taskId") if isinstance(task, dict) else None
    return task_id if isinstance(task_id, str) else None


def _task_param(params: Any) -> str | None:
    task_id = params.get("taskId") if isinstance(params, dict) else None
    return task_id if isinstance(task_id, str) else None


def _tool_error(result: Mapping[str, Any]) -> Any:
    """A result with ``isError`` is a failure: its text is the error, as transcripts record it."""
    if result.get("isError") is not True:
        return MISSING
    return content_text(result.get("content")) or "error"


def _is_input_retry(params: Mapping[str, Any]) -> bool:
    """A retry that answers the upstream's input requests continues an admitted call."""
    return params.get("inputResponses") is not None or params.get("requestState") is not None


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str) and message:
            return message
        return json.dumps(error, sort_keys=True, default=str)
    return str(error)


def _meta_str(meta: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = meta.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return str(value)
    return None


def _is_request(message: Any) -> bool:
    return isinstance(message, dict) and "method" in message and "id" in message


def _response_key(message: Any) -> str | None:
    if isinstance(message, dict) and "id" in message and "method" not in message:
        return _id_key(message["id"])
    return None


def _id_key(request_id: Any) -> str:
    # JSON-RPC ids are strings or numbers, and "1" and 1 are different ids.
    return json.dumps(request_id, sort_keys=True, default=str)


def _dump(message: Any) -> bytes:
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:
        # A lone surrogate (JavaScript writes "\ud83d" when it cuts text mid-emoji): UTF-8
        # cannot carry it, a JSON escape can, as the sender wrote it.
        return json.dumps(message, separators=(",", ":")).encode() + b"\n"
