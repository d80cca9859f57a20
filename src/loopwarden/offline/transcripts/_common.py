"""Plumbing shared by the readers: problem reporting, JSON loading, call/result pairing."""

from __future__ import annotations

import json
import os
import stat
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from loopwarden.base.types import MISSING, ToolCall

from ...base.errors import CallbackError, NotRegularFileError
from ...base.log import get_logger

logger = get_logger("loopwarden.transcripts")

#: A file that is broken everywhere (binary junk read with an explicit format) would otherwise
#: flood the caller with one problem per line.
MAX_PROBLEMS_PER_FILE = 50

_BOM = b"\xef\xbb\xbf"
# Blank for our purposes: whitespace, and NUL bytes (space preallocated but never written,
# or left by a crash mid-write).
_BLANK = b" \t\r\n\x00"
_NUL = b"\x00"

_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a folder"),
)


def not_regular_reason(path: Path) -> str | None:
    """Why ``path`` must not be read as a transcript, or None for a regular file.

    Decided from ``stat`` alone, without opening: opening a FIFO blocks until a writer
    appears, and opening a device can have effects of its own.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "dangling symbolic link" if os.path.islink(path) else "no such file"
    except OSError as exc:
        return f"cannot read file: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _SPECIAL_KINDS if test(mode)), "a special file")
    return f"not a regular file: {kind}"


def open_regular(path: Path) -> IO[bytes]:
    """Open a regular file for binary reading; :class:`NotRegularFileError` for anything else.

    The check comes before the open (see :func:`not_regular_reason`), and the open itself is
    non-blocking and re-checked, so a file swapped for a FIFO in between cannot hang a scan.
    """
    reason = not_regular_reason(path)
    if reason is not None:
        raise NotRegularFileError(reason)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFileError("not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


@dataclass(frozen=True, slots=True)
class ReadProblem:
    """Something in a transcript that could not be read; the reader skipped it and went on."""

    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"


ProblemCallback = Callable[[ReadProblem], None]


class Reporter:
    """Sends problems of one file to the caller's callback, or to the log, with a cap."""

    __slots__ = ("_sink", "count", "path")

    def __init__(self, path: str, sink: ProblemCallback | None) -> None:
        self.path = path
        self._sink = sink
        self.count = 0

    def __call__(self, line: int | None, message: str) -> None:
        self.count += 1
        if self.count <= MAX_PROBLEMS_PER_FILE:
            self._emit(ReadProblem(self.path, line, message))

    def finish(self) -> None:
        """Report how many problems the cap swallowed, once, at the end of the file."""
        hidden = self.count - MAX_PROBLEMS_PER_FILE
        if hidden > 0:
            self._emit(ReadProblem(self.path, None, f"{hidden} more problems not reported"))

    def _emit(self, problem: ReadProblem) -> None:
        if self._sink is None:
            logger.warning("%s", problem)
            return
        try:
            self._sink(problem)
        except Exception as exc:
            raise CallbackError(exc) from exc


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        # orjson refuses NaN/Infinity, which Python's json writes by default.
        return json.loads(data.decode("utf-8"))


def _describe(exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply"
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}"
    return f"invalid JSON ({exc})"


