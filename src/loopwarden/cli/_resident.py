"""A resident ``claude-hook`` process, so that a hook pays an interpreter start, not the imports:
the client half (what a hook runs) and what both halves share. The server is
:mod:`loopwarden.cli._resident_server`.

Claude Code starts the hook command twice per tool call. Importing the guard, the engine and the
SQLite store costs a new process far more than answering does, so the first hook of a project
answers in its own process as before and leaves a server behind; later hooks hand their payload
to it over a Unix socket and print its answer. The server runs the very same
:func:`loopwarden.cli.claude_hook.run`, against the same SQLite file, so answers are the same
whichever process gives them; only the imports are shared.

**One server per setup.** The socket is named by a BLAKE2b hash (128 bits) of the code the hook
runs (the path, size and modification time of every loopwarden source file, and the
interpreter), the working directory, the hook's arguments and the environment that decides
where state and config are read from, so a hook started any other way, or running other code,
never talks to it. Files live in a private runtime folder (``$XDG_RUNTIME_DIR/loopwarden-UID``,
else ``/tmp/loopwarden-UID``), per setup ``hook-KEY.sock`` (the socket), ``hook-KEY.sock.lock``
(held by the server, 0600, its pid inside) and, after a stall, ``hook-KEY.stalled``.

**The exchange** (one connection per hook)::

    client: b"<length>\\n" + payload
    server: b"?"  (claimed: this server will answer it)   or  b"x"  (refused: answer it yourself)
    client: b"!"  (still waiting: go on)                  or  hangs up (gave up: never run)
    server: b"<exit code>\\n<len stdout>\\n<len stderr>\\n" + stdout + stderr

The server runs a payload only after the client's ``!``, and a client that sent ``!`` waits for
the answer, so a payload is answered, and recorded, by one process only: a client that timed
out on a stopped server answers in its own process, and the server, once running again, finds
that client gone and drops the payload.

**Failure modes.** Anything that goes wrong — no server yet, a stale socket, a server that died
mid-answer, refused because its project folder was replaced or its code changed, a runtime
folder someone else could write to — makes the hook answer in its own process: never an error.
A server that does not answer within :data:`ANSWER_TIMEOUT_SECONDS` (stopped, hung) costs one
timeout: the hook writes ``hook-KEY.stalled`` (the server's pid), later hooks skip that socket
for :data:`STALL_BACKOFF_SECONDS`, and the next server started replaces the stalled one.

``LOOPWARDEN_HOOK_SERVER=0`` keeps every hook in its own process.

Kept to the standard library, and imported before anything of the guard's: this is the code the
fast path runs.
"""

from __future__ import annotations

# The client's whole cost is its imports: the C modules, not socket.py (which loads enum),
# json (re) or hashlib (OpenSSL). The server, which imports everything anyway, uses socket.
import _socket
import os
import sys
import time

TYPE_CHECKING = False  # (typing not imported: see loopwarden/__init__.py)
if TYPE_CHECKING:
    import socket
    from collections.abc import Sequence

ENV = "LOOPWARDEN_HOOK_SERVER"
IDLE_ENV = "LOOPWARDEN_HOOK_SERVER_IDLE"
IDLE_SECONDS = 600.0
# Longer is a mistake (a timeout that big does not even fit the socket layer), not a wish.
_MAX_IDLE_SECONDS = 365 * 24 * 3600.0
# The server answers in milliseconds; one stuck past this is given up on, and the hook answers
# in its own process (well inside Claude Code's own hook timeout).
ANSWER_TIMEOUT_SECONDS = 5.0
# After a server stalled, hooks do not try its socket for this long (unless a new server
# replaced it sooner): one timeout per stall, not one per hook.
STALL_BACKOFF_SECONDS = 60.0
_MAX_SOCKET_PATH = 100
# What decides which database, config and presets a hook uses, besides its arguments; and
# whether Claude Code has a user to ask (exit_behavior="ask"): the server answers with its own
# environment, so an interactive session's server must not answer `claude -p`'s hooks.
_ENV_KEYS = ("HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME",
             "CLAUDE_CODE_SESSION_ATTENDED", "CLAUDE_CODE_ENTRYPOINT")
_ENV_PREFIX = "LOOPWARDEN_"
# The exchange's one-byte messages (see the module docstring).
CLAIM, REFUSE, GO = b"?", b"x", b"!"
# In the server's command line, for whoever must tell a hook server from any other process.
SERVER_MARK = "loopwarden-hook-server"
# What the server process runs. The project folder is data (argv), not the working directory it
# starts in, and the path entry `python -c` adds for its working directory is removed first: no
# module of the project (a json.py, a pydantic/ folder) can shadow the ones the hook imports.
# The folder loopwarden was imported from is appended, so the server finds the same code.
_SERVER_CODE = f"""# {SERVER_MARK}
import sys
sys.path[:] = [entry for entry in sys.path if entry]
if sys.argv[1] not in sys.path:
    sys.path.append(sys.argv[1])
import os
os.chdir(sys.argv[2])
from loopwarden.cli.claude_hook import serve
sys.exit(serve(sys.argv[3:]))
"""

_code: str | None = None


def enabled() -> bool:
    """Whether hooks may use a resident server here (a POSIX system, not switched off)."""
    return (os.environ.get(ENV, "1") != "0" and os.name == "posix"
            and hasattr(_socket, "AF_UNIX"))


