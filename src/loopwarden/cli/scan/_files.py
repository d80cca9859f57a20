"""What ``scan`` reads: the arguments turned into transcript files (standard input copied,
folders walked, a file found twice scanned once), scanned in ``--jobs`` worker processes, and
what was passed over and why."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...config import LoopDetectionConfig
from ...offline.efficacy import DEFAULT_WITHIN
from ...offline.report.table import STDIN, Row, ShownNames
from ...offline.scan import FileScan, scanning
from ...offline.transcripts import ReadProblem, detect_format, iter_transcript_files
from ._options import _progress

if TYPE_CHECKING:
    from ...offline.report.html import HtmlReport


#: Without ``--jobs``, less transcript data than this is scanned in one process: starting
#: workers would cost more than they save.
PARALLEL_MIN_BYTES = 4_000_000


@dataclass(frozen=True, slots=True)
class Skipped:
    """A path that was not scanned, and why (from ``scan``'s point of view)."""

    path: str
    reason: str
    explicit: bool  # named on the command line, not found by walking a folder
    error: bool = False  # did not parse as the forced --format: an input error (exit 2)


@dataclass(frozen=True, slots=True)
class ScanOutcome:
    """What one ``scan`` of its arguments found: the transcripts scanned and the paths passed
    over."""

    rows: list[Row]  # every scanned transcript, in the order scanned, with its shown name
    skipped: list[Skipped]
    nothing_usable: bool  # no argument was a folder that could be listed or a transcript

    @property
    def scans(self) -> list[FileScan]:
        """Every scanned transcript's scan, in the order scanned."""
        return [row.scan for row in self.rows]


def _scan_all(paths: Sequence[Path], config: LoopDetectionConfig, format: str,
              report: HtmlReport | None, jobs: int | None = None,
              stdin_file: Path | None = None,
              nudge_within: int = DEFAULT_WITHIN) -> ScanOutcome:
    """Scan file by file; only each file's summary outlives its scan (bounded memory)."""
    arguments = [stdin_file if stdin_file is not None and str(path) == STDIN else path
                 for path in paths]
    folders = [path for path in arguments if os.path.isdir(path.expanduser())]
    named = {_real(path) for path in arguments if path not in folders}
    skipped: list[Skipped] = []
    listable = [folder for folder in folders if _listable(folder, skipped)]
    walked: list[ReadProblem] = []
    files = _walk([p if p not in folders or p in listable else None for p in arguments],
                  walked.append)
    skipped.extend(Skipped(problem.path, problem.message, False) for problem in walked)
    names = ShownNames([str(path) for path in paths])
    rows: list[Row] = []
    workers = jobs if jobs is not None else _default_jobs([path for path, _ in files])
    with scanning([path for path, _ in files], config, format=format, jobs=workers,
                  keep_traces=report is not None, nudge_within=nudge_within) as results, \
            _progress(len(files), "scanning") as advance:
        for (path, argument), result in zip(files, results, strict=True):
            advance(path.name)
            if stdin_file is not None and path == stdin_file:
                result = _from_stdin(result)
            if result.format is None:
                skipped.append(_skipped(result, path, explicit=_real(path) in named))
                continue
            if report is not None:
                report.add(result)
            rows.append(Row(names.name(result.path, argument), result.without_trace()))
    return ScanOutcome(rows, skipped, nothing_usable=not listable and not rows)


def _skipped(result: FileScan, path: Path, *, explicit: bool) -> Skipped:
    """Why ``result`` was not scanned. A file that does not parse as the forced --format is an
    error when it was named, or when it is a transcript of another format; one found in a
    folder that is no transcript at all is passed over, as with --format auto."""
    reason = result.problems[0].message if result.problems else "not read"
    if result.mismatch is None:
        return Skipped(result.path, reason, explicit)
    if not explicit and detect_format(path) is None:
        return Skipped(result.path, "not a recognised transcript format", explicit)
    return Skipped(result.path, reason, explicit, error=True)


def _walk(arguments: Sequence[Path | None],
          on_problem: Callable[[ReadProblem], None]) -> list[tuple[Path, int]]:
    """The files to scan, each with the index of the argument it was found under (None: an
    argument not to walk); a file found twice is scanned once, as by iter_transcript_files."""
    seen: set[str] = set()
    files: list[tuple[Path, int]] = []
    for index, argument in enumerate(arguments):
        if argument is None:
            continue
        for path in iter_transcript_files([argument], on_problem=on_problem):
            key = os.path.realpath(path)
            if key not in seen:
                seen.add(key)
                files.append((path, index))
    return files


def _default_jobs(files: Sequence[Path]) -> int:
    """The number of cores, for scans big enough to gain from more than one process."""
    cores = os.cpu_count() or 1
    if cores == 1 or len(files) < 2:
        return 1
    total = 0
    for path in files:
        try:
            total += os.stat(path).st_size
        except OSError:
            continue  # scanning reports it
        if total >= PARALLEL_MIN_BYTES:
            return cores
    return 1


def _from_stdin(result: FileScan) -> FileScan:
    """The scan of standard input's copy, named ``-`` as on the command line."""
    result.path = STDIN
    result.problems = [dataclasses.replace(problem, path=STDIN) for problem in result.problems]
    return result


def _real(path: Path) -> str:
    return os.path.realpath(path.expanduser())  # unlike Path.resolve, never raises (loops)


def _listable(folder: Path, skipped: list[Skipped]) -> bool:
    try:
        with os.scandir(folder.expanduser()):
            return True
    except OSError as exc:
        skipped.append(Skipped(str(folder), f"cannot list folder: {exc.strerror or exc}", True))
        return False
