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

What the session remembers of a call's last outcome is its *digest*, never the result: per leaf
(paths sorted) short hashes of the text, of its number-masked shape and of its measurement-masked form, and
whether it is one volatile-looking token, behind a hash of the
path set. That is all the comparison needs, and it keeps a session's state a few hundred bytes a
call however large the results are (a 100 KB read costs 36 bytes a leaf, not 100 KB).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from typing import Any

from .fingerprint import canonical_json

__all__ = ["LEARN_AFTER", "Leaves", "check_learned", "learn", "learned_for", "learned_hash",
           "leaves_of", "volatile_change"]

# One observation suffices now that only volatile-looking changes are learned: a second would
# leave the first two outcomes of a loop unequal to the rest, delaying its warning by a call.
LEARN_AFTER = 1
MAX_DIFFERING = 3
MAX_LEAVES = 256
MAX_DEPTH = 16
MAX_REMEMBERED_CALLS = 32
MAX_PATH = 256  # longer paths (huge keys, deep nesting) keep a prefix and a hash of the rest
MAX_SCORED_PATHS = 512  # per tool: paths that differed but are not learned yet
MAX_TOOLS = 256  # tools with scores, and tools with learned paths
MAX_VISITS = 100_000
DIGITS = "#digits"

_NUMBERS = re.compile(r"\d+(?:[.,]\d+)?")
ROOT = "$"
_MEASURED = re.compile(r"(\d+(?:[.,]\d+)?)\s?(%|[kmgtp]i?b\b|b\b|[kmg]\b)?", re.IGNORECASE)
# A volatile token: one word of id-like characters with a digit (tok-ab12, e12, 7f3a9c, 1.5).
_TOKEN = re.compile(r"(?=[^\s]*\d)[\w.:+/=#-]{1,128}")
_DIGITS_ONLY = "digits"
_WHOLE = "whole"
# The same substitution for ASCII text, on bytes whose digits are all "0" first: a pattern that
# starts with a literal lets ``re`` jump from digit to digit instead of trying every position
# (4-10x faster on large results). In ASCII text ``\d`` is exactly 0-9, so the result is equal.
_ZERO_DIGITS = bytes.maketrans(b"0123456789", b"0" * 10)
_ZERO_NUMBERS = re.compile(rb"00*(?:[.,]00*)?")
_HASH_CHARS = 12  # hex digits of one short hash (48 bits)
# Per leaf: the text's hash, its shape's (all numbers masked), its measurements' (only numbers
# with a unit masked), and "t" when the whole text is one volatile-looking token, else "-".
_LEAF_CHARS = 3 * _HASH_CHARS + 1


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
    leaves.digest()
    return leaves


def digest_of(leaves: Mapping[str, str]) -> str:
    """:meth:`Leaves.digest` for any ``path -> text`` mapping."""
    paths = sorted(leaves)
    parts = [_short_hash("\0".join(paths).encode("utf-8", "surrogatepass"))]
    for path in paths:
        parts.append(_leaf_digest(leaves[path]))
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


def learned_for(learned: Mapping[str, Any], tool: str) -> tuple[str, ...]:
    """The learned volatile paths of ``tool`` (``path`` or ``path#digits``), sorted."""
    return tuple(sorted(learned.get("volatile", {}).get(tool, ())))


def volatile_change(old: str, new: str) -> str | None:
    """How a leaf that changed between two outcomes of one call may be learned: ``"whole"``
    (both values are volatile tokens: ids, nonces), ``"digits"`` (only numbers changed, and
    each is a measurement with a unit: ``0.3%``, ``498.2mb``), or None: the change is progress.
    Bare numbers are counts of work (tests passed, rows ingested, lines of output) and growing or
    rewritten text is output: neither is ever learned away."""
    return _change(_leaf_digest(old), _leaf_digest(new))


def learn(learned: dict[str, Any], tool: str, key: str, leaves: Mapping[str, str]) -> tuple[str, ...]:
    """Compare with the last outcome of the same call ``key``, score differing paths that look
    volatile, remember this outcome (its digest), and return the paths learned for this call
    (the tool's, plus the call's own for a plain-text result). Mutates ``learned`` (session
    state)."""
    digest = leaves.digest() if isinstance(leaves, Leaves) else digest_of(leaves)
    seen = _seen(learned)
    previous = seen.pop(key, None)
    seen[key] = digest
    while len(seen) > MAX_REMEMBERED_CALLS:
        del seen[next(iter(seen))]
    volatile: dict[str, list[str]] = learned.setdefault("volatile", {})
    text_scope = _call_scope(tool, key) if leaves.keys() == {ROOT} else None
    known = set(volatile.get(tool, ()))
    if text_scope is not None:
        known.update(volatile.get(text_scope, ()))
    if (previous is None or previous == digest or len(previous) != len(digest)
            or previous[:_HASH_CHARS] != digest[:_HASH_CHARS]):  # a different set of paths
        return tuple(sorted(known))
    differing: list[tuple[str, str | None]] = []
    for i, path in enumerate(sorted(leaves)):
        start = _HASH_CHARS + i * _LEAF_CHARS
        old_leaf, new_leaf = previous[start:start + _LEAF_CHARS], digest[start:start + _LEAF_CHARS]
        if (old_leaf[:_HASH_CHARS] != new_leaf[:_HASH_CHARS] and path not in known
                and f"{path}{DIGITS}" not in known):
            differing.append((path, _change(old_leaf, new_leaf)))
            if len(differing) > MAX_DIFFERING:
                return tuple(sorted(known))
    if not differing:
        return tuple(sorted(known))
    scope = text_scope or tool
    all_scores: dict[str, dict[str, int]] = learned.setdefault("scores", {})
    # Re-inserted so that the caps below drop the scopes scored longest ago, never this one.
    scores = all_scores.pop(scope, None) or {}
    all_scores[scope] = scores
    own = set(volatile.get(scope, ()))
    for path, change in differing:
        if change is None:
            continue  # progress: the outcome differs, and nothing is learned from it
        marker = f"{path}{DIGITS}" if change == _DIGITS_ONLY else path
        scores[marker] = scores.get(marker, 0) + 1
        if scores[marker] >= LEARN_AFTER and len(own) < MAX_LEAVES:
            known.add(marker)
            own.add(marker)
    _drop_oldest(scores, MAX_SCORED_PATHS)
    _drop_oldest(all_scores, MAX_TOOLS)
    if own:
        volatile.pop(scope, None)
        volatile[scope] = sorted(own)
        _drop_oldest(volatile, MAX_TOOLS)
    return tuple(sorted(known))


