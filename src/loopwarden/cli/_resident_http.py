"""The resident ``claude-hook`` server over HTTP on 127.0.0.1, for Claude Code's ``type: "http"``
hooks: Claude Code posts the hook's JSON input and reads the answer from the response, with no
process started per hook (the command hook pays an interpreter start, twice per tool call).

Each request is answered by the very :func:`loopwarden.cli._resident_server._answer` the Unix
socket server uses, so the answer is the command hook's: exit code 0 is ``200`` with the hook's
stdout as the body (its JSON decision, or empty); any other exit code is ``500`` with its stderr,
which Claude Code treats as a non-blocking error, as it treats the command hook's exit code 1.

**Who may connect.** A TCP port on 127.0.0.1 is open to every local user, so each connection's
owner is looked up before anything is read: on Linux the kernel lists every TCP socket with its
owner's uid in ``/proc/net/tcp`` and ``/proc/net/tcp6``; the client's socket is the one whose
local port is the peer's port and whose remote port is ours. A connection from another uid, or
one that cannot be found, gets ``403`` and nothing of it is run or recorded. Elsewhere (no
``/proc/net/tcp``) the server does not start: the command hook stays the way in.

**When it is down.** Claude Code treats a failed http hook (refused connection, timeout, non-2xx)
as a non-blocking error: the tool call goes ahead unguarded, and the call is not recorded. The
installer's ``SessionStart`` command hook starts the server, so a session that starts finds it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Sequence

from . import _resident
from ._resident_server import _answer

DEFAULT_PORT = 47913
_MAX_BODY_BYTES = 64 * 1024 * 1024
_MAX_HEAD_BYTES = 64 * 1024
_PROC_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def connection_uid(conn: socket.socket) -> int | None:
    """The uid owning the other end of ``conn`` (a TCP connection accepted on this host), from
    ``/proc/net/tcp(6)``; None when it is not listed (another host, a closed socket, no /proc)."""
    peer_port = conn.getpeername()[1]
    our_port = conn.getsockname()[1]
    for table in _PROC_TABLES:
        try:
            with open(table, encoding="ascii") as handle:
                next(handle, None)  # the header line
                for line in handle:
                    fields = line.split()
                    if len(fields) < 8:
                        continue
                    local, remote = fields[1], fields[2]
                    if (int(local.rsplit(":", 1)[1], 16) == peer_port
                            and int(remote.rsplit(":", 1)[1], 16) == our_port):
                        return int(fields[7])
        except (OSError, ValueError):
            continue
    return None


def serve_http(argv: Sequence[str], run: Callable[[Sequence[str]], int], port: int) -> int:
    """Answer http hooks on ``127.0.0.1:port`` with ``run(argv)`` until idle; returns 0, also
    when the port is taken (a server already serves it) or uids cannot be checked here."""
    if not all(os.path.exists(table) for table in _PROC_TABLES[:1]):
        return 0
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
    except OSError:
        listener.close()
        return 0
    with listener:
        _serve(listener, list(argv), run)
    return 0


def _serve(listener: socket.socket, argv: list[str], run: Callable[[Sequence[str]], int]) -> None:
    idle = _resident.idle_seconds(warn=False)
    code = _resident.code_identity()
    folder = os.getcwd()
    last = checked = time.monotonic()
    while True:
        left = idle - (time.monotonic() - last)
        if left <= 0:
            return
        listener.settimeout(min(left, 30.0))
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        except OSError:
            return
        last = time.monotonic()
        with conn:
            if time.monotonic() - checked >= 1.0:
                checked = time.monotonic()
                if _resident.scan_code() != code or not os.path.isdir(folder):
                    # New code or a gone folder: refuse, and leave the port to a new server.
                    with contextlib.suppress(OSError):
                        conn.sendall(_response(503, b"loopwarden: hook server restarting\n"))
                    return
            with contextlib.suppress(Exception):  # a client gone, a bug: that hook fails open
                _exchange(conn, argv, run)


def _exchange(conn: socket.socket, argv: list[str], run: Callable[[Sequence[str]], int]) -> None:
    conn.settimeout(_resident.ANSWER_TIMEOUT_SECONDS)
    ours = connection_uid(conn) == os.getuid()  # (looked up first, while surely connected)
    body = _read_post(conn)  # read even when refused, so that the client sees the 403
    if not ours:
        conn.sendall(_response(403, b"loopwarden: not this user's connection\n"))
        return
    if body is None:
        conn.sendall(_response(400, b"loopwarden: expected a POST with a JSON body\n"))
        return
    reply = _answer(argv, body, run)
    head, _, rest = reply.partition(b"\n")
    n_out, _, rest = rest.partition(b"\n")
    n_err, _, payload = rest.partition(b"\n")
    out, err = payload[: int(n_out)], payload[int(n_out): int(n_out) + int(n_err)]
    if int(head) == 0:
        conn.sendall(_response(200, out, json=True))
    else:
        conn.sendall(_response(500, err or b"loopwarden: hook failed\n"))


def _read_post(conn: socket.socket) -> bytes | None:
    """The body of one ``POST`` request with a Content-Length, or None for anything else."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk or len(data) > _MAX_HEAD_BYTES:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"POST "):
        return None
    size = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            size = int(value.strip())
    if size is None or size > _MAX_BODY_BYTES:
        return None
    while len(body) < size:
        chunk = conn.recv(min(65536, size - len(body)))
        if not chunk:
            return None
        body += chunk
    return body[:size]


_REASONS = {200: b"OK", 400: b"Bad Request", 403: b"Forbidden", 500: b"Internal Server Error",
            503: b"Service Unavailable"}


def _response(status: int, body: bytes, *, json: bool = False) -> bytes:
    kind = b"application/json" if json else b"text/plain; charset=utf-8"
    return (b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n" % (status, _REASONS[status], kind, len(body))) + body
