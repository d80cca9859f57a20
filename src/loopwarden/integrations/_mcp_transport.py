"""The MCP proxy's stdio transport: :func:`run_proxy` starts the upstream server and pumps
JSON-RPC lines between our stdin/stdout and its stdio through a
:class:`~loopwarden.integrations._mcp_guard.McpLoopGuard`.

It frames and bounds the lines, reads every client line before it goes on (what it cannot read
is answered with a JSON-RPC parse error instead), answers over-long messages with errors, and
stops the upstream's process group when the connection ends, a signal comes, or (on Linux)
the proxy dies without a chance to. Part of :mod:`loopwarden.integrations.mcp_proxy`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, BinaryIO

import orjson

from ..base.log import get_logger
from ..config import LoopDetectionConfig
from ..guard import ExitBehavior, LoopGuard
from ..guard.asking import DEFAULT_MAX_GRANTS
from ._mcp_guard import McpLoopGuard
from ._mcp_messages import _dump
from ._mcp_pending import DEFAULT_MAX_PENDING_BYTES, DEFAULT_MAX_PENDING_CALLS
from ._parent_death import die_with_parent
from ._stdio_lines import (
    CHUNK,
    PEEK,
    Overlong,
    ThreadWriter,
    frames,
    parse_size,
    peek,
    thread_chunks,
)

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
_BOM = b"\xef\xbb\xbf"

log = get_logger("loopwarden.mcp")


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
    max_pending_calls: int = DEFAULT_MAX_PENDING_CALLS,
    max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
    handle_signals: bool = False,
    exit_behavior: ExitBehavior = "end",
    max_grants: int = DEFAULT_MAX_GRANTS,
) -> int:
    """Start ``command`` (the real MCP server) and proxy between our stdio and its stdio until
    either side closes.

    Returns the exit status for the proxy: the upstream's when it ended on its own (128+N when
    a signal N killed it), 0 when the client closed first and the upstream had to be stopped,
    and 128+N when ``handle_signals`` is on and the proxy got SIGTERM, SIGINT or SIGHUP (the
    upstream's process group is then terminated, and killed if it does not exit at once).

    ``max_message_bytes`` (default: ``$LOOPWARDEN_MCP_MAX_MESSAGE_BYTES``, else 64 MiB) bounds
    one JSON-RPC message in either direction; an over-long one is not forwarded (see
    :data:`DEFAULT_MAX_MESSAGE_BYTES`). ``max_pending_calls`` and ``max_pending_bytes`` bound
    the calls kept while they await the upstream's answer; past them the oldest is evicted
    unrecorded (see :mod:`._mcp_pending`). ``exit_behavior="ask"`` elicits the terminal stop
    from a client that takes elicitations, up to ``max_grants`` "continue" answers a run (see
    :mod:`._mcp_asking`); otherwise the terminal stop blocks, as every stop does."""
    if not command:
        raise ValueError("run_proxy needs the MCP server command to start")
    limit = max_message_bytes if max_message_bytes is not None else max_message_bytes_from_env()
    if limit <= 0:
        raise ValueError(f"max_message_bytes must be positive, not {limit}")
    core = McpLoopGuard(guard or LoopGuard(LoopDetectionConfig(enabled=True)),
                        session=session, agent_id=agent_id,
                        max_pending_calls=max_pending_calls,
                        max_pending_bytes=max_pending_bytes,
                        exit_behavior=exit_behavior, max_grants=max_grants)
    loop = asyncio.get_running_loop()
    signalled: asyncio.Future[int] = loop.create_future()
    caught = _catch_signals(loop, signalled) if handle_signals else []
    try:
        code = await _serve(core, command, cwd, env, stdin, stdout, limit, signalled)
    finally:
        for signum in caught:
            loop.remove_signal_handler(signum)
        if summary := core.stats.summary():
            log.warning("mcp-proxy: connection closed: %s", summary)
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
        # A proxy killed outright (SIGKILL, OOM) cannot stop it: the kernel does (Linux).
        **die_with_parent(),
    )
    assert process.stdin is not None and process.stdout is not None
    to_client = ThreadWriter(stdout or sys.stdout.buffer)
    from_client = frames(thread_chunks(stdin or sys.stdin.buffer), limit)
    from_upstream = frames(functools.partial(process.stdout.read, CHUNK), limit)
    client = asyncio.create_task(
        _pump_client(core, from_client, process.stdin, to_client, limit))
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
                       upstream: asyncio.StreamWriter, to_client: ThreadWriter,
                       limit: int) -> None:
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
            forward, replies = await _client_line(core, line, limit)
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


async def _client_line(core: McpLoopGuard, line: bytes,
                       limit: int) -> tuple[bytes | None, list[bytes]]:
    """The bytes to forward upstream (None: nothing) and the replies for the client. Nothing
    goes on unread: a line that is not UTF-8 JSON is answered with a parse error, and a
    request the guard could not inspect with an internal error."""
    if line.startswith(_BOM):  # harmless, and no part of JSON: read (and sent on) without it
        line = line[len(_BOM):]
    message, reason = _read_client(line)
    if message is _UNPARSED:
        core.stats.unreadable_lines += 1
        return _unreadable(line, reason, limit)
    try:
        forward, replies = await core.from_client(message, size=len(line))
        out = None if forward is None else _with_newline(line) if forward is message \
            else _dump(forward)
        return out, [_dump(reply) for reply in replies]
    except Exception as exc:
        _not_inspected("client", exc)
        if not _has_request(message):
            return _with_newline(line), []  # nothing that a guard could stop
        log.error("mcp-proxy: answered that client request with an error instead of "
                  "forwarding it unguarded")
        return None, [_dump(_error(_plain_id(message), -32603,
                                   f"{_PROXY}: could not inspect this request; it was not "
                                   "forwarded"))]


async def _upstream_message(core: McpLoopGuard, message: Any, line: bytes) -> bytes:
    try:
        out = await core.from_upstream(message)
        return line if out is message and line else _dump(out)
    except Exception as exc:
        _not_inspected("server", exc)
        return line or _dump(message)


def _read_client(line: bytes) -> tuple[Any, str]:
    """A client's message, or :data:`_UNPARSED` and why. Strict UTF-8 JSON like
    :func:`_parse`; nesting too deep for ``json`` (a limit of its recursive parser, not of
    JSON) is read by orjson, which goes to 1,024 levels without recursing in Python."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return _UNPARSED, "not UTF-8"
    try:
        return json.loads(text), ""
    except RecursionError:
        pass
    except ValueError:
        return _UNPARSED, "not JSON"
    try:
        return orjson.loads(text), ""
    except orjson.JSONDecodeError:
        return _UNPARSED, "nested deeper than 1,024 levels, or not JSON"


def _unreadable(line: bytes, reason: str, limit: int) -> tuple[bytes | None, list[bytes]]:
    """A client line the proxy cannot read goes no further: JSON-RPC answers it with a parse
    error (the request's id when its ends show it, else null). A response the server waits
    for gets an error in its place. Logged by size and reason, never by content."""
    kind, request_id = peek(Overlong(len(line), limit, line[:PEEK], line[-PEEK:]))
    what = f"{len(line)} bytes, {reason}"
    if kind == "response":
        log.error("mcp-proxy: dropped an unreadable response from the client (%s)%s", what,
                  "" if request_id is None else "; the server gets an error for its request")
        if request_id is None:
            return None, []
        return _dump(_error(request_id, -32603, f"{_PROXY}: the client's response could not "
                                                f"be read ({reason})")), []
    log.error("mcp-proxy: refused an unreadable line from the client (%s): answered it with a "
              "parse error, not forwarded", what)
    return None, [_dump(_error(request_id, -32700, f"{_PROXY}: parse error: the message is "
                                                   f"{reason}; it was not forwarded"))]


def _has_request(message: Any) -> bool:
    items = message if isinstance(message, list) else [message]
    return any(isinstance(m, dict) and "method" in m and "id" in m for m in items)


def _plain_id(message: Any) -> Any:
    """The id to answer ``message`` with: its own when it is a plain string or number."""
    request_id = message.get("id") if isinstance(message, dict) else None
    if isinstance(request_id, (str, int, float)) and not isinstance(request_id, bool):
        return request_id
    return None


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
