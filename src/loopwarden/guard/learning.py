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
from collections.abc import Mapping
from typing import Any

from ..fingerprint import canonical_json
from ..fingerprint.leaves import (
    DIGITS_ONLY,
    HASH_CHARS,
    LEAF_CHARS,
    MAX_LEAVES,
    ROOT,
    Leaves,
    digest_of,
    leaf_change,
    leaf_digest,
    mask_numbers,
)

# (Leaves, leaves_of and MAX_PATH moved down to the fingerprint, check_learned to the history
# that holds the learned state; named here as before.)
# One observation suffices now that only volatile-looking changes are learned: a second would
# leave the first two outcomes of a loop unequal to the rest, delaying its warning by a call.
LEARN_AFTER = 1
MAX_DIFFERING = 3
MAX_REMEMBERED_CALLS = 32
MAX_SCORED_PATHS = 512  # per tool: paths that differed but are not learned yet
MAX_TOOLS = 256  # tools with scores, and tools with learned paths
DIGITS = "#digits"


def learned_for(learned: Mapping[str, Any], tool: str) -> tuple[str, ...]:
    """The learned volatile paths of ``tool`` (``path`` or ``path#digits``), sorted."""
    return tuple(sorted(learned.get("volatile", {}).get(tool, ())))


def volatile_change(old: str, new: str, path: str = "") -> str | None:
    """How a leaf that changed between two outcomes of one call may be learned: ``"whole"``
    (both values are volatile tokens: ids, nonces), ``"digits"`` (only numbers changed, and
    each is a measurement with a unit: ``0.3%``, ``498.2mb``), or None: the change is progress.
    Bare numbers are counts of work (tests passed, rows ingested, lines of output) and growing or
    rewritten text is output: neither is ever learned away."""
    return leaf_change(leaf_digest(old, path), leaf_digest(new, path))


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
            or previous[:HASH_CHARS] != digest[:HASH_CHARS]):  # a different set of paths
        return tuple(sorted(known))
    differing: list[tuple[str, str | None]] = []
    for i, path in enumerate(sorted(leaves)):
        start = HASH_CHARS + i * LEAF_CHARS
        old_leaf, new_leaf = previous[start:start + LEAF_CHARS], digest[start:start + LEAF_CHARS]
        if (old_leaf[:HASH_CHARS] != new_leaf[:HASH_CHARS] and path not in known
                and f"{path}{DIGITS}" not in known):
            differing.append((path, leaf_change(old_leaf, new_leaf)))
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
        marker = f"{path}{DIGITS}" if change == DIGITS_ONLY else path
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


def learned_hash(leaves: Mapping[str, str], volatile: tuple[str, ...]) -> str:
    """The outcome hash with learned paths left out (or their digits masked)."""
    dropped = {p for p in volatile if not p.endswith(DIGITS)}
    digits = {p[: -len(DIGITS)] for p in volatile if p.endswith(DIGITS)}
    kept = {
        path: (mask_numbers(text) if path in digits else text)
        for path, text in leaves.items() if path not in dropped
    }
    return hashlib.sha256(canonical_json(kept)).hexdigest()


# -- internals -------------------------------------------------------------------------------


def _seen(learned: dict[str, Any]) -> dict[str, str]:
    seen: dict[str, str] = learned.setdefault("seen", {})
    legacy = learned.pop("last", None)
    if legacy:
        # A state written before digests kept whole results: keep its comparisons, not its bulk.
        for key, old in legacy.items():
            seen.setdefault(key, digest_of(old))
    return seen


def _drop_oldest(mapping: dict[str, Any], limit: int) -> None:
    while len(mapping) > limit:
        del mapping[next(iter(mapping))]
