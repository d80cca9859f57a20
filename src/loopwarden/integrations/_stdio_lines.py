"""Newline-delimited JSON-RPC over pipes, for the MCP proxy: one framing for both directions.

:class:`LineFramer` cuts a byte stream into lines in time linear in its length (each byte is
scanned for ``\\n`` once) and in bounded memory: a line longer than the limit is not kept, only
its size and its first and last few KiB, from which :func:`peek` recovers its JSON-RPC id.
:func:`frames` runs a framer over any chunk source; :func:`thread_chunks` and
:class:`ThreadWriter` are the sources and sinks for the proxy's own stdin and stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import re
import select
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

__all__ = ["parse_size"]

#: Bytes asked for per read: what a pipe holds by default on Linux.
CHUNK = 1 << 16
#: How much of an over-long line is kept at each end to find its id.
PEEK = 1 << 12
#: Chunks read from stdin ahead of the proxy; bounds memory when the upstream reads slowly.
_READ_AHEAD = 4


@dataclass(slots=True)
class Overlong:
    """A line longer than the limit, of which only the ends were kept."""

    size: int  # bytes, the newline excluded
    limit: int
    head: bytes
    tail: bytes


class LineFramer:
    """Cuts a byte stream into lines (each with its ``\\n``; the last may lack one at EOF).

    Only new bytes are scanned, and a line is copied once when it is complete, so a 64 MiB
    message costs the same whether it arrives in one read or in a thousand. A line over
    ``limit`` bytes comes out as an :class:`Overlong`; memory stays below ``limit`` plus a chunk.
    """

    __slots__ = ("_buf", "_over", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buf = bytearray()
        self._over: Overlong | None = None

    def feed(self, chunk: bytes) -> list[bytes | Overlong]:
        """The lines ``chunk`` completes, in order (each with its ``\\n``; an over-long one as an
        :class:`Overlong`); the rest waits for the next chunk."""
        out: list[bytes | Overlong] = []
        start, end = 0, len(chunk)
        while (newline := chunk.find(b"\n", start)) >= 0:
            out.append(self._line(chunk, start, newline))
            start = newline + 1
        if start < end:
            self._partial(chunk, start, end)
        return out

    def close(self) -> list[bytes | Overlong]:
        """What is left at EOF: a last line without its newline."""
        if self._over is not None:
            over, self._over = self._over, None
            return [over]
        if self._buf:
            line, self._buf = bytes(self._buf), bytearray()
            return [line]
        return []

    def _line(self, chunk: bytes, start: int, newline: int) -> bytes | Overlong:
        if self._over is None and len(self._buf) + newline - start <= self.limit:
            if not self._buf:
                return chunk[start:newline + 1]  # the common case: one copy, or none
            self._buf += memoryview(chunk)[start:newline + 1]
            line, self._buf = bytes(self._buf), bytearray()
            return line
        self._partial(chunk, start, newline)
        over, self._over = self._over, None
        assert over is not None
        return over

    def _partial(self, chunk: bytes, start: int, end: int) -> None:
        """Bytes of a line whose end has not come yet (or is at ``end``)."""
        piece = memoryview(chunk)[start:end]
        over = self._over
        if over is None:
            if len(self._buf) + len(piece) <= self.limit:
                self._buf += piece
                return
            self._buf += piece
            buf, self._buf = self._buf, bytearray()  # freed: only the ends are kept
            self._over = Overlong(len(buf), self.limit, bytes(buf[:PEEK]), bytes(buf[-PEEK:]))
            return
        over.size += len(piece)
        tail = bytes(piece[-PEEK:])
        over.tail = tail if len(tail) == PEEK else (over.tail + tail)[-PEEK:]


async def frames(read: Callable[[], Awaitable[bytes]],
                 limit: int) -> AsyncIterator[bytes | Overlong]:
    """The lines of the stream ``read`` returns chunks of (``b""`` at EOF)."""
    framer = LineFramer(limit)
    while chunk := await read():
        for frame in framer.feed(chunk):
            yield frame
    for frame in framer.close():
        yield frame


# -- our own stdin and stdout ----------------------------------------------------------------


def thread_chunks(stream: BinaryIO) -> Callable[[], Awaitable[bytes]]:
    """Chunks of ``stream``, read by a thread (asyncio cannot read a pipe or console stdin
    portably: Windows), at most a few chunks ahead of the consumer, then ``b""`` at EOF."""
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes] = asyncio.Queue()
    credits = threading.Semaphore(_READ_AHEAD)
    read = _reader(stream)

    def run() -> None:
        try:
            while True:
                credits.acquire()
                chunk = read()
                if not chunk:
                    break
                loop.call_soon_threadsafe(chunks.put_nowait, chunk)
        except (OSError, ValueError):
            pass  # stdin closed under us: the same as EOF
        except RuntimeError:
            return  # the loop is closed: the proxy has finished
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(chunks.put_nowait, b"")

    threading.Thread(target=run, name="loopwarden-mcp-stdin", daemon=True).start()

    async def next_chunk() -> bytes:
        chunk = await chunks.get()
        if chunk:
            credits.release()
        return chunk

    return next_chunk


class ThreadWriter:
    """Writes whole messages to a stream from a thread of its own, in order: a slow client
    must not stall the event loop, and a write still blocked when the proxy exits must not
    hold up interpreter shutdown (a worker of asyncio's default executor would)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._write = _writer(stream)
        self._loop = asyncio.get_running_loop()
        self._jobs: queue.SimpleQueue[tuple[bytes, asyncio.Future[None]]] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="loopwarden-mcp-stdout", daemon=True).start()

    async def send(self, data: bytes) -> None:
        """Raises the write's error (BrokenPipeError when the client has gone)."""
        done: asyncio.Future[None] = self._loop.create_future()
        self._jobs.put((data, done))
        await done

    def _run(self) -> None:
        while True:
            data, done = self._jobs.get()
            error: BaseException | None = None
            try:
                self._write(data)
            except Exception as exc:
                error = exc
            try:
                self._loop.call_soon_threadsafe(_settle, done, error)
            except RuntimeError:
                return  # the loop is closed


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    if done.done():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)


