"""The resident ``claude-hook`` server over HTTP on 127.0.0.1, for Claude Code's ``type: "http"``
hooks: Claude Code posts the hook's JSON input and reads the answer from the response, with no
process started per hook (the command hook pays an interpreter start, twice per tool call).

Each request is answered by the very :func:`loopwarden.cli._resident_server.answer_payload` the Unix
socket server uses, so the answer is the command hook's: exit code 0 is ``200`` with the hook's
stdout as the body (its JSON decision, or empty); any other exit code is ``500`` with its stderr,
which Claude Code treats as a non-blocking error, as it treats the command hook's exit code 1.

**Who may connect.** A TCP port on 127.0.0.1 is open to every local user, so each connection's
owner is looked up before anything is read: on Linux the kernel tells the uid of the client's
socket (the one whose local address is the peer's and whose remote address is ours) through
sock_diag, as ``ss`` asks it, or else lists it in ``/proc/net/tcp`` and ``/proc/net/tcp6``. A
connection from another uid, or one that cannot be found, gets ``403`` and nothing of it is run
or recorded. Elsewhere (no
``/proc/net/tcp``) the server does not start: the command hook stays the way in.

**When it is down.** Claude Code treats a failed http hook (refused connection, timeout, non-2xx)
as a non-blocking error: the tool call goes ahead unguarded, and the call is not recorded. So
the server is kept up as long as it may be needed:

- The installer's ``SessionStart`` and ``UserPromptSubmit`` command hooks (``claude-hook
  --http-start PORT``: one process per prompt, not per tool call) start it when it does not
  answer, wait until it does (or tell the user, as a ``systemMessage``, that tool calls go
  ahead unguarded), and register the Claude Code process that ran the hook (its nearest ancestor that is not a
  shell, by pid and start time, so a reused pid is not taken for it) as a file
  ``http-PORT-session-PID-START`` in the private runtime folder. The server's idle timeout
  (``LOOPWARDEN_HOOK_SERVER_IDLE``, 10 minutes) only ends it once no registered session process
  is alive: an open session that rests for an hour still finds it.
- New loopwarden code (an upgrade) is not answered by the old process: the server starts one
  with the new code, hands it the listening socket and the connection it just accepted (so no
  request is refused and the port is never free), and exits once the new one runs. Only when
  the new one cannot start does the old one answer ``503`` and exit, as does a server whose
  project folder is gone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

from . import _resident
from ._resident_server import answer_payload

DEFAULT_PORT = 47913
_MAX_BODY_BYTES = 64 * 1024 * 1024
_MAX_HEAD_BYTES = 64 * 1024
_PROC_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
# linux/netlink.h, linux/sock_diag.h, linux/inet_diag.h
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NO_COOKIE = (0xFFFFFFFF, 0xFFFFFFFF)
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "busybox"})
# The flag that hands a new server the old one's sockets: --http-serve PORT --inherit L,C,R ARGS
# (the listening socket, the accepted connection, the pipe that says the new one runs).
_INHERIT = "--inherit"
# How long an old server waits for its successor to say it runs, before it answers 503 itself.
_HANDOVER_SECONDS = 4.0
# How long the start hook waits for the server it started to answer (about half a second on a
# quiet machine; far longer on a loaded one, and better late than unguarded).
_START_SECONDS = 20.0
_PROBE_SECONDS = 3.0
# What the server process runs, as the Unix socket server's (loopwarden.cli._resident): no
# module of the project folder can shadow the ones the server imports.
_SERVER_CODE = """# loopwarden-hook-server (http)
import sys
sys.path[:] = [entry for entry in sys.path if entry]
if sys.argv[1] not in sys.path:
    sys.path.append(sys.argv[1])
