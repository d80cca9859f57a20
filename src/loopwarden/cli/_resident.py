"""A resident ``claude-hook`` process, so that a hook pays an interpreter start, not the imports.

Claude Code starts the hook command twice per tool call. Importing the guard, the engine and the
SQLite store costs a new process far more than answering does, so the first hook of a project
answers in its own process as before and leaves a server behind; later hooks hand their payload
to it over a Unix socket and print its answer. The server runs the very same
:func:`loopwarden.cli.claude_hook.run`, against the same SQLite file, so answers are the same
whichever process gives them; only the imports are shared.

One server serves one setup: the socket is named by a hash of loopwarden's version, the
interpreter, the working directory, the hook's arguments and the environment that decides where
state and config are read from, so a hook started any other way never talks to it. The server
answers one hook at a time, exits after :data:`IDLE_SECONDS` without a hook, and after any hook
once loopwarden's own files changed on disk (an upgrade, an edit of a checkout). Anything that
goes wrong on the way — no server yet, a stale socket, a server that died mid-answer, a runtime
directory someone else could write to — makes the hook answer in its own process: never an
error, never a lost call (a payload given twice is a retried hook, which the guard counts once).

``LOOPWARDEN_HOOK_SERVER=0`` keeps every hook in its own process.

Kept to the standard library, and imported before anything of the guard's: this is the code the
fast path runs.
"""

from __future__ import annotations

# The client's whole cost is its imports: the C modules, not socket.py (which loads enum),
# json (re) or hashlib (OpenSSL). The server, which imports everything anyway, uses socket.
import _socket
import io
import os
import sys
import time
import zlib

TYPE_CHECKING = False  # (typing not imported: see loopwarden/__init__.py)
if TYPE_CHECKING:
    import socket
    from collections.abc import Callable, Sequence

ENV = "LOOPWARDEN_HOOK_SERVER"
IDLE_ENV = "LOOPWARDEN_HOOK_SERVER_IDLE"
IDLE_SECONDS = 600.0
# The server answers in milliseconds; one stuck past this is given up on, and the hook answers
# in its own process (well inside Claude Code's own hook timeout).
_ANSWER_TIMEOUT_SECONDS = 5.0
_MAX_SOCKET_PATH = 100
# What decides which database, config and presets a hook uses, besides its arguments.
_ENV_KEYS = ("HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME")
_ENV_PREFIX = "LOOPWARDEN_"


def enabled() -> bool:
    """Whether hooks may use a resident server here (a POSIX system, not switched off)."""
    return (os.environ.get(ENV, "1") != "0" and os.name == "posix"
            and hasattr(_socket, "AF_UNIX"))


def socket_path(argv: Sequence[str]) -> str | None:
    """The socket of the server for hooks started like this one, or None when there is no
    private place for it (a runtime directory that is not ours alone)."""
    from .. import __version__

    env = sorted((k, v) for k, v in os.environ.items()
                 if k in _ENV_KEYS or (k.startswith(_ENV_PREFIX) and k != IDLE_ENV))
    try:
        cwd = os.getcwd()
    except OSError:
        return None
    key = repr((__version__, sys.executable, cwd, list(argv), env)).encode("utf-8", "replace")
    folder = _private_dir()
    if folder is None:
        return None
    # Only names a server among one user's own (the folder is private): two CRC-32s, 64 bits,
    # keep setups apart without loading a hash library.
    name = f"{zlib.crc32(key):08x}{zlib.crc32(key, 0x9E3779B9):08x}"
    path = os.path.join(folder, f"hook-{name}.sock")
    # A Unix socket's path has a short limit (108 bytes on Linux, 104 on macOS).
    return path if len(os.fsencode(path)) <= _MAX_SOCKET_PATH else None


def _private_dir() -> str | None:
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    folder = os.path.join(base, f"loopwarden-{os.getuid()}")
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        info = os.lstat(folder)
    except OSError:
        return None
    # Another user's folder, a link, or one others may write to: a socket there could be theirs.
    import stat

    if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid()
            or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
        return None
    return folder


def answer_resident(argv: Sequence[str], payload: bytes) -> int | None:
    """Hand ``payload`` to the resident server and print its answer; returns the exit code, or
    None when no server answered (then nothing was printed)."""
    path = socket_path(argv)
    if path is None:
        return None
    try:
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            conn.settimeout(_ANSWER_TIMEOUT_SECONDS)
            conn.connect(path)
            conn.sendall(b"%d\n" % len(payload) + payload)
            conn.shutdown(_socket.SHUT_WR)
            reply = _read_all(conn)
        finally:
            conn.close()
    except OSError:
        return None
    parsed = _parse_reply(reply)
    if parsed is None:
        return None
    code, out, err = parsed
    if out:
        sys.stdout.buffer.write(out)
        sys.stdout.flush()
    if err:
        sys.stderr.buffer.write(err)
        sys.stderr.flush()
    return code


