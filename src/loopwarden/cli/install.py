"""``loopwarden install claude-code``: register ``claude-hook`` in Claude Code's settings.json.

The command written is the absolute path of the running ``loopwarden`` (or ``python -m
loopwarden`` with this interpreter's absolute path), never the bare name: a hook command that
is not on the PATH Claude Code runs it with exits 127, which Claude Code treats as a
non-blocking error, so the guard would be silently off. Before the file is touched the command
is run once with a payload it ignores, so an install that cannot work fails here, not later.

Exit codes: 0 done (or nothing to do), 2 usage or input errors (a settings.json that is not a
JSON object, a config that does not validate, a hook command that does not run).
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from ..integrations.claude_code_settings import (
    SettingsError,
    hook_command,
    install,
    uninstall,
)

install_app = typer.Typer(
    name="install", no_args_is_help=True, add_completion=False,
    help="Register loopwarden with an agent runtime.",
)

# What the check run sends: an event the hook does not handle, answered at once without
# reading a config or touching the database.
_PROBE = json.dumps({"hook_event_name": "SessionStart", "session_id": "loopwarden-install"})
_PROBE_TIMEOUT_SECONDS = 60.0


def register(app: typer.Typer) -> None:
    """Add the ``install`` command group to the ``loopwarden`` app."""
    app.add_typer(install_app, name="install")


@install_app.command("claude-code")
def claude_code(
    user: Annotated[bool, typer.Option(
        "--user", help="~/.claude/settings.json: every project of this user (the default).",
    )] = False,
    project: Annotated[bool, typer.Option(
        "--project", help="./.claude/settings.json: this project (shared with its repository).",
    )] = False,
    config: Annotated[Path | None, typer.Option(
        "--config", help="OpenClaw config file for the hook (validated now, stored absolute).",
    )] = None,
    db: Annotated[Path | None, typer.Option(
        "--db", help="SQLite file of the hook (default, at run time: $LOOPWARDEN_DB or "
        "~/.loopwarden/loopwarden.db).",
    )] = None,
    agent: Annotated[str | None, typer.Option(
        "--agent", help="Agent id whose per-agent loopDetection override applies.",
    )] = None,
    preset: Annotated[str | None, typer.Option(
        "--preset", metavar="NAME", help="Detection preset for the hook: openclaw or early.",
    )] = None,
    exit_behavior: Annotated[str | None, typer.Option(
        "--exit-behavior", metavar="WHAT",
        help="At the terminal stop: end (the default), error, continue or ask (Claude Code: the "
             "user decides in its permission prompt).",
    )] = None,
    remove: Annotated[bool, typer.Option(
        "--uninstall", help="Remove loopwarden's hook entries (only those).",
    )] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the change as a unified diff; write nothing.",
    )] = False,
    check: Annotated[bool, typer.Option(
        "--check", help="Report which hook behaviours the installed Claude Code supports "
        "(from `claude --version`) and whether the hooks are installed; change nothing. "
        "Exit 1 when the release is unsupported or the hooks are missing.",
    )] = False,
    claude: Annotated[str | None, typer.Option(
        "--claude", help="The claude executable --check asks (default: claude on PATH).",
    )] = None,
    http: Annotated[int | None, typer.Option(
        "--http", min=1, max=65535, help="Tool hooks as http hooks posting to a resident "
        "server on 127.0.0.1:PORT (started by a SessionStart hook; only your uid may connect): "
        "no process per tool call. When it is down, tool calls go ahead unguarded.",
    )] = None,
) -> None:
    """Write the hooks that run `loopwarden claude-hook` into Claude Code's settings.json.

    Events: PreToolUse, PostToolUse, PostToolUseFailure, PostToolBatch, PreCompact. Safe to
    run again. Needs Claude Code 2.1.197 or later (--check tells).

    loopwarden's entries (known by their command) are replaced, never duplicated; others stay.

    A changed file is first backed up (settings.json.TIMESTAMP.bak), then replaced atomically.
    """
    if user and project:
        _error("--user and --project exclude each other")
    if check:
        from .claude_check import check_report

        paths = [_settings_path(project=project)] if user or project else [
            _settings_path(project=False), _settings_path(project=True)]
        code, report = check_report(claude, paths)
        typer.echo(report)
        raise typer.Exit(code)
    path = _settings_path(project=project)
    old_text, settings = _read_settings(path)
    command = start = None
    if not remove:
        # One set of options for the hook command and, with --http, the command that starts
        # the server the http hooks talk to.
        command_with = functools.partial(
            hook_command,
            hook_executable(),
            config=None if config is None else str(_checked_config(config, agent)),
            db=None if db is None else str(db.expanduser().absolute()),
            agent=agent,
            preset=_one_of("--preset", preset, ("openclaw", "early")),
            exit_behavior=_one_of("--exit-behavior", exit_behavior, ("end", "error", "continue", "ask")),
        )
        command = command_with()
        _check_runs(command)
        if http is not None:
            start = command_with(http_start=http)
    try:
        new_settings = uninstall(settings) if command is None else install(
            settings, command, http_port=http, start_command=start)
    except SettingsError as exc:
        _error(f"{path}: {exc}; fix or move the file, then run this again")
    if new_settings == settings:
        what = "no loopwarden hooks" if remove else "the hooks are already installed"
        typer.echo(f"{path}: {what}; nothing to change")
        return
    # allow_nan=False: whatever got in, what is written is JSON (reading already refuses).
    new_text = json.dumps(new_settings, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if dry_run:
        diff = difflib.unified_diff(
            (old_text or "").splitlines(keepends=True), new_text.splitlines(keepends=True),
            fromfile=str(path) if old_text is not None else "/dev/null", tofile=str(path))
        typer.echo("".join(diff), nl=False)
        return
    backup = _write_settings(path, new_text, had_file=old_text is not None)
    done = "removed loopwarden's hooks from" if remove else "installed the Claude Code hooks in"
    typer.echo(f"{done} {path}" + (f" (backup: {backup})" if backup else ""))
    if command is not None:
        typer.echo(f"command: {command}")


def hook_executable() -> list[str]:
    """The argv that runs this loopwarden from anywhere: the ``loopwarden`` script this process
    was started as, absolute and resolved, else this interpreter with ``-m loopwarden``."""
    launched = sys.argv[0] if sys.argv else ""
    if Path(launched).name.lower() in ("loopwarden", "loopwarden.exe"):
        found = launched if os.sep in launched or (os.altsep and os.altsep in launched) \
            else shutil.which(launched)
        if found and Path(found).is_file():
            return [str(Path(found).resolve())]
    return [str(Path(sys.executable).absolute()), "-m", "loopwarden"]


def _settings_path(*, project: bool) -> Path:
    if project:
        return Path.cwd() / ".claude" / "settings.json"
    return Path.home() / ".claude" / "settings.json"


def _read_settings(path: Path) -> tuple[str | None, dict[str, Any]]:
    """(the file's text, its object); (None, {}) when there is no file yet. Only a regular
    file is read (a named pipe would block, a device never end), and only JSON that can be
    written back as JSON (no NaN, Infinity, or numbers too large for a float)."""
    try:
        text = _read_regular_file(path)
    except FileNotFoundError:
        return None, {}
    except (OSError, UnicodeDecodeError) as exc:
        _error(f"cannot read {path}: {exc}")
    try:
        settings = json.loads(text, parse_constant=_non_finite, parse_float=_finite_float)
    except ValueError as exc:
        _error(f"{path} is not valid JSON ({exc}); fix or move it, then run this again")
    if not isinstance(settings, dict):
        _error(f"{path} is not a JSON object; fix or move it, then run this again")
    return text, settings


def _read_regular_file(path: Path) -> str:
    # Checked before opening (a socket cannot be opened, a directory not read), and again on
    # the descriptor, opened without blocking (a FIFO's open waits for a writer): the check
    # and the read are about the same file.
    _refuse_non_regular(path, os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        _refuse_non_regular(path, os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        return handle.read().decode("utf-8")


def _refuse_non_regular(path: Path, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    kind = ("a directory" if stat.S_ISDIR(mode) else "a named pipe" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a file")
    _error(f"{path} is not a regular file ({kind}); loopwarden edits only a settings.json "
           "that is a file (or a symlink to one)")


def _non_finite(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON, and could not be written back as JSON")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        raise ValueError(f"{literal[:40]} is too large for a float; written back it would be "
                         "Infinity, which is not JSON")
    return value


def _checked_config(config: Path, agent: str | None) -> Path:
    """The config's absolute path, once it validates: a config the hook cannot load would be
    reported on every tool call instead."""
    from ..config import ConfigError, load_config

    absolute = config.expanduser().absolute()
    try:
        load_config(absolute, agent)
    except ConfigError as exc:
        _error(str(exc))
    return absolute


def _check_runs(command: str) -> None:
    """Run the hook command once as Claude Code would (through the shell) with an event it
    ignores; refuse to install a command that fails."""
    try:
        # (No resident server left behind: it would be keyed to this folder, not the host's.)
        proc = subprocess.run(command, shell=True, input=_PROBE, capture_output=True, text=True,
                              env={**os.environ, "LOOPWARDEN_HOOK_SERVER": "0"},
                              timeout=_PROBE_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        _error(f"the hook command did not run ({exc}): {command}")
    if proc.returncode != 0:
        detail = " ".join(proc.stderr.split())[:300] or "no message"
        _error(f"the hook command failed (exit {proc.returncode}: {detail}): {command}")


def _write_settings(path: Path, text: str, *, had_file: bool) -> Path | None:
    """Replace the file atomically (a temp file beside it, then rename), after copying the old
    one to a timestamped backup; returns the backup's path. A symlinked settings.json (a
    dotfiles checkout) has its target replaced, so the link stays."""
    target = Path(os.path.realpath(path))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        backup = _backup(target) if had_file else None
        mode = target.stat().st_mode & 0o7777 if had_file else _default_mode()
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                         suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temporary, mode)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        _error(f"cannot write {path}: {exc}")
    return backup


def _backup(target: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    backup = target.with_name(f"{target.name}.{stamp}.bak")
    counter = 1
    while backup.exists():
        backup = target.with_name(f"{target.name}.{stamp}-{counter}.bak")
        counter += 1
    shutil.copy2(target, backup)
    return backup


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _one_of(flag: str, value: str | None, allowed: tuple[str, ...]) -> str | None:
    """``value`` when it is one of ``allowed`` (or None); anything else is a usage error."""
    if value is not None and value not in allowed:
        typer.echo(f"error: {flag}: must be one of {', '.join(allowed)} (got {value!r})",
                   err=True)
        raise typer.Exit(2)
    return value


def _error(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


# -- Codex CLI and Gemini CLI: the same hook entries, in their own files ---------------------

_CODEX_EVENTS = ("PreToolUse", "PostToolUse")
_GEMINI_EVENTS = ("BeforeTool", "AfterTool", "PreCompress")
_CODEX_TRUST_NOTE = (
    "Codex runs a hook only once you trust it and skips an untrusted one without a word: start "
    "`codex`, open /hooks and trust loopwarden's PreToolUse and PostToolUse entries (again "
    "after each reinstall: trust is kept per entry content). Unattended `codex exec` runs can "
    "pass --dangerously-bypass-hook-trust instead."
)


@install_app.command("codex")
def codex(
    user: Annotated[bool, typer.Option(
        "--user", help="$CODEX_HOME/hooks.json (~/.codex): every project (the default).",
    )] = False,
    project: Annotated[bool, typer.Option(
        "--project", help="./.codex/hooks.json: this project (Codex reads it once the project "
        "is trusted).",
    )] = False,
    config: Annotated[Path | None, typer.Option(
        "--config", help="OpenClaw config file for the hook (validated now, stored absolute).",
    )] = None,
    db: Annotated[Path | None, typer.Option(
        "--db", help="SQLite file of the hook (default: the one claude-hook uses, so one "
        "session's history is shared).",
    )] = None,
    agent: Annotated[str | None, typer.Option(
        "--agent", help="Agent id whose per-agent loopDetection override applies.",
    )] = None,
    preset: Annotated[str | None, typer.Option(
        "--preset", metavar="NAME", help="Detection preset for the hook: openclaw or early.",
    )] = None,
    exit_behavior: Annotated[str | None, typer.Option(
        "--exit-behavior", metavar="WHAT",
        help="At the terminal stop: end (the default), error, continue or ask (Claude Code: the "
             "user decides in its permission prompt).",
    )] = None,
    remove: Annotated[bool, typer.Option(
        "--uninstall", help="Remove loopwarden's hook entries (only those).",
    )] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the change as a unified diff; write nothing.",
    )] = False,
) -> None:
    """Write the hooks that run `loopwarden codex-hook` into Codex CLI's hooks.json.

    Events: PreToolUse, PostToolUse. Safe to run again; other entries stay; a changed file is
    backed up first (hooks.json.TIMESTAMP.bak), then replaced atomically.

    Codex skips untrusted hooks silently: trust them in Codex's /hooks screen afterwards.
    """
    if user and project:
        _error("--user and --project exclude each other")
    home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    path = (Path.cwd() / ".codex" if project else home) / "hooks.json"
    done = _install_host_hooks(path, "codex-hook", _CODEX_EVENTS, "Codex CLI", config=config,
                               db=db, agent=agent, preset=preset, exit_behavior=exit_behavior,
                               remove=remove, dry_run=dry_run)
    if done and not remove:
        typer.echo(_CODEX_TRUST_NOTE)


@install_app.command("gemini-cli")
def gemini_cli(
    user: Annotated[bool, typer.Option(
        "--user", help="~/.gemini/settings.json: every project (the default).",
    )] = False,
    project: Annotated[bool, typer.Option(
        "--project", help="./.gemini/settings.json: this project.",
    )] = False,
    config: Annotated[Path | None, typer.Option(
        "--config", help="OpenClaw config file for the hook (validated now, stored absolute).",
    )] = None,
    db: Annotated[Path | None, typer.Option(
        "--db", help="SQLite file of the hook (default: the one claude-hook uses, so one "
        "session's history is shared).",
    )] = None,
    agent: Annotated[str | None, typer.Option(
        "--agent", help="Agent id whose per-agent loopDetection override applies.",
    )] = None,
    preset: Annotated[str | None, typer.Option(
        "--preset", metavar="NAME", help="Detection preset for the hook: openclaw or early.",
    )] = None,
    exit_behavior: Annotated[str | None, typer.Option(
        "--exit-behavior", metavar="WHAT",
        help="At the terminal stop: end (the default), error, continue or ask (Claude Code: the "
             "user decides in its permission prompt).",
    )] = None,
    remove: Annotated[bool, typer.Option(
        "--uninstall", help="Remove loopwarden's hook entries (only those).",
    )] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the change as a unified diff; write nothing.",
    )] = False,
) -> None:
    """Write the hooks that run `loopwarden gemini-hook` into Gemini CLI's settings.json.

    Events: BeforeTool, AfterTool, PreCompress; hooksConfig.enabled is set true. Safe to run
    again; other settings stay; a changed file is backed up first, then replaced atomically.
    """
    if user and project:
        _error("--user and --project exclude each other")
    path = (Path.cwd() if project else Path.home()) / ".gemini" / "settings.json"
    _install_host_hooks(path, "gemini-hook", _GEMINI_EVENTS, "Gemini CLI", config=config,
                        db=db, agent=agent, preset=preset, exit_behavior=exit_behavior,
                        remove=remove, dry_run=dry_run, enable={"hooksConfig": {"enabled": True}})


def _install_host_hooks(
    path: Path, subcommand: str, events: tuple[str, ...], host: str, *,
    config: Path | None, db: Path | None, agent: str | None, remove: bool, dry_run: bool,
    preset: str | None = None, exit_behavior: str | None = None,
    enable: dict[str, dict[str, Any]] | None = None,
) -> bool:
    """Install (or remove) loopwarden's ``subcommand`` hook entries for ``events`` in the
    settings file at ``path``, the Claude Code way; ``enable`` is merged into the file on
    install (a switch the host needs on). Returns whether the file was written."""
    old_text, settings = _read_settings(path)
    command = None
    if not remove:
        command = hook_command(
            hook_executable(),
            config=None if config is None else str(_checked_config(config, agent)),
            db=None if db is None else str(db.expanduser().absolute()),
            agent=agent, subcommand=subcommand,
            preset=_one_of("--preset", preset, ("openclaw", "early")),
            exit_behavior=_one_of("--exit-behavior", exit_behavior, ("end", "error", "continue", "ask")),
        )
        _check_runs(command)
    try:
        if command is None:
            new_settings = uninstall(settings, subcommand=subcommand)
        else:
            new_settings = install(settings, command, events=events,
                                   tool_events=frozenset(events[:2]), subcommand=subcommand)
            for key, values in (enable or {}).items():
                section = new_settings.setdefault(key, {})
                if not isinstance(section, dict):
                    raise SettingsError(f'"{key}" is not an object')
                section.update(values)
    except SettingsError as exc:
        _error(f"{path}: {exc}; fix or move the file, then run this again")
    if new_settings == settings:
        what = "no loopwarden hooks" if remove else "the hooks are already installed"
        typer.echo(f"{path}: {what}; nothing to change")
        return False
    new_text = json.dumps(new_settings, indent=2, ensure_ascii=False) + "\n"
    if dry_run:
        diff = difflib.unified_diff(
            (old_text or "").splitlines(keepends=True), new_text.splitlines(keepends=True),
            fromfile=str(path) if old_text is not None else "/dev/null", tofile=str(path))
        typer.echo("".join(diff), nl=False)
        return False
    backup = _write_settings(path, new_text, had_file=old_text is not None)
    done = "removed loopwarden's hooks from" if remove else f"installed the {host} hooks in"
    typer.echo(f"{done} {path}" + (f" (backup: {backup})" if backup else ""))
    if command is not None:
        typer.echo(f"command: {command}")
    return True
