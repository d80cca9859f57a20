"""loopwarden's hook entries in a Claude Code ``settings.json``, as pure functions on the parsed
file (``loopwarden install claude-code`` reads, diffs and writes it).

Claude Code's shape::

    {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command",
                                                           "command": "..."}]}]}}

The three tool events take a tool-name matcher (``"*"``: every tool); ``PreCompact``'s matcher
is the trigger (``manual``/``auto``), left out so both arm the post-compaction guard;
``PostToolBatch`` (the terminal stop repeated for releases that ignore it on a denied call) has
none.

loopwarden's entries are recognised by their command (a ``loopwarden`` executable or
``python -m loopwarden`` running ``claude-hook``), never by position, so installing again with
other options replaces them in place (keeping a matcher or timeout the user set on them), and
everything else in the file stays as it was.

Codex CLI (``hooks.json``) and Gemini CLI (``settings.json``) keep their hooks in the same
shape, so the same functions edit theirs: ``events``, ``tool_events`` and ``subcommand`` name
the host's events and loopwarden's hook command for it (``codex-hook``, ``gemini-hook``).
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Sequence
from pathlib import PureWindowsPath
from typing import Any

from ..base.errors import SettingsError

__all__ = [
    "SettingsError",
    "hook_command",
    "install",
    "uninstall",
]

# With http hooks: the command hooks that start the http server (or restart it, once per
# prompt, when it went away): once per session and prompt, never per tool call.
HTTP_START_EVENTS = ("SessionStart", "UserPromptSubmit")
# The batch hook says the terminal stop again for releases that ignore it on the denied call
# (and settles an unanswered "ask"); the installer leaves it out where it has nothing to do.
BATCH_EVENT = "PostToolBatch"
HOOK_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", BATCH_EVENT, "PreCompact")
_TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
_SUBCOMMAND = "claude-hook"
# loopwarden's http entries are known by this path of their url.
_HTTP_PATH = "/loopwarden/claude-hook"
# Claude Code's own default for an http hook is long; a resident server answers in
# milliseconds, and one that does not must not hold up the tool call for minutes.
_HTTP_TIMEOUT_SECONDS = 5
_MODULES = frozenset({"loopwarden", "loopwarden.cli", "loopwarden.cli._entry"})


def hook_command(executable: Sequence[str], *, config: str | None = None,
                 db: str | None = None, agent: str | None = None,
                 preset: str | None = None, exit_behavior: str | None = None,
                 subcommand: str = _SUBCOMMAND, http_start: int | None = None) -> str:
    """The shell command of the hook entries: ``executable`` (its argv, e.g. the absolute path
    of the ``loopwarden`` script) running ``subcommand`` with the options given, quoted.
    ``http_start``: the SessionStart command that starts the http server on that port."""
    argv = [*executable, subcommand]
    if http_start is not None:
        argv += ["--http-start", str(http_start)]
    for flag, value in (("--config", config), ("--db", db), ("--agent", agent),
                        ("--preset", preset), ("--exit-behavior", exit_behavior)):
        if value is not None:
            argv += [flag, value]
    return shlex.join(argv)


def is_loopwarden_command(command: object, subcommand: str = _SUBCOMMAND) -> bool:
    """Whether a hook command runs ``loopwarden SUBCOMMAND`` (any path, any options)."""
    if not isinstance(command, str):
        return False
    try:
        argv = shlex.split(command)
    except ValueError:  # unbalanced quotes: not a command loopwarden wrote
        return False
    if subcommand not in argv:
        return False
    at = argv.index(subcommand)
    if at == 1:
        # Either separator: a settings.json may have been written on Windows.
        name = PureWindowsPath(argv[0]).name.lower()
        return name in ("loopwarden", "loopwarden.exe")
    if at >= 3 and argv[at - 2] == "-S":  # PYTHON -S .../loopwarden/cli/_hook.py (the fast form)
        return PureWindowsPath(argv[at - 1]).parts[-3:] == ("loopwarden", "cli", "_hook.py")
    return at >= 3 and argv[at - 2] == "-m" and argv[at - 1] in _MODULES


def http_url(port: int) -> str:
    """The url of loopwarden's http hook entries (the resident server on 127.0.0.1:``port``)."""
    return f"http://127.0.0.1:{port}{_HTTP_PATH}"


def http_port_of(entry: object) -> int | None:
    """The port of a loopwarden http hook entry (``{"type": "http", "url": http_url(port)}``),
    None for any other entry."""
    if not isinstance(entry, dict) or entry.get("type") != "http":
        return None
    url = entry.get("url")
    prefix = "http://127.0.0.1:"
    if not isinstance(url, str) or not url.startswith(prefix) or not url.endswith(_HTTP_PATH):
        return None
    port = url[len(prefix):-len(_HTTP_PATH)]
    return int(port) if port.isdigit() and 0 < int(port) < 65536 else None


