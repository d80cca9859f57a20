"""The MCP proxy: a stdio MCP server that fronts a real one and guards every ``tools/call``.

The proxy works on MCP's JSON-RPC messages instead of re-serving the upstream through an SDK
server, so everything it does not guard passes through untouched: the upstream's tool list with
its schemas, resources, prompts, server-to-client requests (sampling, elicitation),
notifications, and every protocol revision either side speaks. Only two things change:

- a ``tools/call`` the guard blocks never reaches the upstream; the client gets a tool result
  with ``isError: true`` and the loop message instead;
- a warned call's result gets the warning note appended as one more text block.

One proxy process serves one client connection, and that connection is the guard's session.
A client that knows its agent's run can send it in the request's ``_meta`` (``runId``,
``run_id`` or ``loopwarden/runId``); a model-level tool call id may come as ``toolCallId``.

:class:`McpLoopGuard` is the transport-free translation; :func:`run_proxy` wires it between our
stdin/stdout and the upstream process.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeGuard

from ..config import LoopDetectionConfig
from ..guard import LoopGuard, Verdict, append_note
from ..transcripts import content_text
from ..types import MISSING

__all__ = ["CALL_ID_META_KEYS", "RUN_ID_META_KEYS", "McpLoopGuard", "run_proxy"]

RUN_ID_META_KEYS = ("runId", "run_id", "loopwarden/runId")
CALL_ID_META_KEYS = ("toolCallId", "tool_call_id", "loopwarden/toolCallId")

#: Tool results can be large (file contents, screenshots as base64); asyncio's default 64 KiB
#: line limit would cut a legitimate response.
_LINE_LIMIT = 1 << 28
#: How long a closed upstream may take to exit on its own before it is terminated, then killed.
_EXIT_GRACE_SECONDS = 5.0


@dataclass(slots=True)
class _InFlight:
    """A forwarded ``tools/call`` waiting for the upstream's response."""

    tool: str
    args: Any
    run_id: str | None
    call_id: str | None
    #: None for a retried call that carries input responses: it was admitted the first time.
    before: Verdict | None


