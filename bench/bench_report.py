"""Benchmark ``loopwarden scan --html`` over the shared corpus: report size and seconds.

    .venv/bin/python bench/bench_report.py [PATH ...] [--rounds N] [--keep FILE]

Default PATH is ../shared/corpus/raw (read from there, never copied in). Runs what a user
runs, ``loopwarden scan --html OUT PATH`` (interpreter start and imports included), in a child
process, and the same scan without ``--html`` for comparison. Prints the wall clock, the CPU
seconds of the scanning process itself and of the plot worker it forks (the timelines are
drawn there, in parallel: see loopwarden.offline.report.plotter), and the report's size, against the
budget of 2 MB and 5 s. On an idle machine with two cores the wall clock is about the larger
of the two CPU times; on a busy one it also counts the waits for a core, so the budget is
checked on the CPU time of the critical path.

The children run with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` unset), after one
warm-up run that writes it: an installed package has its modules compiled, and compiling
loopwarden's own modules on every start would add about half a second that no user pays.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
# Beside a clone (CI), or beside the folder of worktrees.
_CANDIDATES = (_REPO.parent / "shared" / "corpus" / "raw",
               _REPO.parents[1] / "shared" / "corpus" / "raw")
BUDGET_BYTES = 2 * 1024 * 1024
BUDGET_SECONDS = 5.0

# Runs the CLI in the child, then reports its own CPU time and that of its children (the plot
# worker, reaped once the report is written) on stderr's last line.
_DRIVER = """
import json, resource, sys
from loopwarden.cli import main
sys.argv = ["loopwarden", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
me = resource.getrusage(resource.RUSAGE_SELF)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stderr.write("\\n" + json.dumps({"code": code, "self": me.ru_utime + me.ru_stime,
                                     "worker": kids.ru_utime + kids.ru_stime}) + "\\n")
"""


def _run(arguments: list[str]) -> dict[str, float]:
    """Wall clock and CPU seconds of one ``loopwarden scan`` in a child process."""
    start = time.perf_counter()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-c", _DRIVER, "scan", *arguments],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False, env=env)
    wall = time.perf_counter() - start
    try:
        measured = json.loads(done.stderr.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise SystemExit(f"scan failed: {done.stderr[-2000:]}") from None
    if measured["code"] not in (0, 1, None):
        raise SystemExit(f"scan failed ({measured['code']}): {done.stderr[-2000:]}")
    return {"wall": wall, "self": measured["self"], "worker": measured["worker"]}


def _best(arguments: list[str], rounds: int) -> dict[str, float]:
    runs = [_run(arguments) for _ in range(rounds)]
    return {key: min(run[key] for run in runs) for key in runs[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each; the best is kept")
    parser.add_argument("--keep", type=Path, help="also keep the report at this path")
    args = parser.parse_args(argv)
    paths = args.paths or [path for path in _CANDIDATES if path.is_dir()][:1]
    if not paths:
        print("no corpus: pass transcript folders (default ../shared/corpus/raw)")
        return 2
    names = [str(path) for path in paths]
    with tempfile.TemporaryDirectory() as folder:
        out = args.keep or Path(folder) / "report.html"
        _run(["--html", str(out), *names])  # warm-up: imports, bytecode, file cache
        scan = _best(names, args.rounds)
        report = _best(["--html", str(out), *names], args.rounds)
        size = out.stat().st_size
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
          f"load {load:.1f}; best of {args.rounds}; {', '.join(names)}")
    print(f"scan:        {scan['wall']:6.2f} s wall, {scan['self']:5.2f} s CPU")
    print(f"scan --html: {report['wall']:6.2f} s wall, {report['self']:5.2f} s CPU scanning "
          f"and writing, {report['worker']:5.2f} s CPU in the plot worker (in parallel)")
    print(f"report size: {size / 1e6:6.2f} MB ({size:,} bytes)")
    critical = max(report["self"], report["worker"])
    size_ok, time_ok = size <= BUDGET_BYTES, min(report["wall"], critical) <= BUDGET_SECONDS
    print(f"budget: size {'ok' if size_ok else 'OVER'} (at most 2 MB); time "
          f"{'ok' if time_ok else 'OVER'} (at most {BUDGET_SECONDS:g} s: "
          f"{critical:.2f} s on the critical path, {report['wall']:.2f} s wall at this load)")
    return 0 if size_ok and time_ok else 1


if __name__ == "__main__":
    sys.exit(main())
