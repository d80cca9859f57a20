"""The fast volatile-span masking gives exactly the output of the single-alternation substitution.

Masked text feeds result hashes and stored states, so the output of ``mask_volatile`` may not
change by a single character, only its speed.
"""

from __future__ import annotations

import operator
import re
import string
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loopwarden import MISSING, LoopDetectionConfig, LoopGuard
from loopwarden.fingerprint import volatile
from loopwarden.fingerprint.volatile import has_digit, mask_volatile
from loopwarden.offline.transcripts import iter_transcript_files, read_transcript

pytestmark = pytest.mark.slow

# The reference, verbatim from before the fast path: one alternation, tried at every position.
_REFERENCE = re.compile(
    "|".join(f"(?:{p})" for p in (
        r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?",
        r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
        r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{16,}\b",
        r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,9})?\b",
        r"\b1[5-9]\d{8}(?:\d{3})?(?:\.\d+)?\b",
        r"\b\d+\s?(?:seconds?|minutes?|hours?|s|m|h)\s+ago\b",
        r"\b(?:pid|ppid|elapsed|uptime|duration|took|age|runtime|attempt|retry)\b[\s#:=]*\d+"
        r"(?:\.\d+)?",
        r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds?|m|mins?|minutes?|h|hrs?|hours?)\b",
    )),
    re.IGNORECASE,
)


def reference_mask(text: str, extra: tuple[re.Pattern[str], ...] = (), builtin: bool = True) -> str:
    text = mask_volatile(text, extra, builtin=False)  # the extra patterns' code is unchanged
    if not builtin or not has_digit(text):
        return text
    return _REFERENCE.sub("#", text)


def test_the_public_patterns_are_the_reference_alternatives() -> None:
    assert "|".join(f"(?:{p.pattern})" for p in volatile.VOLATILE_PATTERNS) == _REFERENCE.pattern
    assert all(p.flags & re.IGNORECASE for p in volatile.VOLATILE_PATTERNS)


# ---------------------------------------------------------------------------------------------
# Generated text: whole and broken spans (drawn from the alternatives without their boundaries,
# with Unicode or ASCII digits and spaces) glued to words and characters where Unicode matching
# differs from ASCII: non-ASCII digits and spaces, letters that fold onto ASCII ones (İ ı ſ K),
# µ/μ/Μ, word and non-word symbols, a lone surrogate.

_SPAN_SHAPES = [
    r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?",
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    r"[0-9a-fA-F]{7,40}",
    r"\d[0-9a-fA-F]{7,20}",
    r"\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,9})?",
    r"1[5-9]\d{8}(?:\d{3})?(?:\.\d+)?",
    r"\d+\s?(?:seconds?|minutes?|hours?|s|m|h)\s+ago",
    r"(?:pid|ppid|elapsed|uptime|duration|took|age|runtime|attempt|retry)[\s#:=]*\d+(?:\.\d+)?",
    r"\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds?|m|mins?|minutes?|h|hrs?|hours?)",
]
_KEYWORDS = ["pid", "ppid", "elapsed", "uptime", "duration", "took", "age", "runtime", "attempt",
             "retry"]
_UNITS = ["ns", "us", "µs", "μs", "Μs", "ms", "s", "sec", "secs", "second", "seconds", "m", "min",
          "mins", "minute", "minutes", "h", "hr", "hrs", "hour", "hours"]


def _with_folds(words: list[str]) -> list[str]:
    return sorted({word.replace(ascii_letter, folded) for word in words
                   for folded, ascii_letter in (("İ", "i"), ("ı", "i"), ("ſ", "s"), ("\u212a", "k"))})


_WORDS = [*_with_folds(_KEYWORDS), *_with_folds(_UNITS), "ago", "deadbeef", "message",
          "abcdefab-abcd-abcd-abcd-abcdefabcdef"]
_CHARS = [*"0123456789abcdefABCDEF:-.,+ #=_\n\tTZtzxg", "٣", "３", "𝟘", "\u3000", "\xa0", "\x1c",
          "İ", "ı", "ſ", "\u212a", "é", "中", "→", "─", "?", "\ud800"]

