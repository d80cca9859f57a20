"""Benchmark ``loopwarden scan`` over the shared corpus: calls per second and peak memory.

    .venv/bin/python bench/bench_scan.py [PATH ...] [--preset openclaw|early] [--repeat N]
                                         [--jobs N]

Default PATH is the shared corpus/normalized next to the clone (read from there, never copied
in). Measures what ``scan`` does per file: read the transcript (streaming) and replay it
through the real LoopGuard, plus the loop-span accounting; once in one process and once with
``--jobs`` worker processes (default: the number of cores), as ``scan --jobs`` runs it. A
further pass replays calls already in memory, to split the time between reading and
detection. Peak RSS comes from ``resource`` (this process, interpreter included; workers not
counted), printed next to the largest single file.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
from pathlib import Path

from loopwarden import LoopDetectionConfig, __version__, replay
from loopwarden.offline.scan import scanning
from loopwarden.offline.transcripts import iter_transcript_files, read_transcript


def _default_root() -> Path:
    """The nearest ancestor's shared/corpus/normalized: the bench runs from a clone or a
    worktree."""
    for folder in Path(__file__).resolve().parents:
        if (folder / "shared" / "corpus" / "normalized").is_dir():
            return folder / "shared" / "corpus" / "normalized"
    return Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "normalized"


DEFAULT_ROOT = _default_root()


def _peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes vs KiB


def _scan_pass(files: list[Path], config: LoopDetectionConfig,
               jobs: int) -> tuple[int, int, float]:
    """One scan of ``files`` as ``scan --jobs`` does it (pool start-up included)."""
    calls = findings = 0
    start = time.perf_counter()
    with scanning(files, config, jobs=jobs, keep_traces=False) as results:
        for result in results:
            calls += result.calls
            findings += len(result.findings)
    return calls, findings, time.perf_counter() - start


def _best(files: list[Path], config: LoopDetectionConfig, jobs: int,
          repeat: int) -> tuple[int, int, float]:
    best: tuple[int, int, float] | None = None
    for _ in range(max(repeat, 1)):
        result = _scan_pass(files, config, jobs)
        if best is None or result[2] < best[2]:
            best = result
    assert best is not None
    return best


def _replay_pass(files: list[Path], config: LoopDetectionConfig) -> tuple[int, float]:
    """Replay only: each file's calls are read first, outside the timed section."""
    calls, elapsed = 0, 0.0
    for path in files:
        loaded = list(read_transcript(path, on_problem=lambda problem: None))
        start = time.perf_counter()
        replay(loaded, config)
        elapsed += time.perf_counter() - start
        calls += len(loaded)
    return calls, elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, default=[DEFAULT_ROOT])
    parser.add_argument("--preset", choices=["openclaw", "early"], default="openclaw")
    parser.add_argument("--repeat", type=int, default=3, help="scan passes; the best is kept")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="worker processes of the parallel pass [default: the cores]")
    args = parser.parse_args(argv)
    missing = [str(path) for path in args.paths if not path.exists()]
    if missing:
        print(f"not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    files = list(iter_transcript_files(args.paths))
    largest = max((path.stat().st_size for path in files), default=0)
    config = LoopDetectionConfig(enabled=True, preset=args.preset)
    rss_before = _peak_rss_mb()

    calls, findings, elapsed = _best(files, config, 1, args.repeat)
    rss_serial = _peak_rss_mb()
    jobs = max(args.jobs, 1)
    _, _, parallel = _best(files, config, jobs, args.repeat)
    replay_calls, replay_elapsed = _replay_pass(files, config)

    print(f"loopwarden {__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}, preset {args.preset}, {os.cpu_count()} cores")
    print(f"files:              {len(files)} (largest {largest / 1e6:.1f} MB, "
          f"total {sum(p.stat().st_size for p in files) / 1e6:.1f} MB)")
    print(f"calls:              {calls}  findings: {findings}")
    print(f"scan, 1 job:        {elapsed:.2f} s = {calls / elapsed:,.0f} calls/s "
          f"(read+replay, best of {max(args.repeat, 1)})")
    print(f"{f'scan, {jobs} jobs:':<20}{parallel:.2f} s = "
          f"{calls / parallel:,.0f} calls/s ({elapsed / parallel:.2f}x; pool start-up "
          "included)")
    print(f"replay only:        {replay_elapsed:.2f} s = "
          f"{replay_calls / replay_elapsed:,.0f} calls/s")
    print(f"peak RSS:           {rss_serial:.0f} MB after the 1-job passes "
          f"(after imports: {rss_before:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
