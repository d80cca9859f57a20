"""Volatile spans: the parts of a tool result that change on every call without meaning progress.

OpenClaw masks "when, not why" spans only in exec failure identities (spec §c.4). The ``early``
preset masks them in every outcome, so a poll whose only change is a fresh timestamp, elapsed
counter, UUID or pid is recognised as no progress.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..base.lazy_re import lazy_pattern

__all__ = ["mask_value", "mask_volatile"]

_ISO = r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?"
_CLOCK = r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,9})?\b"
_EPOCH = r"\b1[5-9]\d{8}(?:\d{3})?(?:\.\d+)?\b"
_UUID = r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
_HEX = r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{16,}\b"
_DURATION_UNITS = r"(?:ns|us|µs|ms|s|sec|secs|seconds?|m|mins?|minutes?|h|hrs?|hours?)"
_DURATION = r"\b\d+(?:\.\d+)?\s?" + _DURATION_UNITS + r"\b"
_COUNTER_WORDS = (
    "pid", "ppid", "elapsed", "uptime", "duration", "took", "age", "runtime", "attempt", "retry"
)
_COUNTER = r"\b(?:" + "|".join(_COUNTER_WORDS) + r")\b[\s#:=]*\d+(?:\.\d+)?"
_AGO_UNITS = r"(?:seconds?|minutes?|hours?|s|m|h)"
_AGO = r"\b\d+\s?" + _AGO_UNITS + r"\s+ago\b"

_SPANS = (_ISO, _UUID, _HEX, _CLOCK, _EPOCH, _AGO, _COUNTER, _DURATION)
# The patterns compile on first use (see loopwarden.base.lazy_re): the Claude Code hook imports this
# module on every call, and only the ``early`` preset and exec failures run them.
if TYPE_CHECKING:
    VOLATILE_PATTERNS: tuple[re.Pattern[str], ...]


def __getattr__(name: str) -> Any:
    # VOLATILE_PATTERNS, built on first access (PEP 562) and then an ordinary global.
    if name != "VOLATILE_PATTERNS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    patterns = tuple(re.compile(p, re.IGNORECASE) for p in _SPANS)
    globals()[name] = patterns
    return patterns


# One pass over the text: at each position the first alternative that matches wins, in the
# order above (a full ISO timestamp before its clock part, a UUID before its hex runs).
# This is the definition; _sub_spans computes the same substitution fast.
_ALL_SPANS = lazy_pattern("|".join(f"(?:{p})" for p in _SPANS), re.IGNORECASE)

# _ALL_SPANS().sub costs ~400 ns a character: no alternative starts with something ``re`` can skip
# ahead to, so all eight are tried at every position. But every match starts with a digit, or
# with an ASCII letter that begins a word (a UUID or hex run, a counter keyword), and the two
# kinds of start are found separately.
#
# Digit starts: the alternatives but COUNTER, with their first digit hoisted out so that ``re``
# jumps from digit to digit, each restating what it asked of that digit: ``(?<!\w.)`` is the
# ``\b`` before it, ``(?<=[0-9])`` a hex digit, ``(?<=1)`` the 1 of an epoch; HEX's required
# digit is that one. The lookaheads only name the characters the next part must start with,
# which spares trying each unit after every number.
_DIGIT_LED = lazy_pattern(
    r"\d(?:"
    r"\d{3}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|(?<!\w.)(?:"
    r"(?<=[0-9])(?:[0-9a-f]{7}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
    r"|(?=[0-9a-f]*[a-f])[0-9a-f]{15,}\b)"
    r"|\d?:\d{2}:\d{2}(?:[.,]\d{1,9})?\b"
    r"|(?<=1)[5-9]\d{8}(?:\d{3})?(?:\.\d+)?\b"
    r"|\d*(?=[\s.a-zµ])(?:\s?(?=[smh])" + _AGO_UNITS + r"\s+ago\b"
    r"|(?:\.\d+)?\s?(?=[nuµmsh])" + _DURATION_UNITS + r"\b)"
    r"))",
    re.IGNORECASE,
)


# Letter starts: a word of 8+ hex digits whose first is a-f (UUID, HEX), or a COUNTER keyword.
# Stopping ``re`` at every letter would cost what the hoisting saves, so candidates are found by
# scanning for the literal b" x" in a one-byte-per-character shape of the text: "x" for a hex
# letter or a keyword's first letter, "0" for a digit, other letters lowercased, " " for anything
# else (every non-ASCII character included, so a word boundary is never missed). _ALL_SPANS then
# tries each candidate, so the shape only has to find every start. It compares ASCII letters, so
# the non-ASCII letters that case-insensitive matching equates with ASCII ones (İ ı ſ K) are
# replaced by those first.
_FOLDS = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"), ("\u212a", "k"))


def _shape_table() -> bytes:
    table = bytearray(b" " * 256)
    for char in string.ascii_letters + "_":
        table[ord(char)] = ord("x" if char.lower() in "abcdefprtu" else char.lower())
    for char in string.digits:
        table[ord(char)] = ord("0")
    return bytes(table)


_SHAPE = _shape_table()
_LETTER_LED = lazy_pattern(
    rb" x(?:[x0]{7}|(?:"  # a UUID or hex run | a keyword and the non-word character after it
    + b"|".join(word.encode().translate(_SHAPE)[1:] for word in _COUNTER_WORDS)
    + rb")(?= ))"
)


def _letter_led_starts(text: str) -> list[int]:
    if not text.isascii():
        for folded, letter in _FOLDS:
            text = text.replace(folded, letter)
    shape = b" " + text.encode("ascii", "replace").translate(_SHAPE)
    return [match.start() for match in _LETTER_LED().finditer(shape)]


def _sub_spans(text: str) -> str:
    """``_ALL_SPANS().sub("#", text)``, an order of magnitude faster."""
    digit_led = _DIGIT_LED()
    letter_led: list[re.Match[str]] = []
    starts = _letter_led_starts(text)
    if starts:
        all_spans = _ALL_SPANS()
        letter_led = [m for s in starts if (m := all_spans.match(text, s))]
    if not letter_led:
        return digit_led.sub("#", text)
    # Rare: merge both kinds of match, left to right, as one scan would take them. ``digit`` is
    # always the first digit-led match at or after ``done``.
    pieces: list[str] = []
    done = 0
    digit = digit_led.search(text)
    for letter in (*letter_led, None):
        while digit is not None and (letter is None or digit.start() < letter.start()):
            pieces += (text[done : digit.start()], "#")
            done = digit.end()
            digit = digit_led.search(text, done)
        if letter is not None and letter.start() >= done:
            pieces += (text[done : letter.start()], "#")
            done = letter.end()
            if digit is not None and digit.start() < done:
                digit = digit_led.search(text, done)
    pieces.append(text[done:])
    return "".join(pieces)


_NON_ASCII_DIGIT = lazy_pattern(r"\d")


def has_digit(text: str) -> bool:
    """Whether ``text`` has a decimal digit (what ``\\d`` matches), as a quick pre-test.

    ``re`` tries a pattern at every position at ~10 ns a character; ten substring tests run at
    memory speed, so text without digits (most prose) skips the regexes entirely.
    """
    if (
        "0" in text or "1" in text or "2" in text or "3" in text or "4" in text
        or "5" in text or "6" in text or "7" in text or "8" in text or "9" in text
    ):
        return True
    # ``\d`` also matches non-ASCII decimal digits (Arabic-Indic, fullwidth ...).
    return not text.isascii() and _NON_ASCII_DIGIT().search(text) is not None


# Pattern -> ASCII words, one of which every match contains. ``re`` scans at 10-30 ns a
# character; substring tests run at memory speed, so ASCII text without any of the words skips
# the pattern. (Non-ASCII text always runs it: case-insensitive matching folds some non-ASCII
# letters onto ASCII ones.)
_NEEDLES: dict[re.Pattern[str], tuple[str, ...]] = {}


def require_any(pattern: re.Pattern[str], words: Iterable[str]) -> re.Pattern[str]:
    """Declare that every match of ``pattern`` contains one of ``words`` (lowercase ASCII;
    compared case-insensitively when the pattern ignores case), so :func:`mask_volatile` can
    skip text with none of them. Returns ``pattern``."""
    needles = tuple(words)
    if not needles or any(not w or not w.isascii() or w != w.lower() for w in needles):
        raise ValueError("required words must be non-empty lowercase ASCII")
    _NEEDLES[pattern] = needles
    return pattern


def _may_match(pattern: re.Pattern[str], text: str) -> bool:
    needles = _NEEDLES.get(pattern)
    if needles is None or not text.isascii():
        return True
    if pattern.flags & re.IGNORECASE:
        text = text.lower()
    for needle in needles:  # noqa: SIM110 (a generator costs more than these short scans)
        if needle in text:
            return True
    return False


def mask_volatile(
    text: str, extra: tuple[re.Pattern[str], ...] = (), *, builtin: bool = True
) -> str:
    """Replace every volatile span of ``text`` with ``#``: the built-in spans (unless
    ``builtin`` is false) and the matches of a profile's ``extra`` patterns."""
    for pattern in extra:
        if _may_match(pattern, text):
            text = pattern.sub("#", text)
    if not builtin or not has_digit(text):
        return text
    return _sub_spans(text)


