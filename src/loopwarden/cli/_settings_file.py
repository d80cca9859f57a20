"""A host's settings file (Claude Code's, Codex's or Gemini CLI's JSON) read, changed and
written back the careful way ``loopwarden install`` needs: only a regular file is read, only
JSON that can be written back is accepted, a changed file is backed up first and replaced
atomically, and a dry run prints the change as a diff instead."""

from __future__ import annotations

import difflib
import json
import math
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Any, NoReturn

import typer


def apply_change(path: Path, old_text: str | None, settings: dict[str, Any],
                 new_settings: dict[str, Any], *, dry_run: bool) -> tuple[bool, Path | None]:
    """Write ``new_settings`` to ``path`` (read as ``old_text`` / ``settings``) unless it is
    unchanged, or with ``dry_run`` print the change as a unified diff. Returns (whether the
    file was written, the backup of the old one)."""
    if new_settings == settings:
        return False, None
    # allow_nan=False: whatever got in, what is written is JSON (reading already refuses).
    new_text = json.dumps(new_settings, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if dry_run:
        diff = difflib.unified_diff(
            (old_text or "").splitlines(keepends=True), new_text.splitlines(keepends=True),
            fromfile=str(path) if old_text is not None else "/dev/null", tofile=str(path))
        typer.echo("".join(diff), nl=False)
        return False, None
    return True, write_settings(path, new_text, had_file=old_text is not None)


def read_settings(path: Path) -> tuple[str | None, dict[str, Any]]:
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


def write_settings(path: Path, text: str, *, had_file: bool) -> Path | None:
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


def _error(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)
