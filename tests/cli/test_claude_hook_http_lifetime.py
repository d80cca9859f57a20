"""How long the resident http hook server lives: as long as a Claude Code session that ran its
``SessionStart`` hook is alive (not a fixed idle timeout), and across a loopwarden upgrade, where
the old server hands its port and the request in hand to a server running the new code instead
of refusing it with ``503``. The start hook (SessionStart, and UserPromptSubmit once per prompt)
starts a server that went away and waits for it; when none can answer, it tells the user."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import loopwarden
from http_hook_helpers import free_port, hook_env, http_server_pids, post_hook

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="Linux /proc")]
SESSION = "0f1e2d3c-4b5a-4697-8877-665544332211"


def _wait_for(condition: Any, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def _post(port: int, n: int, cwd: Path) -> tuple[int, bytes]:
    return post_hook(port, {
        "session_id": SESSION, "cwd": str(cwd), "tool_name": "Bash",
        "hook_event_name": "PreToolUse", "tool_input": {"command": f"echo {n}"},
        "tool_use_id": f"toolu_{n:04d}", "transcript_path": str(cwd / "t.jsonl")})


@pytest.fixture
def port() -> Iterator[int]:
    chosen = free_port()
    yield chosen
    for pid in http_server_pids(chosen):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def test_the_server_outlives_its_idle_timeout_while_the_session_that_started_it_runs(
        tmp_path: Path, port: int) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # A stand-in for Claude Code: a process that runs the SessionStart hook through a shell,
    # as Claude Code does, then stays open without any tool call.
    start = f"{sys.executable} -m loopwarden claude-hook --http-start {port} < /dev/null"
    session = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time\n"
         "subprocess.run(['/bin/sh', '-c', sys.argv[1]], check=True)\ntime.sleep(600)", start],
        env=hook_env(home, home / "run", LOOPWARDEN_HOOK_SERVER_IDLE="0.5"), cwd=tmp_path)
    try:
        assert _wait_for(lambda: _answers(port)), "the SessionStart hook started no server"
        server = http_server_pids(port)
        time.sleep(3)  # six idle timeouts, with the session still open
        assert http_server_pids(port) == server and _answers(port)
        assert _post(port, 1, tmp_path)[0] == 200
    finally:
        session.kill()
        session.wait()
    # The session ended: the server goes after its idle timeout.
    assert _wait_for(lambda: not http_server_pids(port)), "the server outlived its session"


def _copy_of_loopwarden(tmp_path: Path) -> Path:
    """A copy of this loopwarden's package, to upgrade in place while a server runs it."""
    root = tmp_path / "site"
    shutil.copytree(Path(loopwarden.__file__).parent, root / "loopwarden",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_new_code_takes_over_the_port_without_refusing_a_request(tmp_path: Path,
                                                                 port: int) -> None:
    home = tmp_path / "home"
    home.mkdir()
    root = _copy_of_loopwarden(tmp_path)
    env = hook_env(home, home / "run", PYTHONPATH=str(root))
    old = subprocess.Popen([sys.executable, "-m", "loopwarden", "claude-hook", "--http-serve",
                            str(port)], env=env, cwd=tmp_path)
    try:
        assert _wait_for(lambda: _answers(port))
        assert _post(port, 1, tmp_path)[0] == 200
        # An upgrade: a source file of the running code changes.
        with (root / "loopwarden" / "cli" / "runs.py").open("a") as source:
            source.write("\n# upgraded\n")
        time.sleep(1.2)  # (the server looks at its code at most once a second)
        statuses = [_post(port, n, tmp_path)[0] for n in range(2, 6)]
        assert statuses == [200] * 4, statuses
        assert old.wait(timeout=30) == 0
        assert http_server_pids(port) and old.pid not in http_server_pids(port)
    finally:
        with contextlib.suppress(OSError):
            old.kill()
        old.wait()


def _start_hook(port: int, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    # As users get it: with the resident Unix socket server on (which it must not use).
    return subprocess.run([sys.executable, "-m", "loopwarden", "claude-hook", "--http-start",
                           str(port)], input='{"hook_event_name": "UserPromptSubmit"}',
                          env=hook_env(home, home / "run", LOOPWARDEN_HOOK_SERVER="1"), cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_start_hook_brings_a_killed_server_back_before_it_returns(tmp_path: Path,
                                                                      port: int) -> None:
    home = tmp_path / "home"
    home.mkdir()
    first = _start_hook(port, home, tmp_path)
    # It returns once the server answers: the session's first tool call finds it.
    assert (first.returncode, first.stdout) == (0, "") and _answers(port), first.stderr
    for pid in http_server_pids(port):
        os.kill(pid, signal.SIGKILL)
    assert _wait_for(lambda: not _answers(port))
    again = _start_hook(port, home, tmp_path)  # the next prompt's hook
    assert (again.returncode, again.stdout) == (0, "") and _answers(port), again.stderr
    assert _post(port, 1, tmp_path)[0] == 200
    # Each start hook ran in its own process (registering its session) and left no Unix
    # socket server behind.
    assert not list((home / "run").glob("loopwarden-*/hook-*.sock"))


def test_the_start_hook_tells_the_user_when_another_program_holds_the_port(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with socket.socket() as other:  # not loopwarden: it answers nothing a server would
        other.bind(("127.0.0.1", 0))
        other.listen(8)
        port = other.getsockname()[1]
        threading_answer = subprocess.Popen(  # a plain http server would do as well
            [sys.executable, "-c", "import socket, sys\n"
             "s = socket.socket(fileno=int(sys.argv[1]))\n"
             "while True:\n    c, _ = s.accept()\n    c.recv(4096)\n"
             "    c.sendall(b'HTTP/1.0 404 Not Found\\r\\n\\r\\nnope'); c.close()\n",
             str(other.fileno())], pass_fds=(other.fileno(),))
        try:
            shown = _start_hook(port, home, tmp_path)
        finally:
            threading_answer.kill()
            threading_answer.wait()
    message = json.loads(shown.stdout)["systemMessage"]
    assert shown.returncode == 0 and "another program holds the port" in message
    assert "unguarded" in message
