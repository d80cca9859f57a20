"""Serialised output as ropes (nested chunks joined once at the end) and :class:`_Frame`, one
container being serialised by :class:`~.walker._Walker`: ordering keys and set items, and the
``{"__oversized__": ...}`` summary of output past ``_MAX_BYTES``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

from .values import _compact, _dumps

# Canonical output past this size is replaced by {"__oversized__": {"bytes", "sha256"}}, where
# the digest is computed once per distinct part: a value sharing one subtree at every level
# (2**40 paths through 41 lists) is hashed without being written out.
_MAX_BYTES: Final = 64 * 1024 * 1024
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
