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

Calls in flight count: a ``tools/call`` admitted while identical ones still wait for the
upstream counts them as repeats (see :attr:`LoopGuard.in_flight_seconds`), so a burst of
identical concurrent calls is stopped like the same calls made one by one.

Task-augmented calls (MCP 2025-11-25: ``tools/call`` with a ``task`` parameter) are guarded
like any call. A blocked one is answered at once with the blocked tool result (receivers may
answer a task-augmented request directly); an admitted one's ``CreateTaskResult`` links its
``taskId`` to the call, and the outcome is recorded when it comes: the ``tasks/result``
answer (annotated with the call's warning), or a ``failed`` status (``tasks/get``,
``tasks/cancel``, ``notifications/tasks/status``). A cancelled task records nothing.

The proxy cannot end its client's run: MCP has no message for that. At the terminal stop it
keeps blocking the looping calls.

:class:`McpLoopGuard` is the transport-free translation; :func:`run_proxy` wires it between our
stdin/stdout and the upstream process.

The transport never dies of what it reads. A line that is not strict UTF-8 JSON (invalid bytes,
nesting too deep to parse) is forwarded as it came; a message it cannot inspect or re-encode is
forwarded unchanged; a lone surrogate is re-sent as a JSON escape. Lines are framed in linear
time and bounded (:data:`DEFAULT_MAX_MESSAGE_BYTES`), the same way in both directions. Logs
carry sizes, tool names, detectors and counts, never argument or result text.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
import os
import shutil
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeGuard

from .._text import content_text
from ..config import LoopDetectionConfig
from ..guard import LoopGuard, Verdict, append_note
from ..types import MISSING
from ._stdio_lines import CHUNK, Overlong, ThreadWriter, frames, parse_size, peek, thread_chunks

__all__ = [
    "CALL_ID_META_KEYS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "MAX_MESSAGE_BYTES_ENV",
    "RUN_ID_META_KEYS",
    "McpLoopGuard",
    "max_message_bytes_from_env",
    "run_proxy",
]

RUN_ID_META_KEYS = ("runId", "run_id", "loopwarden/runId")
CALL_ID_META_KEYS = ("toolCallId", "tool_call_id", "loopwarden/toolCallId")

#: The longest JSON-RPC message (one line) the proxy passes, either way. Tool results can be
#: large (file contents, screenshots as base64), so it is generous; it exists so that a peer
#: that never sends a newline cannot grow the proxy's memory without bound. An over-long
#: client request is answered with a JSON-RPC error (-32600); an over-long server response
#: reaches the client as an error response (-32603) for its request; anything else over-long
#: is dropped. Each is logged, by size only.
DEFAULT_MAX_MESSAGE_BYTES = 64 << 20
MAX_MESSAGE_BYTES_ENV = "LOOPWARDEN_MCP_MAX_MESSAGE_BYTES"
#: How long a closed upstream may take to exit on its own before it is terminated, then killed.
_EXIT_GRACE_SECONDS = 5.0
#: After a signal, how long the upstream's group has between SIGTERM and SIGKILL: short, for
#: the client that signalled us kills us too if we linger (the MCP SDKs wait 2 s).
_SIGNAL_GRACE_SECONDS = 1.0
_POSIX = os.name == "posix"
_PROXY = "loopwarden mcp-proxy"
_HOW_TO_RAISE = f"--max-message-bytes or ${MAX_MESSAGE_BYTES_ENV} raises it"
_UNPARSED: Any = object()

log = logging.getLogger("loopwarden.mcp")


@dataclass(slots=True)
class _InFlight:
    """A forwarded ``tools/call`` waiting for the upstream's response."""

    tool: str
    args: Any
    run_id: str | None
    call_id: str | None
    #: None for a retried call that carries input responses: it was admitted the first time.
    before: Verdict | None


@dataclass(slots=True)
class _Task:
    """An admitted task-augmented call whose result the upstream has yet to hand over."""

    flight: _InFlight
    #: The warning notes for the result, once the outcome is recorded (a failure seen in a
    #: status before the client fetched the result).
    notes: list[str] | None = None


