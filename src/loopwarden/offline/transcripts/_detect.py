"""Recognise a transcript's format from its content, never from its file name.

Order of evidence, cheapest first:
1. the Markdown export's header;
2. the first complete lines, when they are JSON objects (JSONL formats, compact documents);
3. the first 64 KB of a larger JSON document, cut back to its last complete value and closed,
   which shows the document's leading structure (top-level keys, first events);
4. when that is still inconclusive (a long leading value), the whole first line of a JSONL
   file or the whole document, up to a size cap.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from loopwarden.offline.transcripts._common import not_regular_reason, open_regular
from loopwarden.offline.transcripts._formats import (
    DOCUMENT_SNIFFERS,
    HEAD_SNIFFERS,
    RECORD_SNIFFERS,
)

from ...base.log import get_logger

logger = get_logger("loopwarden.transcripts")

HEAD_BYTES = 64 * 1024
#: Whole-document fallback limit; larger files must be recognisable from their head.
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
_MAX_LINES = 20

# A string, a structural character, or a lone quote: a string the head cut short.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]|"', re.DOTALL)
_CLOSERS = {"[": "]", "{": "}"}
_UNDECODABLE = re.compile("[\udc80-\udcff]")
# NUL runs that fill a line or end the data: space preallocated but never written, or the
# tail a crash left. They say nothing about the format, unlike NULs inside binary data.
_UNWRITTEN = re.compile(rb"(?:^|(?<=\n))\x00+(?=\n|$)|\x00+$")
_DAMAGE_ALLOWANCE = 8
_DAMAGED = re.compile("[\x00\udc80-\udcff]")


def detect_format(path: str | Path) -> str | None:
    """The format name of the transcript at ``path`` (see ``FORMATS``), or None.

    Only regular files are opened: a FIFO, socket or device is None at once.
    """
    path = Path(path)
    if not_regular_reason(path) is not None:
        return None
    try:
        with open_regular(path) as fh:
            head = fh.read(HEAD_BYTES)
            whole = not fh.read(1)
        text = _decode(head)
        if text is None:
            return None
        found = _from_head(text, whole)
        if found is None and not whole:
            found = _from_document(path)
        return found
    except (OSError, ValueError, RecursionError):
        return None
    except Exception:  # a sniffer bug must not break a scan; the file is just unrecognised
        logger.debug("format detection failed for %s", path, exc_info=True)
        return None


def _decode(head: bytes) -> str | None:
    """The head as text, or None for binary data.

    A few NUL or undecodable bytes (a cut multi-byte character, one line corrupted by a crash)
    do not make a transcript binary, nor do whole lines of NULs (a crash's unwritten tail,
    which is left out); other NULs at the very start or a high share of them do.
    """
    if b"\x00" in head:
        head = _UNWRITTEN.sub(b"", head)
    if b"\x00" in head[:1024]:
        return None
    try:
        text = head.decode("utf-8")
        undecodable = 0  # the common case, without scanning 64 KB for surrogates
    except UnicodeDecodeError:
        # surrogateescape turns each undecodable byte into a lone surrogate, which valid UTF-8
        # never produces (unlike U+FFFD, which real tool output does contain).
        text = head.decode("utf-8", errors="surrogateescape")
        undecodable = len(_UNDECODABLE.findall(text))
    # A small allowance on top of the 1% share, so that a short file survives one bad run.
    if undecodable + text.count("\x00") > len(text) // 100 + _DAMAGE_ALLOWANCE:
        return None
    return text


def _from_head(text: str, whole: bool) -> str | None:
    for name, sniff in HEAD_SNIFFERS:
        if sniff(text[:4096]):
            return name
    body = _past_damaged_lines(text.lstrip("\ufeff \t\r\n"))
    if not body.startswith(("{", "[")):
        return None
    records = _leading_records(body, whole)
    first = next(records, None)
    if first is not None:
        # Lazily: most files are told by their first line, and the reader parses them again.
        return _classify_records(itertools.chain((first,), records))
    if whole:
        found = _classify_text(body)
        if found is not None:
            return found  # else a truncated document: its leading part still shows the format
    prefix = _closed_prefix(body)
    return None if prefix is None else _classify_text(prefix)


def _past_damaged_lines(body: str) -> str:
    """``body`` without leading lines of junk bytes (which the JSONL readers skip too)."""
    while not body.startswith(("{", "[")):
        line, newline, rest = body.partition("\n")
        if not newline or not _DAMAGED.search(line):
            break
        body = rest.lstrip("\ufeff \t\r\n")
    return body


def _leading_records(body: str, whole: bool) -> Iterator[dict[str, Any]]:
    """The first lines that are complete JSON objects (none unless the file is JSONL-like).

    Damaged lines (undecodable bytes, NULs) are passed over, as the readers report and skip
    them; any other line that is not a JSON object ends the records.
    """
    lines = body.split("\n", _MAX_LINES * 4)
    if not whole or len(lines) > _MAX_LINES * 4:
        lines.pop()  # may be cut short, or is the unsplit rest
    count = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            value = _loads_line(line)
        except (ValueError, RecursionError):
            if _DAMAGED.search(line):
                continue
            return
        if not isinstance(value, dict):
            return
        yield value
        count += 1
        if count >= _MAX_LINES:
            return


def _loads_line(line: str) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        # What the readers accept too: NaN, and escapes of lone surrogates ("\\ud83d").
        return json.loads(line)


def _classify_records(records: Iterable[dict[str, Any]]) -> str | None:
    for record in records:
        for name, sniff in RECORD_SNIFFERS:
            if sniff(record):
                return name
    return None


def _classify_text(text: str) -> str | None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            value = json.loads(text)  # NaN and friends
        except ValueError:
            return None
    return _classify_document(value)


def _classify_document(value: Any) -> str | None:
    for name, sniff in DOCUMENT_SNIFFERS:
        if sniff(value):
            return name
    if isinstance(value, dict):
        return _classify_records([value])
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return _classify_records([item for item in value[:_MAX_LINES] if isinstance(item, dict)])
    return None


def _closed_prefix(body: str) -> str | None:
    """Cut a JSON text that was truncated mid-way back to valid JSON.

    Everything up to the last comma outside strings is complete, so cutting there and closing
    the brackets still open at that point yields a document with the same leading structure.
    """
    stack: list[str] = []
    cut: tuple[int, str] | None = None
    for match in _TOKENS.finditer(body):
        token = match.group()
        if token == '"':
            break
        if token in _CLOSERS:
            stack.append(_CLOSERS[token])
        elif token in ("]", "}"):
            if not stack:
                return None
            stack.pop()
        elif token == ",":
            cut = (match.start(), "".join(reversed(stack)))
    if cut is None:
        return None
    end, closers = cut
    return body[:end] + closers


def _from_document(path: Path) -> str | None:
    """Last resort for a file whose first value is longer than the head: read it whole."""
    if path.stat().st_size > MAX_DOCUMENT_BYTES:
        return None
    with open_regular(path) as fh:
        first = fh.readline()
        try:
            value = orjson.loads(first)
        except orjson.JSONDecodeError:
            value = None  # a pretty-printed document: its first line is a bare bracket
        if isinstance(value, dict):
            return _classify_records([value])
        fh.seek(0)
        return _classify_text(fh.read().decode("utf-8", errors="replace"))