def _call_scope(tool: str, key: str) -> str:
    """Where a plain-text result's learned paths live: the tool and the call's arguments
    (``key`` is ``run|args hash``), so one command's noisy numbers are not masked in another's."""
    return f"{tool}|{key.rsplit('|', 1)[-1]}"


def _change(old_leaf: str, new_leaf: str) -> str | None:
    """:func:`volatile_change` on two leaf digests whose texts differ."""
    h = _HASH_CHARS
    if old_leaf[h:2 * h] == new_leaf[h:2 * h]:  # the same shape: only numbers changed
        # Equal once measurements are masked: every number that changed carries a unit.
        return _DIGITS_ONLY if old_leaf[2 * h:3 * h] == new_leaf[2 * h:3 * h] else None
    if old_leaf[-1] == new_leaf[-1] == "t":
        return _WHOLE
    return None


def learned_hash(leaves: Mapping[str, str], volatile: tuple[str, ...]) -> str:
    """The outcome hash with learned paths left out (or their digits masked)."""
    dropped = {p for p in volatile if not p.endswith(DIGITS)}
    digits = {p[: -len(DIGITS)] for p in volatile if p.endswith(DIGITS)}
    kept = {
        path: (_NUMBERS.sub("#", text) if path in digits else text)
        for path, text in leaves.items() if path not in dropped
    }
    return hashlib.sha256(canonical_json(kept)).hexdigest()


def check_learned(data: Any) -> dict[str, Any]:
    """``data`` as a session's learned state; raises ``ValueError`` when a part learning reads
    has the wrong shape (a corrupt stored state). Keys it does not know pass through."""
    if not isinstance(data, dict):
        raise ValueError("learned state is not an object")
    _check_map(data.get("seen", {}), lambda v: isinstance(v, str))
    _check_map(data.get("last", {}), lambda v: isinstance(v, dict) and _all_str(v))
    _check_map(data.get("volatile", {}),
               lambda v: isinstance(v, list) and all(isinstance(p, str) for p in v))
    _check_map(data.get("scores", {}), lambda v: isinstance(v, dict) and all(
        isinstance(k, str) and type(n) is int for k, n in v.items()))
    return dict(data)


# -- internals -------------------------------------------------------------------------------


def _seen(learned: dict[str, Any]) -> dict[str, str]:
    seen: dict[str, str] = learned.setdefault("seen", {})
    legacy = learned.pop("last", None)
    if legacy:
        # A state written before digests kept whole results: keep its comparisons, not its bulk.
        for key, old in legacy.items():
            seen.setdefault(key, digest_of(old))
    return seen


def _leaf_digest(text: str) -> str:
    if text.isascii():
        raw = text.encode()
        shape = _ZERO_NUMBERS.sub(b"#", raw.translate(_ZERO_DIGITS))
    else:
        raw = text.encode("utf-8", "surrogatepass")
        shape = _NUMBERS.sub("#", text).encode("utf-8", "surrogatepass")
    text_hash = _short_hash(raw)
    if shape == raw:  # no digits: nothing to mask, and no token (a token has a digit)
        return text_hash * 3 + "-"
    measured = _MEASURED.sub(_mask_measurement, text).encode("utf-8", "surrogatepass")
    token = "t" if _TOKEN.fullmatch(text.strip()) else "-"
    return text_hash + _short_hash(shape) + (
        text_hash if measured == raw else _short_hash(measured)) + token


def _mask_measurement(match: re.Match[str]) -> str:
    """A number with a unit becomes ``#`` (its unit kept); a bare number stays as it is."""
    if match.group(2) is None:
        return match.group(0)
    return "#" + match.group(0)[len(match.group(1)):]


def _short_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=_HASH_CHARS // 2).hexdigest()


def _bounded(path: str) -> str:
    if len(path) <= MAX_PATH:
        return path
    return f"{path[:MAX_PATH - 18]}~{_short_hash(path.encode('utf-8', 'surrogatepass'))[:16]}~"


def _drop_oldest(mapping: dict[str, Any], limit: int) -> None:
    while len(mapping) > limit:
        del mapping[next(iter(mapping))]


def _check_map(value: Any, valid: Any) -> None:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and valid(v) for k, v in value.items()):
        raise ValueError("learned state has the wrong shape")


def _all_str(mapping: dict[Any, Any]) -> bool:
    return all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items())