#: Tasks the proxy remembers at once: a client that never fetches its results must not grow
#: the proxy's memory. The oldest link is dropped first (its call then stays unrecorded).
MAX_TASKS = 4096
_TASK_METHODS = ("tasks/result", "tasks/get", "tasks/cancel")


@dataclass(slots=True)
class _PendingBatch:
    """A client batch some of whose calls were blocked: their responses wait to be merged into
    the upstream's array answer to the calls that were forwarded."""

    awaited: set[str]  # forwarded requests the upstream has yet to answer
    order: list[str]  # every request of the batch, in the client's order
    replies: list[dict[str, Any]]  # the blocked calls' responses


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
        # Request key -> the partly blocked batch whose array answer it is part of.
        self._batches: dict[str, _PendingBatch] = {}
        # taskId -> the call it runs; request key -> the tasks/* method and the task it asks
        # about.
        self._tasks: dict[str, _Task] = {}
        self._task_requests: dict[str, tuple[str, str]] = {}

    async def from_client(self, message: Any) -> tuple[Any, list[Any]]:
        """Returns what to forward upstream (None: nothing) and the messages to send straight
        back to the client (the results of blocked calls).

        A batch is answered with one array (JSON-RPC 2.0): when some of its calls are blocked
        and others forwarded, the blocked calls' responses wait for the upstream's array and
        are merged into it (:meth:`from_upstream`)."""
        if not isinstance(message, list):
            forward, reply = await self._client_message(message)
            return forward, [reply] if reply is not None else []
        forwards: list[Any] = []
        blocked: list[dict[str, Any]] = []
        replies: list[Any] = []  # earlier batches a cancellation completed
        for item in message:
            forward, reply = await self._client_message(item)
            if forward is not None:
                forwards.append(forward)
            if isinstance(reply, dict):
                blocked.append(reply)
            elif reply is not None:
                replies.append(reply)
        if not blocked:
            return (message if len(forwards) == len(message) else forwards or None), replies
        awaited = [_id_key(f["id"]) for f in forwards if _is_request(f)]
        if not awaited:  # nothing will come back from the upstream: answer now
            return forwards or None, [*replies, blocked]
        order = [_id_key(item["id"]) for item in message if _is_request(item)]
        batch = _PendingBatch(set(awaited), order, blocked)
        for key in awaited:
            self._batches[key] = batch
        return forwards, replies

    async def from_upstream(self, message: Any) -> Any:
        """Returns the message for the client: a ``tools/call`` result with the outcome
        recorded and, when the call was warned, the warning note appended; the upstream's
        answer to a batch with the responses of the batch's blocked calls merged in."""
        if not isinstance(message, list):
            out = await self._upstream_message(message)
            batch = self._batch_of(message)
            # An upstream that answers a batch's calls one by one: the blocked calls' answers
            # go with the first of them.
            return out if batch is None else [out, *batch.replies]
        out = [await self._upstream_message(item) for item in message]
        batches: list[_PendingBatch] = []
        for item in message:
            batch = self._batch_of(item)
            if batch is not None and all(b is not batch for b in batches):
                batches.append(batch)
        if not batches:
            return message if all(a is b for a, b in zip(out, message, strict=True)) else out
        for batch in batches:
            out.extend(batch.replies)
        rank: dict[str | None, int] = {key: n for n, key in enumerate(batches[0].order)}
        out.sort(key=lambda m: rank.get(_response_key(m), len(rank)))  # the client's order
        return out

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def awaiting(self) -> bool:
        """Whether some upstream response matters to the guard: when not, the transport need
        not parse what the upstream sends."""
        return bool(self._in_flight or self._batches or self._tasks or self._task_requests)

    def _batch_of(self, message: Any) -> _PendingBatch | None:
        """The pending batch ``message`` answers a call of, taken off the pending list."""
        if not self._batches:
            return None
        key = _response_key(message)
        batch = self._batches.get(key) if key is not None else None
        if batch is not None:
            for awaited in batch.awaited:
                self._batches.pop(awaited, None)
        return batch

    # -- client -> upstream ------------------------------------------------------------------

    async def _client_message(self, message: Any) -> tuple[Any, Any]:
        """What to forward, and what to answer: a blocked call's response (a dict), or the
        array of a batch whose last awaited call was cancelled."""
        if not isinstance(message, dict):
            return message, None
        method = message.get("method")
        if method == "tools/call" and "id" in message:
            return await self._tools_call(message)
        if method in _TASK_METHODS and "id" in message and self._tasks:
            task_id = _task_param(message.get("params"))
            if task_id in self._tasks:
                self._task_requests[_id_key(message["id"])] = (method, task_id)
        if method == "notifications/cancelled":
            # The upstream will not answer a cancelled call; nothing is recorded for it.
            params = message.get("params")
            if isinstance(params, dict) and "requestId" in params:
                key = _id_key(params["requestId"])
                self._in_flight.pop(key, None)
                self._task_requests.pop(key, None)
                return message, self._cancel_in_batch(key)
        return message, None

    def _cancel_in_batch(self, key: str) -> list[Any] | None:
        batch = self._batches.pop(key, None)
        if batch is None:
            return None
        batch.awaited.discard(key)
        return None if batch.awaited else list(batch.replies)

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
        if not isinstance(message, dict):
            return message
        if "method" in message or "id" not in message:
            # Notifications and server-to-client requests pass through; a task's status is read.
            if message.get("method") == "notifications/tasks/status" and self._tasks:
                await self._task_status(message.get("params"))
            return message
        key = _id_key(message["id"])
        flight = self._in_flight.pop(key, None)
        if flight is None:
            asked = self._task_requests.pop(key, None) if self._task_requests else None
            return message if asked is None else await self._task_answer(*asked, message)
        task_id = _created_task(message.get("result"))
        if task_id is not None:  # the call runs as a task: its outcome comes later
            self._tasks[task_id] = _Task(flight)
            while len(self._tasks) > MAX_TASKS:
                del self._tasks[next(iter(self._tasks))]
            return message
        return await self._outcome(flight, message)

    async def _outcome(self, flight: _InFlight, message: dict[str, Any],
                       notes: list[str] | None = None) -> Any:
        """Records the answer to a call (unless ``notes`` says it is recorded already) and
        returns it with the call's warning notes."""
        if "error" in message:
            if notes is None:
                after = await self._record(flight, error=_error_text(message["error"]))
                notes = _notes(flight.before, after)
            return _annotate_error(message, notes)
        result = message.get("result")
        if not _is_final(result):
            # An input request: no outcome yet. A retry with the answers comes as a new
            # request and records the outcome then.
            return message
        if notes is None:
            after = await self._record(flight, result=result, error=_tool_error(result))
            notes = _notes(flight.before, after)
        if not notes:
            return message
        annotated: Any = result
        for note in notes:
            annotated = append_note(annotated, note)
        return {**message, "result": annotated}

    async def _task_answer(self, method: str, task_id: str, message: dict[str, Any]) -> Any:
        """The upstream's answer to a ``tasks/*`` request about a task of ours: for
        ``tasks/result`` the call's own answer; for ``tasks/get`` and ``tasks/cancel`` the
        task's state (an error there, e.g. cancelling a finished task, says nothing of it)."""
        task = self._tasks.get(task_id)
        if task is None:
            return message
        result = message.get("result")
        if method == "tasks/result":
            if "error" in message or _is_final(result):
                del self._tasks[task_id]
                return await self._outcome(task.flight, message, task.notes)
        elif isinstance(result, dict):
            await self._task_status(result)
        return message

    async def _task_status(self, task: Any) -> None:
        """A task's state (a ``Task``): a failure is the call's outcome, a cancelled task
        will have none."""
        if not isinstance(task, dict):
            return
        task_id = task.get("taskId")
        entry = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if entry is None:
            return
        status = task.get("status")
        if status == "cancelled":
            del self._tasks[task["taskId"]]
        elif status == "failed" and entry.notes is None:
            message = task.get("statusMessage")
            error = message if isinstance(message, str) and message else "task failed"
            after = await self._record(entry.flight, error=error)
            entry.notes = _notes(entry.flight.before, after)

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


