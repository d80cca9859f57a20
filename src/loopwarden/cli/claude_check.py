"""``loopwarden install claude-code --check``: which of the hook's behaviours the installed
Claude Code supports, read from ``claude --version``, and whether loopwarden's hooks are in its
settings.

The behaviours were observed in the real binaries (the host tests in
``tests/integrations/hosts/`` drive 2.1.197 and the current release): a release is judged by the
oldest tested release it is not older than. Releases older than :data:`MINIMUM_VERSION` are
reported as unsupported: they were never tested, and some lack the events the hook relies on.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath
from typing import Any
from urllib.parse import urlsplit

from ..integrations.claude_code_settings import (
    BATCH_EVENT,
    HOOK_EVENTS,
    HTTP_START_EVENTS,
    http_port_of,
    http_url,
    is_loopwarden_command,
)

Version = tuple[int, int, int]

MINIMUM_VERSION: Version = (2, 1, 197)
"""The oldest Claude Code the hook is tested with (the newest npm installs on Node 20)."""
# The oldest release seen to honour continue:false in an answer that also denies (2.1.197 does
# not; releases in between were not tried, and PostToolBatch ends their runs either way).
_ENDS_ON_THE_DENIED_CALL: Version = (2, 1, 332)
_VERSION_TIMEOUT_SECONDS = 30.0
_HTTP_PROBE_TIMEOUT_SECONDS = 3.0
# What a probe run sends: an event the hook does not handle, answered at once without reading a
# config or touching the database.
_PROBE = json.dumps({"hook_event_name": "SessionStart", "session_id": "loopwarden-install"})
_PROBE_TIMEOUT_SECONDS = 60.0
# The shell's own exit codes for a command it could not start.
_SHELL_EXITS = {126: "is not executable", 127: "was not found"}


@dataclass(frozen=True)
class Behaviour:
    """One behaviour of the hook and whether a release supports it."""

    name: str
    supported: bool
    detail: str


def parse_version(text: str) -> Version | None:
    """The version in ``claude --version``'s output (``2.1.332 (Claude Code)``), or None."""
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    if found is None:
        return None
    major, minor, patch = (int(part) for part in found.groups())
    return major, minor, patch


def ends_on_the_denied_call(version: Version | None) -> bool:
    """Whether Claude Code ``version`` ends a run on the answer that denies the terminal call
    with ``continue: false`` (an unknown release, None: assumed not)."""
    return version is not None and version >= _ENDS_ON_THE_DENIED_CALL


def batch_hook_needed(version: Version | None, exit_behavior: str) -> bool:
    """Whether the PostToolBatch hook has work in Claude Code ``version`` under
    ``exit_behavior``: it says the terminal stop again for a release that ignores it on the
    denied call, and settles an unanswered ``ask``. Elsewhere it does nothing but cost one more
    hook per tool call, so the installer leaves it out."""
    if exit_behavior == "ask":
        return True
    return exit_behavior != "continue" and not ends_on_the_denied_call(version)


def release_of(claude: str | None) -> tuple[str | None, Version | None]:
    """(the ``claude`` executable, None: the one on PATH; its version, None when there is no
    such executable or it gave none)."""
    executable = claude or shutil.which("claude")
    return executable, None if executable is None else _version_of(executable)


def behaviours(version: Version) -> list[Behaviour]:
    """What the hook can do in Claude Code ``version``."""
    tested = version >= MINIMUM_VERSION
    ends_at_once = ends_on_the_denied_call(version)
    return [
        Behaviour("deny a looping call (PreToolUse permissionDecision)", tested,
                  "the model gets the loop message as the tool's error"),
        Behaviour("warn the model (additionalContext)", tested,
                  "the warning reaches the model with the call's result"),
        Behaviour("record failures (PostToolUseFailure)", tested,
                  "a failing call's error reaches the guard"),
        Behaviour("end the run on the denied call (continue: false with the deny)", ends_at_once,
                  "honoured" if ends_at_once else
                  "ignored by this release: the run ends after the call's batch instead"),
        Behaviour("end the run after the batch (PostToolBatch)", tested,
                  "not needed: install leaves this hook out (one hook less per tool call) "
                  "unless --exit-behavior ask" if ends_at_once else
                  "continue: false once the terminally denied call is settled; nothing runs "
                  "in between"),
        Behaviour("sub-agent runs kept apart (agent_id)", tested,
                  "a sub-agent's calls are their own run"),
    ]


