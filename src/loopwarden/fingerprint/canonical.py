"""Canonical serialisation (spec §c): the bytes every argument and outcome hash is taken over.

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

import datetime
import uuid
from typing import Any, Final

import orjson

from .ropes import _MAX_BYTES
from .values import _FAST_OPTIONS, _opaque
from .walker import StrTransform, _Walker


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
    """``left`` less the items and string characters of ``node`` (keys included), or
    ``_NOT_PLAIN``, or ``_TOO_BIG`` once ``left`` runs out (recursive: the common values are
    small and flat)."""
    left -= len(node)
    if type(node) is dict:
        # A long key shared by many small dicts is written out at every one of them.
        for key in node:
            if type(key) is str:
                left -= len(key)
        children: Any = node.values()
    else:
        children = node
    if left < 0:
        return _TOO_BIG
    for child in children:
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

