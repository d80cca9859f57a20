"""Error text: the text a raised error is hashed and scanned by (§c.3 step 1), and (``early``
preset) the error a *successful* result reports in its body.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Mapping
from typing import Any, Final

import orjson

from ..base.lazy_re import lazy_pattern
from .canonical import canonical_json
from .results import _content_text, _is_list, _is_mapping


def error_text(error: object) -> str:
    """The text an error is hashed and scanned by (§c.3 step 1); never raises."""
    try:
        return _error_text(error)
    except Exception:  # e.g. a __class__ that raises: isinstance() asks it
        return canonical_json(error).decode("utf-8", "replace")


def _error_text(error: object) -> str:
    if isinstance(error, BaseException):
        try:
            message = str(error)
        except Exception:
            message = ""
        return message or type(error).__name__
    if isinstance(error, str):
        return error if type(error) is str else str.__str__(error)
    if isinstance(error, bool):
        return "true" if error else "false"
    if isinstance(error, (int, float)):
        return _js_number_text(error)
    if isinstance(error, decimal.Decimal):
        return str(error)
    return canonical_json(error).decode("utf-8", "replace")


def _js_number_text(number: float) -> str:
    """Number -> text the way JavaScript's ``String(n)`` prints it (1.0 -> "1")."""
    if isinstance(number, int):
        try:
            return int.__repr__(number)
        except ValueError:
            return hex(number)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number.is_integer() and abs(number) < 1e21:
        return str(int(number))
    text = repr(float(number))
    mantissa, _, exponent = text.partition("e")
    if not exponent:
        return text
    return (
        f"{mantissa}e{'-' if exponent.startswith('-') else '+'}{exponent.lstrip('+-').lstrip('0')}"
    )


# ---------------------------------------------------------------------------------------------
# Errors reported inside results (``early`` preset)

# Keys an error envelope may carry besides its error: a mapping with any other key holds data,
# so a stray "error" field in it does not make the whole result a failure.
_ERROR_ENVELOPE_KEYS: Final = frozenset({
    "error", "errors", "message", "code", "status", "statusCode", "status_code", "errorCode",
    "error_code", "tool", "docs", "hint", "details", "type", "name", "reason", "stack", "ok",
    "success", "isError", "is_error", "retryable", "requestId", "request_id", "content",
})
_EXIT_HEADER: Final = lazy_pattern(r"Exit code ([1-9]\d*)\b")
_MAX_PARSED_RESULT: Final = 65_536


def result_error_text(result: object) -> str | None:
    """The error a *successful* result reports in its body, or None.

    Recognised: ``{"status": "error", "error": ...}``, ``{"ok": false, ...}``,
    ``{"success": false, ...}``, MCP ``{"isError": true, "content": [...]}``, an error envelope
    (``{"error": "...", "message": "..."}`` and nothing else), each as a mapping or as its JSON
    text, an OpenClaw-shaped result whose ``details`` is one, and text that starts with an
    ``Exit code N`` header (N > 0). Never raises."""
    try:
        if isinstance(result, str):
            return _text_error(result)
        if _is_mapping(result):
            found = _mapping_error(result)
            if found is None and _is_mapping(result.get("details")):
                found = _mapping_error(result["details"])
            return found
    except Exception:
        return None
    return None


def _text_error(text: str) -> str | None:
    stripped = text.strip()
    if stripped.startswith("Exit code ") and _EXIT_HEADER().match(stripped):
        return stripped
    if not (stripped.startswith("{") and stripped.endswith("}")) or len(stripped) > _MAX_PARSED_RESULT:
        return None
    if '"error"' not in stripped and '"ok"' not in stripped and '"success"' not in stripped \
            and '"isError"' not in stripped:
        return None
    try:
        parsed = orjson.loads(stripped)
    except orjson.JSONDecodeError:
        return None
    return _mapping_error(parsed) if isinstance(parsed, dict) else None


def _mapping_error(value: Mapping[Any, Any]) -> str | None:
    failed = (
        value.get("isError") is True or value.get("is_error") is True
        or value.get("ok") is False or value.get("success") is False
        or value.get("status") == "error"
    )
    if not failed:
        error = value.get("error")
        if not error or not isinstance(error, (str, Mapping)):
            return None
        if any(not isinstance(k, str) or k not in _ERROR_ENVELOPE_KEYS for k in value):
            return None
        if value.get("status") in ("ok", "success") or value.get("ok") is True:
            return None
    return _error_message(value)


def _error_message(value: Mapping[Any, Any]) -> str:
    for key in ("error", "message", "errors", "reason"):
        item = value.get(key)
        if isinstance(item, str) and item.strip():
            return item.strip()
        if _is_mapping(item):
            inner = item.get("message")
            if isinstance(inner, str) and inner.strip():
                return inner.strip()
            return canonical_json(item).decode("utf-8", "replace")
    content = value.get("content")
    if _is_list(content):
        text = _content_text(content)
        if text:
            return text
    return canonical_json(value).decode("utf-8", "replace")
