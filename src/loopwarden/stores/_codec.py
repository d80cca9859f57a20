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
from ..fingerprint import canonical_json, json_bytes
from ..history import SessionState

__all__ = ["EVENT_FIELDS", "decode_state", "encode_state", "event_from_values", "field_text",
           "storable_id", "text_value"]

Kind = Literal["str", "int", "tuple", "json"]


def encode_state(state: SessionState) -> bytes:
    data = state.to_dict()
    # Everything in a state is loopwarden's own plain data, but for two values callers hand in:
    # records' tool names and call ids. orjson must never see one it could be crashed by (3.12
    # and 3.13 abort the process on deeply nested tuples).
    for record in state.history:  # (a plain loop: this runs over the whole history each time)
        kind: type = type(record.call_id)
        if type(record.tool_name) is not str or not (
            kind is str or kind is int or record.call_id is None
        ):
            data["history"] = [
                {**entry, "tool_name": storable_id(entry["tool_name"]),
                 "call_id": storable_id(entry["call_id"])}
                for entry in data["history"]
            ]
            break
    return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)


def storable_id(value: Any) -> Any:
    """A caller-given id as a store can keep it: a str, int, float, bool or None as it is (a
    subclass as its plain value); anything else as its canonical JSON text."""
    kind = type(value)
    if value is None or kind is str or kind is int or kind is float or kind is bool:
        return value
    try:
        if isinstance(value, str):
            return str.__str__(value)
        if isinstance(value, int):
            return int.__int__(value)
        if isinstance(value, float):
            return float.__float__(value)
    except Exception:  # a __class__ that raises: isinstance() asks it
        pass
    return canonical_json(value).decode("utf-8", "replace")


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
        plain = storable_id(value)
        return plain if type(plain) is str else str(plain)
    return json_bytes(value, orjson.OPT_NON_STR_KEYS).decode()


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