def _created_task(result: Any) -> str | None:
    """The ``taskId`` of a ``CreateTaskResult`` (the answer to a task-augmented request)."""
    task = result.get("task") if isinstance(result, dict) else None
    task_id = task.get("taskId") if isinstance(task, dict) else None
    return task_id if isinstance(task_id, str) else None


def _task_param(params: Any) -> str | None:
    task_id = params.get("taskId") if isinstance(params, dict) else None
    return task_id if isinstance(task_id, str) else None


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


def _is_request(message: Any) -> bool:
    return isinstance(message, dict) and "method" in message and "id" in message


def _response_key(message: Any) -> str | None:
    if isinstance(message, dict) and "id" in message and "method" not in message:
        return _id_key(message["id"])
    return None


def _id_key(request_id: Any) -> str:
    # JSON-RPC ids are strings or numbers, and "1" and 1 are different ids.
    return json.dumps(request_id, sort_keys=True, default=str)


def _dump(message: Any) -> bytes:
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:
        # A lone surrogate (JavaScript writes "\ud83d" when it cuts text mid-emoji): UTF-8
        # cannot carry it, a JSON escape can, as the sender wrote it.
        return json.dumps(message, separators=(",", ":")).encode() + b"\n"


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
    max_message_bytes: int | None = None,
    handle_signals: bool = False,
) -> int:
    """Start ``command`` (the real MCP server) and proxy between our stdio and its stdio until
    either side closes.

    Returns the exit status for the proxy: the upstream's when it ended on its own (128+N when
    a signal N killed it), 0 when the client closed first and the upstream had to be stopped,
    and 128+N when ``handle_signals`` is on and the proxy got SIGTERM, SIGINT or SIGHUP (the
    upstream's process group is then terminated, and killed if it does not exit at once).

    ``max_message_bytes`` (default: ``$LOOPWARDEN_MCP_MAX_MESSAGE_BYTES``, else 64 MiB) bounds
    one JSON-RPC message in either direction; an over-long one is not forwarded (see
    :data:`DEFAULT_MAX_MESSAGE_BYTES`)."""
    if not command:
        raise ValueError("run_proxy needs the MCP server command to start")
    limit = max_message_bytes if max_message_bytes is not None else max_message_bytes_from_env()
    if limit <= 0:
        raise ValueError(f"max_message_bytes must be positive, not {limit}")
    core = McpLoopGuard(guard or LoopGuard(LoopDetectionConfig(enabled=True)),
                        session=session, agent_id=agent_id)
    loop = asyncio.get_running_loop()
    signalled: asyncio.Future[int] = loop.create_future()
    caught = _catch_signals(loop, signalled) if handle_signals else []
    try:
        code = await _serve(core, command, cwd, env, stdin, stdout, limit, signalled)
    finally:
        for signum in caught:
            loop.remove_signal_handler(signum)
    return 128 + signalled.result() if signalled.done() else code


