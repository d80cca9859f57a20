"""Drive the real Claude Code binary against the scripted model, as a new user would.

Each run gets a fresh HOME in which ``loopwarden install claude-code --user`` wrote the hooks (or
none, for a baseline), a work directory, and the scripted model on 127.0.0.1; Claude Code runs
in print mode with permissions skipped, fully offline. The tool calls of the scripts append one
line to ``calls.log`` in the work directory each time they really run, so
:attr:`RunRecord.executions` counts executions, not requests.

The binaries come from ``.ci/install-hosts`` (``.hosts/`` in the checkout); a release that is
not installed is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from anthropic_server import MAX_CALLS, Script, ScriptedModel, serve

from http_hook_helpers import http_server_pids
from loopwarden.guard import RECOVERY_TEXT, TERMINAL_TEXT
from resident_runtime import runtime_dir, stop_servers

__all__ = ["RELEASES", "RunRecord", "claude_binary", "http_server_pids", "install_hooks",
           "run_claude"]

REPO = Path(__file__).resolve().parents[3]
HOSTS = REPO / ".hosts"
RELEASES = {
    "current": HOSTS / "claude-current" / "node_modules" / ".bin" / "claude",
    "2.1.197": HOSTS / "claude-2.1.197" / "node_modules" / ".bin" / "claude",
}
"""Claude Code releases under test: the current one, and the newest that Node 20 installs."""

_RUN_TIMEOUT_SECONDS = 600
_WARNING_MARKERS = ("Tool-loop warning", "WARNING:")


@dataclass(frozen=True)
class RunRecord:
    """What one Claude Code run did, read from the model's side and the work directory."""

    issued: int
    """Tool calls the model issued."""
    executions: int
    """Tool calls that really ran (lines in calls.log)."""
    warned_at: int | None
    """The call whose result first carried a loop warning to the model."""
    denied_at: int | None
    """The first call denied by loopwarden."""
    denials: int
    ended: bool
    """The run ended while the model still wanted to call tools (a host-side stop)."""
    exit_code: int
    stdout: str

    def __str__(self) -> str:
        return (f"issued={self.issued} executions={self.executions} warned_at={self.warned_at} "
                f"denied_at={self.denied_at} denials={self.denials} ended={self.ended}")


def claude_binary(release: str) -> Path:
    """The installed binary of ``release``; skips the test when it is not installed."""
    binary = RELEASES[release]
    if not binary.exists():
        pytest.skip(f"Claude Code {release} is not installed: run .ci/install-hosts")
    return binary


def loopwarden_argv() -> list[str]:
    """How the tests start this checkout's loopwarden."""
    return [sys.executable, "-m", "loopwarden"]


def host_env(home: Path, base_url: str | None = None, *,
             resident: bool | None = None) -> dict[str, str]:
    """The environment Claude Code runs in: a private HOME, offline, no telemetry. With
    ``resident``, the hooks use their resident server (as users get them: the default) or
    answer each in its own process; unset, as ``$LOOPWARDEN_HOOK_SERVER`` says (tests: off)."""
    runtime = runtime_dir(home) if resident else home / "run"
    server = os.environ.get("LOOPWARDEN_HOOK_SERVER", "0") if resident is None else (
        "1" if resident else "0")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(runtime),
        "ANTHROPIC_API_KEY": "dummy",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "IS_SANDBOX": "1",  # --dangerously-skip-permissions as root
        "LOOPWARDEN_HOOK_SERVER": server,
    }
    if base_url is not None:
        env["ANTHROPIC_BASE_URL"] = base_url
    runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
    return env


