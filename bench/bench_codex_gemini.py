"""Codex CLI and Gemini CLI with loopwarden, in the real binaries (a benchmark that prints
tables, not a timed test): what stops each loop shape, and what the hooks cost per tool call.

1. **Gemini CLI's own loop detection against loopwarden**, on the same shapes and the same
   insistent scripted model: hooks off with Gemini's guard on (as Gemini ships), loopwarden on
   with Gemini's guard off. Per run: executions, the call whose result first carried a warning,
   the first denial, and whether (and by whom) the run was ended. The claim checked: loopwarden
   never stops the healthy run, where Gemini's guard does.
2. **The per-tool-call cost of the hooks as each host sees it**: the median time from one model
   request to the next during a healthy run (hooks, the tool, the next request), without hooks,
   with loopwarden's hooks answered by the resident server, and each in its own process
   (``LOOPWARDEN_HOOK_SERVER=0``).

Needs the binaries (``bash .ci/install-hosts-cg``). Slow: each Gemini run takes a minute.

    python bench/bench_codex_gemini.py [--only gemini|codex] [--calls 15]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(_TESTS / "integrations" / "hosts"), str(_TESTS)]  # drivers, shared helpers

from codex_gemini_runs import LOOPS, RunRecord, binary, run_codex, run_gemini  # noqa: E402

SHAPES = (*[s for s in LOOPS if s != "mcp"], "healthy")


def _who(record: RunRecord, *, own_guard: bool) -> str:
    if record.stop is not None:
        return f"loopwarden ended it at call {record.stop}"
    if "Potential loop detected" in record.output or (own_guard and record.ended_by_host):
        return f"Gemini ended it after {record.calls} calls"
    if record.first_denial is not None:
        return "denied, not ended"
    return "never stopped"


def compare_with_gemini(limit: int) -> None:
    """Table 1: Gemini's own guard (hooks off) against loopwarden (Gemini's guard off)."""
    print(f"\n## Gemini CLI's loop detection vs loopwarden (insistent model, {limit} calls max)\n")
    print("| shape | guard | executions | warned at | first denial | end of run |")
    print("|---|---|---|---|---|---|")
    for shape in SHAPES:
        for label, hooks, own in (("Gemini's own (hooks off)", False, True),
                                  ("loopwarden (Gemini's off)", True, False)):
            with tempfile.TemporaryDirectory() as root:
                record = run_gemini(shape, Path(root), hooks=hooks, own_guard=own, limit=limit)
            print(f"| {shape} | {label} | {record.executions} | {record.first_warning or '-'} "
                  f"| {record.first_denial or '-'} | {_who(record, own_guard=own)} |",
                  flush=True)


def hook_cost(host: str, calls: int) -> None:
    """Table 2: one tool call's turnaround in ``host``, hooks off / resident / own process."""
    run = run_codex if host == "codex" else run_gemini
    print(f"\n## {host}: turnaround per tool call (median of {calls} calls, healthy run)\n")
    print("| hooks | ms per tool call | added by the hooks |")
    print("|---|---|---|")
    base = None
    for label, hooks, resident in (("none", False, False), ("loopwarden, resident", True, True),
                                   ("loopwarden, own process", True, False)):
        with tempfile.TemporaryDirectory() as root:
            record = run("healthy", Path(root), hooks=hooks, resident=resident, limit=calls)
        ms = record.turnaround_ms or 0.0
        base = ms if base is None else base
        added = "-" if not hooks else f"{ms - base:+.0f} ms"
        print(f"| {label} | {ms:.0f} | {added} |", flush=True)


def main() -> None:
    """Run the tables for the hosts installed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("codex", "gemini"))
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--limit", type=int, default=30)
    args = parser.parse_args()
    for host in ("codex", "gemini"):
        if args.only not in (None, host):
            continue
        path, why = binary(host)
        if path is None:
            print(f"{host}: skipped ({why})")
            continue
        hook_cost(host, args.calls)
        if host == "gemini":
            compare_with_gemini(args.limit)


if __name__ == "__main__":
    main()
