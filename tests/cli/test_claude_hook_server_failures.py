"""The resident ``claude-hook`` server where it can go wrong: a project that plants modules, a
server stopped with SIGSTOP, a project folder replaced under it, another copy of loopwarden,
colliding keys, stale lock files, bad settings, undecodable input, the installer's self-test.

Hooks run as Claude Code runs them: the console script's code, from a script file outside the
project (so the project folder is not on its import path, as with the installed script), with
one payload on stdin, in the project folder. Each test has its own runtime folder and HOME and
stops the processes it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwarden.cli import _resident
from loopwarden.guard.stores.sqlite import SQLiteStore

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Unix sockets, /proc")]

SCRIPT = """
import sys
from loopwarden._entry import main
code = main()
sys.stdout.flush()
sys.stderr.write("\\nSERVED " + str("loopwarden.guard" not in sys.modules) + "\\n")
sys.exit(code)
"""
SESSION = "5d1c2e3f-0a4b-4c5d-8e6f-1a2b3c4d5e6f"
SRC = Path(_resident.__file__).resolve().parents[2]


@pytest.fixture
def runtime() -> Iterator[Path]:
    # Short (a socket path is limited to about 100 bytes), and the servers found here stopped.
    folder = Path(tempfile.mkdtemp(prefix="lw-", dir="/tmp"))
    yield folder
    for pid in server_pids(folder):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.kill(pid, signal.SIGCONT)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "loopwarden-hook"
    path.parent.mkdir()
    path.write_text(SCRIPT, encoding="utf-8")
    return path


def server_pids(runtime: Path) -> list[int]:
    pids = []
    for lock in runtime.glob("loopwarden-*/hook-*.sock.lock"):
        with contextlib.suppress(OSError):
            text = lock.read_text().strip()
            if text.isdigit() and alive(int(text)):
                pids.append(int(text))
    return pids


def sockets(runtime: Path) -> list[Path]:
    return list(runtime.glob("loopwarden-*/hook-*.sock"))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    status = Path(f"/proc/{pid}/status")
    with contextlib.suppress(OSError):
        return "\nState:\tZ" not in status.read_text()
    return False


def wait_until(predicate: Any, seconds: float = 40) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)


class Hook:
    """Runs hooks of one setup: a project folder, hook arguments, an environment."""

    def __init__(self, script: Path, runtime: Path, project: Path, args: list[str],
                 **env: str) -> None:
        self.script, self.project, self.args = script, project, args
        self.env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime),
                    "LOOPWARDEN_HOOK_SERVER": "1", **env}

    def __call__(self, payload: dict[str, Any] | bytes, **env: str) -> tuple[int, str, str, bool]:
        """(exit code, stdout, stderr, whether a server answered)."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        proc = subprocess.run([sys.executable, str(self.script), "claude-hook", *self.args],
                              input=data, capture_output=True, timeout=60,
                              env={**self.env, **env}, cwd=self.project, check=False)
        err = proc.stderr.decode("utf-8", "replace")
        err, _, served = err.rpartition("\nSERVED ")
        assert served, proc.stderr
        return proc.returncode, proc.stdout.decode("utf-8", "replace"), err, served.strip() == "True"


def bash(turn: int, event: str = "PreToolUse", command: str = "ls -la") -> dict[str, Any]:
    payload: dict[str, Any] = {
        "session_id": SESSION, "hook_event_name": event, "tool_name": "Bash",
        "tool_input": {"command": f"{command} {turn}"}, "tool_use_id": f"toolu_{turn:03d}",
        "cwd": "/tmp", "transcript_path": f"/tmp/{SESSION}.jsonl",
    }
    if event == "PostToolUse":
        payload["tool_response"] = {"stdout": f"listing {turn}\n", "stderr": "",
                                    "interrupted": False}
    return payload


