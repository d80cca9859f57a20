"""Text that can always be written out: transcripts and file names may carry lone surrogates.

They come from JSON escapes such as ``"\\ud83d"`` (half an emoji) and from file names that are
not UTF-8 (Python decodes the bytes as ``\\udc80``-``\\udcff``); neither can be encoded as
UTF-8, so printing them, writing them to a file or drawing them would raise.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["json_text", "printable"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte of a file name
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with each lone surrogate spelled as an escape (``\\xff``, ``\\ud83d``)."""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(_escape, text)


def json_text(data: Any, **options: Any) -> str:
    """``json.dumps(data, ensure_ascii=False)`` whose lone surrogates are ``\\uXXXX`` escapes.

    The output is valid UTF-8 and reads back to exactly the same strings (an undecodable file
    name stays the same name), while all other text stays unescaped.
    """
    text = json.dumps(data, ensure_ascii=False, **options)
    if _SURROGATE.search(text) is None:
        return text
    # Lone surrogates occur only inside JSON strings, where "\udcff" is a valid escape.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
