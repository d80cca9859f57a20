"""``--preset`` before ``--`` belongs to loopwarden; an unknown option there is a usage error
(exit 2), never started as the MCP server (issue 22, friction 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _proxy(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "loopwarden", "mcp-proxy", *args],
                          input="", capture_output=True, text=True, env=env, timeout=60,
                          check=False)


def test_preset_before_the_double_dash_is_ours_and_the_server_runs(tmp_path: Path) -> None:
    done = _proxy(tmp_path, "--preset", "early", "--", sys.executable, "-c", "pass")
    assert done.returncode == 0, done.stderr
    assert "cannot start" not in done.stderr


def test_an_unknown_option_before_the_double_dash_is_a_usage_error(tmp_path: Path) -> None:
    done = _proxy(tmp_path, "--bogus", "--", sys.executable, "-c", "pass")
    assert done.returncode == 2
    assert "--bogus" in done.stderr and "cannot start" not in done.stderr


def test_an_unknown_preset_lists_the_allowed_ones(tmp_path: Path) -> None:
    done = _proxy(tmp_path, "--preset", "fastest", "--", sys.executable, "-c", "pass")
    assert done.returncode == 2
    assert '"early"' in done.stderr


def _loopwarden(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    # This install's scripts on PATH, as in an activated venv: a Codex / Gemini CLI project
    # install writes the bare `loopwarden`, and refuses when PATH does not find one.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path),
           "LOOPWARDEN_DB": str(tmp_path / "lw.db"), "PATH": path}
    return subprocess.run([sys.executable, "-m", "loopwarden", *args], input=stdin,
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
                          check=False)


def test_install_writes_preset_and_exit_behavior_into_the_hook_command(tmp_path: Path) -> None:
    done = _loopwarden(tmp_path, "install", "claude-code", "--project", "--preset", "early",
                       "--exit-behavior", "continue")
    assert done.returncode == 0, done.stderr
    # (a project install's command goes into the per-developer settings.local.json)
    settings = (tmp_path / ".claude" / "settings.local.json").read_text()
    assert "--preset early" in settings and "--exit-behavior continue" in settings


def test_install_rejects_an_unknown_preset_with_the_allowed_list(tmp_path: Path) -> None:
    done = _loopwarden(tmp_path, "install", "claude-code", "--preset", "fastest")
    assert done.returncode == 2 and "openclaw, early" in done.stderr
    assert not (tmp_path / ".claude").exists()


def test_claude_hook_preset_early_blocks_sooner_than_the_default(tmp_path: Path) -> None:
    def first_deny(*options: str) -> int | None:
        for number in range(1, 30):
            payload = json.dumps({"hook_event_name": "PreToolUse",
                                  "session_id": "s" + "".join(options), "tool_name": "Read",
                                  "tool_input": {"path": "a"}, "tool_use_id": f"t{number}"})
            done = _loopwarden(tmp_path, "claude-hook", *options, stdin=payload)
            if '"deny"' in done.stdout:
                return number
        return None

    early, default = first_deny("--preset", "early"), first_deny()
    assert early is not None and (default is None or early < default)


@pytest.mark.parametrize(("host", "settings"), [("codex", ".codex/hooks.json"),
                                                ("gemini-cli", ".gemini/settings.json")])
def test_every_install_command_takes_preset_and_exit_behavior(
    tmp_path: Path, host: str, settings: str,
) -> None:
    done = _loopwarden(tmp_path, "install", host, "--project", "--preset", "early",
                       "--exit-behavior", "error")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / settings).read_text()
    assert "--preset early" in text and "--exit-behavior error" in text
