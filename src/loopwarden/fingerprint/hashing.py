"""The hashes of calls and outcomes: ``args_hash`` (tool name + sha256 of the canonical
arguments), ``digest`` (an outcome's canonical form with untrusted-content ids zeroed, §c.9),
the write-target hash, and the text canonicalisations they share: untrusted-content envelopes
(§c.9) and the "when, not why" masking of terminal exec failures (§c.4).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from typing import Final

import orjson

from ..base.lazy_re import lazy_pattern
from .canonical import canonical_json, canonical_json_slow, orjson_safe
from .profiles import ProfileRegistry, default_registry
from .values import _FAST_OPTIONS, _opaque
from .volatile import has_digit

_UNTRUSTED_NEEDLE: Final = "EXTERNAL_UNTRUSTED_CONTENT"
_UNTRUSTED_NEEDLE_BYTES: Final = _UNTRUSTED_NEEDLE.encode()


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


def mutation_target_hash(
    tool_name: str, args: object, cwd: str | None = None, *,
    registry: ProfileRegistry | None = None,
) -> str | None:
    """For ``write`` calls: sha256 of ``S({"path": <path resolved against cwd>})``.

    Resolution is lexical (no filesystem access): relative paths join ``cwd`` when given, and
    ``.``/``..`` segments are collapsed. ``registry`` says which tool ``tool_name`` is (the
    built-in profiles when None): a detector passes its own, so its aliases of ``write`` count.
    """
    tools = default_registry if registry is None else registry
    if tools.canonical_name(tool_name) != "write" or not isinstance(args, Mapping):
        return None
    path = args.get("path")
    if not isinstance(path, str) or not path.strip():
        return None
    if cwd and not os.path.isabs(path):
        path = os.path.join(cwd, path)
    resolved = os.path.normpath(path)
    return _sha256_hex(canonical_json({"path": resolved}))


# ---------------------------------------------------------------------------------------------
# "When, not why" masking for terminal exec failures (§c.4)

# Every span but the keyword ones starts with a digit; leading with `\d` lets the regex engine
# skip to digits instead of trying five alternatives at every position (10x faster).
# (Compiled on first use, like every pattern most calls never run: see loopwarden.base.lazy_re.)
_WHEN_DIGIT_SPANS: Final = lazy_pattern(
    r"\d(?:"
    r"\d{3}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:[Zz]|[+-]\d{2}:\d{2})?"  # ISO date-time
    r"|(?<!\w\d)\d?:\d{2}:\d{2}(?:\.\d{1,6})?"  # clock time
    r"|(?<!\w\d)\d*(?:\.\d+)?\s?(?:[nNuUmM][sS]|[sS][eE][cC][oO][nN][dD][sS]?"
    r"|[mM][iI][nN][uU][tT][eE][sS]?|[hH][oO][uU][rR][sS]?|[sS])\b"  # durations
    r")"
)
_WHEN_KEYWORD_SPANS: Final = lazy_pattern(r"\b(?:attempt|retry|p?pid)[\s#:=]*\d+", re.IGNORECASE)
_WHEN_KEYWORDS: Final = ("attempt", "retry", "pid")


def mask_when_spans(text: str) -> str:
    """Replace timestamps, clock times, attempt counters, durations and pids with ``#``.

    Calendar dates alone, errno numbers, exit codes and other text stay significant.
    """
    if not has_digit(text):  # every span has a digit; the regexes cost ~10 ns per character
        return text
    lowered = text.lower()
    if any(word in lowered for word in _WHEN_KEYWORDS):
        text = _WHEN_KEYWORD_SPANS().sub("#", text)
    return _WHEN_DIGIT_SPANS().sub("#", text)


# ---------------------------------------------------------------------------------------------
# Untrusted-content nonce canonicalisation (§c.9)

UNTRUSTED_ZERO_ID: Final = "0" * 16

_MARKER_TOKEN: Final = lazy_pattern(r"<<<(?:END_)?EXTERNAL_UNTRUSTED_CONTENT")
_MARKER: Final = lazy_pattern(
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
    envelope = _MARKER()
    markers = [envelope.match(text, token.start()) for token in _MARKER_TOKEN().finditer(text)]
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