class McpLoopGuard:
    """Guards the ``tools/call`` traffic of one MCP client connection (one guard session).

    Feed it every parsed message: :meth:`from_client` for what the client sends (it says what to
    forward and what to answer directly), :meth:`from_upstream` for what the upstream sends (it
    returns the message for the client, annotated when needed). A message it has nothing to do
    with comes back as the same object, so a transport can forward the original bytes.
    """

    def __init__(
        self, guard: LoopGuard, *, session: str | None = None, agent_id: str | None = None
    ) -> None:
        self.guard = guard
        self.session = session or f"mcp-{uuid.uuid4()}"
        self.agent_id = agent_id
        self._in_flight: dict[str, _InFlight] = {}
        # Clients may reuse JSON-RPC ids once a request is answered; the guard would take a
        # reused call id for a retried hook and not count the call, so ids are made unique.
        self._seq = itertools.count(1)

    async def from_client(self, message: Any) -> tuple[Any, list[dict[str, Any]]]:
        """Returns what to forward upstream (None: nothing) and the replies to send straight
        back to the client (the results of blocked calls)."""
        if not isinstance(message, list):
            forward, reply = await self._client_message(message)
            return forward, [reply] if reply is not None else []
        forwards: list[Any] = []
        replies: list[dict[str, Any]] = []
        for item in message:
            forward, reply = await self._client_message(item)
            if forward is not None:
                forwards.append(forward)
            if reply is not None:
                replies.append(reply)
        if len(forwards) == len(message):
            return message, replies
        return (forwards or None), replies

    async def from_upstream(self, message: Any) -> Any:
        """Returns the message for the client: a ``tools/call`` result with the outcome
        recorded and, when the call was warned, the warning note appended."""
        if not isinstance(message, list):
            return await self._upstream_message(message)
        out = [await self._upstream_message(item) for item in message]
        return message if all(a is b for a, b in zip(out, message, strict=True)) else out

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    # -- client -> upstream ------------------------------------------------------------------

    async def _client_message(self, message: Any) -> tuple[Any, dict[str, Any] | None]:
        if not isinstance(message, dict):
            return message, None
        method = message.get("method")
        if method == "tools/call" and "id" in message:
            return await self._tools_call(message)
        if method == "notifications/cancelled":
            # The upstream will not answer a cancelled call; nothing is recorded for it.
            params = message.get("params")
            if isinstance(params, dict) and "requestId" in params:
                self._in_flight.pop(_id_key(params["requestId"]), None)
        return message, None

    async def _tools_call(self, message: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
        params = message.get("params")
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            return message, None  # malformed: the upstream answers with its own error
        name: str = params["name"]
        args = params.get("arguments")
        args = {} if args is None else args
        meta = params.get("_meta")
        meta = meta if isinstance(meta, Mapping) else {}
        run_id = _meta_str(meta, RUN_ID_META_KEYS)
        key = _id_key(message["id"])
        if _is_input_retry(params):
            self._in_flight[key] = _InFlight(name, args, run_id, None, None)
            return message, None
        call_id = _meta_str(meta, CALL_ID_META_KEYS) or f"mcp-{next(self._seq)}"
        verdict = await self.guard.abefore_tool_call(
            name, args, session=self.session, run_id=run_id, call_id=call_id,
            agent_id=self.agent_id,
        )
        if verdict.action == "block":
            return None, blocked_response(message["id"], verdict)
        self._in_flight[key] = _InFlight(name, args, run_id, call_id, verdict)
        return message, None

    # -- upstream -> client ------------------------------------------------------------------

    async def _upstream_message(self, message: Any) -> Any:
        if not isinstance(message, dict) or "method" in message or "id" not in message:
            return message  # notifications and server-to-client requests pass through
        flight = self._in_flight.pop(_id_key(message["id"]), None)
        if flight is None:
            return message
        if "error" in message:
            after = await self._record(flight, error=_error_text(message["error"]))
            return _annotate_error(message, _notes(flight.before, after))
        result = message.get("result")
        if not _is_final(result):
            # An input request or a task handle: no outcome yet. A retry with the answers
            # comes as a new request and records the outcome then.
            return message
        after = await self._record(flight, result=result, error=_tool_error(result))
        notes = _notes(flight.before, after)
        if not notes:
            return message
        annotated: Any = result
        for note in notes:
            annotated = append_note(annotated, note)
        return {**message, "result": annotated}

    async def _record(self, flight: _InFlight, *, result: Any = MISSING,
                      error: Any = MISSING) -> Verdict:
        return await self.guard.aafter_tool_call(
            flight.tool, flight.args, session=self.session, result=result, error=error,
            run_id=flight.run_id, call_id=flight.call_id, agent_id=self.agent_id,
        )


def blocked_response(request_id: Any, verdict: Verdict) -> dict[str, Any]:
    """The JSON-RPC response for a blocked ``tools/call``: a tool result the model reads, not a
    protocol error (MCP reserves those for calls that could not be made at all)."""
    blocked = verdict.blocked_result()
    details = dict(blocked.get("details", {}))
    if verdict.detection is not None:
        details.update(detector=verdict.detection.detector, count=verdict.detection.count,
                       level=verdict.detection.level)
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {
            "content": blocked["content"],
            "isError": True,
            # Required on the 2026-07-28 wire; earlier protocol versions ignore it.
            "resultType": "complete",
            "_meta": {"loopwarden/blocked": details},
        },
    }


def _notes(before: Verdict | None, after: Verdict) -> list[str]:
    notes = [v.note for v in (before, after) if v is not None and v.note]
    return list(dict.fromkeys(notes))  # the same note twice says nothing new


def _annotate_error(message: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """A failed call still carries its warning: in the error message, the only text a client
    shows the model for a JSON-RPC error."""
    error = message["error"]
    if not notes or not isinstance(error, dict):
        return message
    text = str(error.get("message", ""))
    for note in notes:
        text = f"{text}\n\n{note}" if text else note
    return {**message, "error": {**error, "message": text}}


def _is_final(result: Any) -> TypeGuard[dict[str, Any]]:
    return (isinstance(result, dict) and isinstance(result.get("content"), list)
            and result.get("resultType", "complete") == "complete")


def _tool_error(result: Mapping[str, Any]) -> Any:
    """A result with ``isError`` is a failure: its text is the error, as transcripts record it."""
    if result.get("isError") is not True:
        return MISSING
    return content_text(result.get("content")) or "error"


def _is_input_retry(params: Mapping[str, Any]) -> bool:
    """A retry that answers the upstream's input requests continues an admitted call."""
    return params.get("inputResponses") is not None or params.get("requestState") is not None


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str) and message:
            return message
        return json.dumps(error, sort_keys=True, default=str)
    return str(error)


