"""The resident ``claude-hook`` server (the client half, the exchange and the files it keeps are
described in :mod:`loopwarden.cli._resident`), and ``claude-hook --stop-servers``.

A server serves one setup, one hook at a time, from the project folder it was started for, and
exits (taking its socket and lock file along):

- after :func:`~loopwarden.cli._resident.idle_seconds` without a hook (10 minutes);
- when its project folder was removed or replaced (``rm -rf`` and ``mkdir`` at the same path):
  it refuses the hook that finds out, which then answers in its own process, from the new folder;
- when loopwarden's files changed on disk (an upgrade, an edit of a checkout; looked at before a
  hook at most once a second, and every half minute while idle): hooks are then keyed to the new
  code and start a server running it;
- on SIGTERM, once the hook it is answering (if any) is answered;
- replaced, when a hook timed out on it (stopped with SIGSTOP, hung): the next server started
  for the setup kills it (SIGKILL, see :func:`_replace_stalled`) and takes over.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence

from . import _resident

# A payload larger than this is no hook input (Claude Code's are kilobytes): not read, refused.
_MAX_PAYLOAD_BYTES = 64 * 1024 * 1024
# While idle the server wakes this often to see whether its folder or its code changed.
_IDLE_CHECK_SECONDS = 30.0
# How long a server that is told to stop gets, before it is killed.
_STOP_GRACE_SECONDS = 2.0


def serve(argv: Sequence[str], run: Callable[[Sequence[str]], int]) -> int:
    """Serve hooks started with ``argv`` until idle: each payload is answered by ``run(argv)``
    with the payload as stdin. Returns 0, also when another server already serves them."""
    path = _resident.socket_path(argv)
    if path is None:
        return 0
    lock = _take_lock(path)
    if lock is None:
        return 0  # a live server holds it
    stopping = _Stopping()
    signal.signal(signal.SIGTERM, stopping.handle)
    try:
        # Who serves: for `claude-hook --stop-servers`, which checks it before signalling.
        os.ftruncate(lock, 0)
        os.write(lock, b"%d\n" % os.getpid())
        with contextlib.suppress(OSError):  # a stalled server's marker: this one replaces it
            os.unlink(_resident.stall_path(path))
        with _listening(path) as listener:
            _Server(listener, list(argv), run, stopping).serve()
    except OSError:
        pass  # no socket to be had: hooks go on answering in their own processes
    finally:
        # Removed while still held: a server starting now finds the path gone and makes anew.
        with contextlib.suppress(OSError):
            os.unlink(_resident.lock_path(path))
        os.close(lock)
    return 0


def _take_lock(sock: str) -> int | None:
    """The lock file of ``sock``, locked (created 0600), or None when a live server holds it.
    A server that stalled (see :func:`_replace_stalled`) is replaced."""
    path = _resident.lock_path(sock)
    for _ in range(5):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError:
            return None
        try:
            os.fchmod(fd, 0o600)  # (an older file may have been made with another mode)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                if not _replace_stalled(sock, fd):
                    os.close(fd)
                    return None
            # The server that held it removes the file as it exits: the lock is ours only if
            # the path still names the file locked.
            mine, named = os.fstat(fd), os.stat(path)
            if (mine.st_dev, mine.st_ino) == (named.st_dev, named.st_ino):
                return fd
        except OSError:
            pass
        os.close(fd)
    return None


def _replace_stalled(sock: str, fd: int) -> bool:
    """Stop the server holding ``fd``'s lock if a hook marked it stalled; True once the lock is
    ours."""
    try:
        with open(_resident.stall_path(sock), "rb") as marker:
            stalled = int(marker.read(32).strip() or b"0")
        holder = int(os.pread(fd, 32, 0).strip() or b"0")
    except (OSError, ValueError):
        return False
    if stalled <= 0 or holder != stalled or not is_hook_server(holder, _resident.lock_path(sock)):
        return False
    # Killed, not asked to stop: a stalled server let to finish the hook it holds would record
    # it after its client answered it in its own process. Killed, it leaves nothing half done
    # that counts twice: a transaction it did not commit is rolled back, and one it did is the
    # open call (or the recorded outcome) that the client's own answer finds and counts once.
    with contextlib.suppress(OSError):
        os.kill(holder, signal.SIGKILL)
    deadline = time.monotonic() + _STOP_GRACE_SECONDS
    while time.monotonic() < deadline:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            time.sleep(0.02)
    return False


def _terminate(pid: int) -> None:
    """SIGTERM, and SIGCONT so that a stopped server runs to handle it."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGTERM)
        os.kill(pid, signal.SIGCONT)


