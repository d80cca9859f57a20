"""Project installs hold nothing of the installer's machine (#22 item 3), and ``install
claude-code --check`` runs every installed hook command as the host would, reporting one that
does not run and what its config leaves unset (#22 items 1b and 3).

Driven as a user drives them: the console script in temporary HOMEs and git projects, and the
commands the team-shared files hold run by a teammate's shell (``sh -c``, as the hosts run
hooks) with a clean PATH and HOME that do not contain the installer's venv."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwarden.integrations.claude_code_settings import HOOK_EVENTS, is_loopwarden_command

pytestmark = pytest.mark.integration

# A teammate's shell: system directories only (git and sh live there), no venv of the installer.
TEAMMATE_PATH = os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin")
                                if Path(p).is_dir())
PAYLOAD = json.dumps({"hook_event_name": "PreToolUse", "session_id": "s1", "prompt_id": "p1",
                      "cwd": "/w", "tool_name": "Bash", "tool_input": {"command": "ls"},
                      "tool_use_id": "t1"})
OTHER_HOOK = {"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}
SCRIPT = Path(sys.executable).parent / "loopwarden"  # the console script of this install


def loopwarden(*args: str, home: Path, cwd: Path, path: str | None = None,
               script: bool = False) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it: ``script`` the installed console script (else ``python -m``),
    ``path`` the PATH it sees."""
    env = {**os.environ, "HOME": str(home)}
    if path is not None:
        env["PATH"] = path
    argv = [str(SCRIPT)] if script else [sys.executable, "-m", "loopwarden"]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=180,
                          check=False, cwd=cwd, env=env)


