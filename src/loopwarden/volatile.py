"""Volatile spans: the parts of a tool result that change on every call without meaning progress.

OpenClaw masks "when, not why" spans only in exec failure identities (spec §c.4). The ``early``
preset masks them in every outcome, so a poll whose only change is a fresh timestamp, elapsed
counter, UUID or pid is recognised as no progress.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["VOLATILE_PATTERNS", "mask_value", "mask_volatile"]

_ISO = r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?"
_CLOCK = r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,9})?\b"
_EPOCH = r"\b1[5-9]\d{8}(?:\d{3})?(?:\.\d+)?\b"
_UUID = r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
_HEX = r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{16,}\b"
_DURATION = (
    r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds?|m|mins?|minutes?|h|hrs?|hours?)\b"
)
_COUNTER = r"\b(?:pid|ppid|elapsed|uptime|duration|took|age|runtime|attempt|retry)\b[\s#:=]*\d+(?:\.\d+)?"
_AGO = r"\b\d+\s?(?:seconds?|minutes?|hours?|s|m|h)\s+ago\b"

_SPANS = (_ISO, _UUID, _HEX, _CLOCK, _EPOCH, _AGO, _COUNTER, _DURATION)
VOLATILE_PATTERNS: tuple[re.Pattern[str], ...] = tuple(re.compile(p, re.IGNORECASE) for p in _SPANS)
# One pass over the text: at each position the first alternative that matches wins, in the
# order above (a full ISO timestamp before its clock part, a UUID before its hex runs).
_ALL_SPANS = re.compile("|".join(f"(?:{p})" for p in _SPANS), re.IGNORECASE)
_QUICK = re.compile(r"\d")


def mask_volatile(
    text: str, extra: tuple[re.Pattern[str], ...] = (), *, builtin: bool = True
) -> str:
    """Replace every volatile span of ``text`` with ``#``: the built-in spans (unless
    ``builtin`` is false) and the matches of a profile's ``extra`` patterns."""
    for pattern in extra:
        text = pattern.sub("#", text)
    if not builtin or not _QUICK.search(text):
        return text
    return _ALL_SPANS.sub("#", text)


_MAX_DEPTH = 64
_MAX_NODES = 50_000


def mask_value(
    value: Any, extra: tuple[re.Pattern[str], ...] = (), *, builtin: bool = True
) -> Any:
    """A copy of a JSON-like value with volatile spans masked in every string leaf.

    Cycles, values past a modest depth or node budget, and anything that is not a
    str/list/tuple/dict are returned as they are: masking is a refinement, never a reason to fail
    or to spend unbounded time.
    """
    budget = [_MAX_NODES]
    return _mask(value, 0, set(), budget, lambda text: mask_volatile(text, extra, builtin=builtin))


def _mask(value: Any, depth: int, stack: set[int], budget: list[int],
          mask: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return mask(value)
    if not isinstance(value, (dict, list, tuple)) or depth >= _MAX_DEPTH or budget[0] <= 0:
        return value
    if id(value) in stack:
        return value
    budget[0] -= 1
    stack.add(id(value))
    try:
        if isinstance(value, dict):
            return {k: _mask(v, depth + 1, stack, budget, mask) for k, v in value.items()}
        return [_mask(v, depth + 1, stack, budget, mask) for v in value]
    finally:
        stack.discard(id(value))