def is_hook_server(pid: int, lock: str) -> bool:
    """Whether ``pid`` is one of this user's loopwarden hook servers and holds ``lock`` (on
    Linux, from ``/proc``; elsewhere from ``ps``, without the lock check)."""
    if pid <= 0:
        return False
    proc = f"/proc/{pid}"
    if os.path.isdir("/proc/self"):
        try:
            if os.stat(proc).st_uid != os.getuid():
                return False
            with open(f"{proc}/cmdline", "rb") as handle:
                if _resident.SERVER_MARK.encode() not in handle.read():
                    return False
            return _holds_flock(pid, lock)
        except OSError:
            return False
    import subprocess

    try:
        shown = subprocess.run(["ps", "-o", "uid=", "-o", "command=", "-p", str(pid)],
                               capture_output=True, text=True, timeout=5, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    uid, _, command = shown.strip().partition(" ")
    return uid == str(os.getuid()) and _resident.SERVER_MARK in command


def _holds_flock(pid: int, lock: str) -> bool:
    info = os.stat(lock)
    # /proc/locks: "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (device in hex).
    where = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    with open("/proc/locks", encoding="ascii", errors="replace") as locks:
        for line in locks:
            fields = line.split()
            if "FLOCK" in fields and str(pid) in fields and where in fields:
                return True
    return False


class _Stopping:
    """SIGTERM: exit at once when idle, else once the hook being answered is answered."""

    def __init__(self) -> None:
        self.answering = False
        self.requested = False

    def handle(self, *_: object) -> None:
        """The signal handler."""
        self.requested = True
        if not self.answering:
            sys.exit(0)


class _listening:
    """The server's socket, bound with only its owner able to connect, removed at exit."""

    def __init__(self, path: str) -> None:
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
        self.sock.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)


class _Server:
    """One server's loop: accept, claim, answer; until idle, stopped, or no longer valid."""

    def __init__(self, listener: socket.socket, argv: list[str],
                 run: Callable[[Sequence[str]], int], stopping: _Stopping) -> None:
        self.listener, self.argv, self.run, self.stopping = listener, argv, run, stopping
        self.folder = os.getcwd()
        here = os.stat(".")
        self.home = (here.st_dev, here.st_ino)
        self.code = _resident.code_identity()
        self.checked = time.monotonic()

    def serve(self) -> None:
        """Answer hooks until idle, stopped, or the folder or the code changed."""
        idle = _resident.idle_seconds(warn=False)
        last = time.monotonic()
        while not self.stopping.requested:
            left = idle - (time.monotonic() - last)
            if left <= 0:
                return
            self.listener.settimeout(min(left, _IDLE_CHECK_SECONDS))
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                if not self._still_valid(force=True):
                    return
                continue
            except OSError:
                return
            last = time.monotonic()
            with conn:
                if not self._exchange(conn):
                    return

    def _exchange(self, conn: socket.socket) -> bool:
        """One hook; False when this server must stop serving."""
        try:
            conn.settimeout(_resident.ANSWER_TIMEOUT_SECONDS)
            payload = _read_request(conn)
            if payload is None:
                return True  # not a hook: the client answers it itself
            if not self._still_valid(force=False):
                conn.sendall(_resident.REFUSE)
                return False
            conn.sendall(_resident.CLAIM)
            if conn.recv(1) != _resident.GO:
                return True  # the client gave up (timed out): it answered, this must not
            self.stopping.answering = True
            try:
                conn.sendall(answer_payload(self.argv, payload, self.run))
            finally:
                self.stopping.answering = False
        except Exception:  # a client that gave up, a bug: it answers in its own process
            pass
        return True

    def _still_valid(self, *, force: bool) -> bool:
        """Whether this server may answer: its folder is still the one at its path, and (looked
        at once a second at most, unless ``force``) its code is what is on disk."""
        try:
            here, named = os.stat("."), os.stat(self.folder)
        except OSError:
            return False
        if here.st_nlink == 0 or (named.st_dev, named.st_ino) != self.home:
            return False  # removed, or replaced by another folder of the same name
        if force or time.monotonic() - self.checked >= 1.0:
            self.checked = time.monotonic()
            return _resident.scan_code() == self.code
        return True