def _reader(stream: BinaryIO) -> Callable[[], bytes]:
    """Reads the file descriptor directly when there is one: a daemon thread still blocked in
    a buffered read when the proxy exits would abort the interpreter at shutdown."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        read1 = getattr(stream, "read1", stream.read)
        return lambda: bytes(read1(CHUNK))

    def read() -> bytes:
        while True:
            try:
                return os.read(fd, CHUNK)
            except BlockingIOError:  # a parent that handed us a non-blocking pipe
                select.select([fd], [], [])

    return read


def _writer(stream: BinaryIO) -> Callable[[bytes], None]:
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        def write_stream(data: bytes) -> None:
            stream.write(data)
            stream.flush()
        return write_stream
    with contextlib.suppress(OSError, ValueError):
        stream.flush()  # anything written through the stream before us goes first

    def write_fd(data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                select.select([], [fd], [])

    return write_fd


# -- over-long messages ----------------------------------------------------------------------

_DECODER = json.JSONDecoder()
_scanstring: Callable[[str, int], tuple[str, int]] = getattr(json.decoder, "scanstring")  # noqa: B009
# The id as the last member of the root object (``{...,"id":5}``, the TypeScript SDK's order),
# optionally followed by "jsonrpc". Unescaped quotes in valid JSON always delimit strings, and
# no bracket may come between this id and the final brace, so a match is a root member.
_TAIL_ID = re.compile(
    rb'[{,][ \t\r\n]*"id"[ \t\r\n]*:[ \t\r\n]*(-?\d+|"(?:[^"\\]|\\.)*")[ \t\r\n]*'
    rb'(?:,[ \t\r\n]*"jsonrpc"[ \t\r\n]*:[ \t\r\n]*"2\.0"[ \t\r\n]*)?\}[ \t\r\n]*\Z'
)


def peek(line: Overlong) -> tuple[str | None, Any]:
    """What an over-long message is, from its ends only: ``"request"`` (has a method),
    ``"response"`` (has a result or an error) or None, and its id (None if not found)."""
    keys, request_id = _leading_members(line.head.decode("utf-8", "replace"))
    if request_id is None:
        match = _TAIL_ID.search(line.tail)
        if match:
            with contextlib.suppress(ValueError):
                request_id = json.loads(match.group(1))
    kind = "request" if "method" in keys else "response" if keys & {"result", "error"} else None
    return kind, request_id


def _leading_members(text: str) -> tuple[set[str], Any]:
    """The keys of the root object's first members (up to the first value the head cuts off),
    and the id among them."""
    keys: set[str] = set()
    request_id: Any = None
    i = _skip_ws(text, 0)
    if text[i:i + 1] != "{":
        return keys, None
    i += 1
    while True:
        i = _skip_ws(text, i)
        if text[i:i + 1] != '"':
            break
        try:
            key, i = _scanstring(text, i + 1)
        except ValueError:
            break
        i = _skip_ws(text, i)
        if text[i:i + 1] != ":":
            break
        keys.add(key)
        i = _skip_ws(text, i + 1)
        try:
            value, i = _DECODER.raw_decode(text, i)
        except (ValueError, RecursionError):
            break  # the value runs past the head
        if key == "id" and isinstance(value, (str, int)) and not isinstance(value, bool):
            request_id = value
        i = _skip_ws(text, i)
        if text[i:i + 1] != ",":
            break
        i += 1
    return keys, request_id


def _skip_ws(text: str, i: int) -> int:
    while text[i:i + 1] in (" ", "\t", "\r", "\n"):
        i += 1
    return i


_SIZE = re.compile(r"\s*(\d+)\s*(?:([kmg])i?b?)?\s*", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"67108864"``, ``"64M"``, ``"64MiB"``, ``"512k"``: a positive byte count (the
    suffixes are powers of 1024)."""
    match = _SIZE.fullmatch(text)
    if match is None or int(match.group(1)) <= 0:
        raise ValueError(f"not a positive size in bytes: {text!r} (e.g. 67108864, 64M, 512K)")
    shift = {"": 0, "k": 10, "m": 20, "g": 30}[(match.group(2) or "").lower()]
    return int(match.group(1)) << shift
