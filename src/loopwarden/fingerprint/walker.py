"""The fallback serialiser (:class:`_Walker`): iterative, any depth, bounded work, total over
any Python value, and byte-identical to orjson wherever orjson can serialise the value.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import uuid
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import islice
from pathlib import PurePath
from typing import Final, TypeVar

import orjson

from .ropes import (
    _FEW_PARTS,
    _INLINE_LIMIT,
    _LONG_TEXT,
    _MAX_BYTES,
    _TRUNCATED,
    Digests,
    Rope,
    Texts,
    _flatten,
    _Frame,
    _oversized,
)
from .values import (
    _NOT_CONVERTED,
    _bytes_like,
    _callable_name,
    _compact,
    _converted,
    _dataclass_items,
    _dumps,
    _exception_items,
    _int_bytes,
    _is_utf8_safe,
    _object_state,
    _opaque,
    _orjson_leaf,
    _qualified_name,
    _replace_surrogates,
    _scalar_bytes,
)

_CIRCULAR: Final = b'"[Circular]"'

StrTransform = Callable[[str], str]
T = TypeVar("T")

# Values one serialisation takes in (each child is counted when its container is read; a
# shared container's children once; an object or custom mapping, whose own code runs, counts
# _OBJECT_COST more). Past it, a container that has more ends with a "[Truncated]" entry and one
# reached later is "[Truncated]" itself: objects that make up new children on every access, or
# endless iterators, cannot keep the walk going (a second or two at most).
_MAX_NODES: Final = 250_000
_OBJECT_COST: Final = 10
# Keys are stringified by a nested walk; keys inside keys deeper than this are opaque.
_MAX_KEY_DEPTH: Final = 16
# An enum whose value is an enum whose value ... (or itself).
_MAX_ENUM_CHAIN: Final = 256


Visited = bytes | _Frame | tuple[Rope, int]


class _Walker:
    """Post-order, explicit-stack serialiser: no Python recursion over the value's depth, each
    distinct acyclic container serialised once, and at most ``_MAX_NODES`` values visited.
    Values other than the exact JSON types are read by :func:`_visit_any` and the functions
    after it."""

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
        """The canonical bytes of ``root``."""
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
            return _visit_any(self, value)
        except Exception:
            # Only this value degrades to its type name; the rest stays significant.
            return _opaque(value)

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


# -- values other than the exact JSON types ------------------------------------------------------
# (Functions over the walker rather than methods: a call costs the same, the class stays small.)


def _visit_any(walker: _Walker, value: object) -> Visited:
    """What :meth:`_Walker._visit` does not take inline: subclasses, bools, floats, bytes,
    other containers, then :func:`_visit_other`."""
    if isinstance(value, str):
        return walker._string(str.__str__(value))  # its characters, whatever it overrides
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
    seen = walker._seen(value)
    if seen is not None:
        return seen
    if walker._nodes_left <= 0:
        return _TRUNCATED  # (its children could not be taken)
    if isinstance(value, dict):
        return walker._dict(value)
    if isinstance(value, (list, tuple)):
        return walker._open(_Frame.ARRAY, value, walker._elements(value))
    if isinstance(value, deque):
        return walker._open(_Frame.ARRAY, value, walker._take(value))
    if isinstance(value, (set, frozenset)):
        return walker._open(_Frame.SET, value, walker._take(value))
    return _visit_other(walker, value)


def _visit_other(walker: _Walker, value: object) -> Visited:
    """Values no JSON type stands for: orjson's leaves, enums, paths ..., then values whose
    own code runs (exceptions, mappings, dataclasses, models ...)."""
    if isinstance(value, (datetime.date, datetime.time, uuid.UUID, orjson.Fragment)):
        return _orjson_leaf(value)
    if isinstance(value, enum.Enum):
        return _visit_enum(walker, value)
    if isinstance(value, decimal.Decimal):
        return _dumps(str(value))
    if isinstance(value, PurePath):
        return walker._string(value.as_posix())
    if isinstance(value, complex):
        return b"[" + orjson.dumps(value.real) + b"," + orjson.dumps(value.imag) + b"]"
    # What follows runs the value's own code (items, attributes, model_dump ...), at ten
    # times the cost of a plain container: it takes more of the budget.
    walker._nodes_left -= _OBJECT_COST
    if isinstance(value, BaseException):
        return walker._mapping(value, walker._take(_exception_items(value)))
    if isinstance(value, Mapping):
        return walker._mapping(value, walker._take(value.items()))
    if isinstance(value, array):
        return walker._open(_Frame.ARRAY, value, walker._take(value.tolist()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return walker._mapping(value, walker._take(_dataclass_items(value)))
    converted = _converted(value)
    if converted is not _NOT_CONVERTED:
        return _visit_converted(walker, value, converted)
    return _visit_object(walker, value)


def _visit_enum(walker: _Walker, value: enum.Enum) -> Visited:
    """An enum as its value (an enum's value that is an enum, as that one's value ...)."""
    inner = value.value
    for _ in range(_MAX_ENUM_CHAIN):
        if not isinstance(inner, enum.Enum):
            return walker._visit(inner)
        inner = inner.value
    return _opaque(value)


def _visit_converted(walker: _Walker, original: object, converted: object) -> Visited:
    """A value as what it converts to (a model's ``model_dump()`` ...)."""
    visited = walker._visit(converted)
    if isinstance(visited, _Frame):
        # The conversion is a fresh object: guard cycles through the original instead.
        del walker._on_stack[id(visited.ref)]
        visited.ref = original
        walker._on_stack[id(original)] = visited.depth
    return visited


def _visit_object(walker: _Walker, value: object) -> Visited:
    """Any other object: its qualified type name and its state (or a callable's name)."""
    kind = type(value)
    entries: list[tuple[object, object]] = [("__object__", _qualified_name(kind))]
    name = _callable_name(value)
    if name is not None:
        entries.append(("name", name))
    else:
        entries.append(("state", _object_state(value, max(walker._nodes_left, 0) + 1)))
    return walker._mapping(value, walker._take(entries))