def _meta_str(meta: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = meta.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return str(value)
    return None


def _id_key(request_id: Any) -> str:
    # JSON-RPC ids are strings or numbers, and "1" and 1 are different ids.
    return json.dumps(request_id, sort_keys=True, default=str)


def _dump(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


# -- the stdio transport ---------------------------------------------------------------------


async def run_proxy(
    command: Sequence[str],
    guard: LoopGuard | None = None,
    *,
    session: str | None = None,
    agent_id: str | None = None,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> int:
    """Start ``command`` (the real MCP server) and proxy between our stdio and its stdio until
    either side closes. Returns the upstream's exit code (0 when the client closed first and the
    upstream then exited cleanly)."""
    if not command:
        raise ValueError("run_proxy needs the MCP server command to start")
    core = McpLoopGuard(guard or LoopGuard(LoopDetectionConfig(enabled=True)),
                        session=session, agent_id=agent_id)
    # Resolved first so Windows finds ``npx.cmd`` and friends the way a shell would.
    executable = shutil.which(command[0]) or command[0]
    process = await asyncio.create_subprocess_exec(
        executable, *command[1:], stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=None,
        cwd=cwd, env=dict(env) if env is not None else None, limit=_LINE_LIMIT,
    )
    to_client = _ClientWriter(stdout or sys.stdout.buffer)
    lines = _read_lines_in_thread(stdin or sys.stdin.buffer)
    client = asyncio.create_task(_pump_client(core, lines, process, to_client))
    upstream = asyncio.create_task(_pump_upstream(core, process, to_client))
    try:
        done, _ = await asyncio.wait({client, upstream}, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # a pump that crashed ends the proxy with its error
        if client in done:
            # The client hung up: let the upstream see EOF and finish what it was writing.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(upstream), _EXIT_GRACE_SECONDS)
    finally:
        for task in (client, upstream):
            task.cancel()
        await asyncio.gather(client, upstream, return_exceptions=True)
        code = await _stop(process)
    return code


async def _pump_client(core: McpLoopGuard, lines: asyncio.Queue[bytes | None],
                       process: asyncio.subprocess.Process, to_client: _ClientWriter) -> None:
    assert process.stdin is not None
    upstream = process.stdin
    while (line := await lines.get()) is not None:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            upstream.write(_with_newline(line))  # not JSON: the upstream reports a parse error
        else:
            forward, replies = await core.from_client(message)
            for reply in replies:
                await to_client.send(_dump(reply))
            if forward is None:
                continue
            upstream.write(_with_newline(line) if forward is message else _dump(forward))
        try:
            await upstream.drain()
        except (BrokenPipeError, ConnectionResetError):
            return  # the upstream is gone; its pump ends the proxy
    with contextlib.suppress(OSError):
        upstream.close()


async def _pump_upstream(core: McpLoopGuard, process: asyncio.subprocess.Process,
                         to_client: _ClientWriter) -> None:
    assert process.stdout is not None
    while line := await process.stdout.readline():
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            await to_client.send(_with_newline(line))  # the client's problem to report
            continue
        out = await core.from_upstream(message)
        await to_client.send(_with_newline(line) if out is message else _dump(out))


async def _stop(process: asyncio.subprocess.Process) -> int:
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    for escalate in (None, process.terminate, process.kill):
        if escalate is not None:
            with contextlib.suppress(ProcessLookupError):
                escalate()
        with contextlib.suppress(asyncio.TimeoutError):
            return await asyncio.wait_for(process.wait(), _EXIT_GRACE_SECONDS)
    return await process.wait()


def _with_newline(line: bytes) -> bytes:
    return line if line.endswith(b"\n") else line + b"\n"


class _ClientWriter:
    """Writes whole lines to the client, one at a time, off the event loop (a slow client must
    not stall the upstream pump's bookkeeping)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = asyncio.Lock()

    async def send(self, data: bytes) -> None:
        async with self._lock:
            await asyncio.to_thread(self._write, data)

    def _write(self, data: bytes) -> None:
        self._stream.write(data)
        self._stream.flush()


def _read_lines_in_thread(stream: BinaryIO) -> asyncio.Queue[bytes | None]:
    """Lines from ``stream``, then None at EOF. A thread, because asyncio cannot read a pipe or
    console stdin portably (Windows)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    def read() -> None:
        try:
            for line in _lines(stream):
                loop.call_soon_threadsafe(queue.put_nowait, line)
        except (OSError, ValueError, RuntimeError):
            pass  # stdin closed under us (same as EOF), or the proxy already finished
        finally:
            with contextlib.suppress(RuntimeError):  # the loop may already be closed
                loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=read, name="loopwarden-mcp-stdin", daemon=True).start()
    return queue


def _lines(stream: BinaryIO) -> Iterator[bytes]:
    """Reads the file descriptor directly when there is one: a daemon thread still blocked in a
    buffered read when the proxy exits would abort the interpreter at shutdown."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        yield from iter(stream.readline, b"")
        return
    pending = b""
    while chunk := os.read(fd, 1 << 16):
        *complete, pending = (pending + chunk).split(b"\n")
        for line in complete:
            yield line + b"\n"
    if pending:
        yield pending
