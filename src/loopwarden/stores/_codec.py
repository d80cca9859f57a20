"""How the persistent stores serialise session states and loop events.

Event fields are typed from ``LoopEvent``'s annotations rather than listed here, so a field
added to the event later is stored and read back by every store without touching them.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, Literal

import orjson

from ..events import LoopEvent
from ..history import SessionState

__all__ = ["EVENT_FIELDS", "decode_state", "encode_state", "event_from_values", "field_text",
           "text_value"]

Kind = Literal["str", "int", "tuple", "json"]


def encode_state(state: SessionState) -> bytes:
    return orjson.dumps(state.to_dict(), option=orjson.OPT_NON_STR_KEYS)


def decode_state(raw: bytes | str) -> SessionState:
    return SessionState.from_dict(orjson.loads(raw))


def _kind(hint: Any) -> Kind:
    origin = typing.get_origin(hint)
    if origin is tuple:
        return "tuple"
    if hint is int:
        return "int"
    if hint is str or (origin in (typing.Union, types.UnionType) and str in typing.get_args(hint)):
        return "str"
    return "json"


EVENT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(LoopEvent))
_KINDS: dict[str, Kind] = {
    name: _kind(hint) for name, hint in typing.get_type_hints(LoopEvent).items()
    if name in EVENT_FIELDS
}


def field_text(name: str, value: Any) -> str | None:
    """An event field as flat text (``None`` for an absent or empty value)."""
    if value is None or (isinstance(value, (tuple, list, dict)) and not value):
        return None
    kind = _KINDS.get(name, "json")
    if kind in ("str", "int"):
        return str(value)
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def text_value(name: str, text: str) -> Any:
    """The inverse of :func:`field_text`."""
    kind = _KINDS.get(name, "json")
    if kind == "str":
        return text
    if kind == "int":
        return int(text)
    return orjson.loads(text)


def event_from_values(values: Mapping[str, Any]) -> LoopEvent:
    """A ``LoopEvent`` from stored values; unknown names (from a newer writer) are dropped."""
    known: dict[str, Any] = {}
    for name, value in values.items():
        if name not in _KINDS:
            continue
        known[name] = tuple(value) if _KINDS[name] == "tuple" and value is not None else value
    return LoopEvent(**known)
