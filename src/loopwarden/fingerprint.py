"""Canonical serialisation and hashing of tool arguments and outcomes (spec §c). Pure, no I/O.

``canonical_json`` is total over any Python value and deterministic across processes. The common
case is a single ``orjson.dumps(..., OPT_SORT_KEYS)``; anything orjson refuses (cycles, depth over
254, non-string keys, integers beyond 64 bits, lone surrogates, bytes, sets, custom objects ...)
goes to :func:`canonical_json_slow`, an iterative serialiser that emits byte-identical output for
every value orjson can serialise and a deterministic form for the rest:

- NaN and ±infinity serialise as ``null`` (what orjson does), so they hash like ``None``;
- bytes-like values -> ``{"data": <base64>, "type": "Uint8Array"}``; sets -> arrays of their
  items sorted by serialised form; tuples, deques -> arrays;
- dict keys that are not strings are stringified (``1`` -> ``"1"``, ``None`` -> ``"null"``,
  tuples -> their JSON text); colliding keys are all kept, ordered by key then value;
- a reference back to a container that is still being serialised -> ``"[Circular]"``; shared,
  non-cyclic references are serialised in full each time;
- lone surrogates -> U+FFFD (a valid surrogate pair becomes its astral character);
- integers beyond 64 bits -> their digits (hex string past Python's digit limit);
- dataclasses -> their fields; pydantic models -> ``model_dump()``; enums -> their value;
  ``Decimal`` -> its text; paths -> POSIX text; exceptions -> ``{"message", "name"}``;
  any other object -> ``{"__object__": "<module>.<qualname>", "state": {<attributes>}}``
  (never a memory address, never ``repr``).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import enum
import hashlib
import math
import os
import re
import types
import uuid
from array import array
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import Any, Final, NamedTuple, TypeGuard

import orjson

from loopwarden.profiles import (
    PROJECTION_EXEC,
    PROJECTION_PROCESS,
    PROJECTION_WRITE,
    SEND_VOLATILE_KEYS,
    ProfileRegistry,
    ToolProfile,
    default_registry,
)
from loopwarden.types import MISSING
from loopwarden.volatile import has_digit

__all__ = [
    "UNTRUSTED_ZERO_ID",
    "Outcome",
    "args_hash",
    "args_hash_of_json",
    "canonical_json",
    "canonical_json_slow",
    "canonicalise_untrusted",
    "digest",
    "error_text",
    "extract_unknown_tool",
    "mask_when_spans",
    "mutation_target_hash",
    "outcome_of",
    "profiled_outcome",
    "result_error_text",
    "text_outcome",
]

_FAST_OPTIONS: Final = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS
_UNTRUSTED_NEEDLE: Final = "EXTERNAL_UNTRUSTED_CONTENT"
_UNTRUSTED_NEEDLE_BYTES: Final = _UNTRUSTED_NEEDLE.encode()
_CIRCULAR: Final = b'"[Circular]"'

StrTransform = Callable[[str], str]


def _refuse(value: object) -> object:
    raise TypeError("handled by the fallback serialiser")


# ---------------------------------------------------------------------------------------------
# Canonical serialisation


def canonical_json(value: object) -> bytes:
    """Canonical, deterministic JSON-like bytes for any value; never raises."""
    try:
        return orjson.dumps(value, default=_refuse, option=_FAST_OPTIONS)
    except Exception:
        return canonical_json_slow(value)


def canonical_json_slow(value: object, transform: StrTransform | None = None) -> bytes:
    """The fallback serialiser behind :func:`canonical_json` (iterative, any depth).

    ``transform`` rewrites every string *value* (not keys) before it is encoded; ``digest``
    uses it for untrusted-content canonicalisation.
    """
    try:
        return _Walker(transform).serialise(value)
    except Exception:
        # Last resort for values whose own methods misbehave in ways not anticipated below.
        return _opaque(value)


_INLINE_LIMIT: Final = 4096

# A rope is serialised output as nested chunks; joining once at the end keeps deep values linear.
Rope = bytes | list["Rope"]


def _flatten(rope: Rope) -> bytes:
    if isinstance(rope, bytes):
        return rope
    chunks: list[bytes] = []
    stack = [iter(rope)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, bytes):
                chunks.append(item)
            else:
                stack.append(iter(item))
                break
        else:
            stack.pop()
    return b"".join(chunks)


class _Frame:
    """One container being serialised: children are visited in order, parts collected."""

    __slots__ = ("index", "keys", "kind", "nested", "parts", "ref", "values")

    ARRAY: Final = 0
    OBJECT: Final = 1
    SET: Final = 2

    def __init__(
        self, kind: int, ref: object, values: list[object], keys: list[str] | None = None
    ) -> None:
        self.kind = kind
        self.ref = ref  # keeps the object alive, so its id stays unique while on the stack
        self.values = values
        self.keys = keys
        self.index = 0
        self.parts: list[Rope] = []
        self.nested = False  # some part is a rope rather than bytes

    def add(self, part: Rope) -> None:
        # Re-joining large children at every level would make deep chains quadratic.
        if type(part) is not bytes or len(part) > _INLINE_LIMIT:
            self.nested = True
        self.parts.append(part)

    def finish(self) -> Rope:
        if self.kind == _Frame.ARRAY:
            return _joined(b"[", self.parts, b"]", self.nested)
        if self.kind == _Frame.SET:
            return _joined(b"[", sorted(_flatten(part) for part in self.parts), b"]", False)
        return self._finish_object()

    def _finish_object(self) -> Rope:
        keys, parts = self.keys, self.parts
        assert keys is not None
        if len(set(keys)) == len(keys):
            order = sorted(range(len(keys)), key=keys.__getitem__)
        else:
            # Stringified keys collided (e.g. 1 and "1"): order the twins by their values.
            flat = [_flatten(part) for part in parts]
            order = sorted(range(len(keys)), key=lambda i: (keys[i], flat[i]))
        rope: list[Rope] = [b"{"]
        for position, i in enumerate(order):
            prefix = b"," if position else b""
            rope.append(prefix + orjson.dumps(keys[i]) + b":")
            rope.append(parts[i])
        rope.append(b"}")
        return rope if self.nested else b"".join(rope)  # type: ignore[arg-type]


def _joined(opening: bytes, parts: list[Rope] | list[bytes], closing: bytes, nested: bool) -> Rope:
    if not nested:
        return opening + b",".join(parts) + closing  # type: ignore[arg-type]
    rope: list[Rope] = [opening]
    for i, part in enumerate(parts):
        if i:
            rope.append(b",")
        rope.append(part)
    rope.append(closing)
    return rope


class _Walker:
    """Post-order, explicit-stack serialiser: no Python recursion over the value's depth."""

    __slots__ = ("_on_stack", "_transform")

    def __init__(self, transform: StrTransform | None, on_stack: set[int] | None = None) -> None:
        self._transform = transform
        # ids of the containers currently open; shared with the walks that stringify keys
        self._on_stack: set[int] = set() if on_stack is None else on_stack

    def serialise(self, root: object) -> bytes:
        first = self._visit(root)
        if isinstance(first, bytes):
            return first
        stack: list[_Frame] = [first]
        while True:
            frame = stack[-1]
            if frame.index < len(frame.values):
                child = frame.values[frame.index]
                frame.index += 1
                visited = self._visit(child)
                if isinstance(visited, bytes):
                    frame.parts.append(visited)
                else:
                    stack.append(visited)
                continue
            stack.pop()
            self._on_stack.discard(id(frame.ref))
            data = frame.finish()
            if not stack:
                return _flatten(data)
            stack[-1].add(data)

    def _open(self, frame: _Frame) -> _Frame | bytes:
        ident = id(frame.ref)
        if ident in self._on_stack:
            return _CIRCULAR
        self._on_stack.add(ident)
        return frame

    def _visit(self, value: object) -> _Frame | bytes:
        """Leaf bytes for scalars; a new frame for containers (pushed by the caller)."""
        if isinstance(value, str):
            return self._string(value)
        if value is None:
            return b"null"
        if isinstance(value, bool):
            return b"true" if value else b"false"
        if isinstance(value, int):
            return _int_bytes(int.__int__(value))
        if isinstance(value, float):
            return orjson.dumps(float.__float__(value))
        if isinstance(value, dict):
            return self._mapping(value, dict.items(value))
        if isinstance(value, (list, tuple, deque)):
            return self._open(_Frame(_Frame.ARRAY, value, list(value)))
        if isinstance(value, (bytes, bytearray, memoryview)):
            return _bytes_like(value)
        if isinstance(value, (set, frozenset)):
            return self._open(_Frame(_Frame.SET, value, list(value)))
        try:
            return self._visit_other(value)
        except Exception:
            # Only this value degrades to its type name; the rest stays significant.
            return _opaque(value)

    def _visit_other(self, value: object) -> _Frame | bytes:
        if isinstance(value, (datetime.date, datetime.time, uuid.UUID, orjson.Fragment)):
            return _orjson_leaf(value)
        if isinstance(value, enum.Enum):
            return self._visit(value.value)
        if isinstance(value, decimal.Decimal):
            return orjson.dumps(str(value))
        if isinstance(value, PurePath):
            return self._string(value.as_posix())
        if isinstance(value, complex):
            return b"[" + orjson.dumps(value.real) + b"," + orjson.dumps(value.imag) + b"]"
        if isinstance(value, BaseException):
            return self._mapping(value, _exception_items(value))
        if isinstance(value, Mapping):
            return self._mapping(value, list(value.items()))
        if isinstance(value, array):
            return self._open(_Frame(_Frame.ARRAY, value, value.tolist()))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._mapping(value, _dataclass_items(value))
        converted = _converted(value)
        if converted is not _NOT_CONVERTED:
            return self._converted(value, converted)
        return self._object(value)

    def _converted(self, original: object, converted: object) -> _Frame | bytes:
        visited = self._visit(converted)
        if isinstance(visited, _Frame):
            # The conversion is a fresh object: guard cycles through the original instead.
            self._on_stack.discard(id(visited.ref))
            visited.ref = original
            return self._open(visited)
        return visited

    def _object(self, value: object) -> _Frame | bytes:
        kind = type(value)
        entries: list[tuple[object, object]] = [("__object__", _qualified_name(kind))]
        name = _callable_name(value)
        if name is not None:
            entries.append(("name", name))
        else:
            entries.append(("state", _object_state(value)))
        return self._mapping(value, entries)

    def _mapping(self, ref: object, items: object) -> _Frame | bytes:
        ident = id(ref)
        if ident in self._on_stack:
            return _CIRCULAR
        # Keys are stringified while the mapping is on the stack, so a key whose state refers
        # back to this mapping serialises as "[Circular]" instead of recursing forever.
        self._on_stack.add(ident)
        try:
            keys: list[str] = []
            values: list[object] = []
            for key, item in items:  # type: ignore[attr-defined]
                keys.append(self._key(key))
                values.append(item)
        finally:
            self._on_stack.discard(ident)
        return self._open(_Frame(_Frame.OBJECT, ref, values, keys))

    def _key(self, key: object) -> str:
        if isinstance(key, str):
            text = str.__str__(key)
            return text if _is_utf8_safe(text) else _replace_surrogates(text)
        data = _Walker(None, self._on_stack).serialise(key)
        if data[:1] == b'"':
            try:
                decoded = orjson.loads(data)
                if isinstance(decoded, str):
                    return decoded
            except orjson.JSONDecodeError:
                pass
        return data.decode("utf-8", "replace")

    def _string(self, text: str) -> bytes:
        if self._transform is not None:
            text = self._transform(text)
        try:
            return orjson.dumps(text)
        except orjson.JSONEncodeError:
            return orjson.dumps(_replace_surrogates(text))