def install(settings: dict[str, Any], command: str, *,
            events: Sequence[str] = HOOK_EVENTS, tool_events: frozenset[str] = _TOOL_EVENTS,
            subcommand: str = _SUBCOMMAND, http_port: int | None = None,
            start_command: str | None = None) -> dict[str, Any]:
    """``settings`` with loopwarden's hook entries (one per event of ``events``; those in
    ``tool_events`` match every tool) running ``command``. With ``http_port`` (Claude Code),
    every event but PreCompact posts to the http server there instead, and SessionStart and
    UserPromptSubmit entries run ``start_command`` (which starts that server when it does not
    answer); without, such entries go. For Claude Code, loopwarden's entries of the hook events
    left out of ``events`` (the batch hook where the release has no work for it) go too.

    An event that already has a loopwarden entry keeps it where it is, with the new command;
    any further loopwarden entries of that event are removed. An event without one gets a new
    group at the end. Nothing else changes; ``settings`` itself is not modified."""
    result = copy.deepcopy(settings)
    hooks = _hooks_object(result, create=True)
    assert hooks is not None  # (create=True makes one)
    wanted: dict[str, dict[str, Any]] = {
        event: {"type": "command", "command": command} for event in events}
    if http_port is not None:
        for event in events:
            if event != "PreCompact":
                wanted[event] = {"type": "http", "url": http_url(http_port),
                                 "timeout": _HTTP_TIMEOUT_SECONDS}
        if start_command is not None:
            for event in HTTP_START_EVENTS:
                wanted[event] = {"type": "command", "command": start_command}
    elif subcommand == _SUBCOMMAND:
        for event in HTTP_START_EVENTS:  # no http server to start any more: the entries go
            if isinstance(hooks.get(event), list):
                wanted[event] = {}
    if subcommand == _SUBCOMMAND:
        for event in HOOK_EVENTS:  # an event installed before and not wanted now
            if event not in events and isinstance(hooks.get(event), list):
                wanted[event] = {}
    for event, entry in wanted.items():
        groups = _event_groups(hooks, event)
        if not entry:
            kept = [g for g in (_without_ours(group, subcommand) for group in groups)
                    if g is not None]
            if kept or not groups:
                hooks[event] = kept
            else:
                del hooks[event]
            continue
        placed = _replace_entries(groups, entry, subcommand)
        if not placed:
            group: dict[str, Any] = {"hooks": [entry]}
            if event in tool_events:
                group = {"matcher": "*", **group}
            groups.append(group)
        hooks[event] = groups
    return result


def uninstall(settings: dict[str, Any], *, subcommand: str = _SUBCOMMAND) -> dict[str, Any]:
    """``settings`` without loopwarden's hook entries, and without the groups, event lists and
    ``hooks`` object that removing them left empty. Everything else stays."""
    result = copy.deepcopy(settings)
    hooks = _hooks_object(result, create=False)
    if hooks is None:
        return result
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue  # not Claude Code's shape, and not loopwarden's to judge
        kept = [g for g in (_without_ours(group, subcommand) for group in groups)
                if g is not None]
        if kept or not groups:
            hooks[event] = kept
        else:
            del hooks[event]  # only loopwarden's entries were there
    if not hooks and settings.get("hooks"):
        del result["hooks"]
    return result


def _hooks_object(settings: dict[str, Any], *, create: bool) -> dict[str, Any] | None:
    hooks = settings.get("hooks")
    if hooks is None:
        if not create:
            return None
        hooks = settings["hooks"] = {}
    if not isinstance(hooks, dict):
        raise SettingsError(f'"hooks" is a {_json_type(hooks)}, not an object')
    return hooks


def _event_groups(hooks: dict[str, Any], event: str) -> list[Any]:
    groups = hooks.get(event, [])
    if not isinstance(groups, list):
        raise SettingsError(f'"hooks.{event}" is a {_json_type(groups)}, not an array')
    return groups


def _entries(group: Any) -> list[Any] | None:
    """The hook list of a matcher group, None when the group is not Claude Code's shape."""
    entries = group.get("hooks") if isinstance(group, dict) else None
    return entries if isinstance(entries, list) else None


def _is_ours(entry: Any, subcommand: str = _SUBCOMMAND) -> bool:
    if not isinstance(entry, dict):
        return False
    url = entry.get("url")
    return is_loopwarden_command(entry.get("command"), subcommand) or (
        subcommand == _SUBCOMMAND and entry.get("type") == "http" and isinstance(url, str)
        and url.endswith(_HTTP_PATH))


def _replace_entries(groups: list[Any], wanted: dict[str, Any],
                     subcommand: str = _SUBCOMMAND) -> bool:
    """Point the first loopwarden entry at ``command`` and drop any other (and a group left
    empty by that); returns whether there was one."""
    placed = False
    for index, group in enumerate(list(groups)):
        entries = _entries(group)
        if entries is None or not any(_is_ours(entry, subcommand) for entry in entries):
            continue
        kept = []
        for entry in entries:
            if not _is_ours(entry, subcommand):
                kept.append(entry)
            elif not placed:
                old = {k: v for k, v in entry.items() if k not in ("command", "url", "type")}
                if entry.get("type") != wanted["type"]:
                    old.pop("timeout", None)  # (a command's timeout is no http one)
                kept.append({**old, **wanted})
                placed = True
        group["hooks"] = kept
        if not kept:
            groups[index] = None
    groups[:] = [group for group in groups if group is not None]
    return placed


def _without_ours(group: Any, subcommand: str = _SUBCOMMAND) -> Any:
    """The group without loopwarden's entries; None when they were all it held."""
    entries = _entries(group)
    if entries is None or not any(_is_ours(entry, subcommand) for entry in entries):
        return group
    kept = [entry for entry in entries if not _is_ours(entry, subcommand)]
    if not kept:
        return None
    return {**group, "hooks": kept}


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "null" if value is None else type(value).__name__
