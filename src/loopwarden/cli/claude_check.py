"""``loopwarden install claude-code --check``: which of the hook's behaviours the installed
Claude Code supports, read from ``claude --version``, and whether loopwarden's hooks are in its
settings.

The behaviours were observed in the real binaries (the host tests in
``tests/integrations/hosts/`` drive 2.1.197 and the current release): a release is judged by the
oldest tested release it is not older than. Releases older than :data:`MINIMUM_VERSION` are
reported as unsupported: they were never tested, and some lack the events the hook relies on.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..integrations.claude_code_settings import HOOK_EVENTS, is_loopwarden_command

Version = tuple[int, int, int]

MINIMUM_VERSION: Version = (2, 1, 197)
"""The oldest Claude Code the hook is tested with (the newest npm installs on Node 20)."""
# The oldest release seen to honour continue:false in an answer that also denies (2.1.197 does
# not; releases in between were not tried, and PostToolBatch ends their runs either way).
_ENDS_ON_THE_DENIED_CALL: Version = (2, 1, 332)
_VERSION_TIMEOUT_SECONDS = 30.0


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


def installed_events(settings_path: Path) -> list[str]:
    """The hook events whose entries in ``settings_path`` run ``loopwarden claude-hook``."""
    try:
        settings = json.loads(settings_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    if not isinstance(hooks, dict):
        return []
    found = []
    for event, groups in hooks.items():
        entries = [entry for group in groups if isinstance(group, dict)
                   for entry in group.get("hooks") or [] if isinstance(entry, dict)] \
            if isinstance(groups, list) else []
        if any(is_loopwarden_command(entry.get("command")) for entry in entries):
            found.append(event)
    return found


def check_report(claude: str | None, settings_paths: list[Path]) -> tuple[int, str]:
    """(exit code, report) for the ``claude`` executable (None: the one on PATH): 0 when the
    release is supported and the hooks are installed for every event, 1 otherwise."""
    lines: list[str] = []
    executable = claude or shutil.which("claude")
    ok = True
    if executable is None:
        lines.append("claude: not found on PATH (pass --claude PATH)")
        ok = False
    else:
        version = _version_of(executable)
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
    for path in settings_paths:
        events = installed_events(path)
        missing = [event for event in HOOK_EVENTS if event not in events]
        state = "all events" if not missing else (
            "not installed" if not events else f"missing {', '.join(missing)}")
        lines.append(f"hooks in {path}: {state}")
    if not any(not [e for e in HOOK_EVENTS if e not in installed_events(p)]
               for p in settings_paths):
        ok = False
        lines.append("run `loopwarden install claude-code` to install the hooks")
    return (0 if ok else 1), "\n".join(lines)


def _version_of(executable: str) -> Version | None:
    try:
        proc = subprocess.run([executable, "--version"], capture_output=True, text=True,
                              timeout=_VERSION_TIMEOUT_SECONDS, check=False,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(proc.stdout) if proc.returncode == 0 else None