def as_teammate(command: str, *, home: Path, cwd: Path, path: str = TEAMMATE_PATH,
                payload: str = PAYLOAD) -> subprocess.CompletedProcess[str]:
    """Run a hook command exactly as the host runs it, in a teammate's clean environment."""
    env = {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", "LOOPWARDEN_HOOK_SERVER": "0"}
    return subprocess.run(["/bin/sh", "-c", command], input=payload, capture_output=True,
                          text=True, timeout=120, check=False, cwd=cwd, env=env)


def commands_in(settings_file: Path) -> list[str]:
    settings = json.loads(settings_file.read_text(encoding="utf-8"))
    return [entry["command"] for groups in settings.get("hooks", {}).values()
            for group in groups for entry in group["hooks"] if "command" in entry]


def git_project(tmp_path: Path) -> Path:
    project = tmp_path / "repo"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return project


def fake_claude(tmp_path: Path) -> Path:
    script = tmp_path / "claude"
    script.write_text("#!/bin/sh\necho '2.1.332 (Claude Code)'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
needs_script = pytest.mark.skipif(not SCRIPT.is_file(), reason="no loopwarden console script")


@needs_git
def test_claude_code_project_install_leaves_the_team_file_runnable_by_a_teammate(
    tmp_path: Path,
) -> None:
    installer_home, teammate_home = tmp_path / "me", tmp_path / "teammate"
    installer_home.mkdir()
    teammate_home.mkdir()
    project = git_project(tmp_path)
    # What an older loopwarden left in the team's file: the installer's venv path.
    old = f"{shlex.quote(sys.executable)} -m loopwarden claude-hook"
    shared = write_json(project / ".claude" / "settings.json", {"hooks": {"PreToolUse": [
        OTHER_HOOK, {"matcher": "*", "hooks": [{"type": "command", "command": old}]}]}})

    result = loopwarden("install", "claude-code", "--project", home=installer_home, cwd=project)

    assert result.returncode == 0, result.stderr
    local = project / ".claude" / "settings.local.json"
    assert "settings.local.json" in result.stdout and "each teammate" in result.stdout
    installed = json.loads(local.read_text(encoding="utf-8"))
    assert sorted(installed["hooks"]) == sorted(HOOK_EVENTS)
    # The team's file keeps its own hook and holds no loopwarden command, nothing of this machine.
    team_commands = commands_in(shared)
    assert team_commands == ["true"]
    assert not any(is_loopwarden_command(command) for command in team_commands)
    assert sys.prefix not in shared.read_text(encoding="utf-8")
    # A teammate's clone: every hook command of the shared file runs in their shell.
    for command in team_commands:
        ran = as_teammate(command, home=teammate_home, cwd=project)
        assert ran.returncode == 0, (command, ran.stderr)
    # The machine-specific file stays out of git (in this clone's own exclude file).
    git = ["git", "-C", str(project)]
    assert subprocess.run([*git, "check-ignore", "-q", ".claude/settings.local.json"],
                          check=False).returncode == 0
    status = subprocess.run([*git, "status", "--porcelain", "--untracked-files=all"],
                            capture_output=True, text=True, check=True).stdout
    assert "settings.local.json" not in status and ".gitignore" not in status
    # And for the installer, the local command runs as Claude Code runs it.
    (mine,) = set(commands_in(local))
    assert as_teammate(mine, home=installer_home, cwd=project).returncode == 0


@needs_git
def test_uninstall_project_removes_the_hooks_from_both_project_files(tmp_path: Path) -> None:
    home = tmp_path / "me"
    home.mkdir()
    project = git_project(tmp_path)
    assert loopwarden("install", "claude-code", "--project", home=home, cwd=project
                      ).returncode == 0
    shared = write_json(project / ".claude" / "settings.json", {"hooks": {"PreCompact": [
        {"hooks": [{"type": "command", "command": "/old/bin/loopwarden claude-hook"}]}]}})
    removed = loopwarden("install", "claude-code", "--project", "--uninstall", home=home,
                         cwd=project)
    assert removed.returncode == 0, removed.stderr
    assert commands_in(project / ".claude" / "settings.local.json") == []
    assert commands_in(shared) == []


@needs_script
@pytest.mark.parametrize(("host", "relative", "subcommand"), [
    ("codex", ".codex/hooks.json", "codex-hook"),
    ("gemini-cli", ".gemini/settings.json", "gemini-hook"),
])
def test_codex_and_gemini_project_installs_write_a_command_every_teammate_can_run(
    tmp_path: Path, host: str, relative: str, subcommand: str,
) -> None:
    installer_home, teammate_home = tmp_path / "me", tmp_path / "teammate"
    installer_home.mkdir()
    teammate_home.mkdir()
    project = tmp_path / "repo"
    project.mkdir()
    installer_path = os.pathsep.join([str(SCRIPT.parent), TEAMMATE_PATH])

    result = loopwarden("install", host, "--project", "--preset", "early",
                        home=installer_home, cwd=project, path=installer_path, script=True)

    assert result.returncode == 0, result.stderr
    assert "each teammate's PATH" in result.stdout
    shared = project / relative
    (command,) = set(commands_in(shared))
    assert shlex.split(command) == ["loopwarden", subcommand, "--preset", "early"]
    assert str(SCRIPT.parent) not in shared.read_text(encoding="utf-8")
    # The teammate has their own loopwarden, somewhere else, on their PATH.
    their_bin = teammate_home / "bin"
    their_bin.mkdir()
    (their_bin / "loopwarden").symlink_to(SCRIPT)
    ran = as_teammate(command, home=teammate_home, cwd=project,
                      path=os.pathsep.join([str(their_bin), TEAMMATE_PATH]))
    assert ran.returncode == 0, ran.stderr
    # Without loopwarden on PATH the installer refuses, saying why, and writes nothing more.
    again = loopwarden("install", host, "--project", "--preset", "openclaw",
                       home=installer_home, cwd=project, path=TEAMMATE_PATH, script=True)
    assert again.returncode == 2 and "not on PATH" in again.stderr
    assert set(commands_in(shared)) == {command}
    # A path of this machine is refused in the team's file.
    config = write_json(tmp_path / "lw.json", {"tools": {"loopDetection": {"enabled": True}}})
    with_config = loopwarden("install", host, "--project", "--config", str(config),
                             home=installer_home, cwd=project, path=installer_path, script=True)
    assert with_config.returncode == 2 and "this machine's" in with_config.stderr


def check(tmp_path: Path, *scope: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return loopwarden("install", "claude-code", "--check", *scope, "--claude",
                      str(fake_claude(tmp_path)), home=home, cwd=cwd)


def hooks_running(command: str) -> dict[str, Any]:
    return {"hooks": {event: [{"hooks": [{"type": "command", "command": command}]}]
                      for event in HOOK_EVENTS}}


@pytest.mark.parametrize(("program", "said"), [
    ("/nonexistent/venv/bin/loopwarden", "was not found"),
    ("NOT-EXECUTABLE", "is not executable"),
])
def test_check_reports_a_hook_command_that_does_not_run(
    tmp_path: Path, program: str, said: str,
) -> None:
    home, project = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    project.mkdir()
    if program == "NOT-EXECUTABLE":
        plain = tmp_path / "bin" / "loopwarden"
        plain.parent.mkdir()
        plain.write_text("#!/bin/sh\nexit 0\n")
        plain.chmod(0o644)
        program = str(plain)
    write_json(project / ".claude" / "settings.local.json",
               hooks_running(f"{program} claude-hook"))

    result = check(tmp_path, "--project", home=home, cwd=project)

    assert result.returncode == 1, result.stdout
    assert f"does not run: its program {said}" in result.stdout
    assert "all events" in result.stdout  # installed, and still reported as not working


def test_check_flags_a_machine_path_in_the_team_file(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    project.mkdir()
    shared = f"{shlex.quote(sys.executable)} -m loopwarden claude-hook"  # runs here, not there
    write_json(project / ".claude" / "settings.json", hooks_running(shared))
    result = check(tmp_path, "--project", home=home, cwd=project)
    assert result.returncode == 1
    assert "hook command runs" in result.stdout
    assert "shared with the project's team" in result.stdout


@pytest.mark.parametrize(("block", "said"), [
    ({"warningThreshold": 5, "criticalThreshold": 8}, "enabled is unset"),
    ({"enabled": True}, "enabled is true"),
])
def test_check_says_whether_the_hooks_config_leaves_enabled_unset(
    tmp_path: Path, block: dict[str, Any], said: str,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config = write_json(tmp_path / "lw.json", {"tools": {"loopDetection": block}})
    installed = loopwarden("install", "claude-code", "--user", "--config", str(config),
                           home=home, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    result = check(tmp_path, "--user", home=home, cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert f"config: {config}: {said}" in result.stdout
    if said == "enabled is unset":
        assert "tools.loopDetection.enabled = true" in result.stdout