def _read_request(conn: socket.socket) -> bytes | None:
    """The payload of a ``<length>\\n<payload>`` request, or None for anything else."""
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(65536)
        if not chunk or len(data) > 32:
            return None
        data += chunk
    head, _, body = data.partition(b"\n")
    if not head.isdigit() or int(head) > _MAX_PAYLOAD_BYTES:
        return None
    size = int(head)
    chunks = [body]
    received = len(body)
    while received < size:
        chunk = conn.recv(min(65536, size - received))
        if not chunk:
            return None
        chunks.append(chunk)
        received += len(chunk)
    payload = b"".join(chunks)
    return payload if len(payload) == size else None


def answer_payload(argv: list[str], payload: bytes, run: Callable[[Sequence[str]], int]) -> bytes:
    """Run one hook with ``payload`` as stdin; its exit code, stdout and stderr, framed."""
    saved = sys.stdin, sys.stdout, sys.stderr
    out, err = io.BytesIO(), io.BytesIO()
    stdin = io.TextIOWrapper(io.BytesIO(payload), encoding="utf-8", errors="surrogateescape")
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


def stop_servers() -> int:
    """``claude-hook --stop-servers``: stop this user's hook servers (each checked to be one
    before it is signalled) and remove the files of servers that are gone; returns 0."""
    folder = _resident.private_dir()
    if folder is None:
        print("loopwarden: no private runtime folder, so no hook servers")
        return 0
    stopped: list[tuple[int, int]] = []  # (pid, the lock file's descriptor)
    removed = left = 0
    for name in sorted(os.listdir(folder)):
        if not (name.startswith("hook-") and name.endswith(".sock.lock")):
            continue
        lock = os.path.join(folder, name)
        try:
            fd = os.open(lock, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: a live process
            try:
                pid = int(os.pread(fd, 32, 0).strip() or b"0")
            except (OSError, ValueError):
                pid = 0
            if is_hook_server(pid, lock):
                _terminate(pid)
                stopped.append((pid, fd))
                continue
            print(f"loopwarden: {lock} is held by process {pid or '?'}, which is not a "
                  "loopwarden hook server; left alone")
            left += 1
        else:  # nobody holds it: a server that was killed left it
            removed += _remove_setup(lock)
        os.close(fd)
    removed += _remove_orphans(folder)
    for pid, fd in stopped:
        if not _wait_released(fd):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        os.close(fd)
    print(f"loopwarden: stopped {len(stopped)} hook server(s), removed {removed} stale "
          f"file(s){f', left {left} alone' if left else ''}")
    return 0


def _wait_released(fd: int) -> bool:
    deadline = time.monotonic() + _STOP_GRACE_SECONDS
    while time.monotonic() < deadline:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            time.sleep(0.02)
    return False


def _remove_setup(lock: str) -> int:
    """Remove a dead server's lock file, socket and stall marker; how many there were."""
    sock = lock[: -len(".lock")]
    removed = 0
    for path in (sock, _resident.stall_path(sock), lock):
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed += 1
    return removed


def _remove_orphans(folder: str) -> int:
    """Sockets and stall markers without a lock file: nothing serves them."""
    removed = 0
    for name in os.listdir(folder):
        if name.startswith("hook-") and name.endswith((".sock", ".stalled")):
            sock = os.path.join(folder, name.rsplit(".", 1)[0] + ".sock")
            if not os.path.exists(_resident.lock_path(sock)):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, name))
                    removed += 1
    return removed
