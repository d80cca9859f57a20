"""Total conversions of host values to text: ids the guard keys state by, and log arguments.

A host hands the guard whatever it has as a session, run, call or agent id, or as a tool name.
The guard must never raise into the host because of such a value, and must never hand the
``logging`` module an argument that fails while a handler formats or writes it (logging then
prints "--- Logging error ---" to stderr instead of the line).
"""

from __future__ import annotations

__all__ = ["log_repr", "log_text", "optional_id", "text_id"]


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


def log_text(value: object) -> str:
    """``value`` as text that every logging handler can format and write: an unprintable value
    becomes ``<unprintable TypeName>``, and lone surrogates (text no codec can encode) are
    backslash-escaped."""
    text = value if type(value) is str else _plain_str(value, "")
    return text if text.isascii() else _encodable(text)


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


def _encodable(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
