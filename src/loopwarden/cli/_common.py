"""What the transcript commands (``scan``, ``eval``, ``calibrate``) share: the config they run
with, the paths they check, and their ``note:`` and ``error:`` lines on stderr."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from ..config import LoopDetectionConfig, load_config
from ..offline.report._text import printable

__all__ = ["check_paths_exist", "fail", "note", "resolve_config", "stderr"]


def resolve_config(config_path: Path | None = None, agent: str | None = None,
                   preset: str | None = None) -> LoopDetectionConfig:
    """The config a scan runs with: detection on unless the config file says otherwise."""
    config = load_config(config_path, agent_id=agent) if config_path else LoopDetectionConfig()
    changes: dict[str, Any] = {}
    if config.enabled is None:
        changes["enabled"] = True
    if preset is not None:
        changes["preset"] = preset
    return config.with_overrides(**changes) if changes else config


def stderr() -> Console:
    """A rich console on standard error, for notes and errors."""
    return Console(stderr=True)


def note(message: str) -> None:
    """Print ``note: message`` on standard error (lone surrogates escaped)."""
    stderr().print(Text(f"note: {printable(message)}", style="yellow"), soft_wrap=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on standard error and exit with ``code``."""
    stderr().print(Text(f"error: {printable(message)}", style="red"), soft_wrap=True)
    raise typer.Exit(code)


def check_paths_exist(paths: Sequence[Path]) -> None:
    """Exit 2 naming every path that does not exist: a typo must not pass as "no loops"."""
    missing = [path for path in paths if _missing(path.expanduser())]
    if missing:
        names = ", ".join(str(path) for path in missing)
        fail(f"no such file or folder: {names}")


def _missing(path: Path) -> bool:
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return True  # a dangling link too
    except OSError:
        return False  # there but unreadable: reading it says so
    return False
