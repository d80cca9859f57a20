"""Token estimates for tool output inside loops: characters / 4, or a real tokenizer.

``chars`` (the default) needs nothing and counts only characters, so it works on a scan that
kept no outputs. ``tiktoken`` (optional extra ``tokenizer``) counts the tokens of the output
text itself; ``tiktoken:NAME`` picks the encoding (default :data:`DEFAULT_ENCODING`).
tiktoken downloads an encoding's file on first use and caches it (``TIKTOKEN_CACHE_DIR``), so
offline it works only with an encoding cached before; otherwise :func:`token_estimator` raises
:class:`TokenizerError` saying so, before any transcript is read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ...base.errors import TokenizerError
from ..scan import CallTrace

__all__ = ["TokenizerError", "token_estimator"]

#: The usual rule of thumb for English text and code with OpenAI and Anthropic tokenizers.
CHARS_PER_TOKEN = 4
#: The encoding of OpenAI's current models (GPT-4o and later).
DEFAULT_ENCODING = "o200k_base"
#: The ``--tokenizer`` choices (``tiktoken:NAME`` also names an encoding).
TOKENIZERS = ("chars", "tiktoken")


class TokenEstimate(Protocol):
    """Tokens of the tool output of calls ``start..end`` (inclusive ranges) of one trace."""

    @property
    def label(self) -> str:
        """How the numbers were made, for the report ("characters / 4", "tiktoken o200k_base")."""
        ...

    def tokens(self, trace: CallTrace, ranges: Iterable[tuple[int, int]]) -> int:
        """The tokens of the output of the calls in ``ranges`` (each ``(start, end)``)."""
        ...


class CharsEstimate:
    """Characters / :data:`CHARS_PER_TOKEN`, rounded up: the output's length is all it needs."""

    label = f"characters / {CHARS_PER_TOKEN}"

    def tokens(self, trace: CallTrace, ranges: Iterable[tuple[int, int]]) -> int:
        """The ranges' output characters over :data:`CHARS_PER_TOKEN`, rounded up."""
        chars = sum(sum(trace.chars[start:end + 1]) for start, end in ranges)
        return -(-chars // CHARS_PER_TOKEN)


class TiktokenCount:
    """Tokens counted with a tiktoken encoding (each call's output text encoded once)."""

    def __init__(self, encode: Callable[[str], Any], encoding: str) -> None:
        self._encode = encode
        self.label = f"tiktoken {encoding}"
        self._trace: CallTrace | None = None
        self._counts: dict[int, int] = {}

    def tokens(self, trace: CallTrace, ranges: Iterable[tuple[int, int]]) -> int:
        """The ranges' output tokens, each call's output encoded once (needs the outputs kept)."""
        if trace.outputs is None:
            raise ValueError("counting tokens needs the calls' outputs: scan with keep_outputs=True")
        if trace is not self._trace:  # a report asks about one transcript at a time
            self._trace, self._counts = trace, {}
        total = 0
        for start, end in ranges:
            for index in range(start, end + 1):
                count = self._counts.get(index)
                if count is None:
                    count = self._counts[index] = len(self._encode(trace.output(index) or ""))
                total += count
        return total


def token_estimator(spec: str = "chars") -> TokenEstimate:
    """The estimate ``--tokenizer spec`` names: ``chars``, ``tiktoken`` or ``tiktoken:NAME``."""
    name, _, encoding = spec.partition(":")
    if name == "chars" and not encoding:
        return CharsEstimate()
    if name == "tiktoken":
        return _tiktoken(encoding or DEFAULT_ENCODING)
    raise TokenizerError(f"unknown tokenizer {spec!r}: expected chars, tiktoken or tiktoken:ENCODING")


def _tiktoken(encoding: str) -> TiktokenCount:
    try:
        tiktoken = importlib.import_module("tiktoken")
    except ImportError as exc:
        raise TokenizerError(
            f"--tokenizer tiktoken needs the tiktoken package ({exc}); install the "
            "'tokenizer' extra (pip install '.[tokenizer]' in a clone), or use the default "
            "estimate, characters / 4") from None
    try:
        loaded = tiktoken.get_encoding(encoding)
        loaded.encode_ordinary("loopwarden")  # some versions load the file lazily
    except Exception as exc:  # unknown name, no network, a damaged cache: all say the same
        raise TokenizerError(
            f"cannot load the tiktoken encoding {encoding!r}: {type(exc).__name__}: {exc}. "
            "tiktoken downloads an encoding on first use; offline, put a cached copy in "
            "TIKTOKEN_CACHE_DIR, or use the default estimate, characters / 4") from None
    # encode_ordinary: transcripts may contain "<|endoftext|>", which encode() refuses.
    return TiktokenCount(loaded.encode_ordinary, encoding)