_MAX_DEPTH = 64
_MAX_NODES = 50_000
_LONG_TEXT = 256


def mask_value(
    value: Any, extra: tuple[re.Pattern[str], ...] = (), *, builtin: bool = True
) -> Any:
    """A copy of a JSON-like value with volatile spans masked in every string leaf.

    Cycles, values past a modest depth or node budget, and anything that is not a
    str/list/tuple/dict are returned as they are: masking is a refinement, never a reason to fail
    or to spend unbounded time.
    """
    if type(value) is str:  # most tool results: skip the walk's set-up
        return mask_volatile(value, extra, builtin=builtin)
    budget = [_MAX_NODES]
    # A long string may be shared by thousands of references: mask it once.
    masked: dict[int, tuple[str, str]] = {}

    def mask(text: str) -> str:
        if len(text) <= _LONG_TEXT:
            return mask_volatile(text, extra, builtin=builtin)
        done = masked.get(id(text))
        if done is None or done[0] is not text:
            done = masked[id(text)] = (text, mask_volatile(text, extra, builtin=builtin))
        return done[1]

    try:
        return _mask(value, 0, set(), budget, mask)
    except Exception:  # a value whose own methods raise (a __class__ property ...)
        return value


def _mask(value: Any, depth: int, stack: set[int], budget: list[int],
          mask: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return mask(value if type(value) is str else str.__str__(value))
    if not isinstance(value, (dict, list, tuple)) or depth >= _MAX_DEPTH or budget[0] <= 0:
        return value
    if id(value) in stack:
        return value
    budget[0] -= 1
    stack.add(id(value))
    try:
        # As stored (dict.items, list/tuple iteration): a subclass's items() or __iter__ could
        # go on forever.
        if isinstance(value, dict):
            return {k: _mask(v, depth + 1, stack, budget, mask) for k, v in dict.items(value)}
        items = value if type(value) is list or type(value) is tuple else (
            list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value))
        return [_mask(v, depth + 1, stack, budget, mask) for v in items]
    finally:
        stack.discard(id(value))
