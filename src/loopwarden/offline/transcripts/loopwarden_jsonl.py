"""loopwarden's own JSONL: one tool call per line, already paired.

``{"tool": "read", "args": {...}, "result": ..., "error": null, "call_id": "c1", "run_id": "r1"}``
(the corpus' normalised files add ``"i"``; extra keys are ignored).

Rules:
- ``tool`` is required (``tool_name`` is accepted too); ``args`` defaults to ``{}``.
- ``"result": null`` or no ``result`` means the result never arrived (``MISSING``): that is how
  the corpus writes calls without results.
- ``error`` is None unless it is a non-empty value; a non-string error is kept as its JSON text.
- ``call_id`` and ``run_id`` are kept as strings (numbers are converted).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwarden.base.types import MISSING, ToolCall
from loopwarden.fingerprint import json_bytes
from loopwarden.offline.transcripts._common import Reporter, iter_json_lines

_FOREIGN_KEYS = ("role", "type", "message", "action", "observation")


def sniff(record: dict[str, Any]) -> bool:
    """True when one parsed JSONL record looks like a loopwarden call line."""
    name = record.get("tool", record.get("tool_name"))
    if not isinstance(name, str):
        return False
    return not any(key in record for key in _FOREIGN_KEYS)


def read(path: Path, report: Reporter) -> Iterator[ToolCall]:
    """The tool calls of a loopwarden JSONL file, one a line; problems go to ``report``."""
    for lineno, record in iter_json_lines(path, report):
        call = _call(record)
        if isinstance(call, str):
            report(lineno, call)
        else:
            yield call


def _call(record: dict[str, Any]) -> ToolCall | str:
    """The line's call, or a message saying why it is not one."""
    name = record.get("tool", record.get("tool_name"))
    if not isinstance(name, str) or not name:
        return "line has no 'tool' name"
    args = record.get("args", {})
    result = record.get("result")
    return ToolCall(
        name,
        {} if args is None else args,
        _text_or_none(record.get("call_id")),
        _text_or_none(record.get("run_id")),
        MISSING if result is None else result,
        _error(record.get("error")),
    )


def _text_or_none(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json_bytes(value).decode() if isinstance(value, (dict, list)) else str(value)


def _error(value: Any) -> str | None:
    if value is None or value is False or value == "":
        return None
    if value is True:
        return "error"
    return _text_or_none(value)
