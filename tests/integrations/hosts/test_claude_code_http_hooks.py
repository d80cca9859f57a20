"""The real Claude Code binaries with ``loopwarden install claude-code --user --http PORT``: the
tool hooks are http hooks answered by the resident server that the SessionStart command hook
starts. On both releases a loop (the A-B shape) is still stopped and its run ended, and the
server stays while the session runs, however long the model rests between calls (its idle
timeout counts only once no session that registered with it is alive); a healthy run with
changing output is untouched. The same shapes with the default command hooks:
test_claude_code_loops.py.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from anthropic_server import ToolCall, serve
from claude_code import (
    _record,
    bash,
    claude_binary,
    host_env,
    http_server_pids,
    install_hooks,
    run_claude,
)

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="Linux /proc")]

RELEASES = ["current", "2.1.197"]


@pytest.fixture
def port() -> Iterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        chosen = int(probe.getsockname()[1])
    yield chosen
    for pid in http_server_pids(chosen):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("release", ["current"])
def test_a_healthy_run_with_changing_output_over_http_hooks_is_never_denied(
        release: str, tmp_path: Path, port: int) -> None:
    # The same command, a new answer each time: progress.
    work = tmp_path / "work"
    count = shlex.quote(str(work / "calls.log"))
    record = run_claude(claude_binary(release), tmp_path,
                        lambda n: bash(work, f"wc -l < {count}") if n <= 30 else None,
                        install_options=("--http", str(port)))
    print(record)
    assert record.denials == 0, record
    assert (record.issued, record.executions, record.ended) == (30, 30, False), record


@pytest.mark.parametrize("release", RELEASES)
def test_the_http_server_stays_while_the_session_rests_past_its_idle_timeout(
        release: str, tmp_path: Path, port: int) -> None:
    # The idle timeout is one second and the model rests three seconds before its fourth call:
    # a server that left after its idle timeout would leave the rest of the loop unguarded.
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    install_hooks(home, "--http", str(port), binary=claude_binary(release))
    servers: list[list[int]] = []

    def script(n: int) -> ToolCall:
        if n == 4:
            servers.append(http_server_pids(port))
            time.sleep(3)
            servers.append(http_server_pids(port))
        return bash(work, "echo A" if n % 2 else "echo B")

    env = {**host_env(home), "LOOPWARDEN_HOOK_SERVER_IDLE": "1"}
    with serve(script) as (url, model):
        proc = subprocess.run([str(claude_binary(release)), "-p", "Do the task.",
                               "--output-format", "stream-json", "--verbose",
                               "--dangerously-skip-permissions"],
                              env={**env, "ANTHROPIC_BASE_URL": url}, cwd=work,
                              capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL, check=False)
    record = _record(model, work, proc)
    print(record)
    assert servers[0] and servers[1] == servers[0], servers
    assert record.executions <= 25 and record.denied_at is not None and record.ended, record
