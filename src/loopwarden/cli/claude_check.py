"""``loopwarden install claude-code --check``: which of the hook's behaviours the installed
Claude Code supports, read from ``claude --version``, whether loopwarden's hooks are in its
settings, and for http hooks whether their resident server answers.

The behaviours were observed in the real binaries (the host tests in
``tests/integrations/hosts/`` drive 2.1.197 and the current release): a release is judged by the
oldest tested release it is not older than. Releases older than :data:`MINIMUM_VERSION` are
reported as unsupported: they were never tested, and some lack the events the hook relies on.
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..integrations.claude_code_settings import (
    HOOK_EVENTS,
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
_PROBE_TIMEOUT_SECONDS = 3.0


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


def behaviours(version: Version) -> list[Behaviour]:
    """What the hook can do in Claude Code ``version``."""
    tested = version >= MINIMUM_VERSION
    ends_at_once = version >= _ENDS_ON_THE_DENIED_CALL
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
                  "continue: false once the terminally denied call is settled; nothing runs "
                  "in between"),
        Behaviour("sub-agent runs kept apart (agent_id)", tested,
                  "a sub-agent's calls are their own run"),
    ]


def _loopwarden_entries(settings_path: Path) -> dict[str, list[dict[str, Any]]]:
    """Per hook event of ``settings_path``, loopwarden's entries: commands running ``loopwarden
    claude-hook`` and http entries posting to its resident server."""
    try:
        settings = json.loads(settings_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    if not isinstance(hooks, dict):
        return {}
    found: dict[str, list[dict[str, Any]]] = {}
    for event, groups in hooks.items():
        entries = [entry for group in groups if isinstance(group, dict)
                   for entry in group.get("hooks") or [] if isinstance(entry, dict)] \
            if isinstance(groups, list) else []
        ours = [entry for entry in entries if is_loopwarden_command(entry.get("command"))
                or http_port_of(entry) is not None]
        if ours:
            found[event] = ours
    return found


def installed_events(settings_path: Path) -> list[str]:
    """The hook events whose entries in ``settings_path`` run ``loopwarden claude-hook``, as a
    command or as an http hook answered by its resident server."""
    return [event for event in _loopwarden_entries(settings_path) if event != "SessionStart"]


def http_ports(settings_path: Path) -> list[int]:
    """The ports of the resident servers that loopwarden's http hooks in ``settings_path``
    post to (``install claude-code --http PORT``)."""
    ports = {port for entries in _loopwarden_entries(settings_path).values()
             for port in map(http_port_of, entries) if port is not None}
    return sorted(ports)


def http_server_state(port: int) -> tuple[bool, str]:
    """(whether the http hooks can work, what answers on ``127.0.0.1:port``), asked with a GET,
    which the server refuses without running anything. Nothing listening is fine: the
    SessionStart hook starts the server when a session starts."""
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=_PROBE_TIMEOUT_SECONDS)
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


def check_report(claude: str | None, settings_paths: list[Path]) -> tuple[int, str]:
    """(exit code, report) for the ``claude`` executable (None: the one on PATH): 0 when the
    release is supported and the hooks are installed for every event (and, for http hooks,
    their port is not taken by something else), 1 otherwise."""
    ok, lines = _release_report(claude)
    complete = False
    for path in settings_paths:
        events = installed_events(path)
        missing = [event for event in HOOK_EVENTS if event not in events]
        ports = http_ports(path)
        if ports and "SessionStart" not in _loopwarden_entries(path):
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
    return (0 if ok else 1), "\n".join(lines)


def _release_report(claude: str | None) -> tuple[bool, list[str]]:
    """(whether the release is supported, the report's lines on it and its behaviours)."""
    executable = claude or shutil.which("claude")
    if executable is None:
        return False, ["claude: not found on PATH (pass --claude PATH)"]
    version = _version_of(executable)
    if version is None:
        return False, [f"claude: {executable}: `claude --version` gave no version"]
    shown = ".".join(map(str, version))
    minimum = ".".join(map(str, MINIMUM_VERSION))
    supported = version >= MINIMUM_VERSION
    lines = [f"Claude Code {shown} ({executable}): "
             + ("supported" if supported else f"older than the minimum {minimum}, "
                "unsupported: upgrade Claude Code")]
    for behaviour in behaviours(version):
        mark = "yes" if behaviour.supported else "no "
        lines.append(f"  [{mark}] {behaviour.name}: {behaviour.detail}")
    return supported, lines


def _version_of(executable: str) -> Version | None:
    try:
        proc = subprocess.run([executable, "--version"], capture_output=True, text=True,
                              timeout=_VERSION_TIMEOUT_SECONDS, check=False,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(proc.stdout) if proc.returncode == 0 else None