def _int_bytes(value: int) -> bytes:
    """Digits, as orjson prints 64-bit integers (and as JSON allows any integer)."""
    try:
        return int.__repr__(value).encode()
    except ValueError:
        # Past sys.get_int_max_str_digits(); hex has no such limit and stays deterministic.
        return orjson.dumps(hex(value))


def _bytes_like(value: bytes | bytearray | memoryview) -> bytes:
    try:
        raw = bytes(value)
    except Exception:  # e.g. a released memoryview
        raw = b""
    return b'{"data":"' + base64.b64encode(raw) + b'","type":"Uint8Array"}'


def _orjson_leaf(value: object) -> bytes:
    try:
        return orjson.dumps(value, default=_refuse, option=_FAST_OPTIONS)
    except Exception:
        # orjson refuses e.g. timezone-aware times and some subclasses.
        isoformat = getattr(value, "isoformat", None)
        text = isoformat() if callable(isoformat) else str(value)
        return orjson.dumps(_replace_surrogates(str(text)))


def _is_utf8_safe(text: str) -> bool:
    return text.isascii() or not _SURROGATE.search(text)


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _replace_surrogates(text: str) -> str:
    """Lone surrogates -> U+FFFD; a high+low pair becomes the character it encodes (as in JS)."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _exception_items(error: BaseException) -> list[tuple[object, object]]:
    try:
        message = str(error)
    except Exception:
        message = ""
    return [("message", message), ("name", type(error).__name__)]


def _dataclass_items(value: object) -> list[tuple[object, object]]:
    items: list[tuple[object, object]] = []
    for f in dataclasses.fields(value):  # type: ignore[arg-type]
        try:
            items.append((f.name, getattr(value, f.name)))
        except AttributeError:
            continue  # init=False field never assigned
    return items


_NOT_CONVERTED: Final = object()


def _converted(value: object) -> object:
    """A plain-data stand-in for well-known rich objects, or ``_NOT_CONVERTED``."""
    kind = type(value)
    try:
        if callable(getattr(kind, "model_dump", None)) and hasattr(kind, "model_fields"):
            return value.model_dump()  # type: ignore[attr-defined]
        if kind.__module__ == "numpy" and callable(getattr(value, "tolist", None)):
            return value.tolist()  # type: ignore[attr-defined]
    except Exception:
        return _NOT_CONVERTED
    if isinstance(value, range):
        return {"start": value.start, "stop": value.stop, "step": value.step}
    return _NOT_CONVERTED


def _qualified_name(kind: type) -> str:
    module = getattr(kind, "__module__", None)
    qualname = getattr(kind, "__qualname__", None) or getattr(kind, "__name__", "?")
    return f"{module}.{qualname}" if isinstance(module, str) else str(qualname)


def _callable_name(value: object) -> str | None:
    """Functions, classes and modules are identified by name (their state is not data)."""
    if isinstance(value, types.ModuleType):
        return value.__name__
    if isinstance(
        value,
        (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType),
    ):
        module = getattr(value, "__module__", None)
        qualname = getattr(value, "__qualname__", None) or getattr(value, "__name__", "?")
        return f"{module}.{qualname}" if isinstance(module, str) else str(qualname)
    return None


def _object_state(value: object) -> dict[str, object]:
    state: dict[str, object] = {}
    try:
        attributes = vars(value)
    except TypeError:
        attributes = {}
    try:
        for name, item in attributes.items():
            state[str(name)] = item
    except Exception:
        pass
    for name in _slot_names(type(value)):
        if name in state:
            continue
        try:
            state[name] = getattr(value, name)
        except Exception:
            continue  # unset slot or failing descriptor
    return state


def _slot_names(kind: type) -> list[str]:
    names: list[str] = []
    for klass in kind.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        if isinstance(slots, str):
            slots = (slots,)
        try:
            declared = list(slots)
        except TypeError:
            continue
        for slot in declared:
            if not isinstance(slot, str) or slot in ("__dict__", "__weakref__"):
                continue
            if slot.startswith("__") and not slot.endswith("__"):
                slot = f"_{klass.__name__.lstrip('_')}{slot}"
            if slot not in names:
                names.append(slot)
    return names


def _opaque(value: object) -> bytes:
    return b'{"__unserialisable__":' + orjson.dumps(_qualified_name(type(value))) + b"}"


# ---------------------------------------------------------------------------------------------
# Hashes


def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def args_hash(tool_name: str, args: object) -> str:
    """``"<tool>:<sha256 hex>"`` of the canonical arguments (never untrusted-canonicalised)."""
    return args_hash_of_json(tool_name, canonical_json(args))


def args_hash_of_json(tool_name: str, canonical: bytes) -> str:
    """:func:`args_hash` for arguments already serialised by :func:`canonical_json`."""
    return f"{tool_name}:{hashlib.sha256(canonical).hexdigest()}"


def digest(value: object) -> str:
    """sha256 hex of the *outcome* form of ``value``: canonical JSON with untrusted-content
    envelopes canonicalised in every string value (§c.9)."""
    try:
        data = orjson.dumps(value, default=_refuse, option=_FAST_OPTIONS)
    except Exception:
        # The rewrite is a cheap substring test on strings without markers: do it in one pass.
        data = canonical_json_slow(value, canonicalise_untrusted)
    else:
        if _UNTRUSTED_NEEDLE_BYTES in data:
            data = canonical_json_slow(value, canonicalise_untrusted)
    return hashlib.sha256(data).hexdigest()


def mutation_target_hash(tool_name: str, args: object, cwd: str | None = None) -> str | None:
    """For ``write`` calls: sha256 of ``S({"path": <path resolved against cwd>})``.

    Resolution is lexical (no filesystem access): relative paths join ``cwd`` when given, and
    ``.``/``..`` segments are collapsed.
    """
    if default_registry.canonical_name(tool_name) != "write" or not isinstance(args, Mapping):
        return None
    path = args.get("path")
    if not isinstance(path, str) or not path.strip():
        return None
    if cwd and not os.path.isabs(path):
        path = os.path.join(cwd, path)
    resolved = os.path.normpath(path)
    return _sha256_hex(canonical_json({"path": resolved}))


# ---------------------------------------------------------------------------------------------
# Error text and unknown-tool extraction (§c.3 step 1, §c.8)


def error_text(error: object) -> str:
    """The text an error is hashed and scanned by (§c.3 step 1)."""
    if isinstance(error, BaseException):
        try:
            message = str(error)
        except Exception:
            message = ""
        return message or type(error).__name__
    if isinstance(error, str):
        return error
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


_UNKNOWN_TOOL_PATTERNS: Final = (
    re.compile(r"unknown tool[:\s]+[\"']?([a-z0-9_.-]+)[\"']?", re.IGNORECASE),
    re.compile(
        r"tool\s+[\"']?([a-z0-9_.-]+)[\"']?\s+(?:not found|is not available)", re.IGNORECASE
    ),
)


_NAME: Final = r"[\"'`]?([\w.:/-]*[\w])[\"'`]?"
# The wordings of the frameworks loopwarden integrates with (LangChain/LangGraph, OpenAI Agents
# SDK, Claude Code, MCP servers), with namespaced names such as `google:search` or
# `mcp__server__tool` that OpenClaw's own pattern cannot capture.
_EXTENDED_UNKNOWN_TOOL_PATTERNS: Final = (
    re.compile(r"no such tool(?: available)?[:\s]+" + _NAME, re.IGNORECASE),
    re.compile(r"unknown (?:tool|function)(?: name| id)?[:\s]+" + _NAME, re.IGNORECASE),
    re.compile(r"no (?:tool|function) named\s+" + _NAME, re.IGNORECASE),
    re.compile(_NAME + r" is not a valid tool", re.IGNORECASE),
    re.compile(
        r"(?:tool|function)\s+" + _NAME
        + r"\s+(?:was\s+)?(?:not found|is not available|does not exist|is not registered)",
        re.IGNORECASE,
    ),
)


def extract_unknown_tool(text: str, *, extended: bool = False) -> str | None:
    """Lower-cased name of the missing tool an error complains about, else ``None`` (§c.8).

    Faithful to OpenClaw including its quirk: ``Unknown tool id: x`` yields ``"id"``.
    ``extended`` (the ``early`` preset) first tries other frameworks' wordings and namespaced
    names.
    """
    raw = text.strip()
    patterns = _EXTENDED_UNKNOWN_TOOL_PATTERNS + _UNKNOWN_TOOL_PATTERNS if extended else _UNKNOWN_TOOL_PATTERNS
    for pattern in patterns:
        match = pattern.search(raw)
        if match:
            return match.group(1).lower()
    return None


# ---------------------------------------------------------------------------------------------
# "When, not why" masking for terminal exec failures (§c.4)

# Every span but the keyword ones starts with a digit; leading with `\d` lets the regex engine
# skip to digits instead of trying five alternatives at every position (10x faster).
_WHEN_DIGIT_SPANS: Final = re.compile(
    r"\d(?:"
    r"\d{3}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:[Zz]|[+-]\d{2}:\d{2})?"  # ISO date-time
    r"|(?<!\w\d)\d?:\d{2}:\d{2}(?:\.\d{1,6})?"  # clock time
    r"|(?<!\w\d)\d*(?:\.\d+)?\s?(?:[nNuUmM][sS]|[sS][eE][cC][oO][nN][dD][sS]?"
    r"|[mM][iI][nN][uU][tT][eE][sS]?|[hH][oO][uU][rR][sS]?|[sS])\b"  # durations
    r")"
)
_WHEN_KEYWORD_SPANS: Final = re.compile(r"\b(?:attempt|retry|p?pid)[\s#:=]*\d+", re.IGNORECASE)
_WHEN_KEYWORDS: Final = ("attempt", "retry", "pid")


def mask_when_spans(text: str) -> str:
    """Replace timestamps, clock times, attempt counters, durations and pids with ``#``.

    Calendar dates alone, errno numbers, exit codes and other text stay significant.
    """
    if not has_digit(text):  # every span has a digit; the regexes cost ~10 ns per character
        return text
    lowered = text.lower()
    if any(word in lowered for word in _WHEN_KEYWORDS):
        text = _WHEN_KEYWORD_SPANS.sub("#", text)
    return _WHEN_DIGIT_SPANS.sub("#", text)


# ---------------------------------------------------------------------------------------------
# Untrusted-content nonce canonicalisation (§c.9)

UNTRUSTED_ZERO_ID: Final = "0" * 16

_MARKER_TOKEN: Final = re.compile(r"<<<(?:END_)?EXTERNAL_UNTRUSTED_CONTENT")
_MARKER: Final = re.compile(
    r'<<<(END_)?EXTERNAL_UNTRUSTED_CONTENT id=(\\*)"([0-9a-f]{16})(\\*)">>>'
)


def canonicalise_untrusted(text: str) -> str:
    """Zero the ids of every well-formed untrusted-content envelope in ``text``.

    Well-formed: a start marker directly followed (no marker in between) by an end marker with
    the same 16 lowercase-hex id, all four id quotes preceded by the same run of ``2**n - 1``
    backslashes (n levels of JSON encoding), and every quote of the payload escaped at least
    that deep (``run + 1`` a multiple of the marker's ``run + 1``). Anything else is left as
    is, so it stays hash-significant.
    """
    if _UNTRUSTED_NEEDLE not in text:
        return text
    markers = [_MARKER.match(text, token.start()) for token in _MARKER_TOKEN.finditer(text)]
    pieces: list[str] = []
    copied_to = 0
    i = 0
    while i + 1 < len(markers):
        start, end = markers[i], markers[i + 1]
        if start is None or end is None or not _is_envelope(text, start, end):
            i += 1
            continue
        for marker in (start, end):
            pieces.append(text[copied_to : marker.start(3)])
            pieces.append(UNTRUSTED_ZERO_ID)
            copied_to = marker.end(3)
        i += 2
    if not pieces:
        return text
    pieces.append(text[copied_to:])
    return "".join(pieces)


def _is_envelope(text: str, start: re.Match[str], end: re.Match[str]) -> bool:
    if start.group(1) or not end.group(1) or start.group(3) != end.group(3):
        return False
    runs = {len(start.group(2)), len(start.group(4)), len(end.group(2)), len(end.group(4))}
    if len(runs) != 1:
        return False
    unit = runs.pop() + 1
    if unit & (unit - 1):  # run length must be 2**n - 1
        return False
    return _quotes_escaped_at(text, start.end(), end.start(), unit)


def _quotes_escaped_at(text: str, low: int, high: int, unit: int) -> bool:
    if unit == 1:
        return True
    quote = text.find('"', low, high)
    while quote != -1:
        first = quote
        while first > low and text[first - 1] == "\\":
            first -= 1
        if (quote - first + 1) % unit:
            return False
        quote = text.find('"', quote + 1, high)
    return True


# ---------------------------------------------------------------------------------------------
# Outcome hashing (§c.3-§c.6)


class Outcome(NamedTuple):
    """What one tool outcome contributes to the loop history.

    An immutable value built for nearly every result: a named tuple costs a fifth of a frozen
    dataclass to build."""

    result_hash: str | None  # 64-hex, "error:<64hex>", or None (nothing to record)
    outcome_kind: str | None = None  # "tool-loop-veto" | "terminal-exec-failure" | "write-mutation"
    failure_identity_hash: str | None = None
    no_progress: bool = False
    unknown_tool_name: str | None = None
    # ``early`` preset: which failure this was, whatever the arguments (for error repeat).
    error_identity_hash: str | None = None


_NOTHING: Final = Outcome(None)
_new_tuple: Final = tuple.__new__


def _plain(result_hash: str) -> Outcome:
    """A hash-only Outcome (tuple.__new__ skips the named tuple's keyword handling: half the
    cost, for nearly every result)."""
    return _new_tuple(Outcome, (result_hash, None, None, False, None, None))


def text_outcome(text: str) -> Outcome:
    """The outcome of a text result (no error), whatever the tool's profile: projections and
    volatile keys apply to structured results only."""
    return _plain(digest(text))


_VETO: Final = Outcome(None, outcome_kind="tool-loop-veto")
_EMPTY: Mapping[str, object] = types.MappingProxyType({})


def outcome_of(
    tool_name: str,
    args: object,
    result: object = MISSING,
    error: object = MISSING,
    *,
    registry: ProfileRegistry | None = None,
    extended_unknown: bool = False,
) -> Outcome:
    """Hash one outcome following OpenClaw's order (§c.3); never raises.

    A mapping result is OpenClaw-shaped when its ``content`` is a list or its ``details`` a
    mapping; any other mapping is treated as its own ``details`` (with empty text), so plain
    dict results from Python tools keep every field significant.
    """
    try:
        profile = (registry or default_registry).get(tool_name)
    except Exception:
        return _raw_outcome(tool_name, result, error)
    return profiled_outcome(tool_name, profile, args, result, error,
                            extended_unknown=extended_unknown)


def profiled_outcome(
    tool_name: str,
    profile: ToolProfile | None,
    args: object,
    result: object = MISSING,
    error: object = MISSING,
    *,
    extended_unknown: bool = False,
) -> Outcome:
    """:func:`outcome_of` for a caller that has already looked up the tool's profile."""
    try:
        return _outcome(profile, args, result, error, extended_unknown)
    except Exception:
        return _raw_outcome(tool_name, result, error)


def _raw_outcome(tool_name: str, result: object, error: object) -> Outcome:
    # Defensive: a hash of the raw value still lets identical outcomes match.
    return Outcome(_sha256_hex(canonical_json_slow((tool_name, result, error))))


def _outcome(
    profile: ToolProfile | None,
    args: object,
    result: object,
    error: object,
    extended_unknown: bool = False,
) -> Outcome:
    if error is not MISSING and error is not None:
        text = error_text(error)
        return Outcome(
            "error:" + digest(text),
            no_progress=True,
            unknown_tool_name=extract_unknown_tool(text, extended=extended_unknown),
        )
    # (The exact-type tests skip the ABC check, ~0.4 us, for the usual str and dict results.)
    if type(result) is str or (type(result) is not dict and not _is_mapping(result)):
        if result is MISSING:
            return _NOTHING
        if profile is not None and profile.volatile_keys:
            result = _strip_keys(result, profile.volatile_keys, message_ids=False)
        return _plain(digest(result))
    details, text = _details_and_text(result)
    if details.get("status") == "blocked" and details.get("deniedReason") == "tool-loop":
        return _VETO
    if profile is None:
        return _plain(digest({"details": details, "text": text}))
    return _profiled(profile, args, details, text)


def _is_mapping(value: object) -> TypeGuard[Mapping[Any, Any]]:
    return type(value) is dict or isinstance(value, Mapping)


def _is_list(value: object) -> TypeGuard[list[object] | tuple[object, ...]]:
    return type(value) is list or isinstance(value, (list, tuple))


def _details_and_text(result: Mapping[str, object]) -> tuple[Mapping[str, object], str]:
    content = result.get("content")
    details = result.get("details")
    # (The exact-type tests are fast paths: this runs on every outcome.)
    has_content = type(content) is list or isinstance(content, (list, tuple))
    has_details = type(details) is dict or isinstance(details, Mapping)
    if not has_content and not has_details:
        return result, ""
    text = _content_text(content) if has_content else ""  # type: ignore[arg-type]
    return (details if has_details else _EMPTY), text  # type: ignore[return-value]


def _content_text(content: list[object] | tuple[object, ...]) -> str:
    if len(content) == 1:  # the usual single text block, without the general loop
        entry = content[0]
        if type(entry) is dict:
            text = entry.get("text")
            if type(text) is str and isinstance(entry.get("type"), str):
                return text.strip()
    texts: list[str] = []
    for entry in content:
        if type(entry) is dict or isinstance(entry, Mapping):
            kind, text = entry.get("type"), entry.get("text")
            if isinstance(kind, str) and isinstance(text, str):
                texts.append(text)
    if len(texts) == 1:
        return texts[0].strip()
    return "\n".join(texts).strip()


def _profiled(
    profile: ToolProfile, args: object, details: Mapping[str, object], text: str
) -> Outcome:
    if profile.volatile_keys:
        details = _strip_keys(details, profile.volatile_keys, message_ids=False)  # type: ignore[assignment]
    projected = _projection(profile._projection, args, details, text)
    if projected is not None:
        return projected
    if profile.is_send_like(args):
        return _plain(digest(_strip_keys(details, SEND_VOLATILE_KEYS, message_ids=True)))
    return _plain(digest({"details": details, "text": text}))


def _projection(
    kind: str | None, args: object, details: Mapping[str, object], text: str
) -> Outcome | None:
    if kind == PROJECTION_EXEC:
        return _exec_outcome(details, text)
    if kind == PROJECTION_WRITE:
        return _write_outcome(details, text)
    if kind == PROJECTION_PROCESS:
        return _process_outcome(args, details, text)
    return None


def _exec_outcome(details: Mapping[str, object], text: str) -> Outcome | None:
    status = details.get("status")
    if status == "running":
        tail = details.get("tail")
        return _plain(digest({"status": status, "tail": tail if isinstance(tail, str) else ""}))
    if status in ("completed", "failed"):
        return _exec_finished(status, details, text)
    if status in ("approval-pending", "approval-unavailable"):
        return Outcome(
            digest(
                {
                    "status": status,
                    "reason": _str_or(details.get("reason"), None),
                    "host": _str_or(details.get("host"), None),
                    "command": _str_or(details.get("command"), ""),
                    "warningText": _str_or(details.get("warningText"), ""),
                }
            )
        )
    return None


def _exec_finished(status: str, details: Mapping[str, object], text: str) -> Outcome:
    exit_code = _number_or_none(details.get("exitCode"))
    timed_out = details.get("timedOut") is True
    output = _nonempty(details.get("aggregated")) or text
    projection = {"status": status, "exitCode": exit_code, "timedOut": timed_out}
    result_hash = digest({**projection, "output": output})
    if not _is_terminal_failure(exit_code, timed_out, output):
        return _plain(result_hash)
    masked = mask_when_spans(output)
    identity = result_hash if masked == output else digest({**projection, "output": masked})
    return Outcome(
        result_hash, outcome_kind="terminal-exec-failure", failure_identity_hash=identity
    )


def _is_terminal_failure(exit_code: float | None, timed_out: bool, output: str) -> bool:
    if exit_code is None or not math.isfinite(exit_code) or exit_code == 0 or timed_out:
        return False
    footer = f"(Command exited with code {_js_number_text(exit_code)})"
    return output != "" and output != footer


def _write_outcome(details: Mapping[str, object], text: str) -> Outcome | None:
    changed = details.get("changed")
    if changed is False:
        return Outcome(digest({"status": "unchanged"}), no_progress=True)
    if changed is True:
        return Outcome(digest({"details": details, "text": text}), outcome_kind="write-mutation")
    return None


_PROCESS_FIELDS: Final = {
    "poll": ("exitCode", "exitSignal", "aggregated"),
    "log": ("totalLines", "totalChars", "truncated", "exitCode", "exitSignal"),
}


def _process_outcome(args: object, details: Mapping[str, object], text: str) -> Outcome | None:
    action = args.get("action") if isinstance(args, Mapping) else None
    if action not in _PROCESS_FIELDS:
        return None
    projection: dict[str, object] = {"action": action, "text": text}
    # JS leaves a missing status `undefined`; omitting the key keeps it distinct from null.
    if "status" in details:
        projection["status"] = details["status"]
    for key in _PROCESS_FIELDS[action]:
        projection[key] = details.get(key)
    return _plain(digest(projection))


def _str_or(value: object, default: str | None) -> str | None:
    return value if isinstance(value, str) else default


def _nonempty(value: object) -> str | None:
    if isinstance(value, str):
        stripped = value.strip()
        return stripped or None
    return None


def _number_or_none(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)  # JS has one number type: 1.0 and 1 are the same exit code
    return value


# ---------------------------------------------------------------------------------------------
# Errors reported inside results (``early`` preset)

# Keys an error envelope may carry besides its error: a mapping with any other key holds data,
# so a stray "error" field in it does not make the whole result a failure.
_ERROR_ENVELOPE_KEYS: Final = frozenset({
    "error", "errors", "message", "code", "status", "statusCode", "status_code", "errorCode",
    "error_code", "tool", "docs", "hint", "details", "type", "name", "reason", "stack", "ok",
    "success", "isError", "is_error", "retryable", "requestId", "request_id", "content",
})
_EXIT_HEADER: Final = re.compile(r"Exit code ([1-9]\d*)\b")
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
    if stripped.startswith("Exit code ") and _EXIT_HEADER.match(stripped):
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


# ---------------------------------------------------------------------------------------------
# Volatile key stripping (§c.6 and user volatile_keys)


def _looks_like_message(value: Mapping[object, object]) -> bool:
    return (
        isinstance(value.get("id"), str)
        and isinstance(value.get("text"), str)
        and (
            isinstance(value.get("direction"), str)
            or isinstance(value.get("senderId"), str)
            or isinstance(value.get("accountId"), str)
            or isinstance(value.get("conversation"), Mapping)
        )
    )


def _strip_keys(value: object, keys: frozenset[str], *, message_ids: bool) -> object:
    """Copy ``value`` without ``keys`` in any nested mapping (iterative; keeps sharing/cycles).

    With ``message_ids``, ``id`` is also dropped from objects that look like a delivered
    message (string ``id`` and ``text`` plus a direction/sender/account/conversation).
    """
    if not isinstance(value, (Mapping, list, tuple)):
        return value
    try:
        return _strip_iteratively(value, keys, message_ids)
    except Exception:
        return value  # a misbehaving custom Mapping: hash it as it is


def _strip_iteratively(
    root: Mapping[object, object] | list[object] | tuple[object, ...],
    keys: frozenset[str],
    message_ids: bool,
) -> object:
    copies: dict[int, dict[object, object] | list[object]] = {}
    pending: list[tuple[object, dict[object, object] | list[object]]] = []

    def copy_of(value: object) -> object:
        if not isinstance(value, (Mapping, list, tuple)):
            return value
        existing = copies.get(id(value))
        if existing is not None:
            return existing
        target: dict[object, object] | list[object] = {} if isinstance(value, Mapping) else []
        copies[id(value)] = target
        pending.append((value, target))
        return target

    result = copy_of(root)
    while pending:
        source, target = pending.pop()
        if isinstance(target, dict):
            assert isinstance(source, Mapping)
            drop_id = message_ids and _looks_like_message(source)
            for key, item in list(source.items()):
                if key in keys or (drop_id and key == "id"):
                    continue
                target[key] = copy_of(item)
        else:
            assert isinstance(source, (list, tuple))
            target.extend(copy_of(item) for item in source)
    return result
