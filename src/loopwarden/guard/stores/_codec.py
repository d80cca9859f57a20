"""How the persistent stores serialise session states and loop events.

Event fields are typed from ``LoopEvent``'s annotations rather than listed here, so a field
added to the event later is stored and read back by every store without touching them.

Encoding is lossless for every Python string, lone surrogates included (ids and tool names come
from agents and transcripts, which may hold them): orjson refuses those, so a value it cannot
encode is written by the standard library, which escapes them (``\\ud800``) and reads them back.
A stored state that cannot be read back is never fatal: :class:`StateDecoder` reports it once
and the session starts afresh.
"""

from __future__ import annotations

import json
import types
import typing
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, Literal

import orjson

from ...base.log import get_logger
from ...engine.history import SessionState
from ...fingerprint import canonical_json, orjson_safe
from ..events import LoopEvent

log = get_logger("loopwarden.stores")

Kind = Literal["str", "int", "tuple", "json"]

# Sessions whose corrupt state was already reported, per store (bounded: a flood of corrupt
# rows must not grow memory; a session forgotten here is reported again, which is harmless).
_MAX_REPORTED = 1024


def dumps(value: Any) -> bytes:
    """JSON bytes for ``value``, lossless for every string (lone surrogates escaped); never
    raises, never hands orjson a value that could crash it (deep tuples abort orjson 3.12-3.13)."""
    if orjson_safe(value):
        try:
            return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
        except orjson.JSONEncodeError:
            pass
    try:
        # orjson rejects lone surrogates (and integers beyond 64 bits); the standard library
        # escapes the former as \udXXX, which json.loads turns back into the same string.
        return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    except (ValueError, TypeError, RecursionError):
        # Too deep, cyclic or not JSON at all: only a caller's value can be; stored as the
        # canonical form every hash already uses.
        return canonical_json(value)


def loads(raw: bytes | bytearray | memoryview | str) -> Any:
    """The inverse of :func:`dumps` (raises ``ValueError`` on text that is not JSON)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        # The escapes dumps' fallback writes (and text holding raw surrogates) are not
        # orjson's to read.
        if not isinstance(raw, str):
            raw = bytes(raw).decode("utf-8", "surrogatepass")
        return json.loads(raw)


def encode_state(state: SessionState) -> bytes:
    """A session state as the JSON bytes a store writes (read back by :func:`decode_state`)."""
    data = state.to_dict()
    # A state is loopwarden's own plain data but for the records' tool names and call ids,
    # which callers hand in (the guard makes them text; a record built directly may not be).
    for record in state.history:  # (a plain loop: this runs over the whole history each time)
        if type(record.tool_name) is not str or not (
            (record.call_id is None or type(record.call_id) is str)
            and (record.run_id is None or type(record.run_id) is str)
        ):
            data["history"] = [
                {**entry, "tool_name": storable_id(entry["tool_name"]),
                 "call_id": storable_id(entry["call_id"]), "run_id": storable_id(entry["run_id"])}
                for entry in data["history"]
            ]
            break
    # With those ids text, a state is plain, shallow data of loopwarden's own, so it skips the
    # check dumps() makes of a caller's value (which costs more than the write itself, and a
    # state is written on every call).
    try:
        return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:  # a lone surrogate in an id or a learned path
        return json.dumps(data, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def storable_id(value: Any) -> str | None:
    """A caller-given id as text: a str (a subclass as its plain value) as it is, anything
    else as its canonical JSON text, so that reading it back never depends on its methods."""
    if value is None or type(value) is str:
        return value
    try:
        if isinstance(value, str):
            return str.__str__(value)
    except Exception:  # a __class__ that raises: isinstance() asks it
        pass
    return canonical_json(value).decode("utf-8", "surrogatepass")


def decode_state(raw: bytes | str) -> SessionState:
    """A stored state; raises ``ValueError``/``TypeError`` (or similar) on a corrupt one."""
    data = loads(raw)
    if not isinstance(data, dict):
        raise ValueError(f"a session state is a JSON object, not {type(data).__name__}")
    return SessionState.from_dict(data)


class StateDecoder:
    """Decodes a store's session states; a corrupt one (unreadable bytes, truncated or
    foreign JSON, a wrong shape) is logged once per session, counted in :attr:`corrupt` and
    treated as absent, so the session starts afresh — and its next write replaces it —
    instead of failing on every call."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.corrupt = 0
        self._reported: OrderedDict[str, None] = OrderedDict()

    def __call__(self, raw: bytes | str, session: str) -> SessionState | None:
        try:
            return decode_state(raw)
        except Exception as exc:  # anything a corrupt value can make the decoder raise
            self.corrupt += 1
            if session not in self._reported:
                self._reported[session] = None
                while len(self._reported) > _MAX_REPORTED:
                    self._reported.popitem(last=False)
                log.error("loopwarden %s: the stored state of session %r cannot be read "
                          "(%s: %s); starting that session afresh",
                          self.where, session, type(exc).__name__, exc)
            return None


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
    """An event field as flat text (``None`` for an absent or empty value, or a false flag)."""
    if value is None or value is False or (isinstance(value, (tuple, list, dict)) and not value):
        return None
    kind = _KINDS.get(name, "json")
    if kind == "int" and type(value) is int:
        return str(value)
    if kind in ("str", "int"):
        return storable_id(value)
    return dumps(value).decode("utf-8", "surrogatepass")


def text_value(name: str, text: str) -> Any:
    """The inverse of :func:`field_text`."""
    kind = _KINDS.get(name, "json")
    if kind == "str":
        return text
    if kind == "int":
        return int(text)
    return loads(text)


def event_from_values(values: Mapping[str, Any]) -> LoopEvent:
    """A ``LoopEvent`` from stored values; unknown names (from a newer writer) are dropped."""
    known: dict[str, Any] = {}
    for name, value in values.items():
        if name not in _KINDS:
            continue
        known[name] = tuple(value) if _KINDS[name] == "tuple" and value is not None else value
    return LoopEvent(**known)
