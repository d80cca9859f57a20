"""Total conversions of host values to text: ids the guard keys state by, and log arguments.

A host hands the guard whatever it has as a session, run, call or agent id, or as a tool name.
The guard must never raise into the host because of such a value, and must never hand the
``logging`` module an argument that fails while a handler formats or writes it (logging then
prints "--- Logging error ---" to stderr instead of the line).

:func:`content_text` flattens model-facing content blocks to text; the transcript readers and the
MCP proxy both need it, so it lives here, below both doors.
"""

from __future__ import annotations

from typing import Any

__all__ = ["content_text", "log_repr", "log_text", "optional_id", "text_id"]

#: A tool name or id in a log line is cut after this many characters (a name is the model's
#: text, and may be anything).
LOG_NAME_LIMIT = 120


def text_id(value: object) -> str:
    """``value`` as an id: itself for a ``str``, else ``str(value)`` as a plain ``str``; a value
    whose ``__str__`` raises (or returns no text) becomes ``<unprintable id: TypeName>``, the
    same for every such value of one type (a stable marker, not a per-object address)."""
    if type(value) is str:
        return value
    return _plain_str(value, "id: ")


def optional_id(value: object) -> str | None:
    """:func:`text_id` for an optional id: ``None`` stays ``None``."""
    if value is None or type(value) is str:
        return value
    return _plain_str(value, "id: ")


def log_text(value: object, limit: int = LOG_NAME_LIMIT) -> str:
    """``value`` as text for one log line: cut after ``limit`` characters, and control
    characters, other non-printables and lone surrogates backslash-escaped (a name with a
    newline cannot forge a log line, and every handler can encode the result). An unprintable
    value becomes ``<unprintable TypeName>``. Never raises: a host may hand the guard anything
    as a tool name."""
    text = value if type(value) is str else _plain_str(value, "")
    if len(text) > limit:
        text = f"{text[:limit]}...({len(text)} chars)"
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def log_repr(value: object) -> str:
    """``repr(value)`` made safe like :func:`log_text` (for naming user objects in log lines)."""
    try:
        text = repr(value)
        if not isinstance(text, str):
            raise TypeError("__repr__ returned a non-string")
        text = str.__str__(text)
    except Exception:
        text = f"<unprintable {_type_name(value)}>"
    return log_text(text)


def _plain_str(value: object, kind: str) -> str:
    try:
        text = str(value)
        # str() passes a str subclass returned by __str__ through; keys and log arguments
        # must not carry its overridden __hash__, __eq__ or __str__.
        return text if type(text) is str else str.__str__(text)
    except Exception:
        return f"<unprintable {kind}{_type_name(value)}>"


def _type_name(value: object) -> str:
    try:
        name = type(value).__qualname__
    except Exception:
        return "object"
    return name if type(name) is str else "object"


def content_text(content: Any) -> str:
    """Flatten message content (a string or a list of content blocks) to the text a model saw.

    Text blocks are joined with newlines and every non-text block becomes ``[<type>]``, the
    way the corpus' normalised twins spell it.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            text = block.get("text")
            if block.get("type", "text") == "text" and isinstance(text, str):
                parts.append(text)
            else:
                parts.append(f"[{block.get('type', 'block')}]")
    return "\n".join(parts)