def records(db: Path) -> list[str | None]:
    """The call ids of the session's records, in order."""
    store = SQLiteStore(db)
    try:
        state = store.load(SESSION)
    finally:
        store.close()
    assert state is not None
    return [record.call_id for record in state.run_records(None)]


def start_server(hook: Hook, runtime: Path) -> int:
    """Answer a first hook in its own process, and wait for the server it leaves."""
    assert hook(bash(0))[3] is False
    wait_until(lambda: server_pids(runtime) and sockets(runtime))
    (pid,) = server_pids(runtime)
    return pid


# -- 1. a project's modules never run in the server ------------------------------------------

def test_no_module_of_the_project_runs_in_the_server(
        tmp_path: Path, runtime: Path, script: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    marker = tmp_path / "imported"
    plant = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for name in ("json", "secrets", "sqlite3", "typing_extensions"):
        (project / f"{name}.py").write_text(plant, encoding="utf-8")
    (project / "pydantic").mkdir()
    (project / "pydantic" / "__init__.py").write_text(plant, encoding="utf-8")
    hook = Hook(script, runtime, project, ["--db", "hook.db"])
    start_server(hook, runtime)
    for turn in range(1, 4):
        code, _, err, served = hook(bash(turn))
        assert (code, served) == (0, True), err
    assert not marker.exists(), marker.read_text()


# -- 2. a stopped server ---------------------------------------------------------------------

def test_a_hook_that_gave_up_is_never_answered_by_the_server(
        tmp_path: Path, runtime: Path, script: Path) -> None:
    hook = Hook(script, runtime, tmp_path, ["--db", "hook.db"])
    pid = start_server(hook, runtime)
    os.kill(pid, signal.SIGSTOP)
    try:
        # A hook's client, written out: it hands over a payload, waits, and gives up.
        given_up = json.dumps(bash(1)).encode()
        (path,) = sockets(runtime)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(0.5)
            conn.connect(str(path))
            conn.sendall(b"%d\n" % len(given_up) + given_up)
            conn.shutdown(socket.SHUT_WR)
            with pytest.raises(TimeoutError):
                conn.recv(1)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert hook(bash(2))[3] is True  # the same server, running again
    assert records(tmp_path / "hook.db") == ["toolu_000", "toolu_002"]


def test_a_stopped_server_costs_one_timeout_is_replaced_and_every_call_counts_once(
        tmp_path: Path, runtime: Path, script: Path) -> None:
    hook = Hook(script, runtime, tmp_path, ["--db", "hook.db"])
    stopped = start_server(hook, runtime)
    assert hook(bash(0, "PostToolUse"))[3] is True
    os.kill(stopped, signal.SIGSTOP)
    try:
        code, _, err, served = hook(bash(1))
        assert (code, served) == (0, False), err
        for turn, event in ((1, "PostToolUse"), (2, "PreToolUse"), (2, "PostToolUse")):
            assert hook(bash(turn, event))[0] == 0
        # The first of those waited for the stopped server and left a marker behind; the next
        # ones did not try it, and a new server replaced it.
        wait_until(lambda: [p for p in server_pids(runtime) if p != stopped])
        wait_until(lambda: not alive(stopped))
        turn = 3
        while not hook(bash(turn))[3]:
            hook(bash(turn, "PostToolUse"))
            turn += 1
        hook(bash(turn, "PostToolUse"))
    finally:
        with contextlib.suppress(OSError):
            os.kill(stopped, signal.SIGCONT)
    assert records(tmp_path / "hook.db") == [f"toolu_{t:03d}" for t in range(turn + 1)]


# -- 3. a replaced project folder ------------------------------------------------------------

def test_a_replaced_project_folder_is_not_served_from_the_old_one(
        tmp_path: Path, runtime: Path, script: Path) -> None:
    project = tmp_path / "project"
    config = {"tools": {"loopDetection": {"enabled": True}}}

    def make() -> None:
        project.mkdir()
        (project / "openclaw.json").write_text(json.dumps(config), encoding="utf-8")

    make()
    hook = Hook(script, runtime, project, ["--db", "hook.db", "--config", "openclaw.json"])
    old = start_server(hook, runtime)
    assert hook(bash(1))[3] is True
    shutil.rmtree(project)
    make()
    code, _, err, _ = hook(bash(2))
    assert (code, err.strip()) == (0, ""), err
    assert records(project / "hook.db") == ["toolu_002"]  # in the new folder's database
    wait_until(lambda: not alive(old))
    wait_until(lambda: hook(bash(3))[3])


# -- 4. another copy of loopwarden, same version ---------------------------------------------

def test_another_copy_of_loopwarden_gets_a_server_running_its_own_code(
        tmp_path: Path, runtime: Path, script: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(SRC / "loopwarden", copy / "loopwarden",
                    ignore=shutil.ignore_patterns("__pycache__"))
    hook_module = copy / "loopwarden" / "cli" / "claude_hook.py"
    hook_module.write_text(hook_module.read_text(encoding="utf-8").replace(
        "def run(argv: Sequence[str]) -> int:\n",
        "def run(argv: Sequence[str]) -> int:\n"
        "    sys.stderr.write('THE COPY ' + ('in-process' if 'claude-hook' in sys.argv else "
        "'served') + '\\n')\n    return 0\n"
        "\n\ndef _original_run(argv: Sequence[str]) -> int:\n", 1), encoding="utf-8")
    hook = Hook(script, runtime, tmp_path, ["--db", "hook.db"])
    start_server(hook, runtime)
    assert hook(bash(1))[3] is True
    copied = {"PYTHONPATH": str(copy)}
    # (The copy's hook answers without the guard: whether it was served, it says itself.)
    code, _, err, _ = hook(bash(2), **copied)
    assert (code, err.strip()) == (0, "THE COPY in-process")
    wait_until(lambda: len(server_pids(runtime)) == 2)
    code, _, err, _ = hook(bash(3), **copied)
    assert (code, err.strip()) == (0, "THE COPY served")
    assert hook(bash(4))[2:] == ("", True)  # the original's server still serves the original


# -- 5. a real hash names the server ---------------------------------------------------------

def old_name(key: bytes) -> str:
    """How servers were named before: two CRC-32s, which for keys of one length are one."""
    return f"{zlib.crc32(key):08x}{zlib.crc32(key, 0x9E3779B9):08x}"


def test_keys_that_collided_under_the_old_name_get_different_servers() -> None:
    # (Folder names spread over many bytes: CRC-32 is linear, so names differing in a few
    # adjacent digits never collide; random-looking ones do, after some 80,000 on average.)
    names = random.Random(24)
    seen: dict[int, bytes] = {}
    for _ in range(2_000_000):
        key = repr(("0.1.0", "/usr/bin/python3", f"/home/me/{names.getrandbits(64):016x}")).encode()
        crc = zlib.crc32(key)
        if crc in seen:
            first = seen[crc]
            break
        seen[crc] = key
    assert old_name(first) == old_name(key)  # the old scheme: one server for both
    assert _resident.key_name(first) != _resident.key_name(key)
    assert len(_resident.key_name(key)) == 32  # 128 bits


# -- 6. stopping the servers, lock files -----------------------------------------------------

def test_stop_servers_stops_only_hook_servers_and_removes_stale_files(
        tmp_path: Path, runtime: Path, script: Path) -> None:
    folder = runtime / f"loopwarden-{os.getuid()}"
    folder.mkdir(mode=0o700)  # made before: the lock file's mode must not depend on it
    hook = Hook(script, runtime, tmp_path, ["--db", "hook.db"])
    server = start_server(hook, runtime)
    (lock,) = folder.glob("hook-*.sock.lock")
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    # A dead server's lock file naming a pid that is now another process, and a lock held by
    # a process that is no hook server.
    bystander = subprocess.Popen(["sleep", "120"])
    holder = subprocess.Popen(["flock", str(folder / "hook-f00d.sock.lock"), "sleep", "120"])
    try:
        (folder / "hook-dead.sock.lock").write_text(f"{bystander.pid}\n")
        (folder / "hook-dead.sock").write_text("")
        wait_until(lambda: (folder / "hook-f00d.sock.lock").exists())
        (folder / "hook-f00d.sock.lock").write_text(f"{holder.pid}\n")
        proc = subprocess.run([sys.executable, str(script), "claude-hook", "--stop-servers"],
                              capture_output=True, text=True, timeout=60, env=hook.env,
                              check=False)
        assert proc.returncode == 0, proc.stderr
        assert "stopped 1 hook server(s)" in proc.stdout, proc.stdout
        wait_until(lambda: not alive(server))
        assert bystander.poll() is None and holder.poll() is None  # neither was signalled
        assert sorted(p.name for p in folder.iterdir()) == ["hook-f00d.sock.lock"]
    finally:
        for child in (bystander, holder):
            child.kill()
            child.wait()


# -- 7. a bad idle setting -------------------------------------------------------------------

@pytest.mark.parametrize("idle", ["nan", "-1", "inf", "0", "soon"])
def test_a_bad_idle_setting_is_one_warning_and_the_default(
        tmp_path: Path, runtime: Path, script: Path, idle: str) -> None:
    hook = Hook(script, runtime, tmp_path, ["--db", "hook.db"],
                LOOPWARDEN_HOOK_SERVER_IDLE=idle)
    code, _, err, served = hook(bash(0))
    assert (code, served) == (0, False)
    assert err.count("LOOPWARDEN_HOOK_SERVER_IDLE") == 1 and err.count("\n") == 1, err
    wait_until(lambda: server_pids(runtime) and sockets(runtime))
    time.sleep(0.3)  # (a server that took the value would be gone by now)
    code, _, err, served = hook(bash(1))
    assert (code, served, err) == (0, True, "")


# -- 11. undecodable input, the installer ----------------------------------------------------

def test_input_that_is_not_utf8_gets_the_same_answer_served_and_in_process(
        tmp_path: Path, runtime: Path, script: Path) -> None:
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps({"tools": {"loopDetection": {
        "enabled": True, "warningThreshold": 2, "criticalThreshold": 3}}}), encoding="utf-8")
    answers = {}
    for resident in ("1", "0"):
        folder = tmp_path / f"resident-{resident}"
        folder.mkdir()
        hook = Hook(script, runtime, folder, ["--db", "hook.db", "--config", str(config)],
                    LC_ALL="C", LANG="C", LOOPWARDEN_HOOK_SERVER=resident)
        got = []
        for turn in range(6):
            for event in ("PreToolUse", "PostToolUse"):
                payload = {**bash(turn, event), "tool_input": {"command": "cat \udcff"}}
                if event == "PostToolUse":
                    payload["tool_response"] = {"stdout": "\udcfe", "stderr": ""}
                data = json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogateescape")
                code, out, err, _ = hook(data)
                got.append((code, out, err))
                if resident == "1" and turn == 0:
                    wait_until(lambda: sockets(runtime))
        answers[resident] = got
        assert any('"deny"' in out for _, out, _ in got)  # read, guarded, and stopped
    assert answers["1"] == answers["0"]


def test_install_leaves_no_server_behind(tmp_path: Path, runtime: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from loopwarden._entry import main; sys.exit(main())",
         "install", "claude-code"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime),
             "LOOPWARDEN_HOOK_SERVER": "1"}, check=False)
    assert proc.returncode == 0, proc.stderr
    assert (home / ".claude" / "settings.json").exists()
    time.sleep(1.0)  # (a server the self-test left would have its socket by now)
    assert not list(runtime.glob("loopwarden-*/hook-*"))