def max_message_bytes_from_env() -> int:
    """``$LOOPWARDEN_MCP_MAX_MESSAGE_BYTES`` (``67108864``, ``64M``...), else the default."""
    value = os.environ.get(MAX_MESSAGE_BYTES_ENV, "").strip()
    return parse_size(value) if value else DEFAULT_MAX_MESSAGE_BYTES


async def _serve(core: McpLoopGuard, command: Sequence[str], cwd: str | None,
                 env: Mapping[str, str] | None, stdin: BinaryIO | None,
                 stdout: BinaryIO | None, limit: int, signalled: asyncio.Future[int]) -> int:
    # Resolved first so Windows finds ``npx.cmd`` and friends the way a shell would.
    executable = shutil.which(command[0]) or command[0]
    process = await asyncio.create_subprocess_exec(
        executable, *command[1:], stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=None, cwd=cwd,
        env=dict(env) if env is not None else None,
        # Small: we read chunks, never lines, so this only bounds what asyncio buffers.
        limit=CHUNK,
        # Its own process group, so that stopping it reaches whatever it started (npx ->
        # node -> ...), and a signal meant for the proxy's group is ours to pass on.
        start_new_session=_POSIX,
    )
    assert process.stdin is not None and process.stdout is not None
    to_client = ThreadWriter(stdout or sys.stdout.buffer)
    from_client = frames(thread_chunks(stdin or sys.stdin.buffer), limit)
    from_upstream = frames(functools.partial(process.stdout.read, CHUNK), limit)
    client = asyncio.create_task(_pump_client(core, from_client, process.stdin, to_client))
    upstream = asyncio.create_task(
        _pump_upstream(core, from_upstream, process.stdin, to_client))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _EXIT_GRACE_SECONDS  # renewed when the connection ends
    try:
        stop: set[asyncio.Future[Any]] = {client, upstream, signalled}
        done, _ = await asyncio.wait(stop, return_when=asyncio.FIRST_COMPLETED)
        deadline = loop.time() + _EXIT_GRACE_SECONDS
        for task in done - {signalled}:
            task.result()  # a pump that crashed ends the proxy with its error
        if client in done and not signalled.done():
            # The client hung up: let the upstream see EOF and finish what it was writing.
            rest: set[asyncio.Future[Any]] = {upstream, signalled}
            await asyncio.wait(rest, timeout=_EXIT_GRACE_SECONDS,
                               return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (client, upstream):
            task.cancel()
        await asyncio.gather(client, upstream, return_exceptions=True)
        # One grace period in all for the upstream to finish and exit after the connection
        # ended (and a moment more for one that has just closed its stdout).
        code = await _stop(process, signalled, max(deadline - loop.time(), 0.5))
    return code


async def _pump_client(core: McpLoopGuard, lines: AsyncIterator[bytes | Overlong],
                       upstream: asyncio.StreamWriter, to_client: ThreadWriter) -> None:
    try:
        async for line in lines:
            if isinstance(line, Overlong):
                back, onward = _overlong(line, "client")
                if onward is not None:
                    upstream.write(_dump(onward))
                if back is not None:
                    await to_client.send(_dump(back))
                continue
            if line.isspace():
                continue
            forward, replies = await _client_line(core, line)
            for reply in replies:
                await to_client.send(reply)
            if forward is None:
                continue
            upstream.write(forward)
            await upstream.drain()
    except (BrokenPipeError, ConnectionResetError):
        return  # one side is gone; its pump, or the client's EOF, ends the proxy
    with contextlib.suppress(OSError):
        upstream.close()


async def _pump_upstream(core: McpLoopGuard, lines: AsyncIterator[bytes | Overlong],
                         upstream: asyncio.StreamWriter, to_client: ThreadWriter) -> None:
    try:
        async for line in lines:
            if isinstance(line, Overlong):
                back, onward = _overlong(line, "server")
                if back is not None:
                    upstream.write(_dump(back))
                if onward is not None:  # a call's answer: the call failed, and is recorded so
                    await to_client.send(await _upstream_message(core, onward, b""))
                continue
            if line.isspace():
                continue
            if not core.awaiting():  # nothing in flight: nothing to parse
                await to_client.send(_with_newline(line))
                continue
            message = _parse(line)
            out = line if message is _UNPARSED else await _upstream_message(core, message, line)
            await to_client.send(_with_newline(out))
    except (BrokenPipeError, ConnectionResetError):
        return  # the client is gone


async def _client_line(core: McpLoopGuard, line: bytes) -> tuple[bytes | None, list[bytes]]:
    """The bytes to forward upstream (None: nothing) and the replies for the client. What
    cannot be parsed, or inspected, goes on exactly as it came."""
    message = _parse(line)
    if message is _UNPARSED:
        return _with_newline(line), []
    try:
        forward, replies = await core.from_client(message)
        out = None if forward is None else _with_newline(line) if forward is message \
            else _dump(forward)
        return out, [_dump(reply) for reply in replies]
    except Exception as exc:  # e.g. RecursionError on a message nested just under the limit
        _not_inspected("client", exc)
        return _with_newline(line), []


async def _upstream_message(core: McpLoopGuard, message: Any, line: bytes) -> bytes:
    try:
        out = await core.from_upstream(message)
        return line if out is message and line else _dump(out)
    except Exception as exc:
        _not_inspected("server", exc)
        return line or _dump(message)


def _parse(line: bytes) -> Any:
    """The message on ``line``, or :data:`_UNPARSED`. Strict UTF-8, unlike ``json.loads`` on
    bytes (which also takes UTF-16 and encoded surrogates): what is not, is forwarded as it
    came instead of being re-encoded differently."""
    try:
        return json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, or nested too deep to parse
        return _UNPARSED


def _not_inspected(origin: str, exc: Exception) -> None:
    # The exception's type only: its text may quote the message (arguments, results).
    log.warning("mcp-proxy: could not inspect a message from the %s (%s); forwarded it "
                "unchanged", origin, type(exc).__name__)


def _overlong(line: Overlong, origin: str) -> tuple[dict[str, Any] | None,
                                                      dict[str, Any] | None]:
    """An over-long message is dropped. Returns the error response for its sender and the one
    for the other side, each when that side waits for an answer that will now not come; the
    message's text is neither forwarded nor logged, only its size."""
    kind, request_id = peek(line)
    over = f"{line.size} bytes, over the proxy's limit of {line.limit} bytes"
    if kind == "response":
        # The other side waits for this answer: it gets an error in its place.
        log.error("mcp-proxy: dropped a response from the %s: %s (%s)%s", origin, over,
                  _HOW_TO_RAISE, "" if request_id is None else "; answered its request with "
                  "an error")
        if request_id is None:
            return None, None
        return None, _error(request_id, -32603, f"{_PROXY}: the {origin}'s response was {over}")
    if origin == "server" and (kind != "request" or request_id is None):
        log.error("mcp-proxy: dropped a message from the server: %s (%s)", over, _HOW_TO_RAISE)
        return None, None
    # A request, or from the client something we cannot tell: JSON-RPC answers an invalid
    # request with an error, with a null id when the id cannot be read.
    log.error("mcp-proxy: dropped a request from the %s: %s (%s); answered it with an error",
              origin, over, _HOW_TO_RAISE)
    return _error(request_id, -32600, f"{_PROXY}: request too large: {over}"), None


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


async def _stop(process: asyncio.subprocess.Process, signalled: asyncio.Future[int],
                grace: float) -> int:
    """Closes the upstream's stdin and waits ``grace`` seconds for it to exit; terminates its
    process group if it does not (at once when we were signalled), and kills the group if that
    does not work either."""
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    if not signalled.done() and await _exited(process, grace, signalled):
        assert process.returncode is not None
        return _status(process.returncode)
    _signal_group(process, hard=False)
    grace = _SIGNAL_GRACE_SECONDS if signalled.done() else _EXIT_GRACE_SECONDS
    if not await _exited(process, grace, None if signalled.done() else signalled):
        _signal_group(process, hard=True)
        await process.wait()
    return 0  # the connection ended normally; stopping the upstream was our doing


async def _exited(process: asyncio.subprocess.Process, timeout: float,
                  interrupt: asyncio.Future[int] | None) -> bool:
    """Whether the process exits within ``timeout`` (cut short when ``interrupt`` is done)."""
    waiter = asyncio.ensure_future(process.wait())
    await asyncio.wait({waiter} if interrupt is None else {waiter, interrupt}, timeout=timeout,
                       return_when=asyncio.FIRST_COMPLETED)
    if not waiter.done():
        waiter.cancel()
        return False
    return True


def _signal_group(process: asyncio.subprocess.Process, *, hard: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if _POSIX:
            # The whole group, even when its leader has exited: what it started may live on.
            os.killpg(process.pid, signal.SIGKILL if hard else signal.SIGTERM)
        elif process.returncode is None:
            process.kill() if hard else process.terminate()


def _status(returncode: int) -> int:
    """A shell's exit status for the upstream's return code (-N: killed by signal N)."""
    return 128 - returncode if returncode < 0 else returncode


def _catch_signals(loop: asyncio.AbstractEventLoop, signalled: asyncio.Future[int]) -> list[int]:
    """SIGTERM, SIGINT and SIGHUP end the proxy through :func:`_stop` instead of killing it
    while the upstream lives on (a client that closes our stdin and then signals our pid only
    would otherwise leave a server that ignores EOF running, orphaned)."""
    def stop(signum: int) -> None:
        if not signalled.done():
            signalled.set_result(signum)

    caught: list[int] = []
    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        try:
            loop.add_signal_handler(signum, stop, int(signum))
        except (NotImplementedError, RuntimeError, ValueError):
            continue  # Windows, or not the main thread: signals keep their default action
        caught.append(signum)
    return caught


def _with_newline(line: bytes) -> bytes:
    return line if line.endswith(b"\n") else line + b"\n"