def installed_events(settings_path: Path) -> list[str]:
    """The hook events whose entries in ``settings_path`` run ``loopwarden claude-hook``, as a
    command or as an http hook answered by its resident server (SessionStart, which starts
    that server, aside)."""
    found = []
    for event, entry in _hook_entries(settings_path):
        ours = is_loopwarden_command(entry.get("command")) or http_port_of(entry) is not None
        if ours and event not in HTTP_START_EVENTS and event not in found:
            found.append(event)
    return found


def http_ports(settings_path: Path) -> list[int]:
    """The ports of the resident servers that loopwarden's http hooks in ``settings_path``
    post to (``install claude-code --http PORT``)."""
    ports = {http_port_of(entry) for _, entry in _hook_entries(settings_path)}
    return sorted(port for port in ports if port is not None)


def _starts_http_server(settings_path: Path) -> bool:
    return any(event == "SessionStart" and is_loopwarden_command(entry.get("command"))
               for event, entry in _hook_entries(settings_path))


def http_server_state(port: int) -> tuple[bool, str]:
    """(whether the http hooks can work, what answers on ``127.0.0.1:port``), asked with a GET,
    which the server refuses without running anything. Nothing listening is fine: the
    SessionStart hook starts the server when a session starts."""
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port,
                                                timeout=_HTTP_PROBE_TIMEOUT_SECONDS)
        try:
            connection.request("GET", urlsplit(http_url(port)).path)
            response = connection.getresponse()
            status, body = response.status, response.read(200)
        finally:
            connection.close()
    except ConnectionRefusedError:
        return True, ("not running (the SessionStart hook starts it with the next Claude Code "
                      "session; until then tool calls go ahead unguarded)")
    except (OSError, http.client.HTTPException) as exc:
        return False, f"no answer ({exc or type(exc).__name__}): tool calls go ahead unguarded"
    if not body.startswith(b"loopwarden:"):
        return False, (f"taken by another program (HTTP {status}, not loopwarden's server): "
                       "the hooks cannot reach loopwarden; install again with another --http PORT")
    if status == 403:
        return False, ("held by another user's loopwarden server, which refuses this user: "
                       "install again with another --http PORT")
    if status == 503:
        return True, "answering, restarting for new code (the next session starts a fresh one)"
    return True, "answering (loopwarden's resident server, this user's)"


def installed_commands(settings_path: Path) -> list[str]:
    """The distinct hook commands in ``settings_path`` that answer ``claude-hook`` events (not
    the one that starts the http server)."""
    found = []
    for _, command in _hook_commands(settings_path):
        if isinstance(command, str) and is_loopwarden_command(command) \
                and "--http-start" not in command and command not in found:
            found.append(command)
    return found


def _hook_commands(settings_path: Path) -> Iterator[tuple[str, object]]:
    for event, entry in _hook_entries(settings_path):
        yield event, entry.get("command")


