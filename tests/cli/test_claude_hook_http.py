"""The http transport of the resident ``claude-hook`` server: it answers what the command hook
answers, only this user's connections are served (another uid gets 403, nothing run), and the
installer writes http entries plus the SessionStart command that starts the server."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from http_hook_helpers import free_port, hook_env, post_hook
from loopwarden.cli._resident_http import connection_uid, kernel_uid, proc_table_uid
from loopwarden.cli.claude_check import check_report
from loopwarden.integrations.claude_code_settings import http_url, install, uninstall

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="Linux /proc")]
SESSION = "5d1c2e3f-0a4b-4c5d-8e6f-1a2b3c4d5e6f"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    home = tmp_path / "http-home"
    home.mkdir()
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "loopwarden", "claude-hook", "--http-serve",
                             str(port)], env=hook_env(home, home), cwd=tmp_path)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                break
            time.sleep(0.05)
        yield port, tmp_path
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def _payloads(cwd: Path) -> list[dict[str, Any]]:
    out = []
    for n in range(12):
        base = {"session_id": SESSION, "cwd": str(cwd), "tool_name": "Bash",
                "tool_input": {"command": "echo hi"}, "tool_use_id": f"toolu_{n:04d}",
                "transcript_path": str(cwd / "t.jsonl")}
        out.append({**base, "hook_event_name": "PreToolUse"})
        out.append({**base, "hook_event_name": "PostToolUse", "tool_response": {
            "stdout": "hi", "stderr": "", "interrupted": False}})
    return out


def test_http_answers_are_the_command_hooks_answers(server: tuple[int, Path],
                                                     tmp_path: Path) -> None:
    port, cwd = server
    home = tmp_path / "command-home"
    home.mkdir()
    for payload in _payloads(cwd):
        status, body = post_hook(port, payload)
        command = subprocess.run([sys.executable, "-m", "loopwarden", "claude-hook"],
                                 input=json.dumps(payload), capture_output=True, text=True,
                                 env=hook_env(home, home), cwd=cwd, timeout=60, check=False)
        assert (status, body.decode()) == (200, command.stdout), payload


def test_connection_uid_finds_this_users_socket() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        with socket.create_connection(listener.getsockname()) as client:
            conn, _ = listener.accept()
            with conn:
                assert client
                assert connection_uid(conn) == os.getuid()


@pytest.mark.skipif(os.getuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to connect as another uid")
def test_another_uid_is_refused_and_nothing_is_recorded(server: tuple[int, Path]) -> None:
    port, cwd = server
    client = ("import sys, urllib.request, urllib.error\n"
              "req = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode())\n"
              "try:\n    urllib.request.urlopen(req, timeout=30)\n    print(200)\n"
              "except urllib.error.HTTPError as e:\n    print(e.code)\n")
    payloads = _payloads(cwd)
    for payload in payloads[:6]:
        shown = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
             "-I", "-c", client, http_url(port), json.dumps(payload)],
            capture_output=True, text=True, timeout=60, check=False)
        assert shown.stdout.strip() == "403", shown.stderr
    # Nothing the other user sent counted: this user's first call is still a fresh one.
    status, body = post_hook(port, payloads[0])
    assert status == 200 and b"deny" not in body and b"loop" not in body.lower()


def test_installer_writes_http_entries_and_the_session_start_command() -> None:
    settings = install({"hooks": {"SessionStart": [{"hooks": [
        {"type": "command", "command": "echo hi"}]}]}}, "loopwarden claude-hook",
        http_port=47913, start_command="loopwarden claude-hook --http-start 47913")
    hooks = settings["hooks"]
    assert hooks["PreToolUse"][0]["hooks"] == [
        {"type": "http", "url": "http://127.0.0.1:47913/loopwarden/claude-hook", "timeout": 5}]
    assert hooks["PreCompact"][0]["hooks"][0]["type"] == "command"
    assert hooks["SessionStart"][-1]["hooks"] == [
        {"type": "command", "command": "loopwarden claude-hook --http-start 47913"}]
    # Once per prompt as well: a server that went away mid-session is started again.
    assert hooks["UserPromptSubmit"] == [{"hooks": [
        {"type": "command", "command": "loopwarden claude-hook --http-start 47913"}]}]
    # Back to command hooks: the http entries and the start command are replaced / removed.
    back = install(settings, "loopwarden claude-hook")
    assert back["hooks"]["PreToolUse"][0]["hooks"] == [
        {"type": "command", "command": "loopwarden claude-hook"}]
    assert "UserPromptSubmit" not in back["hooks"]
    assert back["hooks"]["SessionStart"] == [{"hooks": [
        {"type": "command", "command": "echo hi"}]}]
    assert uninstall(settings)["hooks"] == {"SessionStart": [{"hooks": [
        {"type": "command", "command": "echo hi"}]}]}


def _http_settings(tmp_path: Path, port: int) -> tuple[str, Path]:
    """(a stand-in ``claude`` of the current release, a settings.json holding what
    ``install claude-code --user --http PORT`` writes)."""
    claude = tmp_path / "claude"
    claude.write_text("#!/bin/sh\necho '2.1.332 (Claude Code)'\n")
    claude.chmod(claude.stat().st_mode | stat.S_IXUSR)
    command = shlex.join([sys.executable, "-m", "loopwarden", "claude-hook"])  # (it runs)
    settings = install({}, command, http_port=port, start_command=f"{command} --http-start {port}")
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    return str(claude), path


def test_check_recognises_http_hooks_and_says_the_server_answers(server: tuple[int, Path],
                                                                 tmp_path: Path) -> None:
    port, _ = server
    claude, settings = _http_settings(tmp_path, port)
    code, report = check_report(claude, [settings])
    assert code == 0, report
    assert f"hooks in {settings}: all events (http hooks)" in report
    assert f"http server 127.0.0.1:{port}: answering" in report


def test_check_says_when_the_http_server_is_down_or_the_port_taken(tmp_path: Path) -> None:
    # Down: normal between sessions (the SessionStart hook starts it), so not a failure.
    claude, settings = _http_settings(tmp_path, free_port())
    code, report = check_report(claude, [settings])
    assert code == 0 and "all events (http hooks)" in report and "not running" in report, report
    # The SessionStart entry that starts the server is gone: the hooks would never be answered.
    without_start = json.loads(settings.read_text())
    del without_start["hooks"]["SessionStart"]
    settings.write_text(json.dumps(without_start))
    code, report = check_report(claude, [settings])
    assert code == 1 and "missing SessionStart" in report, report
    # Another program on the port: the hooks cannot reach loopwarden.
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        claude, settings = _http_settings(tmp_path, other.getsockname()[1])

        def answer() -> None:
            conn, _ = other.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                             b"Connection: close\r\n\r\nhello")

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        code, report = check_report(claude, [settings])
        thread.join(timeout=30)
    assert code == 1 and "taken by another program" in report, report


def test_the_kernel_lookup_and_the_proc_table_agree() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        with socket.create_connection(listener.getsockname()):
            conn, _ = listener.accept()
            with conn:
                assert kernel_uid(conn) == proc_table_uid(conn) == os.getuid()


@pytest.mark.skipif(os.getuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to connect as another uid")
def test_the_kernel_lookup_names_another_users_connection() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = subprocess.Popen(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
             "-I", "-c", "import socket, sys, time\n"
             "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
             "s.recv(1)\n", str(listener.getsockname()[1])])
        try:
            conn, _ = listener.accept()
            with conn:
                assert kernel_uid(conn) == proc_table_uid(conn) == 65534
                assert connection_uid(conn) == 65534
                conn.sendall(b"x")
        finally:
            client.wait(timeout=30)
