"""``loopwarden install claude-code`` (and ``codex``, ``gemini-cli``): register the hook in the
host's settings.

Where the hook command goes, and what it is:

- ``--user`` (the default): the user's own settings file, with this interpreter's absolute path
  running loopwarden's hook file without ``site`` (``PYTHON -S .../loopwarden/cli/_hook.py``,
  the cheapest start; else the absolute path of the running ``loopwarden``), never the bare
  name: a hook command that is not on the PATH the host runs it with exits 127, which the
  hosts treat as a non-blocking error, so the guard would be silently off.
- ``claude-code --project``: ``.claude/settings.local.json``, Claude Code's settings of this
  project for this developer only (kept out of git), with the same absolute command. Nothing
  machine-specific goes into the team-shared ``.claude/settings.json``; loopwarden entries an
  older install left there are removed. Each teammate runs the install once.
- ``codex --project`` / ``gemini-cli --project``: these hosts have no per-developer project
  file, so the shared file gets a command every teammate can run: the bare ``loopwarden``,
  found on each one's PATH, and no path of this machine (``--config`` / ``--db`` are refused).

Before a file is touched the command is run once with a payload it ignores, so an install that
cannot work fails here, not later.

Exit codes: 0 done (or nothing to do), 2 usage or input errors (a settings.json that is not a
JSON object, a config that does not validate, a hook command that does not run).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from ..integrations.claude_code_settings import (
    BATCH_EVENT,
    HOOK_EVENTS,
    SettingsError,
    hook_command,
    install,
    uninstall,
)
from ._settings_file import apply_change, read_settings

install_app = typer.Typer(
    name="install", no_args_is_help=True, add_completion=False,
    help="Register loopwarden with an agent runtime.",
)

def register(app: typer.Typer) -> None:
    """Add the ``install`` command group to the ``loopwarden`` app."""
    app.add_typer(install_app, name="install")


@install_app.command("claude-code")
def claude_code(
    user: Annotated[bool, typer.Option(
        "--user", help="~/.claude/settings.json: every project of this user (the default).",
    )] = False,
    project: Annotated[bool, typer.Option(
        "--project", help="./.claude/settings.local.json: this project, for you only (Claude "
        "Code's git-ignored file; each teammate installs once). Nothing goes into the shared "
        "./.claude/settings.json.",
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
        "--claude", help="The claude executable whose release --check reports and the install "
        "fits the hooks to (default: claude on PATH).",
    )] = None,
    http: Annotated[int | None, typer.Option(
        "--http", min=1, max=65535, help="Tool hooks as http hooks posting to a resident "
        "server on 127.0.0.1:PORT (started by a SessionStart hook; only your uid may connect): "
        "no process per tool call. When it is down, tool calls go ahead unguarded.",
    )] = None,
) -> None:
    """Write the hooks that run `loopwarden claude-hook` into Claude Code's settings.json.

    Events: PreToolUse, PostToolUse, PostToolUseFailure, PostToolBatch, PreCompact; the
    PostToolBatch hook only where the installed Claude Code needs it (releases before 2.1.332,
    which do not end a run on the denied call, and --exit-behavior ask). Safe to run again.
    Needs Claude Code 2.1.197 or later (--check tells).

    loopwarden's entries (known by their command) are replaced, never duplicated; others stay.

    A changed file is first backed up (settings.json.TIMESTAMP.bak), then replaced atomically.
    """
    if user and project:
        _error("--user and --project exclude each other")
    if check:
        from .claude_check import check_report

        project_files = [_settings_path(project=True), _settings_path(project=True, shared=True)]
        paths = list(dict.fromkeys(  # (one file once, when run in HOME itself)
            [_settings_path(project=False)] * (not project) + project_files * (not user)))
        # (In HOME itself the project's settings.json is the user's own file, no team's.)
        shared = [path for path in project_files[1:]
                  if not user and path != _settings_path(project=False)]
        code, report = check_report(claude, paths, shared=shared)
        typer.echo(report)
        raise typer.Exit(code)
    path = _settings_path(project=project)
    command = start = None
    events: tuple[str, ...] = HOOK_EVENTS
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
        events = _events_for(claude, exit_behavior or "end")
    done = "removed loopwarden's hooks from" if remove else "installed the Claude Code hooks in"
    written = _edit(path, lambda settings: uninstall(settings) if command is None else install(
        settings, command, events=events, http_port=http, start_command=start),
        dry_run=dry_run, done=done, unchanged=_UNCHANGED[remove])
    if project:
        # An older loopwarden wrote this machine's path into the shared file; with the entries
        # in settings.local.json too, every tool call would also be counted twice.
        _edit(_settings_path(project=True, shared=True), uninstall, dry_run=dry_run,
              done="removed loopwarden's hooks from the team-shared")
    if written and command is not None:
        typer.echo(f"command: {command}")
        if project:
            typer.echo(_keep_out_of_git(path))


_UNCHANGED = {False: "the hooks are already installed", True: "no loopwarden hooks"}


def _events_for(claude: str | None, exit_behavior: str) -> tuple[str, ...]:
    """The hook events to install for the Claude Code that ``claude`` (None: the one on PATH)
    runs: all of them, but the batch hook only where that release needs it. An unknown
    release (none on PATH, no version) gets it: it costs a hook per tool call, and without it
    an older release would deny the terminal call without ending the run."""
    from .claude_check import batch_hook_needed, release_of

    executable, version = release_of(claude)
    if batch_hook_needed(version, exit_behavior):
        return HOOK_EVENTS
    if exit_behavior == "continue":
        typer.echo(f"{BATCH_EVENT} hook left out: under --exit-behavior continue it has no run "
                   "to end")
    else:
        shown = ".".join(map(str, version or ()))
        typer.echo(f"{BATCH_EVENT} hook left out: Claude Code {shown} ({executable}) ends a run "
                   "on the denied call itself; install again after changing to a release "
                   "before 2.1.332")
    return tuple(event for event in HOOK_EVENTS if event != BATCH_EVENT)


def _edit(path: Path, change: Callable[[dict[str, Any]], dict[str, Any]], *, dry_run: bool,
          done: str, unchanged: str | None = None) -> bool:
    """Apply ``change`` to the settings file at ``path`` and say what happened (``unchanged``:
    what to say when nothing changed, None for nothing); returns whether it was written."""
    old_text, settings = read_settings(path)
    try:
        new_settings = change(settings)
    except SettingsError as exc:
        _error(f"{path}: {exc}; fix or move the file, then run this again")
    if new_settings == settings:
        if unchanged is not None:
            typer.echo(f"{path}: {unchanged}; nothing to change")
        return False
    written, backup = apply_change(path, old_text, settings, new_settings, dry_run=dry_run)
    if written:
        typer.echo(f"{done} {path}" + (f" (backup: {backup})" if backup else ""))
    return written


def hook_executable() -> list[str]:
    """The argv that runs this loopwarden's hooks from anywhere: this interpreter without
    ``site`` running the hook file (:mod:`loopwarden.cli._hook`: half the start-up of the
    console script, which costs every hook event); else the ``loopwarden`` script this process
    was started as, absolute and resolved; else this interpreter with ``-m loopwarden``."""
    hook_file = Path(__file__).with_name("_hook.py")  # (a file to run, not a module to import)
    if sys.executable and hook_file.is_file():
        return [str(Path(sys.executable).absolute()), "-S", str(hook_file.absolute())]
    launched = sys.argv[0] if sys.argv else ""
    if Path(launched).name.lower() in ("loopwarden", "loopwarden.exe"):
        found = launched if os.sep in launched or (os.altsep and os.altsep in launched) \
            else shutil.which(launched)
        if found and Path(found).is_file():
            return [str(Path(found).resolve())]
    return [str(Path(sys.executable).absolute()), "-m", "loopwarden"]


def _settings_path(*, project: bool, shared: bool = False) -> Path:
    """Claude Code's settings file: the user's, or this project's for this developer
    (``settings.local.json``) or for the team (``shared``: ``settings.json``)."""
    if project:
        return Path.cwd() / ".claude" / ("settings.json" if shared else "settings.local.json")
    return Path.home() / ".claude" / "settings.json"


def _keep_out_of_git(path: Path) -> str:
    """Make sure git ignores ``path`` (a file of this machine's paths): when it is in a git
    work tree and not ignored yet, it goes into that clone's own ``info/exclude`` (never into
    the shared .gitignore). Returns what to tell the user."""
    mine = "(this machine's command, for you only: each teammate runs the same install)"
    git = shutil.which("git")
    if git is None:
        return f"{mine}; keep {path.name} out of version control"

    def ask(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([git, "-C", str(path.parent), *args], capture_output=True,
                              text=True, check=False, stdin=subprocess.DEVNULL)

    ignored = ask("check-ignore", "-q", path.name).returncode
    if ignored != 1:  # 0: ignored already; 128: not in a git work tree
        return mine
    if ask("ls-files", "--error-unmatch", path.name).returncode == 0:
        return f"{mine}; warning: git tracks {path}: `git rm --cached` it, it is yours only"
    top, exclude = ask("rev-parse", "--show-toplevel").stdout.strip(), \
        ask("rev-parse", "--git-path", "info/exclude").stdout.strip()
    if not top or not exclude:
        return f"{mine}; keep {path.name} out of version control"
    exclude_path = Path(path.parent, exclude).resolve()
    line = "/" + path.resolve().relative_to(Path(top).resolve()).as_posix()
    try:
        exclude_path.parent.mkdir(parents=True, exist_ok=True)
        with exclude_path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    except OSError as exc:
        return f"{mine}; could not add it to {exclude_path} ({exc}): keep it out of git"
    return f"{mine}; git now ignores it in this clone ({line} in {exclude_path})"


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


def _check_runs(command: str, *, on_path: bool = False) -> None:
    """Run the hook command once as the host would (through the shell) with an event it
    ignores; refuse to install a command that fails. ``on_path``: the command is the bare
    ``loopwarden``, which must be on this PATH too."""
    from .claude_check import probe

    problem = probe(command)
    if problem is None:
        return
    if on_path and "not found" in problem:
        _error("`loopwarden` is not on PATH, and a project install writes the bare name "
               "(each teammate's PATH finds their own): put it on PATH (e.g. `pipx install "
               "loopwarden`, or activate its venv), then run this again")
    _error(f"the hook command {problem}: {command}")


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
        "--project", help="./.codex/hooks.json: this project, shared with its team (Codex reads "
        "it once the project is trusted). The command is the bare `loopwarden`, found on each "
        "teammate's PATH; no --config / --db path.",
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
                               remove=remove, dry_run=dry_run, shared=project)
    if done and not remove:
        typer.echo(_CODEX_TRUST_NOTE)


@install_app.command("gemini-cli")
def gemini_cli(
    user: Annotated[bool, typer.Option(
        "--user", help="~/.gemini/settings.json: every project (the default).",
    )] = False,
    project: Annotated[bool, typer.Option(
        "--project", help="./.gemini/settings.json: this project, shared with its team. The "
        "command is the bare `loopwarden`, found on each teammate's PATH; no --config / --db "
        "path.",
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
                        remove=remove, dry_run=dry_run, enable={"hooksConfig": {"enabled": True}},
                        shared=project)


def _install_host_hooks(
    path: Path, subcommand: str, events: tuple[str, ...], host: str, *,
    config: Path | None, db: Path | None, agent: str | None, remove: bool, dry_run: bool,
    preset: str | None = None, exit_behavior: str | None = None,
    enable: dict[str, dict[str, Any]] | None = None, shared: bool = False,
) -> bool:
    """Install (or remove) loopwarden's ``subcommand`` hook entries for ``events`` in the
    settings file at ``path``, the Claude Code way; ``enable`` is merged into the file on
    install (a switch the host needs on). ``shared``: a file the project's team shares, so the
    command is the bare ``loopwarden`` and holds no path of this machine. Returns whether the
    file was written."""
    command = None
    if not remove:
        if shared and (config is not None or db is not None):
            _error(f"--project writes {path}, which the project's team shares: a --config or "
                   "--db path is this machine's. Leave them out (the hook then uses the "
                   "defaults and --preset) or install with --user")
        command = hook_command(
            ["loopwarden"] if shared else hook_executable(),
            config=None if config is None else str(_checked_config(config, agent)),
            db=None if db is None else str(db.expanduser().absolute()),
            agent=agent, subcommand=subcommand,
            preset=_one_of("--preset", preset, ("openclaw", "early")),
            exit_behavior=_one_of("--exit-behavior", exit_behavior, ("end", "error", "continue", "ask")),
        )
        _check_runs(command, on_path=shared)

    def change(settings: dict[str, Any]) -> dict[str, Any]:
        if command is None:
            return uninstall(settings, subcommand=subcommand)
        new_settings = install(settings, command, events=events,
                               tool_events=frozenset(events[:2]), subcommand=subcommand)
        for key, values in (enable or {}).items():
            section = new_settings.setdefault(key, {})
            if not isinstance(section, dict):
                raise SettingsError(f'"{key}" is not an object')
            section.update(values)
        return new_settings

    done = "removed loopwarden's hooks from" if remove else f"installed the {host} hooks in"
    written = _edit(path, change, dry_run=dry_run, done=done, unchanged=_UNCHANGED[remove])
    if written and command is not None:
        typer.echo(f"command: {command}")
        if shared:
            typer.echo("(a file the team shares: the command is `loopwarden` as found on each "
                       "teammate's PATH; everyone who runs this project's hooks needs "
                       "loopwarden installed and on PATH)")
    return written
