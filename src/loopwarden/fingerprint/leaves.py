"""A result seen as leaves (``path -> text``) and the short digest a session keeps of it.

What the learned volatile fields (:mod:`loopwarden.guard.learning`, ``early`` preset) compare between
two outcomes of one call. It sits with the fingerprint because it is one: the engine takes a
result's leaves when it hashes the outcome, outside any store lock, and the guard only learns
from them.

A digest is the hash of the sorted path set (:data:`HASH_CHARS` hex digits), then per path a
leaf digest of :data:`LEAF_CHARS` characters: the text's short hash, its shape's (all numbers
masked), its measurements' (only numbers with a unit masked), and ``"t"`` when the whole text is
one volatile-looking token, else ``"-"``. :func:`leaf_change` reads two leaf digests.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from typing import Any

from ..base.lazy_re import lazy_pattern
from .canonical import canonical_json

__all__ = [
    "DIGITS_ONLY",
    "HASH_CHARS",
    "LEAF_CHARS",
    "MAX_PATH",
    "ROOT",
    "Leaves",
    "digest_of",
    "leaf_change",
    "leaf_digest",
    "leaves_of",
    "mask_numbers",
]

MAX_LEAVES = 256
MAX_DEPTH = 16
MAX_PATH = 256  # longer paths (huge keys, deep nesting) keep a prefix and a hash of the rest
MAX_VISITS = 100_000
ROOT = "$"
#: What :func:`leaf_change` calls a change: every changed number is a measurement with a unit,
#: or both whole texts are volatile-looking tokens.
DIGITS_ONLY = "digits"
WHOLE = "whole"
HASH_CHARS = 12  # hex digits of one short hash (48 bits)
LEAF_CHARS = 3 * HASH_CHARS + 1

# (Compiled on first use: the OpenClaw preset, and the Claude Code hook's every start, never
# take a result's leaves.)
_NUMBERS = lazy_pattern(r"\d+(?:[.,]\d+)?")
_MEASURED = lazy_pattern(r"(\d+(?:[.,]\d+)?)\s?(%|[kmgtp]i?b\b|b\b|[kmg]\b)?", re.IGNORECASE)
# A volatile token: one word of id-like characters with a digit (tok-ab12, e12, 7f3a9c, 1.5).
_TOKEN = lazy_pattern(r"(?=[^\s]*\d)[\w.:+/=#-]{1,128}")
# The same substitution for ASCII text, on bytes whose digits are all "0" first: a pattern that
# starts with a literal lets ``re`` jump from digit to digit instead of trying every position
# (4-10x faster on large results). In ASCII text ``\d`` is exactly 0-9, so the result is equal.
_ZERO_DIGITS = bytes.maketrans(b"0123456789", b"0" * 10)
_ZERO_NUMBERS = lazy_pattern(rb"00*(?:[.,]00*)?")


class Leaves(dict[str, str]):
    """A bounded ``path -> text`` view of one result (what :func:`leaves_of` returns), with
    :meth:`digest`, the form :func:`learn` remembers."""

    __slots__ = ("_digest",)
    _digest: str

    def digest(self) -> str:
        """The path set's hash, then per sorted path the text's hash and its shape's."""
        try:
            return self._digest
        except AttributeError:
            self._digest = digest_of(self)
            return self._digest


def leaves_of(value: Any) -> Leaves:
    """A bounded ``path -> text`` view of a JSON-like result (pure; never raises). Its digest is
    computed here, outside any store lock.

    Depth-first, last child first. Bounded in work too: children are read as they are visited,
    at most :data:`MAX_VISITS` nodes are visited, and custom containers (whose items may never
    end) are read no further than that in all (a result sharing its children at every level,
    or making up new ones on every access, ends there)."""
    leaves = Leaves()
    # A value met at many leaf positions (a shared subtree past MAX_DEPTH) is written once:
    # id -> (the value, kept alive so the id stays its own; its text).
    written: dict[int, tuple[Any, str]] = {}
    stack: list[tuple[Iterator[tuple[str, Any]], int]] = [(iter((("$", value),)), 0)]
    visits = 0
    budget = [MAX_VISITS]  # children custom containers may still hand over
    while stack and len(leaves) < MAX_LEAVES and visits < MAX_VISITS:
        children, depth = stack[-1]
        try:
            path, node = next(children)
        except StopIteration:
            stack.pop()
            continue
        except Exception:  # a container that changed or raised while being read
            stack.pop()
            continue
        visits += 1
        try:
            if depth < MAX_DEPTH:
                nested = _children(path, node, budget)
                if nested is not None:
                    stack.append((nested, depth + 1))
                    continue
            if isinstance(node, str):
                leaves[path] = node if type(node) is str else str.__str__(node)
                continue
        except Exception:  # a container that raises when read is a leaf like any value
            pass
        done = written.get(id(node))
        if done is None:
            done = written[id(node)] = (node, canonical_json(node).decode("utf-8", "replace"))
        leaves[path] = done[1]
    leaves.digest()
    return leaves


def digest_of(leaves: Mapping[str, str]) -> str:
    """:meth:`Leaves.digest` for any ``path -> text`` mapping."""
    paths = sorted(leaves)
    parts = [_short_hash("\0".join(paths).encode("utf-8", "surrogatepass"))]
    for path in paths:
        parts.append(leaf_digest(leaves[path], path))
    return "".join(parts)


