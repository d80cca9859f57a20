"""Learned volatile fields (``early`` preset): result fields that change on every otherwise
identical outcome of a call are, after a few observations, ignored when hashing that tool's
outcomes.

A result is seen as leaves: ``path -> text``. When the same call (tool and arguments) returns
again and only a few leaves differ, each differing path that *looks* volatile scores one
observation (:func:`volatile_change`): a leaf whose whole old and new values are volatile tokens
(an id, nonce) scores for the path; a text leaf that differs only in numbers that are
measurements (``cpu 0.3%`` → ``cpu 0.5%``, ``498.0mb``) scores for its digits. Anything else, above all output that grows or reads differently, is progress and
is never learned. At :data:`LEARN_AFTER` observations a path is learned, and from then on the
outcome hash leaves it (or its digits) out: for that tool when the path is a field of a
structured result, for that one call when it is the whole text of a plain-text result (what a
text's numbers mean depends on the command). The learned set lives in the session state, so it
is persisted by every store and shown in findings and events.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from .fingerprint import canonical_json

__all__ = ["LEARN_AFTER", "Leaves", "learn", "learned_for", "learned_hash", "leaves_of",
           "volatile_change"]

# One observation suffices now that only volatile-looking changes are learned: a second would
# leave the first two outcomes of a loop unequal to the rest, delaying its warning by a call.
LEARN_AFTER = 1
MAX_DIFFERING = 3
MAX_LEAVES = 256
MAX_DEPTH = 16
MAX_REMEMBERED_CALLS = 32
DIGITS = "#digits"

Leaves = dict[str, str]
_NUMBERS = re.compile(r"\d+(?:[.,]\d+)?")
ROOT = "$"
_MEASURED = re.compile(r"(\d+(?:[.,]\d+)?)\s?(%|[kmgtp]i?b\b|b\b|[kmg]\b)?", re.IGNORECASE)
# A volatile token: one word of id-like characters with a digit (tok-ab12, e12, 7f3a9c, 1.5).
_TOKEN = re.compile(r"(?=[^\s]*\d)[\w.:+/=#-]{1,128}")
_DIGITS_ONLY = "digits"
_WHOLE = "whole"


def volatile_change(old: str, new: str) -> str | None:
    """How a leaf that changed between two outcomes of one call may be learned: ``"whole"``
    (both values are volatile tokens: ids, nonces), ``"digits"`` (only numbers changed, and
    each is a measurement with a unit: ``0.3%``, ``498.2mb``), or None: the change is progress.
    Bare numbers are counts of work (tests passed, rows ingested, lines of output) and growing or
    rewritten text is output: neither is ever learned away."""
    if _NUMBERS.sub("#", old) == _NUMBERS.sub("#", new):
        before, after = _MEASURED.findall(old), _MEASURED.findall(new)
        changed = [(a, b) for a, b in zip(before, after, strict=False) if a != b]
        if changed and all(unit_a and unit_b for (_, unit_a), (_, unit_b) in changed):
            return _DIGITS_ONLY
        return None
    if _TOKEN.fullmatch(old.strip()) and _TOKEN.fullmatch(new.strip()):
        return _WHOLE
    return None


def leaves_of(value: Any) -> Leaves:
    """A bounded ``path -> text`` view of a JSON-like result (pure; never raises)."""
    leaves: Leaves = {}
    stack: list[tuple[str, Any, int]] = [("$", value, 0)]
    while stack and len(leaves) < MAX_LEAVES:
        path, node, depth = stack.pop()
        if isinstance(node, Mapping) and depth < MAX_DEPTH:
            stack.extend((f"{path}.{k}", v, depth + 1) for k, v in node.items() if isinstance(k, str))
        elif isinstance(node, (list, tuple)) and depth < MAX_DEPTH:
            stack.extend((f"{path}[{i}]", v, depth + 1) for i, v in enumerate(node))
        elif isinstance(node, str):
            leaves[path] = node
        else:
            leaves[path] = canonical_json(node).decode("utf-8", "replace")
    return leaves


def learned_for(learned: Mapping[str, Any], tool: str) -> tuple[str, ...]:
    """The learned volatile paths of ``tool`` (``path`` or ``path#digits``), sorted."""
    return tuple(sorted(learned.get("volatile", {}).get(tool, ())))


def learn(learned: dict[str, Any], tool: str, key: str, leaves: Leaves) -> tuple[str, ...]:
    """Compare with the last outcome of the same call ``key``, score differing paths that look
    volatile, remember this outcome, and return the paths learned for this call (the tool's,
    plus the call's own for a plain-text result). Mutates ``learned`` (session state)."""
    last_by_call: dict[str, Leaves] = learned.setdefault("last", {})
    previous = last_by_call.pop(key, None)
    last_by_call[key] = leaves
    while len(last_by_call) > MAX_REMEMBERED_CALLS:
        del last_by_call[next(iter(last_by_call))]
    volatile: dict[str, list[str]] = learned.setdefault("volatile", {})
    text_scope = _call_scope(tool, key) if leaves.keys() == {ROOT} else None
    known = set(volatile.get(tool, ()))
    if text_scope is not None:
        known.update(volatile.get(text_scope, ()))
    if previous is None or previous.keys() != leaves.keys():
        return tuple(sorted(known))
    differing = [p for p in leaves if previous[p] != leaves[p] and p not in known
                 and f"{p}{DIGITS}" not in known]
    if not differing or len(differing) > MAX_DIFFERING:
        return tuple(sorted(known))
    scope = text_scope or tool
    scores: dict[str, int] = learned.setdefault("scores", {}).setdefault(scope, {})
    own = set(volatile.get(scope, ()))
    for path in differing:
        change = volatile_change(previous[path], leaves[path])
        if change is None:
            continue  # progress: the outcome differs, and nothing is learned from it
        marker = f"{path}{DIGITS}" if change == _DIGITS_ONLY else path
        scores[marker] = scores.get(marker, 0) + 1
        if scores[marker] >= LEARN_AFTER:
            known.add(marker)
            own.add(marker)
    if own:
        volatile[scope] = sorted(own)
    return tuple(sorted(known))


def _call_scope(tool: str, key: str) -> str:
    """Where a plain-text result's learned paths live: the tool and the call's arguments
    (``key`` is ``run|args hash``), so one command's noisy numbers are not masked in another's."""
    return f"{tool}|{key.rsplit('|', 1)[-1]}"


def learned_hash(leaves: Leaves, volatile: tuple[str, ...]) -> str:
    """The outcome hash with learned paths left out (or their digits masked)."""
    dropped = {p for p in volatile if not p.endswith(DIGITS)}
    digits = {p[: -len(DIGITS)] for p in volatile if p.endswith(DIGITS)}
    kept = {
        path: (_NUMBERS.sub("#", text) if path in digits else text)
        for path, text in leaves.items() if path not in dropped
    }
    return hashlib.sha256(canonical_json(kept)).hexdigest()
