"""The resident ``claude-hook`` server: the first hook answers in its own process and leaves a
server behind; later hooks are answered by it, with the same answers, and whatever goes wrong
with it the hook still answers.

Hooks are started as Claude Code starts them (the console script's code in a fresh interpreter,
one payload on stdin). Each test gives the servers a private runtime directory and stops what
it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwarden.cli import _resident

pytestmark = [pytest.mark.skipif(os.name != "posix", reason="Unix sockets"), pytest.mark.integration]

# The console script, then whether this process imported the guard (it did not if a server
# answered) on stderr.
CHILD = """
import sys
from loopwarden.cli._entry import main
code = main()
sys.stdout.flush()
sys.stderr.write("\\nSERVED " + str("loopwarden.guard" not in sys.modules) + "\\n")
sys.exit(code)
"""
SESSION = "5d1c2e3f-0a4b-4c5d-8e6f-1a2b3c4d5e6f"


@pytest.fixture
def runtime() -> Iterator[Path]:
    # Short, like /run/user/1000: a Unix socket's path is limited to about 100 bytes, which
    # pytest's own temporary folders exceed.
    folder = Path(tempfile.mkdtemp(prefix="lw-", dir="/tmp"))
    yield folder
    for pid in server_pids(folder):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)


def server_pids(runtime: Path) -> list[int]:
    pids = []
    for lock in runtime.glob("loopwarden-*/hook-*.sock.lock"):
        text = lock.read_text().strip()
        if text.isdigit():
            pids.append(int(text))
    return pids


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    # A killed child of an exited parent may linger as a zombie until reaped.
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "\nState:\tZ" in status.read_text())


def wait_until(predicate: Any, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)


def hook(payload: dict[str, Any], db: Path, runtime: Path, *, resident: bool = True,
         config: Path | None = None, **env: str) -> tuple[int, str, bool]:
    """(exit code, stdout, whether a server answered) of one hook."""
    args = ["claude-hook", "--db", str(db)] + (["--config", str(config)] if config else [])
    child_env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime),
                 "LOOPWARDEN_HOOK_SERVER": "1" if resident else "0", **env}
    proc = subprocess.run([sys.executable, "-c", CHILD, *args], input=json.dumps(payload),
                          capture_output=True, text=True, timeout=60, env=child_env,
                          cwd=db.parent, check=False)
    _, _, served = proc.stderr.rpartition("\nSERVED ")
    assert served, proc.stderr
    return proc.returncode, proc.stdout, served.strip() == "True"


def bash(turn: int, event: str = "PreToolUse", output: str = "same listing\n") -> dict[str, Any]:
    payload: dict[str, Any] = {
        "session_id": SESSION, "hook_event_name": event, "tool_name": "Bash",
        "tool_input": {"command": "ls -la"}, "tool_use_id": f"toolu_{turn:03d}",
        "cwd": "/tmp", "transcript_path": f"/tmp/{SESSION}.jsonl",
    }
    if event == "PostToolUse":
        payload["tool_response"] = {"stdout": output, "stderr": "", "interrupted": False}
    return payload


def small_thresholds(folder: Path) -> Path:
    config = folder / "openclaw.json"
    config.write_text(json.dumps({"tools": {"loopDetection": {
        "enabled": True, "warningThreshold": 2, "criticalThreshold": 4,
        "globalCircuitBreakerThreshold": 6}}}), encoding="utf-8")
    return config


def session(db: Path, runtime: Path, resident: bool, config: Path, turns: int,
            changing: bool = False) -> tuple[list[tuple[int, str]], int]:
    """Every hook's (exit code, answer) over ``turns`` tool calls, and how many a server
    answered."""
    answers, served = [], 0
    first = True
    for turn in range(turns):
        output = f"listing {turn}\n" if changing else "same listing\n"
        for event in ("PreToolUse", "PostToolUse"):
            code, out, by_server = hook(bash(turn, event, output), db, runtime,
                                        resident=resident, config=config)
            answers.append((code, out))
            served += by_server
            if first and resident:
                first = False
                wait_until(lambda: any(runtime.glob("loopwarden-*/hook-*.sock")))
    return answers, served


def denied(answers: list[tuple[int, str]]) -> list[int]:
    return [i for i, (_, out) in enumerate(answers) if '"deny"' in out]


def test_a_loop_is_stopped_alike_by_the_server_and_in_process(
        tmp_path: Path, runtime: Path) -> None:
    config = small_thresholds(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    served_answers, served = session(tmp_path / "a" / "hook.db", runtime, True, config, 8)
    own_answers, none = session(tmp_path / "b" / "hook.db", runtime, False, config, 8)
    assert none == 0
    assert served >= len(served_answers) - 1  # all but the first hook
    assert served_answers == own_answers  # call for call, the same answers
    assert denied(served_answers), served_answers  # and the loop was stopped


def test_progress_is_never_blocked_by_the_server(tmp_path: Path, runtime: Path) -> None:
    config = small_thresholds(tmp_path)
    answers, served = session(tmp_path / "hook.db", runtime, True, config, 8, changing=True)
    assert served >= len(answers) - 1
    assert denied(answers) == []
    assert all(code == 0 for code, _ in answers)


def test_a_dead_server_leaves_the_hook_answering_and_is_replaced(
        tmp_path: Path, runtime: Path) -> None:
    db = tmp_path / "hook.db"
    assert hook(bash(0), db, runtime)[::2] == (0, False)  # answered here, a server started
    wait_until(lambda: server_pids(runtime) and any(runtime.glob("loopwarden-*/hook-*.sock")))
    (pid,) = server_pids(runtime)
    assert hook(bash(1), db, runtime)[::2] == (0, True)
    os.kill(pid, signal.SIGKILL)  # its socket file stays behind
    wait_until(lambda: not alive(pid))
    assert list(runtime.glob("loopwarden-*/hook-*.sock"))
    code, _, by_server = hook(bash(2), db, runtime)
    assert (code, by_server) == (0, False)
    wait_until(lambda: [p for p in server_pids(runtime) if p != pid and alive(p)])
    wait_until(lambda: hook(bash(3), db, runtime)[2], seconds=30)


def test_an_idle_server_exits_and_removes_its_socket(tmp_path: Path, runtime: Path) -> None:
    db = tmp_path / "hook.db"
    hook(bash(0), db, runtime, LOOPWARDEN_HOOK_SERVER_IDLE="1")
    wait_until(lambda: server_pids(runtime))
    (pid,) = server_pids(runtime)
    wait_until(lambda: not alive(pid))
    assert not list(runtime.glob("loopwarden-*/hook-*.sock"))


def test_switched_off_no_server_is_started(tmp_path: Path, runtime: Path) -> None:
    db = tmp_path / "hook.db"
    for turn in range(3):
        assert hook(bash(turn), db, runtime, resident=False)[::2] == (0, False)
    time.sleep(0.5)
    assert not list(runtime.glob("loopwarden-*/*"))


def test_a_runtime_directory_others_can_write_to_is_not_used(
        tmp_path: Path, runtime: Path) -> None:
    shared = runtime / f"loopwarden-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o777)  # a socket here could be anyone's
    db = tmp_path / "hook.db"
    for turn in range(2):
        assert hook(bash(turn), db, runtime)[::2] == (0, False)
    time.sleep(0.5)
    assert list(shared.iterdir()) == []


def test_a_socket_path_too_long_for_the_system_means_no_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = tmp_path / ("x" * 80)
    deep.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    assert _resident.socket_path(["--db", "a.db"]) is None


def test_hooks_started_differently_get_different_servers(
        runtime: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path = runtime
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    base = _resident.socket_path(["--db", "a.db"])
    assert base is not None and base == _resident.socket_path(["--db", "a.db"])
    assert _resident.socket_path(["--db", "b.db"]) != base
    monkeypatch.setenv("LOOPWARDEN_DB", "other.db")  # decides where state is kept
    assert _resident.socket_path(["--db", "a.db"]) != base
    monkeypatch.delenv("LOOPWARDEN_DB")
    monkeypatch.setenv("LOOPWARDEN_HOOK_SERVER_IDLE", "5")  # only how long a server waits
    assert _resident.socket_path(["--db", "a.db"]) == base
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert _resident.socket_path(["--db", "a.db"]) != base


@pytest.mark.parametrize("reply", [b"", b"0\n", b"0\n5\n0\nabc", b"x\n0\n0\n", b"0\n-1\n1\n"])
def test_a_partial_answer_is_no_answer(reply: bytes) -> None:
    # A server that died while answering: the hook then answers in its own process.
    assert _resident._parse_reply(reply) is None


def test_a_whole_answer_is_read_back() -> None:
    assert _resident._parse_reply(b"2\n3\n4\nouterr!") == (2, b"out", b"err!")


def test_the_client_path_imports_only_what_it_needs() -> None:
    # What a served hook loads: each of these cost it milliseconds (bench/bench_claude_hook.py).
    code = ("import sys; from loopwarden.cli._entry import main; from loopwarden.cli import _resident; "
            "print(' '.join(sorted(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    loaded = set(proc.stdout.split())
    assert not loaded & {"logging", "json", "hashlib", "socket", "typing", "re",
                         "loopwarden.guard", "loopwarden.engine", "loopwarden.guard.stores"}


def test_a_library_warning_is_not_printed_when_the_application_set_up_no_logging() -> None:
    # The "loopwarden" logger's NullHandler comes with the modules that log (loopwarden.base.log),
    # not with `import loopwarden`: still no "last resort" output on stderr.
    code = ("import loopwarden; from loopwarden.guard import LoopGuard; import logging; "
            "logging.getLogger('loopwarden.stores').warning('store down')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert proc.stderr == ""


def test_a_hook_without_stdin_fails_open_in_one_line(tmp_path: Path, runtime: Path) -> None:
    # Started with its stdin closed: no payload to hand over, so the hook runs here and says
    # what went wrong in one line, with a non-blocking exit code (never 2, "block").
    proc = subprocess.run(
        ["bash", "-c", f'exec "{sys.executable}" -c "$0" claude-hook --db "$1" 0<&-',
         "import sys; from loopwarden.cli._entry import main; sys.exit(main())",
         str(tmp_path / "hook.db")],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime), "LOOPWARDEN_HOOK_SERVER": "1"})
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_a_stopped_server_takes_its_socket_along(tmp_path: Path, runtime: Path) -> None:
    db = tmp_path / "hook.db"
    hook(bash(0), db, runtime)
    wait_until(lambda: server_pids(runtime) and any(runtime.glob("loopwarden-*/hook-*.sock")))
    (pid,) = server_pids(runtime)
    os.kill(pid, signal.SIGTERM)  # what the README's loop sends
    wait_until(lambda: not alive(pid))
    assert not list(runtime.glob("loopwarden-*/hook-*.sock"))
