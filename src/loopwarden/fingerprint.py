"""Canonical serialisation and hashing of tool arguments and outcomes (spec §c). Pure, no I/O.

``canonical_json`` is total over any Python value and deterministic across processes. The common
case is a single ``orjson.dumps(..., OPT_SORT_KEYS)``, taken only for values a quick check finds
safe for it: exact JSON types (tuples too), at most 128 levels deep, no container shared so often
that writing it out would blow up. Everything else (cycles, deeper values, non-string keys,
integers beyond 64 bits, lone surrogates, bytes, sets, subclasses, custom objects ...) goes to
:func:`canonical_json_slow`, an iterative serialiser that emits byte-identical output for every
value orjson can serialise and a deterministic form for the rest:

- NaN and ±infinity serialise as ``null`` (what orjson does), so they hash like ``None``;
- bytes-like values -> ``{"data": <base64>, "type": "Uint8Array"}``; sets -> arrays of their
  items sorted by serialised form; tuples, deques -> arrays;
- dict keys that are not strings are stringified (``1`` -> ``"1"``, ``None`` -> ``"null"``,
  tuples -> their JSON text); colliding keys are all kept, ordered by key then value;
- a reference back to a container that is still being serialised -> ``"[Circular]"``; a shared,
  non-cyclic container is serialised once and its output repeated (same bytes as in full);
- bounded work: past 250,000 values (custom objects count 11) the rest is ``"[Truncated]"``;
  output past 64 MiB becomes
  ``{"__oversized__": {"bytes": n, "sha256": <digest over the distinct parts>}}``;
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import islice
from pathlib import PurePath
from typing import Any, Final, NamedTuple, TypeGuard, TypeVar

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
    "orjson_safe",
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
T = TypeVar("T")


def _refuse(value: object) -> object:
    raise TypeError("handled by the fallback serialiser")


# ---------------------------------------------------------------------------------------------
# Canonical serialisation


def canonical_json(value: object) -> bytes:
    """Canonical, deterministic JSON-like bytes for any value; never raises."""
    # (The usual arguments, one small flat dict, are checked inline: a call costs as much.)
    if type(value) is dict and len(value) <= _FLAT_ITEMS:
        safe = True
        for child in value.values():
            if type(child) not in _PLAIN_TEXT_LEAVES:
                safe = orjson_safe(value)
                break
    else:
        safe = orjson_safe(value)
    if safe:
        try:
            return orjson.dumps(value, option=_FAST_OPTIONS)
        except Exception:  # integers beyond 64 bits, non-string keys, lone surrogates
            pass
    return canonical_json_slow(value)


def json_bytes(value: object, option: int = 0) -> bytes:
    """``orjson.dumps(value, option=option)`` when orjson can be trusted with ``value`` (see
    :func:`canonical_json`), else :func:`canonical_json`: for storing and reporting values that
    came from callers. Never raises, never hands orjson a value that could crash it."""
    if orjson_safe(value):
        try:
            return orjson.dumps(value, option=option)
        except Exception:
            pass
    return canonical_json(value)


def canonical_json_slow(value: object, transform: StrTransform | None = None) -> bytes:
    """The fallback serialiser behind :func:`canonical_json` (iterative, any depth, bounded).

    ``transform`` rewrites every string *value* (not keys) before it is encoded; ``digest``
    uses it for untrusted-content canonicalisation.
    """
    try:
        return _Walker(transform).serialise(value)
    except Exception:
        # Last resort for values whose own methods misbehave in ways not anticipated below.
        return _opaque(value)


# -- which values orjson is trusted with ------------------------------------------------------

# Exact types orjson writes as leaves, byte for byte as the fallback does.
_PLAIN_LEAVES: Final = frozenset(
    {int, float, bool, type(None), datetime.datetime, datetime.date, datetime.time, uuid.UUID}
)
# Deeper values go to the fallback. orjson limits lists and dicts to 255 levels, but 3.12.0 to
# 3.13.0 do not limit tuples: a few thousand nested tuples corrupt its heap and abort the
# process. Far below every version's limit, orjson is safe with any mix of the three.
_FAST_DEPTH: Final = 128
# Items and string characters the quick check counts before it also looks for shared
# containers (orjson would write a shared container out at every reference).
_FAST_WEIGHT: Final = 1 << 16
# A flat container this small is safe with any strings in it.
_FLAT_ITEMS: Final = 64
_PLAIN_TEXT_LEAVES: Final = _PLAIN_LEAVES | {str}
_NOT_PLAIN: Final = -1
_TOO_BIG: Final = -2


def orjson_safe(value: object) -> bool:
    """Whether orjson may serialise ``value``: exact JSON types (tuples too), at most
    ``_FAST_DEPTH`` levels, and no container so shared that writing it out would blow up.

    This runs before every serialisation on the path of every call, and costs about what
    orjson does on a small flat dict: most arguments and outcomes are one, so that case is
    tested first, inline, and without measuring its strings (a flat container repeats a string
    at most ``_FLAT_ITEMS`` times)."""
    kind = type(value)
    if kind is dict:
        children: Any = value.values()  # type: ignore[attr-defined]
    elif kind is str:
        return True
    elif kind is list or kind is tuple:
        children = value
    else:
        return kind in _PLAIN_LEAVES
    if len(value) <= _FLAT_ITEMS:  # type: ignore[arg-type]
        for child in children:
            if type(child) not in _PLAIN_TEXT_LEAVES:
                break
        else:
            return True
    try:
        left = _weigh(value, _FAST_DEPTH, _FAST_WEIGHT)  # type: ignore[arg-type]
        return left >= 0 or (left == _TOO_BIG and _large_and_plain(value))
    except Exception:  # RecursionError when called near the interpreter's limit
        return False


def _weigh(node: dict[Any, Any] | list[Any] | tuple[Any, ...], depth: int, left: int) -> int:
    """``left`` less the items and string characters of ``node``, or ``_NOT_PLAIN``, or
    ``_TOO_BIG`` once ``left`` runs out (recursive: the common values are small and flat)."""
    left -= len(node)
    if left < 0:
        return _TOO_BIG
    for child in node.values() if type(node) is dict else node:  # type: ignore[union-attr]
        kind = type(child)
        if kind is str:
            left -= len(child)
        elif kind is dict or kind is list or kind is tuple:
            if not depth:
                return _NOT_PLAIN
            left = _weigh(child, depth - 1, left)
            if left < 0:
                return left
        elif kind not in _PLAIN_LEAVES:
            return _NOT_PLAIN
    return left if left >= 0 else _TOO_BIG


def _large_and_plain(root: object) -> bool:
    """The quick check for big values: also no non-empty container reached twice (shared or
    cyclic) and at most ``_MAX_BYTES`` characters of text, keys included."""
    seen: set[int] = set()
    left = _MAX_BYTES
    stack: list[tuple[Any, int]] = [(root, _FAST_DEPTH)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            return False
        seen.add(id(node))
        left -= len(node)
        if type(node) is dict:
            for key in node:
                if type(key) is str:
                    left -= len(key)
            children = node.values()
        else:
            children = node
        for child in children:
            kind = type(child)
            if kind is str:
                left -= len(child)
            elif kind is dict or kind is list or kind is tuple:
                if not depth:
                    return False
                if child:  # empty ones (() is a singleton) cannot blow anything up
                    stack.append((child, depth - 1))
            elif kind not in _PLAIN_LEAVES:
                return False
        if left < 0:
            return False
    return True


# -- the fallback --------------------------------------------------------------------------

# Values one serialisation takes in (each child is counted when its container is read; a
# shared container's children once; an object or custom mapping, whose own code runs, counts
# _OBJECT_COST more). Past it, a container that has more ends with a "[Truncated]" entry and one
# reached later is "[Truncated]" itself: objects that make up new children on every access, or
# endless iterators, cannot keep the walk going (a second or two at most).
_MAX_NODES: Final = 250_000
_OBJECT_COST: Final = 10
# Canonical output past this size is replaced by {"__oversized__": {"bytes", "sha256"}}, where
# the digest is computed once per distinct part: a value sharing one subtree at every level
# (2**40 paths through 41 lists) is hashed without being written out.
_MAX_BYTES: Final = 64 * 1024 * 1024
# Keys are stringified by a nested walk; keys inside keys deeper than this are opaque.
_MAX_KEY_DEPTH: Final = 16
# An enum whose value is an enum whose value ... (or itself).
_MAX_ENUM_CHAIN: Final = 256
_TRUNCATED: Final = b'"[Truncated]"'
_TRUNCATED_KEY: Final = "[Truncated]"
_INLINE_LIMIT: Final = 4096
_FEW_PARTS: Final = 16

# A rope is serialised output as nested chunks; joining once at the end keeps deep values linear.
Rope = bytes | list["Rope"]
Digests = dict[int, tuple[object, bytes]]
# Long strings already encoded or checked: (what, id) -> (the string, kept alive; the result)
Texts = dict[tuple[object, ...], tuple[object, object]]
_LONG_TEXT: Final = 256


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


def _rope_digest(root: Rope, digests: Digests) -> bytes:
    """sha256 over the rope's structure, each distinct chunk or sub-rope hashed once.

    ``digests`` holds every node it names, so an id is never reused while it is in there."""
    stack: list[Rope] = [root]
    while stack:
        node = stack[-1]
        known = digests.get(id(node))
        if known is not None and known[0] is node:
            stack.pop()
            continue
        if isinstance(node, bytes):
            digests[id(node)] = (node, hashlib.sha256(b"b" + node).digest())
            stack.pop()
            continue
        pending = [part for part in node if id(part) not in digests]
        if pending:
            stack.extend(pending)
            continue
        summary = hashlib.sha256(b"l")
        for part in node:
            summary.update(digests[id(part)][1])
        digests[id(node)] = (node, summary.digest())
        stack.pop()
    return digests[id(root)][1]


def _oversized(rope: Rope, size: int, digests: Digests) -> bytes:
    fingerprint = _rope_digest(rope, digests).hex()
    return b'{"__oversized__":{"bytes":%d,"sha256":"%s"}}' % (size, fingerprint.encode())


class _Frame:
    """One container being serialised: children are visited in order, parts collected."""

    __slots__ = ("cyclic", "depth", "index", "keys", "kind", "loose", "nested", "parts", "ref",
                 "size", "truncated", "values")

    ARRAY: Final = 0
    OBJECT: Final = 1
    SET: Final = 2

    def __init__(self, kind: int, ref: object, values: Sequence[object],
                 keys: list[str] | None, depth: int, cyclic: bool, truncated: bool) -> None:
        self.kind = kind
        self.ref = ref  # keeps the object alive, so its id stays unique while on the stack
        self.values = values
        self.keys = keys
        self.depth = depth
        self.cyclic = cyclic  # the enclosing walk's flag, restored (or-ed) when this closes
        self.truncated = truncated  # the node budget left some children out
        self.index = 0
        self.parts: list[Rope] = []
        self.size = 0  # bytes of the parts
        self.nested = False  # some part is a rope rather than bytes
        self.loose = False  # some part may sit in an allocation larger than itself

    def add(self, part: Rope, size: int) -> None:
        # Re-joining large children at every level would make deep chains quadratic.
        if type(part) is not bytes or size > _INLINE_LIMIT:
            self.nested = True
        self.parts.append(part)
        self.size += size

    def finish(self, digests: Digests, texts: Texts) -> tuple[Rope, int]:
        if self.truncated:  # the rest of this container is one "[Truncated]" entry
            if self.keys is not None:
                self.keys.append(_TRUNCATED_KEY)
            self.add(_TRUNCATED, len(_TRUNCATED))
        parts = self.parts
        size = self.size + max(len(parts) - 1, 0) + 2  # brackets and commas
        oversized = size > _MAX_BYTES
        if self.loose and (self.nested or oversized):  # kept as a rope: compact its first parts
            for i, part in enumerate(parts[:_FEW_PARTS]):
                if type(part) is bytes and len(part) <= _INLINE_LIMIT:
                    parts[i] = _compact(part)
        if self.kind == _Frame.OBJECT:
            return self._finish_object(digests, texts)
        if self.kind == _Frame.ARRAY:
            return _joined(b"[", parts, b"]", self.nested or oversized), size
        if oversized:  # the whole value is summarised: any fixed order will do
            ordered = sorted(parts, key=lambda part: _rope_digest(part, digests))
            return _joined(b"[", ordered, b"]", True), size
        return _joined(b"[", sorted(_flatten(part) for part in parts), b"]", False), size

    def _finish_object(self, digests: Digests, texts: Texts) -> tuple[Rope, int]:
        keys, parts = self.keys, self.parts
        assert keys is not None
        if len(keys) <= _FEW_PARTS:
            encoded = [_dumps(key) if len(key) <= _LONG_TEXT else _encoded_key(key, texts)
                       for key in keys]
        else:  # all held at once: each in its own size
            encoded = [_compact(_dumps(key)) if len(key) <= _LONG_TEXT
                       else _encoded_key(key, texts) for key in keys]
        size = self.size + sum(map(len, encoded)) + 2 * len(keys) + 1 + (not keys)
        oversized = size > _MAX_BYTES
        if len(set(keys)) == len(keys):
            order = sorted(range(len(keys)), key=keys.__getitem__)
        else:
            # Stringified keys collided (e.g. 1 and "1"): order the twins by their values.
            ranks = ([_rope_digest(part, digests) for part in parts] if oversized
                     else [_flatten(part) for part in parts])
            order = sorted(range(len(keys)), key=lambda i: (keys[i], ranks[i]))
        rope: list[Rope] = [b"{"]
        nested = self.nested or oversized
        for position, i in enumerate(order):
            prefix = b"," if position else b""
            key = encoded[i]
            if len(key) > _INLINE_LIMIT:  # a long key, maybe shared: never copied
                rope += (prefix, key, b":")
                nested = True
            else:
                rope.append(prefix + key + b":")
            rope.append(parts[i])
        rope.append(b"}")
        if nested:
            return rope, size
        return b"".join(rope), size  # type: ignore[arg-type]


def _encoded_key(key: str, texts: Texts) -> bytes:
    cache = ("encoded key", id(key))
    done = texts.get(cache)
    if done is None or done[0] is not key:
        done = texts[cache] = (key, _compact(_dumps(key)))
    return done[1]  # type: ignore[return-value]


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


Visited = bytes | _Frame | tuple[Rope, int]


class _Walker:
    """Post-order, explicit-stack serialiser: no Python recursion over the value's depth, each
    distinct acyclic container serialised once, and at most ``_MAX_NODES`` values visited."""

    __slots__ = ("_cyclic", "_depth", "_digests", "_key_depth", "_key_memo", "_memo",
                 "_nodes_left", "_on_stack", "_texts", "_transform", "_value_memo")

    def __init__(self, transform: StrTransform | None) -> None:
        self._transform = transform
        # ids of the containers currently open (-> their depth), key walks included
        self._on_stack: dict[int, int] = {}
        # Finished containers whose walk met no cycle: they serialise the same wherever they
        # occur, so a shared one is written once (id -> (object kept alive, rope, size)).
        self._memo: dict[int, tuple[object, Rope, int]] = {}
        self._value_memo = self._memo
        # Keys are never transformed, so with a transform they keep their own memo.
        self._key_memo = self._memo if transform is None else {}
        self._digests: Digests = {}
        self._texts: Texts = {}
        self._nodes_left = _MAX_NODES
        self._depth = 0  # containers open
        self._cyclic = False  # a "[Circular]" was written since the innermost frame opened
        self._key_depth = 0

    def serialise(self, root: object) -> bytes:
        rope, size = self._walk(root)
        if size > _MAX_BYTES:
            return _oversized(rope, size, self._digests)
        return _flatten(rope)

    def _walk(self, root: object) -> tuple[Rope, int]:
        self._nodes_left -= 1
        first = self._visit(root)
        if type(first) is bytes:
            return first, len(first)
        if type(first) is tuple:
            return first
        assert isinstance(first, _Frame)
        stack: list[_Frame] = [first]
        visit = self._visit
        while True:
            frame = stack[-1]
            if frame.index < len(frame.values):
                child = frame.values[frame.index]
                frame.index += 1
                visited = visit(child)
                if type(visited) is bytes:
                    size = len(visited)
                    if size > _INLINE_LIMIT:  # (a long string, maybe shared: never copied)
                        frame.nested = True
                    elif len(frame.parts) >= _FEW_PARTS:
                        visited = _compact(visited)
                    else:
                        frame.loose = True
                    frame.parts.append(visited)
                    frame.size += size
                elif type(visited) is tuple:
                    frame.add(*visited)
                else:
                    stack.append(visited)  # type: ignore[arg-type]
                continue
            stack.pop()
            rope, size = self._close(frame)
            if not stack:
                return rope, size
            stack[-1].add(rope, size)

    def _open(self, kind: int, ref: object, children: tuple[Sequence[object], bool]) -> _Frame:
        frame = _Frame(kind, ref, children[0], None, self._depth, self._cyclic, children[1])
        self._cyclic = False
        self._on_stack[id(ref)] = self._depth
        self._depth += 1
        return frame

    def _close(self, frame: _Frame) -> tuple[Rope, int]:
        self._depth = frame.depth
        self._on_stack.pop(id(frame.ref), None)
        rope, size = frame.finish(self._digests, self._texts)
        if not self._cyclic:
            self._memo[id(frame.ref)] = (frame.ref, rope, size)
        self._cyclic = self._cyclic or frame.cyclic
        return rope, size

    def _take(self, items: Iterable[T]) -> tuple[list[T], bool]:
        """As many of ``items`` as the node budget still allows (each child is paid for when
        it is taken, so an endless iterator or a child made afresh on every access stops), and
        whether some were left out."""
        allowed = max(self._nodes_left, 0)
        taken = list(islice(items, allowed + 1))
        truncated = len(taken) > allowed
        if truncated:
            del taken[allowed:]
        self._nodes_left -= len(taken)
        return taken, truncated

    def _elements(self, value: list[object] | tuple[object, ...]) -> tuple[Sequence[object], bool]:
        """A list's or tuple's items as stored (what orjson writes, whatever a subclass's
        ``__iter__`` says), within the node budget."""
        kind = type(value)
        if (kind is tuple or kind is list) and len(value) <= self._nodes_left:
            self._nodes_left -= len(value)
            return (value if kind is tuple else list(value)), False
        if isinstance(value, list):
            return self._take(list.__iter__(value))
        return self._take(tuple.__iter__(value))

    def _visit(self, value: object) -> Visited:
        """Leaf bytes for scalars; a new frame for containers (pushed by the caller); the rope
        and size of a container already serialised."""
        kind = type(value)
        if kind is str:
            return self._string(value)  # type: ignore[arg-type]
        if kind is int:
            return _int_bytes(value)  # type: ignore[arg-type]
        if value is None:
            return b"null"
        if kind is list or kind is dict or kind is tuple:
            seen = self._seen(value)
            if seen is not None:
                return seen
            if self._nodes_left <= 0:
                return _TRUNCATED  # (its children could not be taken)
            if kind is dict:
                return self._dict(value)  # type: ignore[arg-type]
            return self._open(_Frame.ARRAY, value, self._elements(value))  # type: ignore[arg-type]
        try:
            return self._visit_any(value)
        except Exception:
            # Only this value degrades to its type name; the rest stays significant.
            return _opaque(value)

    def _visit_any(self, value: object) -> Visited:
        if isinstance(value, str):
            return self._string(str.__str__(value))  # its characters, whatever it overrides
        if value is None:
            return b"null"
        if isinstance(value, bool):
            return b"true" if value else b"false"
        if isinstance(value, int):
            return _int_bytes(int.__int__(value))
        if isinstance(value, float):
            return _dumps(float.__float__(value))
        if isinstance(value, (bytes, bytearray, memoryview)):
            return _bytes_like(value)
        seen = self._seen(value)
        if seen is not None:
            return seen
        if self._nodes_left <= 0:
            return _TRUNCATED  # (its children could not be taken)
        if isinstance(value, dict):
            return self._dict(value)
        if isinstance(value, (list, tuple)):
            return self._open(_Frame.ARRAY, value, self._elements(value))
        if isinstance(value, deque):
            return self._open(_Frame.ARRAY, value, self._take(value))
        if isinstance(value, (set, frozenset)):
            return self._open(_Frame.SET, value, self._take(value))
        return self._visit_other(value)

    def _dict(self, value: dict[object, object]) -> _Frame:
        if type(value) is dict and len(value) <= self._nodes_left:
            self._nodes_left -= len(value)
            return self._mapping(value, (list(value.items()), False))
        return self._mapping(value, self._take(dict.items(value)))

    def _seen(self, value: object) -> Visited | None:
        """A container already serialised (its rope), or one still open (a cycle)."""
        ident = id(value)
        done = self._memo.get(ident)
        if done is not None and done[0] is value:
            return done[1], done[2]
        if ident in self._on_stack:
            self._cyclic = True
            return _CIRCULAR
        return None

    def _visit_other(self, value: object) -> Visited:
        if isinstance(value, (datetime.date, datetime.time, uuid.UUID, orjson.Fragment)):
            return _orjson_leaf(value)
        if isinstance(value, enum.Enum):
            return self._enum(value)
        if isinstance(value, decimal.Decimal):
            return _dumps(str(value))
        if isinstance(value, PurePath):
            return self._string(value.as_posix())
        if isinstance(value, complex):
            return b"[" + orjson.dumps(value.real) + b"," + orjson.dumps(value.imag) + b"]"
        # What follows runs the value's own code (items, attributes, model_dump ...), at ten
        # times the cost of a plain container: it takes more of the budget.
        self._nodes_left -= _OBJECT_COST
        if isinstance(value, BaseException):
            return self._mapping(value, self._take(_exception_items(value)))
        if isinstance(value, Mapping):
            return self._mapping(value, self._take(value.items()))
        if isinstance(value, array):
            return self._open(_Frame.ARRAY, value, self._take(value.tolist()))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._mapping(value, self._take(_dataclass_items(value)))
        converted = _converted(value)
        if converted is not _NOT_CONVERTED:
            return self._converted(value, converted)
        return self._object(value)

    def _enum(self, value: enum.Enum) -> Visited:
        inner = value.value
        for _ in range(_MAX_ENUM_CHAIN):
            if not isinstance(inner, enum.Enum):
                return self._visit(inner)
            inner = inner.value
        return _opaque(value)

    def _converted(self, original: object, converted: object) -> Visited:
        visited = self._visit(converted)
        if isinstance(visited, _Frame):
            # The conversion is a fresh object: guard cycles through the original instead.
            del self._on_stack[id(visited.ref)]
            visited.ref = original
            self._on_stack[id(original)] = visited.depth
        return visited

    def _object(self, value: object) -> Visited:
        kind = type(value)
        entries: list[tuple[object, object]] = [("__object__", _qualified_name(kind))]
        name = _callable_name(value)
        if name is not None:
            entries.append(("name", name))
        else:
            entries.append(("state", _object_state(value, max(self._nodes_left, 0) + 1)))
        return self._mapping(value, self._take(entries))

    def _mapping(self, ref: object, children: tuple[list[tuple[object, object]], bool]) -> _Frame:
        items, truncated = children
        # Keys are stringified while the mapping is on the stack, so a key whose state refers
        # back to this mapping serialises as "[Circular]" instead of recursing forever.
        depth, cyclic, ident = self._depth, self._cyclic, id(ref)
        self._cyclic = False
        self._on_stack[ident] = depth
        self._depth = depth + 1
        try:
            keys = [self._key(key) for key, _ in items]
        except BaseException:
            del self._on_stack[ident]
            self._depth = depth
            self._cyclic = self._cyclic or cyclic
            raise
        return _Frame(_Frame.OBJECT, ref, [item for _, item in items], keys, depth, cyclic,
                      truncated)

    def _key(self, key: object) -> str:
        if isinstance(key, str):
            text = str.__str__(key)
            if len(text) <= _LONG_TEXT or text.isascii():
                return text if _is_utf8_safe(text) else _replace_surrogates(text)
            cache = ("key", id(text))  # one long key shared by many mappings: scanned once
            done = self._texts.get(cache)
            if done is None or done[0] is not text:
                safe = text if _is_utf8_safe(text) else _replace_surrogates(text)
                done = self._texts[cache] = (text, safe)
            return done[1]  # type: ignore[return-value]
        kind = type(key)
        if kind is int or kind is float or kind is bool or key is None:
            data = _scalar_bytes(key)  # type: ignore[arg-type]  # as the walk writes it
        else:
            data = self._key_bytes(key)
        if data[:1] == b'"':
            try:
                decoded = orjson.loads(data)
                if isinstance(decoded, str):
                    return decoded
            except orjson.JSONDecodeError:
                pass
        return data.decode("utf-8", "replace")

    def _key_bytes(self, key: object) -> bytes:
        if self._key_depth >= _MAX_KEY_DEPTH:
            return _opaque(key)
        transform, self._transform = self._transform, None
        self._memo = self._key_memo
        self._key_depth += 1
        try:
            return self.serialise(key)
        finally:
            self._key_depth -= 1
            self._transform = transform
            if not self._key_depth:
                self._memo = self._value_memo

    def _string(self, text: str) -> bytes:
        if len(text) <= _LONG_TEXT:
            if self._transform is None:
                try:
                    return _dumps(text)
                except orjson.JSONEncodeError:
                    return _dumps(_replace_surrogates(text))
            return self._encoded(text)
        # A long string may be shared by thousands of references: encode it once.
        key = ("value", id(text), self._transform is None)
        done = self._texts.get(key)
        if done is None or done[0] is not text:
            done = self._texts[key] = (text, _compact(self._encoded(text)))
        return done[1]  # type: ignore[return-value]

    def _encoded(self, text: str) -> bytes:
        if self._transform is not None:
            text = self._transform(text)
        try:
            return _dumps(text)
        except orjson.JSONEncodeError:
            return _dumps(_replace_surrogates(text))


_dumps: Final = orjson.dumps


def _compact(data: bytes) -> bytes:
    """``data`` in an allocation of its own size. orjson hands back even a short result in one
    of some 4 KiB: parts kept for long (a list of 250,000 strings until it closes) are copied."""
    return bytes(memoryview(data))


def _scalar_bytes(value: int | float | bool | None) -> bytes:
    if value is None:
        return b"null"
    if value is True or value is False:
        return b"true" if value else b"false"
    if type(value) is int:
        return _int_bytes(value)
    return _dumps(value)


def _int_bytes(value: int) -> bytes:
    """Digits, as orjson prints 64-bit integers (and as JSON allows any integer)."""
    try:
        return int.__repr__(value).encode()
    except ValueError:
        # Past sys.get_int_max_str_digits(); hex has no such limit and stays deterministic.
        return _dumps(hex(value))


def _bytes_like(value: bytes | bytearray | memoryview) -> bytes:
    try:
        raw = bytes(value)
    except Exception:  # e.g. a released memoryview
        raw = b""
    return b'{"data":"' + base64.b64encode(raw) + b'","type":"Uint8Array"}'


def _orjson_leaf(value: object) -> bytes:
    try:
        return _dumps(value, default=_refuse, option=_FAST_OPTIONS)
    except Exception:
        # orjson refuses e.g. timezone-aware times and some subclasses.
        isoformat = getattr(value, "isoformat", None)
        text = isoformat() if callable(isoformat) else str(value)
        return _dumps(_replace_surrogates(str(text)))


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


def _object_state(value: object, limit: int) -> dict[str, object]:
    state: dict[str, object] = {}
    try:
        attributes = vars(value)
    except TypeError:
        attributes = {}
    try:
        # (A ``__dict__`` property may hand back any mapping, endless ones included.)
        for name, item in islice(attributes.items(), limit):
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


_MAX_SLOTS: Final = 4096


def _slot_names(kind: type) -> list[str]:
    names: list[str] = []
    for klass in kind.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        if isinstance(slots, str):
            slots = (slots,)
        try:
            declared = list(islice(slots, _MAX_SLOTS))  # __slots__ may be reassigned to anything
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
    try:
        name = _qualified_name(type(value))
        try:
            return b'{"__unserialisable__":' + orjson.dumps(name) + b"}"
        except orjson.JSONEncodeError:
            return b'{"__unserialisable__":' + orjson.dumps(_replace_surrogates(name)) + b"}"
    except Exception:  # a metaclass whose __module__ or __qualname__ raises
        return b'{"__unserialisable__":"?"}'

# ---------------------------------------------------------------------------------------------
# Hashes


def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def args_hash(tool_name: str, args: object) -> str:
    """``"<tool>:<sha256 hex>"`` of the canonical arguments (never untrusted-canonicalised)."""
    return args_hash_of_json(tool_name, canonical_json(args))


def args_hash_of_json(tool_name: str, canonical: bytes) -> str:
    """:func:`args_hash` for arguments already serialised by :func:`canonical_json`."""
    if type(tool_name) is not str:
        return f"{_tool_text(tool_name)}:{hashlib.sha256(canonical).hexdigest()}"
    return f"{tool_name}:{hashlib.sha256(canonical).hexdigest()}"


def _tool_text(tool_name: object) -> str:
    """A tool name that is not a plain ``str``, as text, without letting it raise."""
    try:
        if isinstance(tool_name, str):
            return str.__str__(tool_name)
        return format(tool_name)
    except Exception:  # also RecursionError from a deeply nested name
        return _opaque(tool_name).decode()


def digest(value: object) -> str:
    """sha256 hex of the *outcome* form of ``value``: canonical JSON with untrusted-content
    envelopes canonicalised in every string value (§c.9)."""
    if type(value) is not str and not orjson_safe(value):
        return hashlib.sha256(canonical_json_slow(value, canonicalise_untrusted)).hexdigest()
    try:
        data = orjson.dumps(value, option=_FAST_OPTIONS)
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
        return _plain(_details_digest(details, text))
    return _profiled(profile, args, details, text)


def _details_digest(details: Mapping[str, object], text: str) -> str:
    """``digest({"details": details, "text": text})``. The text is a ``str`` already, so only
    the details take the quick check (this runs for nearly every structured result)."""
    if details is _EMPTY:
        details = {}
    if type(details) is dict and len(details) <= _FLAT_ITEMS:  # (inline, as in canonical_json)
        safe = True
        for child in details.values():
            if type(child) not in _PLAIN_TEXT_LEAVES:
                safe = orjson_safe(details)
                break
    else:
        safe = orjson_safe(details)
    if safe and type(text) is str:
        try:
            data = orjson.dumps({"details": details, "text": text}, option=_FAST_OPTIONS)
        except Exception:
            pass
        else:
            if _UNTRUSTED_NEEDLE_BYTES not in data:
                return hashlib.sha256(data).hexdigest()
    return digest({"details": details, "text": text})


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
    # (As stored: a subclass's __iter__ could go on forever.)
    entries = content if type(content) is list or type(content) is tuple else (
        list.__iter__(content) if isinstance(content, list) else tuple.__iter__(content))
    for entry in entries:
        if type(entry) is dict or isinstance(entry, Mapping):
            kind, text = entry.get("type"), entry.get("text")
            if isinstance(kind, str) and isinstance(text, str):
                texts.append(text)
    if len(texts) == 1:
        return texts[0].strip()
    if sum(map(len, texts)) > _MAX_BYTES:  # one long text repeated in many entries
        return _summary_text(texts)
    return "\n".join(texts).strip()


def _summary_text(texts: list[str]) -> str:
    """A fixed-size stand-in for a joined text past ``_MAX_BYTES`` (its parts hashed once each,
    in order), so it is never built."""
    seen: dict[int, tuple[str, bytes]] = {}
    summary = hashlib.sha256()
    for text in texts:
        done = seen.get(id(text))
        if done is None:
            done = seen[id(text)] = (text, hashlib.sha256(text.encode("utf-8", "replace")).digest())
        summary.update(done[1])
    return f"[oversized text: {len(texts)} parts, sha256 {summary.hexdigest()}]"


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
    return _plain(_details_digest(details, text))


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
        return Outcome(_details_digest(details, text), outcome_kind="write-mutation")
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
    try:
        if not isinstance(value, (Mapping, list, tuple)):
            return value
        return _strip_iteratively(value, keys, message_ids)
    except Exception:
        return value  # a misbehaving custom Mapping: hash it as it is


# Containers one strip copies; past that the rest is hashed as it is (keys not stripped), so a
# mapping that makes up new children on every access cannot keep it copying.
_MAX_COPIES: Final = 250_000


def _strip_iteratively(
    root: Mapping[object, object] | list[object] | tuple[object, ...],
    keys: frozenset[str],
    message_ids: bool,
) -> object:
    # id -> (the source, kept alive so its id is not reused, and its copy)
    copies: dict[int, tuple[object, dict[object, object] | list[object]]] = {}
    pending: list[tuple[object, dict[object, object] | list[object]]] = []
    left = _MAX_COPIES  # copies, and items read from custom mappings, still allowed

    def copy_of(value: object) -> object:
        nonlocal left
        if not isinstance(value, (Mapping, list, tuple)):
            return value
        existing = copies.get(id(value))
        if existing is not None:
            return existing[1]
        if left <= 0:
            return value
        left -= 1
        target: dict[object, object] | list[object] = {} if isinstance(value, Mapping) else []
        copies[id(value)] = (value, target)
        pending.append((value, target))
        return target

    result = copy_of(root)
    while pending:
        source, target = pending.pop()
        if isinstance(target, dict):
            assert isinstance(source, Mapping)
            drop_id = message_ids and _looks_like_message(source)
            items = source.items()
            if type(source) is dict:
                pairs = list(items)
            else:  # (a custom mapping's items may never end)
                pairs = list(islice(items, max(left, 0)))
                left -= len(pairs)
            for key, item in pairs:
                if key in keys or (drop_id and key == "id"):
                    continue
                target[key] = copy_of(item)
        else:
            assert isinstance(source, (list, tuple))
            # As stored: a subclass's __iter__ could go on forever.
            stored = source if type(source) is list or type(source) is tuple else (
                list.__iter__(source) if isinstance(source, list) else tuple.__iter__(source))
            target.extend(copy_of(item) for item in stored)
    return result