def socket_path(argv: Sequence[str]) -> str | None:
    """The socket of the server for hooks started like this one, or None when there is no
    private place for it (a runtime directory that is not ours alone)."""
    env = sorted((k, v) for k, v in os.environ.items()
                 if k in _ENV_KEYS or (k.startswith(_ENV_PREFIX) and k != IDLE_ENV))
    try:
        cwd = os.getcwd()
    except OSError:
        return None
    folder = private_dir()
    if folder is None:
        return None
    key = repr((code_identity(), sys.executable, sys.version, cwd, list(argv), env))
    path = os.path.join(folder, f"hook-{key_name(key.encode('utf-8', 'surrogatepass'))}.sock")
    # A Unix socket's path has a short limit (108 bytes on Linux, 104 on macOS).
    return path if len(os.fsencode(path)) <= _MAX_SOCKET_PATH else None


def key_name(key: bytes) -> str:
    """The 32 hex digits (BLAKE2b, 128 bits) that name the server of a setup's ``key``."""
    try:
        from _blake2 import blake2b  # the C module alone: hashlib would load OpenSSL
    except ImportError:  # pragma: no cover - a Python built without it
        from hashlib import blake2b
    return blake2b(key, digest_size=16).hexdigest()


def lock_path(sock: str) -> str:
    """The lock file the server of ``sock`` holds while it runs (its pid inside)."""
    return sock + ".lock"


def stall_path(sock: str) -> str:
    """The marker a hook leaves when the server of ``sock`` stalled (that server's pid inside)."""
    return sock[: -len(".sock")] + ".stalled"


def code_identity() -> str:
    """The code this process runs as hooks see it: where loopwarden was imported from, and the
    size and modification time of each of its source files. Computed once per process (a
    hook's process answers one hook; the server looks again with :func:`scan_code`)."""
    global _code
    if _code is None:
        _code = scan_code()
    return _code


def scan_code() -> str:
    """:func:`code_identity`, read from disk now (about a millisecond)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    entries = [root]
    folders = [root]
    while folders:
        folder = folders.pop()
        try:
            listing = list(os.scandir(folder))
        except OSError:
            entries.append(f"{folder} unreadable")
            continue
        for entry in listing:
            name = entry.name
            if name.endswith(".py"):
                try:
                    info = entry.stat()
                except OSError:
                    entries.append(f"{entry.path} gone")
                    continue
                entries.append(f"{entry.path} {info.st_size} {info.st_mtime_ns}")
            elif name != "__pycache__" and entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
    entries.sort()
    return "\n".join(entries)


def private_dir() -> str | None:
    """This user's runtime folder for the servers, created if need be; None when it is not
    private (another user's, a link, or writable by others: a socket there could be theirs)."""
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
    import stat

    if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid()
            or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
        return None
    return folder


def idle_seconds(*, warn: bool) -> float:
    """How long a server waits for a hook before it exits: ``LOOPWARDEN_HOOK_SERVER_IDLE``, or
    :data:`IDLE_SECONDS` when unset or not a positive, finite number of seconds (then, with
    ``warn``, one line on stderr says so)."""
    raw = os.environ.get(IDLE_ENV)
    if raw is None:
        return IDLE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    # (NaN fails every comparison, so it is refused too.)
    if 0 < value <= _MAX_IDLE_SECONDS:
        return value
    if warn:
        sys.stderr.write(f"loopwarden: {IDLE_ENV}={raw!r} is not a positive number of seconds "
                         f"(at most a year); using the default, {IDLE_SECONDS:g}\n")
    return IDLE_SECONDS


def answer_resident(argv: Sequence[str], payload: bytes) -> int | None:
    """Hand ``payload`` to the resident server and print its answer; returns the exit code, or
    None when no server answered (then nothing was printed, and the payload was not run)."""
    path = socket_path(argv)
    if path is None or _stalled(path):
        return None
    try:
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            conn.settimeout(ANSWER_TIMEOUT_SECONDS)
            conn.connect(path)
            conn.sendall(b"%d\n" % len(payload) + payload)
            if conn.recv(1) != CLAIM:
                return None  # refused, or gone: nothing was run
            conn.sendall(GO)
            conn.shutdown(_socket.SHUT_WR)
            reply = read_all(conn)
        finally:
            conn.close()
    except TimeoutError:
        _mark_stalled(path)
        return None
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


def _stalled(path: str) -> bool:
    """Whether the server of ``path`` stalled a short while ago (then it is not tried)."""
    try:
        since = time.time() - os.stat(stall_path(path)).st_mtime
    except OSError:
        return False
    return 0 <= since < STALL_BACKOFF_SECONDS


def _mark_stalled(path: str) -> None:
    """Leave the marker: later hooks skip this server, and the next one started replaces it."""
    try:
        with open(lock_path(path), "rb") as lock:
            pid = lock.read(32).strip()
        fd = os.open(stall_path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, pid + b"\n")
        finally:
            os.close(fd)
    except OSError:
        pass  # no marker: the next hook waits for that server once more


def start_server(argv: Sequence[str]) -> None:
    """Start a server for hooks started like this one, detached, unless one cannot be (it
    replaces a server that stalled; it exits at once when a live one serves already)."""
    import contextlib
    import subprocess

    path = socket_path(argv)
    if path is None:
        return
    idle_seconds(warn=True)  # a bad value: said once here, where stderr reaches someone
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # (On failure the next hook answers in its own process, and tries again.)
    with contextlib.suppress(OSError):
        subprocess.Popen(
            [sys.executable, "-c", _SERVER_CODE, root, os.getcwd(), *argv],
            cwd=os.path.dirname(path), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def read_all(conn: socket.socket | _socket.socket) -> bytes:
    """Everything the peer sends until it closes its end."""
    chunks: list[bytes] = []
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


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