def start_server(argv: Sequence[str]) -> None:
    """Start a server for hooks started like this one, detached, unless one cannot be."""
    import contextlib
    import subprocess

    if socket_path(argv) is None:
        return
    code = "import sys; from loopwarden.cli.claude_hook import serve; sys.exit(serve(sys.argv[1:]))"
    # (On failure the next hook answers in its own process, and tries again.)
    with contextlib.suppress(OSError):
        subprocess.Popen(
            [sys.executable, "-c", code, *argv], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            close_fds=True)


def serve(argv: Sequence[str], run: Callable[[Sequence[str]], int]) -> int:
    """Serve hooks started with ``argv`` until idle: each payload is answered by ``run(argv)``
    with the payload as stdin. Returns 0, also when another server already serves them."""
    import fcntl

    path = socket_path(argv)
    if path is None:
        return 0
    lock = open(path + ".lock", "a+")  # noqa: SIM115 - held for the server's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return 0  # another server holds it
    # Who serves: for an operator (or a test) who wants it gone before it is idle.
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    import signal

    # Stopped (kill, a logout): leave as at idle, taking the socket file along.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        with _listening(path) as listener:
            _serve_until_idle(listener, list(argv), run)
    except OSError:
        pass  # no socket to be had: hooks go on answering in their own processes
    finally:
        lock.close()
    return 0


class _listening:
    """The server's socket, bound with only its owner able to connect, removed at exit."""

    def __init__(self, path: str) -> None:
        import socket

        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def __enter__(self) -> socket.socket:
        # The lock is ours, so a socket file left here is a dead server's.
        if os.path.exists(self.path):
            os.unlink(self.path)
        old = os.umask(0o177)
        try:
            self.sock.bind(self.path)
        finally:
            os.umask(old)
        self.sock.listen(64)
        return self.sock

    def __exit__(self, *exc: object) -> None:
        import contextlib

        self.sock.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def _serve_until_idle(listener: socket.socket, argv: list[str],
                      run: Callable[[Sequence[str]], int]) -> None:
    try:
        idle = float(os.environ.get(IDLE_ENV, IDLE_SECONDS))
    except ValueError:
        idle = IDLE_SECONDS
    listener.settimeout(idle)
    code_stamp = _code_stamp()
    checked = time.monotonic()
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            return
        except OSError:
            return
        with conn:
            try:
                conn.settimeout(_ANSWER_TIMEOUT_SECONDS)
                payload = _parse_request(_read_all(conn))
                if payload is not None:  # else not a hook: the client answers it itself
                    conn.sendall(_answer(argv, payload, run))
            except Exception:  # a client that gave up, a bug: it answers in its own process
                pass
        # (At most once a second: a tool call's two hooks come milliseconds apart.)
        if time.monotonic() - checked >= 1.0:
            checked = time.monotonic()
            if _code_stamp() != code_stamp:
                return  # loopwarden changed on disk: the next hook starts a server running it


def _answer(argv: list[str], payload: bytes, run: Callable[[Sequence[str]], int]) -> bytes:
    """Run one hook with ``payload`` as stdin; its exit code, stdout and stderr, framed."""
    saved = sys.stdin, sys.stdout, sys.stderr
    out, err = io.BytesIO(), io.BytesIO()
    stdin = io.TextIOWrapper(io.BytesIO(payload), encoding="utf-8")
    stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace",
                              write_through=True)
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        code = run(argv)
    except Exception as exc:  # whatever it was, this hook must be answered
        from ._exits import crash_message

        stderr.write(crash_message("claude-hook", exc) + "\n")
        code = 1
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        stdout.flush()
        stderr.flush()
        # Detached, so that the wrappers, once collected, do not close the buffers read here.
        stdout.detach()
        stderr.detach()
    body_out, body_err = out.getvalue(), err.getvalue()
    return b"%d\n%d\n%d\n" % (code, len(body_out), len(body_err)) + body_out + body_err


def _code_stamp() -> tuple[tuple[str, int], ...]:
    """When each of loopwarden's own modules last changed on disk."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    stamps = []
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                try:
                    stamps.append((path, os.stat(path).st_mtime_ns))
                except OSError:
                    stamps.append((path, -1))
    return tuple(sorted(stamps))


def _read_all(conn: socket.socket | _socket.socket) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _parse_request(request: bytes) -> bytes | None:
    head, sep, body = request.partition(b"\n")
    if not sep or not head.isdigit() or int(head) != len(body):
        return None
    return body


def _parse_reply(reply: bytes) -> tuple[int, bytes, bytes] | None:
    """A complete answer, or None (a server that died while answering sent part of one)."""
    parts = reply.split(b"\n", 3)
    if len(parts) != 4 or not all(p.lstrip(b"-").isdigit() for p in parts[:3]):
        return None
    code, n_out, n_err = (int(p) for p in parts[:3])
    body = parts[3]
    if n_out < 0 or n_err < 0 or len(body) != n_out + n_err:
        return None
    return code, body[:n_out], body[n_out:]