import os
os.chdir(sys.argv[2])
from loopwarden.cli.claude_hook import run
sys.exit(run(sys.argv[3:]))
"""


def connection_uid(conn: socket.socket) -> int | None:
    """The uid owning the other end of ``conn`` (a TCP connection accepted on this host), asked
    of the kernel for that one socket (sock_diag netlink), else from ``/proc/net/tcp(6)``; None
    when it is not listed (another host, a closed socket, no /proc)."""
    try:
        return kernel_uid(conn)
    except (OSError, ValueError, AttributeError, struct.error):  # no sock_diag (a sandbox)
        return proc_table_uid(conn)


def kernel_uid(conn: socket.socket) -> int | None:
    """The client socket's uid from the kernel's sock_diag (what ``ss`` asks): one exact lookup
    instead of /proc/net/tcp, which the kernel writes out whole on every read (milliseconds)."""
    if conn.family != socket.AF_INET:
        raise ValueError("sock_diag lookup is written for IPv4")
    client_ip, client_port = conn.getpeername()[:2]
    our_ip, our_port = conn.getsockname()[:2]
    # inet_diag_req_v2 for the client's socket: its own address first, then ours; any state.
    sockid = struct.pack("!HH16s16s", client_port, our_port, socket.inet_aton(client_ip),
                         socket.inet_aton(our_ip)) + struct.pack("=III", 0, *_NO_COOKIE)
    request = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
    message = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST,
                          1, 0) + request
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as netlink:
        netlink.settimeout(1.0)
        netlink.sendto(message, (0, 0))
        reply = netlink.recv(65536)
    _, kind = struct.unpack_from("=IH", reply)
    if kind == _NLMSG_ERROR:
        if -struct.unpack_from("=i", reply, 16)[0] == errno.ENOENT:
            return None  # no such socket: not a connection from this host
        raise OSError("sock_diag refused the lookup")
    if kind != _SOCK_DIAG_BY_FAMILY:
        raise ValueError(f"unexpected sock_diag answer {kind}")
    # nlmsghdr (16) + inet_diag_msg: family, state, timer, retrans (4), the socket id (48),
    # expires, rqueue, wqueue (12), then the uid.
    return int(struct.unpack_from("=I", reply, 16 + 64)[0])


def proc_table_uid(conn: socket.socket) -> int | None:
    """The client socket's uid from ``/proc/net/tcp(6)`` (where sock_diag is not available)."""
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


def start_http(port: int, argv: Sequence[str]) -> str | None:
    """The ``SessionStart`` and ``UserPromptSubmit`` hook: register the Claude Code session that
    runs it, and start the server for ``port`` detached unless it answers already; wait until it
    answers. Returns what the user must be told when no loopwarden server answers there (the
    tool calls then go ahead unguarded), else None."""
    register_session(port)
    state = _probe(port)
    if state is None:
        _spawn(port, argv)
        deadline = time.monotonic() + _START_SECONDS
        while state is None and time.monotonic() < deadline:
            time.sleep(0.05)
            state = _probe(port)
    if state:
        return None
    where = f"the loopwarden http hook server on 127.0.0.1:{port}"
    problem = ("did not start" if state is None
               else "cannot listen: another program holds the port")
    return (f"loopwarden: {where} {problem}; tool calls go ahead unguarded and unrecorded "
            "(`loopwarden install claude-code --check` says more)")


def _probe(port: int) -> bool | None:
    """Whether loopwarden's server answers on ``port`` (a GET, which it refuses without running
    anything): True, False for another program, None when nothing listens."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=_PROBE_SECONDS) as probe:
            probe.sendall(b"GET / HTTP/1.0\r\n\r\n")
            answer = b""
            while chunk := probe.recv(4096):
                answer += chunk
    except ConnectionRefusedError:
        return None
    except OSError:
        return False
    return b"\r\n\r\nloopwarden:" in answer


def _spawn(port: int, argv: Sequence[str], *, inherit: Sequence[int] = ()) -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    handed = [_INHERIT, ",".join(map(str, inherit))] if inherit else []
    with contextlib.suppress(OSError):  # no server: the http hooks fail open, as documented
        subprocess.Popen([sys.executable, "-c", _SERVER_CODE, root, os.getcwd(), "--http-serve",
                          str(port), *handed, *argv], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, close_fds=True, pass_fds=tuple(inherit))


def serve_http(argv: Sequence[str], run: Callable[[Sequence[str]], int], port: int) -> int:
    """Answer http hooks on ``127.0.0.1:port`` with ``run(argv)`` until idle with no registered
    session alive; returns 0, also when the port is taken (a server already serves it) or uids
    cannot be checked here. ``argv`` starting with ``--inherit L,C,R``: take over an old
    server's listening socket ``L`` and accepted connection ``C``, and say so on pipe ``R``."""
    if not all(os.path.exists(table) for table in _PROC_TABLES[:1]):
        return 0
    if argv[:1] == [_INHERIT]:
        fds = [int(fd) for fd in argv[1].split(",")]
        inherited = socket.socket(fileno=fds[0])
        with socket.socket(fileno=fds[1]) as conn:
            os.write(fds[2], b"r")  # running: the old server may go
            os.close(fds[2])
            with contextlib.suppress(Exception):
                _exchange(conn, list(argv[2:]), run)
        with inherited:
            _serve(inherited, list(argv[2:]), run, port)
        return 0
    listener = _bind(port)
    if listener is None:
        return 0
    with listener:
        _serve(listener, list(argv), run, port)
    return 0