def _children(path: str, node: Any, budget: list[int]) -> Iterator[tuple[str, Any]] | None:
    """``(path, child)`` of a mapping's string keys or a list's items, last first, else
    ``None``."""
    kind = type(node)
    if kind is dict:
        return ((_bounded("".join((path, ".", k))), v) for k, v in reversed(node.items())
                if isinstance(k, str))
    if kind is list or kind is tuple:
        return ((_bounded(f"{path}[{i}]"), node[i]) for i in range(len(node) - 1, -1, -1))
    if isinstance(node, Mapping):
        items = _read(node.items(), budget)
        # (join, not an f-string: a str subclass's __format__ could raise.)
        return ((_bounded("".join((path, ".", k))), v) for k, v in reversed(items)
                if isinstance(k, str))
    if isinstance(node, (list, tuple)):  # a subclass: as stored, never its own __iter__
        stored = _read(list.__iter__(node) if isinstance(node, list) else tuple.__iter__(node),
                       budget)
        return ((_bounded(f"{path}[{i}]"), v) for i, v in reversed(list(enumerate(stored))))
    return None


def _read(items: Iterable[Any], budget: list[int]) -> list[Any]:
    taken = list(islice(items, max(budget[0], 0)))
    budget[0] -= len(taken)
    return taken


def mask_numbers(text: str) -> str:
    """``text`` with every number (``12``, ``0.5``, ``1,5``) replaced by ``#``."""
    return _NUMBERS().sub("#", text)


def leaf_change(old_leaf: str, new_leaf: str) -> str | None:
    """How two leaf digests whose texts differ differ: :data:`DIGITS_ONLY` (the same shape,
    and equal once measurements are masked), :data:`WHOLE` (both texts are volatile-looking
    tokens), or None."""
    h = HASH_CHARS
    if old_leaf[h:2 * h] == new_leaf[h:2 * h]:  # the same shape: only numbers changed
        # Equal once measurements are masked: every number that changed carries a unit.
        return DIGITS_ONLY if old_leaf[2 * h:3 * h] == new_leaf[2 * h:3 * h] else None
    if old_leaf[-1] == new_leaf[-1] == "t":
        return WHOLE
    return None


def leaf_digest(text: str, path: str = "") -> str:
    """The :data:`LEAF_CHARS` characters a digest keeps of one leaf's text (at ``path``, whose
    last key may say that its numbers count progress)."""
    if text.isascii():
        raw = text.encode()
        shape = _ZERO_NUMBERS().sub(b"#", raw.translate(_ZERO_DIGITS))
    else:
        raw = text.encode("utf-8", "surrogatepass")
        shape = _NUMBERS().sub("#", text).encode("utf-8", "surrogatepass")
    text_hash = _short_hash(raw)
    if shape == raw:  # no digits: nothing to mask, and no token (a token has a digit)
        return text_hash * 3 + "-"
    mask = _mask_gauge if _is_progress(text, path) else _mask_measurement
    measured = _MEASURED().sub(mask, text).encode("utf-8", "surrogatepass")
    token = "t" if _TOKEN().fullmatch(text.strip()) else "-"
    return text_hash + _short_hash(shape) + (
        text_hash if measured == raw else _short_hash(measured)) + token


# Words that say a percentage or a byte size counts work done (issue 21): such a number that
# changes is progress, never learned away. Without them (``cpu 0.3%``, ``mem 62.5mb`` in a
# status table) it is a gauge, learned as volatile. A field named so (``{"progress": "12%"}``)
# counts progress too.
_PROGRESS_CUE = lazy_pattern(
    r"(?:\b|_)(?:done|complete[ds]?|progress|percent|download(?:ed|ing)?|upload(?:ed|ing)?|"
    r"cop(?:ied|ying)|transferr(?:ed|ing)|receiv(?:ed|ing)|written|writing|processed|fetched|"
    r"extract(?:ed|ing)|install(?:ed|ing)|remaining|of)(?:\b|_)", re.IGNORECASE)


def _is_progress(text: str, path: str) -> bool:
    cue = _PROGRESS_CUE()
    key = path.rsplit(".", 1)[-1] if path else ""
    return cue.search(text) is not None or (bool(key) and cue.search(key) is not None)


def _mask_gauge(match: re.Match[str]) -> str:
    """:func:`_mask_measurement` for a text that counts progress: its percentages and byte
    sizes stay as they are."""
    unit = match.group(2)
    if unit is not None and (unit == "%" or unit[-1] in "bB"):
        return match.group(0)
    return _mask_measurement(match)


def _mask_measurement(match: re.Match[str]) -> str:
    """A number with a unit becomes ``#`` (its unit kept); a bare number stays as it is."""
    unit = match.group(2)
    if unit is None:
        return match.group(0)
    return "#" + match.group(0)[len(match.group(1)):]


def _short_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=HASH_CHARS // 2).hexdigest()


def _bounded(path: str) -> str:
    if len(path) <= MAX_PATH:
        return path
    return f"{path[:MAX_PATH - 18]}~{_short_hash(path.encode('utf-8', 'surrogatepass'))[:16]}~"
