"""Benchmark ``loopwarden scan`` over the shared corpus: calls per second and peak memory.

    .venv/bin/python bench/bench_scan.py [PATH ...] [--preset openclaw|early] [--repeat N]

Default PATH is ../shared/corpus/normalized (read from there, never copied in). Measures what
``scan`` does per file: read the transcript (streaming) and replay it through the real
LoopGuard, plus the loop-span accounting. A second pass replays calls already in memory, to
split the time between reading and detection. Peak RSS comes from ``resource`` (the whole
process, interpreter included), printed next to the largest single file.
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import time
from pathlib import Path

from loopwarden import LoopDetectionConfig, __version__, replay
from loopwarden.report import scan_file
from loopwarden.transcripts import iter_transcript_files, read_transcript

DEFAULT_ROOT = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "normalized"


def _peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes vs KiB


def _scan_pass(files: list[Path], config: LoopDetectionConfig) -> tuple[int, int, float]:
    calls = findings = 0
    start = time.perf_counter()
    for path in files:
        result = scan_file(path, config)
        calls += result.calls
        findings += len(result.findings)
    return calls, findings, time.perf_counter() - start


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
    args = parser.parse_args(argv)
    missing = [str(path) for path in args.paths if not path.exists()]
    if missing:
        print(f"not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    files = list(iter_transcript_files(args.paths))
    largest = max((path.stat().st_size for path in files), default=0)
    config = LoopDetectionConfig(enabled=True, preset=args.preset)
    rss_before = _peak_rss_mb()

    best: tuple[int, int, float] | None = None
    for _ in range(max(args.repeat, 1)):
        result = _scan_pass(files, config)
        if best is None or result[2] < best[2]:
            best = result
    assert best is not None
    calls, findings, elapsed = best
    replay_calls, replay_elapsed = _replay_pass(files, config)

    print(f"loopwarden {__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}, preset {args.preset}, 1 process (single core)")
    print(f"files:              {len(files)} (largest {largest / 1e6:.1f} MB, "
          f"total {sum(p.stat().st_size for p in files) / 1e6:.1f} MB)")
    print(f"calls:              {calls}  findings: {findings}")
    print(f"scan (read+replay): {elapsed:.2f} s = {calls / elapsed:,.0f} calls/s "
          f"(best of {max(args.repeat, 1)})")
    print(f"replay only:        {replay_elapsed:.2f} s = "
          f"{replay_calls / replay_elapsed:,.0f} calls/s")
    print(f"peak RSS:           {_peak_rss_mb():.0f} MB (after imports: {rss_before:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