def iter_json_lines(path: Path, report: Reporter) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for each JSON object line; report and skip the others."""
    loads = orjson.loads
    with open_regular(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                obj = loads(raw)  # the hot path: one C call per line
            except orjson.JSONDecodeError:
                obj = _slow_line(raw, lineno, report)
                if obj is None:
                    continue
            if type(obj) is not dict:
                report(lineno, f"expected a JSON object, got {type(obj).__name__}")
                continue
            yield lineno, obj


def _slow_line(raw: bytes, lineno: int, report: Reporter) -> Any:
    """Decode a line orjson refused: blank, BOM, NaN, or broken (reported; None)."""
    if lineno == 1 and raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
    if not raw.strip():
        return None
    try:
        return _loads(raw)
    except (ValueError, RecursionError) as exc:
        report(lineno, _damage(raw) or _describe(exc))
        return None


def _damage(raw: bytes) -> str | None:
    """What is physically wrong with a line, when it is more than a JSON syntax error."""
    if _NUL in raw:
        if not raw.strip(_BLANK):
            return f"{raw.count(_NUL)} NUL bytes (space never written, e.g. after a crash)"
        return "NUL bytes in the line (cut short by a crash?)"
    return None


def _undamaged(raw: bytes) -> bool:
    """False for a line with NUL bytes or invalid UTF-8: it says nothing about the format."""
    if _NUL in raw:
        return False
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def first_line_is_object(path: Path) -> bool:
    """True for JSONL-style files: the first non-blank line alone is a JSON object.

    A pretty-printed document starts with a bare ``[`` or ``{`` line and answers False.
    Damaged lines (NUL bytes, invalid UTF-8) are passed over: the next line decides.
    """
    with open_regular(path) as fh:
        for raw in fh:
            if not raw.strip(_BLANK):
                continue
            try:
                return type(_loads(raw)) is dict
            except (ValueError, RecursionError):
                if _undamaged(raw):
                    return False
    return False


def read_lines_or_document(
    path: Path, report: Reporter,
    lines: Callable[[Path, Reporter], Iterator[ToolCall]],
    document: Callable[[Any, Reporter], Iterator[ToolCall]],
) -> Iterator[ToolCall]:
    """The calls of a format saved either as JSONL (``lines``) or as one JSON document."""
    if first_line_is_object(path):
        yield from lines(path, report)
        return
    value = load_json_document(path, report)
    if value is not MISSING:
        yield from document(value, report)


def load_json_document(path: Path, report: Reporter) -> Any:
    """Parse a whole-file JSON document; report and return MISSING when it is not one.

    An empty file is an empty transcript, not a broken one: MISSING without a problem. A tail
    of NUL bytes (a crash, a preallocated file) is cut off and invalid UTF-8 bytes become
    U+FFFD, each reported, so that the rest of the document is still read.
    """
    with open_regular(path) as fh:
        data = fh.read()
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    if not data.strip():
        return MISSING
    data = _salvage(data, report)
    if not data.strip():
        return MISSING
    try:
        return _loads(data)
    except (ValueError, RecursionError) as exc:
        line = exc.lineno if isinstance(exc, json.JSONDecodeError) else None
        report(line, _describe(exc))
        return MISSING


def _salvage(data: bytes, report: Reporter) -> bytes:
    """The readable part of a damaged document (unchanged when nothing is damaged)."""
    body = data.rstrip(_BLANK)
    if len(body) < len(data.rstrip()):
        start = data.index(_NUL, len(body))
        report(data.count(b"\n", 0, start) + 1,
               f"{data.count(_NUL, start)} NUL bytes at the end ignored "
               "(space never written, e.g. after a crash)")
        data = body
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        report(data.count(b"\n", 0, exc.start) + 1,
               "invalid UTF-8 bytes replaced with U+FFFD")
        data = data.decode("utf-8", errors="replace").encode("utf-8")
    return data


def parse_json_args(raw: Any) -> Any:
    """Decode function-call arguments that arrive as a JSON string; keep anything else as is.

    Arguments that are not valid JSON (a model's truncated output) stay the raw string, so two
    identical broken calls still look identical to the detectors.
    """
    if not isinstance(raw, str):
        return {} if raw is None else raw
    if not raw.strip():
        return {}
    try:
        return _loads(raw.encode("utf-8"))
    except (ValueError, RecursionError):
        return raw


class _Slot:
    __slots__ = ("call", "done")

    def __init__(self, call: ToolCall, done: bool) -> None:
        self.call = call
        self.done = done


class CallQueue:
    """Holds calls in call order until their results arrive, pairing results by call id.

    A call is released once it and every call before it are settled, so the output keeps call
    order while memory stays bounded by the calls of one file. Two open calls may share an id
    (some providers reuse them); results then settle them oldest first.
    """

    __slots__ = ("_order", "_pending", "_reused")

    def __init__(self) -> None:
        self._order: deque[_Slot] = deque()
        self._pending: dict[str, _Slot] = {}  # oldest open call per key
        self._reused: dict[str, deque[_Slot]] = {}  # younger open calls with the same key

    def add(self, call: ToolCall, *, settled: bool = False, key: str | None = None) -> None:
        """Queue a call; an open call is settled later by ``key`` (default: its call id)."""
        slot = _Slot(call, settled)
        self._order.append(slot)
        if key is None:
            key = call.call_id
        if settled or key is None:
            return
        if key in self._pending:
            self._reused.setdefault(key, deque()).append(slot)
        else:
            self._pending[key] = slot

    def settle(self, key: str | None, result: Any, error: str | None) -> bool:
        """Attach a result to the oldest open call with ``key``; False when there is none."""
        slot = self._pending.pop(key, None) if key is not None else None
        if slot is None:
            return False
        if self._reused and key in self._reused:
            younger = self._reused[key]
            self._pending[key] = younger.popleft()
            if not younger:
                del self._reused[key]
        call = slot.call
        call.result = result
        call.error = error
        slot.done = True
        return True

    def ready(self) -> Iterator[ToolCall]:
        """Release the settled calls at the head of the queue."""
        order = self._order
        while order and order[0].done:
            yield order.popleft().call

    def drain(self) -> Iterator[ToolCall]:
        """Release everything; calls still open keep ``result=MISSING``."""
        self._pending.clear()
        self._reused.clear()
        while self._order:
            yield self._order.popleft().call


class Turns:
    """A conversation being read: its open calls and its user turns. A call's run id is the
    number of user prompts before it (``u<n>``), behind ``prefix`` when a file holds several
    conversations (``c2.u1``)."""

    __slots__ = ("prefix", "queue", "report", "user_turns")

    def __init__(self, report: Reporter, prefix: str) -> None:
        self.report = report
        self.prefix = prefix
        self.queue = CallQueue()
        self.user_turns = 0

    @property
    def run_id(self) -> str:
        """The run id of a call made now: ``<prefix>u<user turns>``."""
        return f"{self.prefix}u{self.user_turns}"

    def finish(self) -> Iterator[ToolCall]:
        """The calls still held, results or not, in call order."""
        yield from self.queue.drain()

