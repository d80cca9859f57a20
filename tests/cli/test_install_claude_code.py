"""``loopwarden install claude-code``: real settings files in a temporary HOME / project, the
command run as a user runs it, and the hook command it writes run as Claude Code runs it."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwarden.integrations.claude_code_settings import (
    HOOK_EVENTS,
    SettingsError,
    hook_command,
    install,
    is_loopwarden_command,
    uninstall,
)

pytestmark = pytest.mark.integration

FOREIGN = {
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)"], "deny": []},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/audit.sh",
                                           "timeout": 5}]},
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


def child_env(**extra: str) -> dict[str, str]:
    """This environment, its PYTHONPATH made absolute (the children run in other folders), and
    no ``claude`` on its PATH: the install fits the hooks to the release on PATH, and these
    tests must not depend on what this machine has (tests with a release put one there)."""
    env = {**os.environ, **extra}
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    env["PATH"] = os.pathsep.join(
        folder for folder in env.get("PATH", "").split(os.pathsep)
        if folder and not os.path.exists(os.path.join(folder, "claude")))
    return env


def run_cli(*args: str, home: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopwarden", "install", "claude-code", *args],
        capture_output=True, text=True, timeout=120, check=False, cwd=cwd,
        env=child_env(HOME=str(home)),
    )


def user_settings(home: Path) -> Path:
    return home / ".claude" / "settings.json"


def read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def ours(settings: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [entry for group in settings.get("hooks", {}).get(event, [])
            for entry in group.get("hooks", []) if is_loopwarden_command(entry.get("command"))]


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.*.bak"))


# -- the command line, on real files ----------------------------------------------------------


def test_a_fresh_install_writes_the_hooks_with_an_absolute_command(tmp_path: Path) -> None:
    result = run_cli(home=tmp_path)
    assert result.returncode == 0, result.stderr
    path = user_settings(tmp_path)
    settings = read(path)
    assert list(settings["hooks"]) == list(HOOK_EVENTS)
    commands = set()
    for event in HOOK_EVENTS:
        (group,) = settings["hooks"][event]
        assert group.get("matcher") == (None if event in ("PreCompact", "PostToolBatch") else "*")
        (entry,) = group["hooks"]
        assert entry["type"] == "command"
        commands.add(entry["command"])
    (command,) = commands
    argv = shlex.split(command)
    assert Path(argv[0]).is_absolute() and Path(argv[0]).exists()
    assert argv[-1] == "claude-hook"
    assert str(path) in result.stdout and command in result.stdout
    assert backups(path) == []  # there was nothing to back up


def test_the_batch_hook_follows_the_release_on_path(tmp_path: Path) -> None:
    """Claude Code 2.1.332 ends a run on the denied call itself: its install has no batch hook
    (one hook less per tool call); 2.1.197 needs it, and so does ``--exit-behavior ask``.
    Installing again for another release adds or removes it, and only loopwarden's entry.
    (A stand-in ``claude`` prints the version; the host tests run the real releases.)"""
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    bin_dir.mkdir()
    claude = bin_dir / "claude"
    path = user_settings(home)
    path.parent.mkdir()
    foreign = {"hooks": [{"type": "command", "command": "notify-send batch"}]}
    path.write_text(json.dumps({"hooks": {"PostToolBatch": [foreign]}}), encoding="utf-8")

    def install_for(version: str, *args: str) -> list[str]:
        claude.write_text(f"#!/bin/sh\necho '{version} (Claude Code)'\n", encoding="utf-8")
        claude.chmod(0o755)
        env = child_env(HOME=str(home))
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
        result = subprocess.run([sys.executable, "-m", "loopwarden", "install", "claude-code",
                                 *args], capture_output=True, text=True, timeout=120,
                                check=False, env=env)
        assert result.returncode == 0, result.stderr
        left_out = "PostToolBatch hook left out: Claude Code 2.1.332" in result.stdout
        assert left_out == (version == "2.1.332" and not args), result.stdout
        settings = read(path)
        assert settings["hooks"]["PostToolBatch"][0] == foreign  # never theirs
        return [event for event in HOOK_EVENTS if ours(settings, event)]

    without_batch = [event for event in HOOK_EVENTS if event != "PostToolBatch"]
    assert install_for("2.1.332") == without_batch
    assert install_for("2.1.197") == list(HOOK_EVENTS)
    assert install_for("2.1.332") == without_batch
    assert install_for("2.1.332", "--exit-behavior", "ask") == list(HOOK_EVENTS)
    # Under "continue" there is no run to end, on any release.
    assert install_for("2.1.197", "--exit-behavior", "continue") == without_batch


def test_installing_twice_changes_nothing(tmp_path: Path) -> None:
    assert run_cli(home=tmp_path).returncode == 0
    path = user_settings(tmp_path)
    before = path.read_bytes()
    again = run_cli(home=tmp_path)
    assert again.returncode == 0
    assert "nothing to change" in again.stdout
    assert path.read_bytes() == before
    assert backups(path) == []


def test_other_hooks_and_keys_are_kept(tmp_path: Path) -> None:
    path = user_settings(tmp_path)
    path.parent.mkdir()
    path.write_text(json.dumps(FOREIGN), encoding="utf-8")
    assert run_cli(home=tmp_path).returncode == 0
    settings = read(path)
    assert settings["model"] == "opus" and settings["permissions"] == FOREIGN["permissions"]
    assert settings["hooks"]["Stop"] == FOREIGN["hooks"]["Stop"]
    assert settings["hooks"]["PreToolUse"][0] == FOREIGN["hooks"]["PreToolUse"][0]
    for event in HOOK_EVENTS:
        assert len(ours(settings, event)) == 1
    # Uninstalling gives the original back.
    assert run_cli("--uninstall", home=tmp_path).returncode == 0
    assert read(path) == FOREIGN


def test_a_changed_file_is_backed_up_first_and_keeps_its_mode(tmp_path: Path) -> None:
    path = user_settings(tmp_path)
    path.parent.mkdir()
    original = json.dumps(FOREIGN, indent=4).encode()
    path.write_bytes(original)
    path.chmod(0o600)
    assert run_cli(home=tmp_path).returncode == 0
    (backup,) = backups(path)
    assert backup.read_bytes() == original
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not list(path.parent.glob(".settings.json.*.tmp"))  # the temp file was renamed


def test_a_reinstall_with_other_options_replaces_loopwardens_entries(tmp_path: Path) -> None:
    config = tmp_path / "openclaw.json"
    config.write_text('{"tools": {"loopDetection": {"warningThreshold": 4}}}', encoding="utf-8")
    assert run_cli(home=tmp_path).returncode == 0
    path = user_settings(tmp_path)
    settings = read(path)
    # The user narrows loopwarden's PreToolUse entry and gives it a timeout; a reinstall keeps it.
    settings["hooks"]["PreToolUse"][0]["matcher"] = "Bash|mcp__.*"
    settings["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"] = 30
    settings["hooks"]["PreToolUse"].insert(0, FOREIGN["hooks"]["PreToolUse"][0])
    # ...and an older install left a second entry (the bare name) behind.
    settings["hooks"]["PostToolUse"].append(
        {"matcher": "*", "hooks": [{"type": "command", "command": "loopwarden claude-hook"}]})
    path.write_text(json.dumps(settings), encoding="utf-8")
    result = run_cli("--config", str(config), "--agent", "coder", "--db", "state.db",
                     home=tmp_path, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    settings = read(path)
    for event in HOOK_EVENTS:
        (entry,) = ours(settings, event)
        argv = shlex.split(entry["command"])
        assert argv[argv.index("--config") + 1] == str(config)
        assert argv[argv.index("--agent") + 1] == "coder"
        assert argv[argv.index("--db") + 1] == str(tmp_path / "state.db")  # made absolute
    pre = settings["hooks"]["PreToolUse"]
    assert pre[0] == FOREIGN["hooks"]["PreToolUse"][0]
    assert pre[1]["matcher"] == "Bash|mcp__.*" and pre[1]["hooks"][0]["timeout"] == 30
    assert len(settings["hooks"]["PostToolUse"]) == 1


def test_uninstall_removes_only_loopwardens_entries(tmp_path: Path) -> None:
    assert run_cli(home=tmp_path).returncode == 0
    path = user_settings(tmp_path)
    settings = read(path)
    mixed = settings["hooks"]["PostToolUse"][0]["hooks"]
    mixed.append({"type": "command", "command": "prettier --write"})
    settings["theme"] = "dark"
    path.write_text(json.dumps(settings), encoding="utf-8")
    result = run_cli("--uninstall", home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert read(path) == {"theme": "dark", "hooks": {"PostToolUse": [
        {"matcher": "*", "hooks": [{"type": "command", "command": "prettier --write"}]}]}}
    assert len(backups(path)) == 1
    again = run_cli("--uninstall", home=tmp_path)
    assert again.returncode == 0 and "nothing to change" in again.stdout


def test_dry_run_prints_a_diff_and_writes_nothing(tmp_path: Path) -> None:
    result = run_cli("--dry-run", home=tmp_path)
    assert result.returncode == 0, result.stderr
    path = user_settings(tmp_path)
    assert not path.exists()
    lines = result.stdout.splitlines()
    assert lines[0] == "--- /dev/null" and lines[1] == f"+++ {path}"
    assert any(line.startswith("+") and "claude-hook" in line for line in lines)

    path.parent.mkdir()
    path.write_text(json.dumps(FOREIGN, indent=2) + "\n", encoding="utf-8")
    before = path.read_bytes()
    result = run_cli("--dry-run", home=tmp_path)
    assert result.returncode == 0
    assert result.stdout.startswith(f"--- {path}\n+++ {path}\n@@")
    assert not any(line.startswith("-") and "audit.sh" in line
                   for line in result.stdout.splitlines())  # foreign entries unchanged
    assert path.read_bytes() == before and backups(path) == []


@pytest.mark.parametrize(("content", "why"), [
    ("{not json", "is not valid JSON"),
    ("", "is not valid JSON"),
    ("[1, 2]", "is not a JSON object"),
    ('{"hooks": []}', '"hooks" is a array, not an object'),
    ('{"hooks": {"PreToolUse": {"matcher": "*"}}}', '"hooks.PreToolUse" is a'),
])
def test_a_settings_file_it_cannot_edit_is_refused_and_left_alone(
    tmp_path: Path, content: str, why: str
) -> None:
    path = user_settings(tmp_path)
    path.parent.mkdir()
    path.write_text(content, encoding="utf-8")
    for args in ((), ("--uninstall",), ("--dry-run",)):
        if args == ("--uninstall",) and "PreToolUse" in content:
            continue  # uninstall leaves an event it cannot read alone (nothing of ours there)
        result = run_cli(*args, home=tmp_path)
        assert result.returncode == 2, (args, result.stdout)
        assert str(path) in result.stderr and why.split(" a")[0] in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert path.read_text(encoding="utf-8") == content and backups(path) == []


def test_project_scope_writes_the_projects_local_settings(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    project.mkdir()
    result = run_cli("--project", home=home, cwd=project)
    assert result.returncode == 0, result.stderr
    assert ours(read(project / ".claude" / "settings.local.json"), "PreToolUse")
    assert not (project / ".claude" / "settings.json").exists()  # the team's file: untouched
    assert not user_settings(home).exists()
    both = run_cli("--user", "--project", home=home, cwd=project)
    assert both.returncode == 2 and "exclude each other" in both.stderr


def test_a_config_that_does_not_validate_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "bad.json"
    config.write_text('{"tools": {"loopDetection": {"warningThreshold": 0}}}', encoding="utf-8")
    result = run_cli("--config", str(config), home=tmp_path)
    assert result.returncode == 2 and "warningThreshold" in result.stderr
    assert not user_settings(tmp_path).exists()


def test_a_symlinked_settings_file_stays_a_symlink(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text(json.dumps(FOREIGN), encoding="utf-8")
    path = user_settings(tmp_path)
    path.parent.mkdir()
    path.symlink_to(dotfiles)
    assert run_cli(home=tmp_path).returncode == 0
    assert path.is_symlink() and ours(read(dotfiles), "PreCompact")


# -- the command written runs ------------------------------------------------------------------


def console_script(directory: Path) -> Path:
    """A ``loopwarden`` console script, as pip writes it, for this interpreter."""
    directory.mkdir()
    script = directory / "loopwarden"
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom loopwarden.cli._entry import main\n"
                      "sys.exit(main())\n", encoding="utf-8")
    script.chmod(0o755)
    return script


def test_the_written_command_runs_as_claude_code_runs_it(tmp_path: Path) -> None:
    """Installed through the bare name on PATH; the command written names the script by its
    absolute path, so it runs from a shell whose PATH does not have it."""
    script = console_script(tmp_path / "bin")
    config = tmp_path / "openclaw.json"
    config.write_text('{"tools": {"loopDetection": {"warningThreshold": 2, '
                      '"criticalThreshold": 4}}}', encoding="utf-8")
    db = tmp_path / "hook.db"
    result = subprocess.run(
        ["loopwarden", "install", "claude-code", "--config", str(config), "--db", str(db)],
        capture_output=True, text=True, timeout=120, check=False,
        env=child_env(HOME=str(tmp_path), PATH=f"{script.parent}:{os.environ['PATH']}"),
    )
    assert result.returncode == 0, result.stderr
    (entry,) = ours(read(user_settings(tmp_path)), "PreToolUse")
    command = entry["command"]
    # This interpreter without site, running the hook file of this loopwarden (cli/_hook.py).
    argv = shlex.split(command)
    assert Path(argv[0]).is_absolute() and argv[1] == "-S", command
    assert Path(argv[2]).parts[-3:] == ("loopwarden", "cli", "_hook.py"), command

    hook_env = child_env(PATH="/usr/bin:/bin")  # no loopwarden on it
    answers = []
    for n in range(1, 4):
        call = {"hook_event_name": "PreToolUse", "session_id": "s", "prompt_id": "p",
                "tool_name": "Bash", "tool_input": {"command": "make"}, "tool_use_id": f"t{n}",
                "cwd": str(tmp_path)}
        pre = subprocess.run(command, shell=True, input=json.dumps(call), capture_output=True,
                             text=True, timeout=120, check=False, env=hook_env)
        assert (pre.returncode, pre.stderr) == (0, ""), pre.stderr
        answers.append(json.loads(pre.stdout) if pre.stdout.strip() else None)
        post = {**call, "hook_event_name": "PostToolUse",
                "tool_response": {"stdout": "same", "stderr": ""}}
        done = subprocess.run(command, shell=True, input=json.dumps(post), capture_output=True,
                              text=True, timeout=120, check=False, env=hook_env)
        assert done.returncode == 0, done.stderr
    assert answers[:2] == [None, None]
    warning = answers[2]["hookSpecificOutput"]
    assert warning["hookEventName"] == "PreToolUse"
    assert "additionalContext" in warning  # the config's warningThreshold (2) applied
    assert db.exists()


def test_without_a_console_script_the_command_is_this_interpreter(tmp_path: Path) -> None:
    # `python -m loopwarden install ...`: no script named loopwarden started this process; the
    # command is this interpreter without site (-S) running the hook file, as with the script.
    assert run_cli(home=tmp_path).returncode == 0
    (entry,) = ours(read(user_settings(tmp_path)), "PostToolUseFailure")
    argv = shlex.split(entry["command"])
    assert argv[1] == "-S" and argv[3:] == ["claude-hook"]
    assert Path(argv[2]).parts[-3:] == ("loopwarden", "cli", "_hook.py")
    assert Path(argv[0]).is_absolute()
    assert os.path.samefile(argv[0], sys.executable)


# -- the pure functions -------------------------------------------------------------------------


@pytest.mark.parametrize(("command", "expected"), [
    ("loopwarden claude-hook", True),
    ("/opt/venv/bin/loopwarden claude-hook --config /x.json", True),
    ("'/path with space/loopwarden' claude-hook", True),
    ("/usr/bin/python3 -m loopwarden claude-hook --db d", True),
    ("python -m loopwarden.cli claude-hook", True),
    ("/opt/venv/bin/python3 -S /opt/venv/lib/loopwarden/cli/_hook.py claude-hook", True),
    ("python -S /opt/other/cli/_hook.py claude-hook", False),
    ("'C:\\venv\\Scripts\\loopwarden.exe' claude-hook", True),
    ("loopwarden scan .", False),
    ("~/bin/audit.sh claude-hook", False),
    ("echo loopwarden claude-hook", False),
    ("python -m other claude-hook", False),
    ("loopwarden 'claude-hook", False),
    (None, False),
    (42, False),
])
def test_loopwardens_entries_are_recognised_by_their_command(command: Any, expected: bool) -> None:
    assert is_loopwarden_command(command) is expected


def test_install_and_uninstall_do_not_modify_their_argument() -> None:
    original = json.loads(json.dumps(FOREIGN))
    command = hook_command(["/x/loopwarden"], agent="a b")
    assert command == "/x/loopwarden claude-hook --agent 'a b'"
    installed = install(original, command)
    assert original == FOREIGN
    assert install(installed, command) == installed
    assert uninstall(installed) == FOREIGN
    assert uninstall(FOREIGN) == FOREIGN
    assert uninstall({}) == {} and uninstall({"hooks": {}}) == {"hooks": {}}


def test_groups_that_are_not_claude_codes_shape_are_left_alone() -> None:
    odd = {"hooks": {"PreToolUse": ["a string", {"matcher": "*"}, {"hooks": "x"}]}}
    installed = install(odd, "loopwarden claude-hook")
    assert installed["hooks"]["PreToolUse"][:3] == odd["hooks"]["PreToolUse"]
    assert uninstall(installed) == odd
    with pytest.raises(SettingsError):
        install({"hooks": "none"}, "loopwarden claude-hook")
