"""Read saved agent transcripts as streams of :class:`~loopwarden.base.types.ToolCall`.

One reader per format, each yielding the transcript's tool calls in call order with their
results paired by call id and their run (user turn) ids::

    from loopwarden.offline.transcripts import iter_transcript_files, read_transcript

    for path in iter_transcript_files(["~/.openclaw/agents"]):
        for call in read_transcript(path, on_problem=print):
            ...

Broken input never raises: a malformed line is reported as a :class:`ReadProblem` (file and
line) and skipped; an unreadable or unrecognised file is one problem and no calls. Each
reader module documents how it maps its format's results, errors and runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from loopwarden.base.errors import CallbackError
from loopwarden.base.types import ToolCall
from loopwarden.offline.transcripts._common import (
    ProblemCallback,
    ReadProblem,
    Reporter,
    not_regular_reason,
    open_regular,
)
from loopwarden.offline.transcripts._detect import detect_format
from loopwarden.offline.transcripts._formats import BY_NAME, FORMATS

from ...base.log import get_logger

__all__ = ["FORMATS", "ReadProblem", "detect_format", "iter_transcript_files", "read_transcript"]

logger = get_logger("loopwarden.transcripts")


# Hidden folders are skipped when walking, except the ones agents keep their sessions in.
_HIDDEN_TRANSCRIPT_DIRS = (".openclaw", ".claude", ".openhands")
_NOT_TRANSCRIPTS = frozenset(
    {
        # images, audio, video
        ".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".ico", ".svg", ".tif", ".tiff",
        ".heic", ".mp3", ".wav", ".ogg", ".flac", ".m4a", ".mp4", ".mov", ".avi", ".mkv",
        ".webm",
        # archives, binaries, documents, databases
        ".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".tar", ".whl", ".jar",
        ".so", ".dylib", ".dll", ".exe", ".bin", ".o", ".a", ".pyc", ".pyo", ".class",
        ".pdf", ".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".db", ".sqlite",
        ".sqlite3", ".parquet", ".npy", ".npz", ".pkl", ".pt", ".safetensors",
        ".ttf", ".otf", ".woff", ".woff2",
    }
)  # fmt: skip


def read_transcript(
    path: str | Path,
    format: str | None = "auto",
    *,
    on_problem: ProblemCallback | None = None,
) -> Iterator[ToolCall]:
    """Yield the tool calls of one transcript file, in call order.

    ``format`` is one of :data:`FORMATS` or ``"auto"``/None (recognised from the content). Problems
    go to ``on_problem``, or to the ``loopwarden.offline.transcripts`` logger when it is None; the
    iterator itself never raises for a bad file. An exception raised by ``on_problem`` is
    passed through, so a caller can make problems fatal. An unknown ``format`` name is a
    programming error and raises :class:`ValueError` at once.
    """
    if format is None:
        format = "auto"
    if format != "auto" and format not in BY_NAME:
        raise ValueError(f"unknown transcript format {format!r}; expected one of {FORMATS}")
    return _read(Path(path), format, on_problem)


def _read(path: Path, format: str, on_problem: ProblemCallback | None) -> Iterator[ToolCall]:
    report = Reporter(str(path), on_problem)
    try:
        yield from _read_guarded(path, format, report)
        report.finish()
    except CallbackError as exc:
        raise exc.original from None


def _read_guarded(path: Path, format: str, report: Reporter) -> Iterator[ToolCall]:
    try:
        if not _readable(path, report):
            return
        name = format if format != "auto" else detect_format(path)
        if name is None:
            empty = path.stat().st_size == 0
            report(None, "empty file" if empty else "not a recognised transcript format")
            return
        yield from BY_NAME[name].read(path, report)
    except CallbackError:
        raise
    except OSError as exc:
        report(None, f"cannot read file: {exc.strerror or exc}")
    except Exception as exc:  # a reader bug must not abort a scan of many files
        report(None, f"reader failed: {type(exc).__name__}: {exc}")


def _readable(path: Path, report: Reporter) -> bool:
    reason = not_regular_reason(path)  # FIFOs and devices are never opened
    if reason is not None:
        report(None, reason)
        return False
    with open_regular(path):
        pass  # raises OSError (permissions) before any reader runs
    return True


def iter_transcript_files(
    paths: Iterable[str | Path], *, on_problem: ProblemCallback | None = None
) -> Iterator[Path]:
    """Expand files and folders into candidate transcript files.

    Folders are walked recursively in sorted order, skipping hidden files and folders (except
    agent session homes such as ``.openclaw`` and ``.claude``) and files that are obviously not
    transcripts (images, archives, binaries). Files named explicitly are always yielded, even
    when missing, so that reading them reports the problem; so are FIFOs, sockets, devices and
    dangling links found in a folder, which reading reports without opening them. Whether a
    file really is a transcript is decided from its content: :func:`detect_format` returns None
    for the rest. Each file is yielded once. A folder that cannot be listed is reported to
    ``on_problem`` (or logged when it is None) and passed over.
    """
    seen: set[str] = set()
    for given in paths:
        root = Path(given).expanduser()
        # os.path.isdir and realpath never raise (permissions, link loops); reading reports.
        found = _walk(root, on_problem) if os.path.isdir(root) else iter((root,))
        for path in found:
            key = os.path.realpath(path)
            if key not in seen:
                seen.add(key)
                yield path


def _walk(root: Path, on_problem: ProblemCallback | None) -> Iterator[Path]:
    def unlisted(exc: OSError) -> None:
        folder = os.fsdecode(exc.filename if exc.filename is not None else root)
        problem = ReadProblem(folder, None, f"cannot list folder: {exc.strerror or exc}")
        if on_problem is None:
            logger.warning("%s", problem)
        else:
            on_problem(problem)

    files: list[Path] = []
    for folder, dirnames, filenames in os.walk(root, onerror=unlisted):
        dirnames[:] = [name for name in dirnames if _visible_dir(name)]
        base = Path(folder)
        files.extend(
            base / name
            for name in filenames
            if not name.startswith(".") and Path(name).suffix.lower() not in _NOT_TRANSCRIPTS
        )
    files.sort(key=lambda path: path.relative_to(root).parts)
    yield from files


def _visible_dir(name: str) -> bool:
    return not name.startswith(".") or name.startswith(_HIDDEN_TRANSCRIPT_DIRS)