def _hook_entries(settings_path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        settings = json.loads(settings_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    if not isinstance(hooks, dict):
        return
    for event, groups in hooks.items():
        for group in groups if isinstance(groups, list) else []:
            entries = group.get("hooks") if isinstance(group, dict) else None
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict):
                    yield event, entry


def probe(command: str) -> str | None:
    """Run a hook command once as the host runs it (through the shell) with an event it
    ignores: None when it exits 0, else what went wrong (``"was not found"`` in it for a
    program the shell could not find)."""
    try:
        # (No resident server left behind: it would be keyed to this folder, not the host's.)
        proc = subprocess.run(command, shell=True, input=_PROBE, capture_output=True, text=True,
                              env={**os.environ, "LOOPWARDEN_HOOK_SERVER": "0"},
                              timeout=_PROBE_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"did not run ({exc})"
    if proc.returncode == 0:
        return None
    detail = " ".join(proc.stderr.split())[:300] or "no message"
    shell_says = _SHELL_EXITS.get(proc.returncode)
    if shell_says is not None:
        return f"does not run: its program {shell_says} (exit {proc.returncode}: {detail})"
    return f"failed (exit {proc.returncode}: {detail})"


def machine_specific(command: str) -> bool:
    """Whether a hook command names a path of this machine (an absolute or relative program
    path, an absolute --config / --db): it cannot work for a teammate."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return True
    program = argv[0] if argv else ""
    return any(sep in program for sep in ("/", "\\")) or any(
        token.startswith("/") or PureWindowsPath(token).is_absolute() for token in argv[1:])


def commands_report(settings_paths: list[Path], shared: Collection[Path]) -> tuple[bool, list[str]]:
    """(all fine, lines): every loopwarden hook command in ``settings_paths`` run once as the
    host runs it, a machine-specific one in a ``shared`` (team) file flagged, and what the
    config each one uses leaves unset."""
    ok, lines = True, []
    for path in settings_paths:
        for command in installed_commands(path):
            problem = probe(command)
            if problem is not None:
                ok = False
                lines.append(f"error: the hook command in {path} {problem}: {command}")
            else:
                lines.append(f"hook command runs: {command}")
            if path in shared and machine_specific(command):
                ok = False
                lines.append(f"error: {path} is shared with the project's team, and this "
                             "command names a path of this machine (for a teammate it does "
                             "not run, and the guard is off): run `loopwarden install "
                             "claude-code --project` to move it into settings.local.json")
            lines += _config_notes(command)
    return ok, lines


def _config_notes(command: str) -> list[str]:
    """What the --config of a hook command leaves to defaults that a reader may not expect."""
    from ..config import ConfigError, load_config

    options = _options_of(command)
    config = options.get("--config")
    if config is None:
        return ["config: none (the defaults, rolling detectors on)"]
    try:
        enabled = load_config(config, options.get("--agent")).enabled
    except ConfigError as exc:
        return [f"error: the hook's config does not load: {exc}"]
    if enabled is None:
        return [f"config: {config}: enabled is unset: the hook turns the rolling detectors "
                "on, LoopGuard(load_config(...)) in Python leaves them off. Set "
                "tools.loopDetection.enabled = true to detect loops everywhere"]
    return [f"config: {config}: enabled is {str(enabled).lower()}"
            + ("" if enabled else ": the rolling detectors are OFF")]


def check_report(claude: str | None, settings_paths: list[Path],
                 shared: Collection[Path] = ()) -> tuple[int, str]:
    """(exit code, report) for the ``claude`` executable (None: the one on PATH): 0 when the
    release is supported, the hooks are installed for every event and their commands run
    (none with a path of this machine in a ``shared`` file), 1 otherwise."""
    lines: list[str] = []
    executable, version = release_of(claude)
    ok = True
    if executable is None:
        lines.append("claude: not found on PATH (pass --claude PATH)")
        ok = False
    else:
        if version is None:
            lines.append(f"claude: {executable}: `claude --version` gave no version")
            ok = False
        else:
            shown = ".".join(map(str, version))
            minimum = ".".join(map(str, MINIMUM_VERSION))
            supported = version >= MINIMUM_VERSION
            ok = ok and supported
            lines.append(f"Claude Code {shown} ({executable}): "
                         + ("supported" if supported else f"older than the minimum {minimum}, "
                            "unsupported: upgrade Claude Code"))
            for behaviour in behaviours(version):
                mark = "yes" if behaviour.supported else "no "
                lines.append(f"  [{mark}] {behaviour.name}: {behaviour.detail}")
    complete = False
    for path in settings_paths:
        events = installed_events(path)
        missing = [event for event in HOOK_EVENTS if event not in events and (
            event != BATCH_EVENT or batch_hook_needed(version, _exit_behavior(path)))]
        ports = http_ports(path)
        if ports and not _starts_http_server(path):
            missing.append("SessionStart (starts the http server)")
        complete = complete or not missing
        state = "all events" if not missing else (
            "not installed" if not events else f"missing {', '.join(missing)}")
        lines.append(f"hooks in {path}: {state}" + (" (http hooks)" if ports else ""))
        for port in ports:
            works, what = http_server_state(port)
            ok = ok and works
            lines.append(f"  http server 127.0.0.1:{port}: {what}")
    if not complete:
        ok = False
        lines.append("run `loopwarden install claude-code` to install the hooks")
    commands_ok, command_lines = commands_report(settings_paths, shared)
    return (0 if ok and commands_ok else 1), "\n".join(lines + command_lines)


def _options_of(command: str) -> dict[str, str]:
    """A hook command's options, ``--flag value`` and ``--flag=value`` alike (a command that is
    not shell words has none)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return {}
    options = dict(itertools.pairwise(argv))
    for token in argv:
        flag, has_value, value = token.partition("=")
        if flag.startswith("--") and has_value:
            options[flag] = value
    return options


def _exit_behavior(settings_path: Path) -> str:
    """The ``--exit-behavior`` of loopwarden's hook commands in ``settings_path`` (``end``, the
    hook's default, when they name none)."""
    for _, command in _hook_commands(settings_path):
        if isinstance(command, str) and is_loopwarden_command(command):
            behaviour = _options_of(command).get("--exit-behavior")
            if behaviour is not None:
                return behaviour
    return "end"


def _version_of(executable: str) -> Version | None:
    try:
        proc = subprocess.run([executable, "--version"], capture_output=True, text=True,
                              timeout=_VERSION_TIMEOUT_SECONDS, check=False,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(proc.stdout) if proc.returncode == 0 else None
