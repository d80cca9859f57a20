"""What the transcript commands (``scan``, ``eval``, ``calibrate``) share: the config they run
with, the paths they check, and their ``note:`` and ``error:`` lines on stderr."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from ..config import LoopDetectionConfig, load_config
from ..offline.report._text import printable

# `--nudge-within`, as `scan` and `runs` both take it (one help text, one bound).
NudgeWithinOption = Annotated[
    int, typer.Option("--nudge-within", min=1,
                      help="Nudge efficacy: later calls of its run in which a warning, block or "
                           "ask must be followed by a change of course to count as heeded.")
]

#: The path argument that means "standard input", in every command that reads a file.
STDIN = "-"


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


@contextmanager
def stdin_copy(paths: Sequence[Path]) -> Iterator[Path | None]:
    """Standard input copied to a temporary file when ``-`` is an argument: the readers and
    the format sniffer take files, and a pipe can be read only once."""
    if not any(str(path) == STDIN for path in paths):
        yield None
        return
    handle, name = tempfile.mkstemp(prefix="loopwarden-stdin-")
    try:
        with os.fdopen(handle, "wb") as copy:
            if sys.stdin is not None:
                shutil.copyfileobj(sys.stdin.buffer, copy)
        yield Path(name)
    finally:
        os.unlink(name)


def read_stdin() -> str:
    """Standard input as text (``-`` as a file argument); invalid UTF-8 is an input error."""
    try:
        return sys.stdin.buffer.read().decode("utf-8") if sys.stdin is not None else ""
    except UnicodeDecodeError as exc:
        fail(f"<stdin>: not UTF-8 text ({exc})")


def check_paths_exist(paths: Sequence[Path]) -> None:
    """Exit 2 naming every path that does not exist: a typo must not pass as "no loops".
    ``-`` (standard input) always exists."""
    missing = [path for path in paths if str(path) != STDIN and _missing(path.expanduser())]
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
