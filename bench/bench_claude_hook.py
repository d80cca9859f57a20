"""Latency of one ``loopwarden claude-hook`` invocation, as Claude Code pays it (a benchmark that
prints numbers, not a timed test).

Both ways a hook can run are measured: answered by the resident server the first hook leaves
behind (the default), and in its own process (``LOOPWARDEN_HOOK_SERVER=0``).

Claude Code starts the hook command once per hook event — twice per tool call (PreToolUse and
PostToolUse) — so what counts is the whole process: interpreter start, imports, reading the
SQLite state, answering. Each run here starts the command fresh with one payload on stdin and a
temp SQLite file, and times it until it exits. The calls differ in their arguments, so nothing
loops and the state grows as in an ordinary session.

    python bench/bench_claude_hook.py [--runs 30] [--command "loopwarden"]

``--command`` defaults to what the installed ``loopwarden`` console script runs, with this
interpreter (``python -c "...loopwarden.cli._entry.main()"``); the script itself can be named, or
an older entry point (``"python -m loopwarden.cli"``) to compare.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# The body of the `loopwarden` console script pip writes (project.scripts in pyproject.toml).
CONSOLE_SCRIPT = "import sys; from loopwarden.cli._entry import main; sys.exit(main())"
SESSION = "bench-session"
PROMPT = "bench-prompt"


def payload(event: str, turn: int) -> dict[str, Any]:
    base: dict[str, Any] = {
        "session_id": SESSION,
        "prompt_id": PROMPT,
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": f"ls -la /tmp/dir-{turn}"},
        "tool_use_id": f"toolu_{turn:04d}",
        "cwd": "/tmp",
        "transcript_path": "/tmp/transcript.jsonl",
    }
    if event == "PostToolUse":
        base["tool_response"] = {"stdout": f"total {turn}\n", "stderr": "", "interrupted": False}
    return base


# An installed package has its bytecode compiled; so must the code measured here (the warm-up
# run writes it), whatever the calling shell says.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_once(command: list[str], db: Path, data: dict[str, Any],
             env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one invocation. The CPU time (user + system of the child)
    is less sensitive to other processes on a busy machine than the wall time."""
    text = json.dumps(data)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([*command, "claude-hook", "--db", str(db)], input=text, env=env or CHILD_ENV,
                          capture_output=True, text=True, timeout=60, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"hook failed ({proc.returncode}): {proc.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(name: str, runs: list[tuple[float, float]]) -> None:
    wall = [w * 1000 for w, _ in runs]
    cpu = [c * 1000 for _, c in runs]
    print(f"{name:<12} runs {len(runs):3}  median {statistics.median(wall):6.1f} ms  "
          f"p95 {quantile(wall, 0.95):6.1f} ms  min {min(wall):6.1f} ms  "
          f"(CPU median {statistics.median(cpu):6.1f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="tool calls (each = Pre + Post)")
    parser.add_argument("--command", default=None,
                        help="hook command without 'claude-hook' [the console script's code]")
    args = parser.parse_args()
    command = shlex.split(args.command) if args.command else [sys.executable, "-c", CONSOLE_SCRIPT]

    print(f"command: {shlex.join(command)} claude-hook --db TMP  (load average "
          f"{os.getloadavg()[0]:.2f}, {os.cpu_count()} cores)")
    for mode in ("resident", "in-process"):
        with tempfile.TemporaryDirectory() as tmp:
            timings = measure(command, Path(tmp), args.runs, resident=mode == "resident")
        print(f"-- {mode}")
        for event, runs in timings.items():
            report(event, runs)
        report("all", [run for runs in timings.values() for run in runs])


def measure(command: list[str], tmp: Path, turns: int,
            resident: bool) -> dict[str, list[tuple[float, float]]]:
    """Time ``turns`` tool calls. Resident: the first hook leaves a server (in a private
    runtime directory under ``tmp``), which answers the hooks measured; it is stopped after."""
    runtime = tmp / "run"
    runtime.mkdir(mode=0o700)
    env = {**CHILD_ENV, "XDG_RUNTIME_DIR": str(runtime),
           "LOOPWARDEN_HOOK_SERVER": "1" if resident else "0"}
    db = tmp / "hook.db"
    timings: dict[str, list[tuple[float, float]]] = {"PreToolUse": [], "PostToolUse": []}
    try:
        run_once(command, db, payload("PreToolUse", -1), env)  # warm caches, create the file
        if resident:
            wait_for_server(runtime)
        for turn in range(turns):
            for event, runs in timings.items():
                runs.append(run_once(command, db, payload(event, turn), env))
    finally:
        stop_servers(runtime)
    return timings


def wait_for_server(runtime: Path) -> None:
    deadline = time.monotonic() + 30
    while not list(runtime.glob("loopwarden-*/hook-*.sock")):
        if time.monotonic() > deadline:
            raise SystemExit("no resident hook server started")
        time.sleep(0.05)


def stop_servers(runtime: Path) -> None:
    for lock in runtime.glob("loopwarden-*/hook-*.sock.lock"):
        pid = lock.read_text().strip()
        if pid.isdigit():
            with contextlib.suppress(OSError):  # already gone
                os.kill(int(pid), signal.SIGTERM)


if __name__ == "__main__":
    main()