def _bind(port: int) -> socket.socket | None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # The connections a server that went away closed linger (TIME_WAIT) for a minute; on
        # Linux this lets a new server listen meanwhile, never beside a live listener.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
    except OSError:
        listener.close()
        return None
    return listener


def _serve(listener: socket.socket, argv: list[str], run: Callable[[Sequence[str]], int],
           port: int) -> None:
    idle = _resident.idle_seconds(warn=False)
    code = _resident.code_identity()
    folder = os.getcwd()
    last = checked = time.monotonic()
    while True:
        left = idle - (time.monotonic() - last)
        if left <= 0:
            if live_sessions(port):  # an open session may call any time: stay
                last = time.monotonic()
                continue
            listener.close()
            # A session that registered meanwhile found the port taken: serve it after all.
            rebound = _bind(port) if live_sessions(port) else None
            if rebound is None:
                return
            listener = rebound
            last = time.monotonic()
            continue
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
                if not os.path.isdir(folder):  # a gone folder: refuse, and leave the port
                    _refuse(conn)
                    return
                if _resident.scan_code() != code:  # new code answers from now on
                    if not _hand_over(listener, conn, argv, port):
                        _refuse(conn)
                    return
            with contextlib.suppress(Exception):  # a client gone, a bug: that hook fails open
                _exchange(conn, argv, run)


def _hand_over(listener: socket.socket, conn: socket.socket, argv: list[str], port: int) -> bool:
    """Start a server running the new code with ``listener`` and ``conn``; whether it runs."""
    ready_read, ready_write = os.pipe()
    try:
        _spawn(port, argv, inherit=(listener.fileno(), conn.fileno(), ready_write))
        os.close(ready_write)
        readable, _, _ = select.select([ready_read], [], [], _HANDOVER_SECONDS)
        return bool(readable) and os.read(ready_read, 1) == b"r"
    finally:
        os.close(ready_read)


def register_session(port: int) -> None:
    """Register the Claude Code process running this hook as a session of the server on
    ``port`` (nothing when there is no private runtime folder or no such process)."""
    folder = _resident.private_dir()
    session = _session_process()
    if folder is None or session is None:
        return
    pid, started = session
    path = os.path.join(folder, f"http-{port}-session-{pid}-{started}")
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))


def live_sessions(port: int) -> int:
    """How many registered sessions of the server on ``port`` still run (the files of those
    that ended are removed)."""
    folder = _resident.private_dir()
    if folder is None:
        return 0
    prefix = f"http-{port}-session-"
    alive = 0
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            if not name.startswith(prefix):
                continue
            pid, _, started = name[len(prefix):].partition("-")
            stat = _proc_stat(int(pid)) if pid.isdigit() else None
            if stat is not None and stat[2] == started:
                alive += 1
            else:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, name))
    return alive


def _session_process() -> tuple[int, str] | None:
    """The pid and start time of the nearest ancestor that is not a shell: the Claude Code
    process that ran this hook (None past init, or without /proc)."""
    pid = os.getppid()
    while pid > 1:
        stat = _proc_stat(pid)
        if stat is None:
            return None
        name, parent, started = stat
        if name not in _SHELLS:
            return pid, started
        pid = parent
    return None


def _proc_stat(pid: int) -> tuple[str, int, str] | None:
    """The command name, parent pid and start time (clock ticks since boot) of ``pid``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            line = handle.read()
    except OSError:
        return None
    name, _, rest = line.partition(" (")[2].rpartition(")")
    fields = rest.split()
    if len(fields) < 20 or not fields[1].isdigit():
        return None
    # (After the name: state, ppid, ... and, 20th, the start time: field 22 of proc(5).)
    return name, int(fields[1]), fields[19]


def _refuse(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(_response(503, b"loopwarden: hook server restarting\n"))


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
    reply = answer_payload(argv, body, run)
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