def install_hooks(home: Path, *options: str, binary: Path | None = None) -> str:
    """``loopwarden install claude-code --user`` in ``home``, with ``binary`` on PATH as a
    user's ``claude`` is (the install fits the hooks to its release); returns its output."""
    env = {**host_env(home), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    if binary is not None:
        env["PATH"] = f"{binary.parent}{os.pathsep}{env['PATH']}"
    proc = subprocess.run([*loopwarden_argv(), "install", "claude-code", "--user", *options],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def bash(work: Path, command: str) -> tuple[str, dict[str, Any]]:
    """A Bash call that records its execution in ``work/calls.log``, then runs ``command``."""
    log = shlex.quote(str(work / "calls.log"))
    return "Bash", {"command": f"echo ran >> {log}; {command}", "description": "scripted step"}


def run_claude(binary: Path, tmp: Path, script: Script, *, hooks: bool = True,
               mcp_config: dict[str, Any] | None = None,
               install_options: tuple[str, ...] = (), resident: bool = True) -> RunRecord:
    """Run ``binary`` once on ``script`` in a fresh HOME under ``tmp`` (the hooks installed
    with ``install_options``; ``resident``: the command hooks use their resident server, as
    users get them, or each answers in its own process)."""
    home, work = tmp / "home", tmp / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    if hooks:
        install_hooks(home, *install_options, binary=binary)
    argv = [str(binary), "-p", "Do the task.", "--output-format", "stream-json", "--verbose",
            "--dangerously-skip-permissions"]
    if mcp_config is not None:
        config = tmp / "mcp.json"
        config.write_text(json.dumps(mcp_config))
        argv += ["--mcp-config", str(config)]
    with serve(script) as (url, model):
        try:
            proc = subprocess.run(argv, env=host_env(home, url, resident=resident), cwd=work,
                                  capture_output=True, text=True, timeout=_RUN_TIMEOUT_SECONDS,
                                  stdin=subprocess.DEVNULL, check=False)
        finally:
            servers = stop_servers(home)
    if hooks and resident and "--http" not in install_options:
        # The command hooks answered through their resident server, as users get them (a
        # socket path that is too long would have them answer each in its own process).
        assert servers >= 1, "no resident hook server ran"
    return _record(model, work, proc)


def _record(model: ScriptedModel, work: Path,
            proc: subprocess.CompletedProcess[str]) -> RunRecord:
    log = work / "calls.log"
    executions = len(log.read_text().splitlines()) if log.exists() else 0
    warned_at = denied_at = None
    denials = 0
    results: dict[int, tuple[bool, str]] = {}
    for turn in model.turns:
        for block in _json_blocks(turn.seen):
            if block.get("type") == "tool_result":
                results[_call_number(block)] = (bool(block.get("is_error")),
                                                _text(block.get("content")))
            elif warned_at is None and _is_warning(_text(block.get("text"))):
                warned_at = turn.call - 1  # hook context given with the last call's result
    for call in sorted(results):
        is_error, text = results[call]
        if is_error and _is_denial(text):
            denials += 1
            denied_at = call if denied_at is None else denied_at
        elif warned_at is None and _is_warning(text):
            warned_at = call
    issued = sum(1 for turn in model.turns if turn.answered is not None)
    last = model.turns[-1] if model.turns else None
    ended = last is not None and last.answered is not None and issued < MAX_CALLS
    return RunRecord(issued, executions, warned_at, denied_at, denials, ended,
                     proc.returncode, proc.stdout)


def _json_blocks(seen: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for line in seen.splitlines():
        try:
            parsed = json.loads(line)
        except ValueError:
            continue
        blocks += [b for b in parsed if isinstance(b, dict)] if isinstance(parsed, list) else []
    return blocks


def _call_number(block: dict[str, Any]) -> int:
    tool_use_id = str(block.get("tool_use_id") or "")
    return int(tool_use_id[6:10]) if tool_use_id[6:10].isdigit() else -1


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(item.get("text")) if isinstance(item, dict) else str(item)
                         for item in content)
    return "" if content is None else str(content)


def _is_denial(text: str) -> bool:
    """loopwarden's deny reasons: a critical detection, or the recovery / terminal texts."""
    return any(marker in text for marker in ("CRITICAL:", RECOVERY_TEXT, TERMINAL_TEXT))


def _is_warning(text: str) -> bool:
    return any(marker in text for marker in _WARNING_MARKERS)