_token = st.one_of(
    *(st.from_regex(re.compile(shape, re.IGNORECASE), fullmatch=True) for shape in _SPAN_SHAPES),
    *(st.from_regex(re.compile(shape.replace(r"\d", "[0-9]").replace(r"\s", " "),
                               re.IGNORECASE), fullmatch=True) for shape in _SPAN_SHAPES),
    st.builds(operator.add, st.sampled_from(_with_folds(_KEYWORDS)),
              st.from_regex(r"[\s#:=]*\d+(?:\.\d+)?", fullmatch=True)),
    st.builds(lambda number, space, unit, ago: number + space + unit + ago,
              st.from_regex(r"\d+(?:\.\d+)?", fullmatch=True), st.sampled_from(["", " ", "\u3000"]),
              st.sampled_from(_with_folds(_UNITS)), st.sampled_from(["", " ago", "  AGO"])),
    st.sampled_from(_WORDS),
    st.sampled_from(_CHARS),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=3),
)
_glue = st.sampled_from(["", "", " ", "\n", ":", "-", "=", "→", "中", "_"])
_texts = st.lists(st.tuples(_glue, _token), max_size=10).map(lambda parts: "".join(sum(parts, ())))
_SETTINGS = settings(max_examples=400, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@_SETTINGS
@given(_texts)
@example("abcdefab-abcd-abcd-abcd-abcdefabcdef took 3")  # a UUID without a digit
@example("pid 7 elapsed: 3.5 took=12ms age 4 minutes ago attempt#2 retry 1")
@example("→deadbeef0123456789 中deadbeef0123456789 ٣ 2024-01-02T03:04:05.678+05:30")
@example("x1700000000 1700000000123.5 12:34:56,789 3 ſec 4 Μs 5 MİNS 6 hours\u3000ago")
@example("PıD 1 ELAPſED 2 TOO\u212a 3 took age 5 1:02:03 12ab34cd56ef78ab90cd 1a2b3c4d-1a2b-1a2b")
@example("٣deadbeefdeadbeef0 ٣1234567-1234-1234-1234-123456789012 ab 1234567-1234-1234-1234-1")
@example("0123456789abcdef a123456789abcdef 1700000000 2700000000")
def test_mask_volatile_is_the_single_alternation(text: str) -> None:
    assert mask_volatile(text) == reference_mask(text)
    # The fast substitution on its own, without the digit pre-test in front of it.
    assert volatile._sub_spans(text) == _REFERENCE.sub("#", text)


def test_only_the_listed_letters_fold_onto_ascii_ones() -> None:
    # Letter-led spans are located on an ASCII shape of the text, after replacing the non-ASCII
    # letters that case-insensitive matching equates with ASCII ones: they must all be listed.
    non_ascii = "".join(map(chr, range(0x80, sys.maxunicode + 1)))
    folding = set(re.findall("[a-z]", non_ascii, re.IGNORECASE))
    assert {(char, next(letter for letter in string.ascii_lowercase
                        if re.fullmatch(letter, char, re.IGNORECASE)))
            for char in folding} == set(volatile._FOLDS)
    assert {word[0] for word in volatile._COUNTER_WORDS} <= set("abcdefprtu")


# ---------------------------------------------------------------------------------------------
# Every text mask_volatile sees when the shared corpus is replayed, default and early preset.

def test_mask_volatile_is_the_single_alternation_on_the_corpus(corpus: Path, monkeypatch: Any) -> None:
    calls = []
    for path in iter_transcript_files([corpus / "normalized"]):
        for call in read_transcript(path):
            outcome = call.error if call.error is not None else call.result
            if outcome is not MISSING:
                calls.append((call.tool_name, call.args, outcome))

    seen: set[tuple[str, tuple[re.Pattern[str], ...], bool]] = set()

    def spy(text: str, extra: tuple[re.Pattern[str], ...] = (), *, builtin: bool = True) -> str:
        seen.add((text, extra, builtin))
        return mask_volatile(text, extra, builtin=builtin)

    for name, module in list(sys.modules.items()):  # wherever the function was imported
        if name.startswith("loopwarden") and getattr(module, "mask_volatile", None) is mask_volatile:
            monkeypatch.setattr(module, "mask_volatile", spy)
    for config in (LoopDetectionConfig(enabled=True),
                   LoopDetectionConfig(enabled=True, preset="early")):
        detector = LoopGuard(config).detector
        for tool, args, result in calls:
            detector.observe(detector.fingerprint(tool, args), args, result, MISSING)
    monkeypatch.undo()

    assert len(seen) > 1000
    different = [text for text, extra, builtin in seen
                 if mask_volatile(text, extra, builtin=builtin) != reference_mask(text, extra, builtin)]
    assert not different, different[:3]
