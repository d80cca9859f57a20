"""Learned volatile fields (``early`` preset): result fields that change on every otherwise
identical outcome of a call are, after a few observations, ignored when hashing that tool's
outcomes.

A result is seen as leaves: ``path -> text``. When the same call (tool and arguments) returns
again and only a few leaves differ, each differing path scores one observation; a text leaf that
differs only in its numbers (``cpu 0.3%`` → ``cpu 0.5%``) scores for its digits instead of its
whole text. At :data:`LEARN_AFTER` observations a path is learned for that tool, and from then on
the outcome hash leaves it (or its digits) out. The learned set lives in the session state, so
it is persisted by every store and shown in findings and events.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from typing import Any

from .fingerprint import canonical_json

__all__ = ["LEARN_AFTER", "Leaves", "learn", "learned_for", "learned_hash", "leaves_of"]

LEARN_AFTER = 2
MAX_DIFFERING = 3
MAX_LEAVES = 256
MAX_DEPTH = 16
MAX_REMEMBERED_CALLS = 32
MAX_VISITS = 100_000
DIGITS = "#digits"

Leaves = dict[str, str]
_NUMBERS = re.compile(r"\d+(?:[.,]\d+)?")


def leaves_of(value: Any) -> Leaves:
    """A bounded ``path -> text`` view of a JSON-like result (pure; never raises).

    Depth-first, last child first. Bounded in work too: children are read as they are visited,
    at most :data:`MAX_VISITS` nodes are visited, and custom containers (whose items may never
    end) are read no further than that in all (a result sharing its children at every level,
    or making up new ones on every access, ends there)."""
    leaves: Leaves = {}
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
        leaves[path] = canonical_json(node).decode("utf-8", "replace")
    return leaves


def _children(path: str, node: Any, budget: list[int]) -> Iterator[tuple[str, Any]] | None:
    """``(path, child)`` of a mapping's string keys or a list's items, last first, else
    ``None``."""
    kind = type(node)
    if kind is dict:
        return ((f"{path}.{k}", v) for k, v in reversed(node.items()) if isinstance(k, str))
    if kind is list or kind is tuple:
        return ((f"{path}[{i}]", node[i]) for i in range(len(node) - 1, -1, -1))
    if isinstance(node, Mapping):
        items = _read(node.items(), budget)
        # (join, not an f-string: a str subclass's __format__ could raise.)
        return (("".join((path, ".", k)), v) for k, v in reversed(items) if isinstance(k, str))
    if isinstance(node, (list, tuple)):  # a subclass: as stored, never its own __iter__
        stored = _read(list.__iter__(node) if isinstance(node, list) else tuple.__iter__(node),
                       budget)
        return ((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(stored))))
    return None


def _read(items: Iterable[Any], budget: list[int]) -> list[Any]:
    taken = list(islice(items, max(budget[0], 0)))
    budget[0] -= len(taken)
    return taken


def learned_for(learned: Mapping[str, Any], tool: str) -> tuple[str, ...]:
    """The learned volatile paths of ``tool`` (``path`` or ``path#digits``), sorted."""
    return tuple(sorted(learned.get("volatile", {}).get(tool, ())))


def learn(learned: dict[str, Any], tool: str, key: str, leaves: Leaves) -> tuple[str, ...]:
    """Compare with the last outcome of the same call ``key``, score differing paths, remember
    this outcome, and return the tool's learned paths. Mutates ``learned`` (session state)."""
    last_by_call: dict[str, Leaves] = learned.setdefault("last", {})
    previous = last_by_call.pop(key, None)
    last_by_call[key] = leaves
    while len(last_by_call) > MAX_REMEMBERED_CALLS:
        del last_by_call[next(iter(last_by_call))]
    volatile: dict[str, list[str]] = learned.setdefault("volatile", {})
    known = set(volatile.get(tool, ()))
    if previous is None or previous.keys() != leaves.keys():
        return tuple(sorted(known))
    differing = [p for p in leaves if previous[p] != leaves[p] and p not in known
                 and f"{p}{DIGITS}" not in known]
    if not differing or len(differing) > MAX_DIFFERING:
        return tuple(sorted(known))
    scores: dict[str, int] = learned.setdefault("scores", {}).setdefault(tool, {})
    for path in differing:
        same_shape = _NUMBERS.sub("#", previous[path]) == _NUMBERS.sub("#", leaves[path])
        marker = f"{path}{DIGITS}" if same_shape else path
        scores[marker] = scores.get(marker, 0) + 1
        if scores[marker] >= LEARN_AFTER:
            known.add(marker)
    volatile[tool] = sorted(known)
    return tuple(volatile[tool])


def learned_hash(leaves: Leaves, volatile: tuple[str, ...]) -> str:
    """The outcome hash with learned paths left out (or their digits masked)."""
    dropped = {p for p in volatile if not p.endswith(DIGITS)}
    digits = {p[: -len(DIGITS)] for p in volatile if p.endswith(DIGITS)}
    kept = {
        path: (_NUMBERS.sub("#", text) if path in digits else text)
        for path, text in leaves.items() if path not in dropped
    }
    return hashlib.sha256(canonical_json(kept)).hexdigest()
