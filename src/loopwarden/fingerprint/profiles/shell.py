"""Shell tools: which commands change files, which only wait, and how long they wait (the
``early`` preset's progress knowledge for ``exec``, ``Bash`` and the other shells).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ...base.lazy_re import lazy_pattern
from .registry import ToolProfile

_SHELL_WRAPPERS: Final = frozenset({"bash", "sh", "zsh", "-c", "-lc", "-l", "/bin/bash", "/bin/sh"})
_DURATION_FACTORS: Final = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
# Compiled on first use (loopwarden.base.lazy_re): most calls read no shell command.
_SLEEP = r"sleep\s+(\d+(?:\.\d+)?)([smhd]?)"
_ONLY_SLEEPS = lazy_pattern(rf"\s*(?:{_SLEEP}\s*(?:&&|;)?\s*)+")
_LEADING_SLEEP = lazy_pattern(rf"\s*{_SLEEP}\s*(?:&&|;)")
_SLEEPS = lazy_pattern(_SLEEP)
# Conservative on purpose: only commands that plainly write files. A missed mutation costs what
# loopwarden did before (a repeat counts); a false one would hide a real loop.
_FILE_COMMANDS = (
    r"rm|mv|cp|mkdir|rmdir|touch|chmod|chown|ln|tee|truncate|patch|unzip|install"
    r"|sed\s+(?:-\w+\s+)*-i|perl\s+(?:-\w+\s+)*-i"
    r"|git\s+(?:add|commit|checkout|switch|restore|reset|merge|rebase|apply|am|cherry-pick"
    r"|stash|pull|clone|rm|mv|init)"
    r"|(?:npm|pnpm|yarn|bun)\s+(?:install|i|add|remove|uninstall|ci)"
    r"|(?:python3?\s+-m\s+)?pip3?\s+(?:install|uninstall)|uv\s+(?:add|remove|sync|pip\s+install)"
    r"|cargo\s+(?:add|install)|go\s+(?:get|mod\s+tidy)"
)
_FILE_COMMAND = lazy_pattern(rf"(?:^|&&|\|\||[;|(`]|\$\()\s*(?:sudo\s+)?(?:{_FILE_COMMANDS})\b")
# `> file` and `>> file`, but not `2>&1`, `>/dev/null` or a comparison inside quotes-free tests.
_REDIRECT = lazy_pattern(r"(?<![0-9&>=<-])>>?\s*(?!&|/dev/null\b)[\w./~\"'$-]")


def _command(args: object) -> str | None:
    """The command line of a shell call (``command`` or ``cmd``, a string or an argv list)."""
    if not isinstance(args, Mapping):
        return None
    command = args.get("command", args.get("cmd"))
    if isinstance(command, str):
        return command
    if isinstance(command, (list, tuple)) and all(isinstance(part, str) for part in command):
        parts = list(command)
        while len(parts) > 1 and parts[0] in _SHELL_WRAPPERS:
            parts.pop(0)
        return " ".join(parts)
    return None


def _seconds(number: str, unit: str) -> float:
    return float(number) * _DURATION_FACTORS[unit]


def shell_changes_files(args: object) -> bool:
    """Whether a shell call's command plainly writes files (``rm``, ``git commit``, ``> f``)."""
    command = _command(args)
    return command is not None and bool(
        _FILE_COMMAND().search(command) or _REDIRECT().search(command))


def shell_only_sleeps(args: object) -> bool:
    """Whether a shell call's command does nothing but sleep (``sleep 30``): pacing."""
    command = _command(args)
    return command is not None and _ONLY_SLEEPS().fullmatch(command) is not None


def shell_wait_seconds(args: object) -> float | None:
    """The sleeps a command does before its work (``sleep 30 && tail log``), or all of them."""
    command = _command(args)
    if command is None:
        return None
    if _ONLY_SLEEPS().fullmatch(command):
        return sum(_seconds(n, u) for n, u in _SLEEPS().findall(command)) or None
    total = 0.0
    position = 0
    leading_sleep = _LEADING_SLEEP()
    while (match := leading_sleep.match(command, position)) is not None:
        total += _seconds(match.group(1), match.group(2))
        position = match.end()
    return total or None


def _shell(name: str, **kwargs: object) -> ToolProfile:
    return ToolProfile(name, mutating=shell_changes_files, pacing=shell_only_sleeps,
                       wait_seconds=shell_wait_seconds, **kwargs)  # type: ignore[arg-type]

