"""Cost of one guarded call (before_tool_call + after_tool_call) on a realistic stream.

Prints the median pair cost at the default history (30) and at historySize 1,000, each as a
ratio to "bare hashing" (canonical JSON + SHA-256 of the same args and result) measured in the
same run. Targets (issue 2): pair <= 8x bare hashing; history 1,000 <= 1.2x history 30
(issue 24: every per-call check is O(1) in the history size).

Two streams: a synthetic coding-agent mix, and — when ``../shared/corpus`` is present — the
real tool calls of every transcript in the shared corpus, in order (the most realistic stream
there is; results average 2.3 KB).

    python bench/bench_guard.py [--calls 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import time
from typing import Any

import orjson

from loopwarden import LoopDetectionConfig, LoopGuard

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
         "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi",
         "chi", "psi", "omega"]


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def realistic_stream(n: int, seed: int = 7) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """A coding agent's mix: reads of ~2 KB files, greps, shell commands, writes, polls; about a
    fifth of the calls repeat an earlier call exactly (re-reads, polls)."""
    rng = random.Random(seed)
    files = [f"src/pkg/module_{i}.py" for i in range(200)]
    stream: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for i in range(n):
        if stream and rng.random() < 0.2:
            stream.append(rng.choice(stream[-50:]))
            continue
        kind = rng.random()
        if kind < 0.35:
            path = rng.choice(files)
            stream.append(("read", {"path": path, "offset": 0, "limit": 400},
                           {"content": [{"type": "text", "text": _text(rng, 300)}],
                            "details": {"path": path, "lines": 80}}))
        elif kind < 0.55:
            q = rng.choice(WORDS)
            stream.append(("grep", {"pattern": q, "path": "src", "glob": "*.py"},
                           {"content": [{"type": "text", "text": "\n".join(
                               f"{rng.choice(files)}:{rng.randint(1, 400)}: {_text(rng, 8)}"
                               for _ in range(12))}], "details": {"matches": 12}}))
        elif kind < 0.8:
            cmd = f"pytest tests/test_{rng.randint(0, 60)}.py -q"
            stream.append(("exec", {"command": cmd, "timeout": 120},
                           {"content": [{"type": "text", "text": _text(rng, 120)}],
                            "details": {"status": "completed", "exitCode": rng.choice((0, 1)),
                                        "durationMs": rng.randint(50, 9000),
                                        "aggregated": _text(rng, 120), "cwd": "/work"}}))
        elif kind < 0.93:
            path = rng.choice(files)
            stream.append(("write", {"path": path, "content": _text(rng, 200)},
                           {"content": [{"type": "text", "text": f"wrote {path}"}],
                            "details": {"changed": True, "diff": _text(rng, 40)}}))
        else:
            stream.append(("process", {"action": "poll", "sessionId": f"s{rng.randint(0, 3)}"},
                           {"content": [{"type": "text", "text": "(no new output)"}],
                            "details": {"status": "running", "aggregated": _text(rng, 20)}}))
        del i
    return stream


def corpus_stream() -> list[tuple[str, Any, Any]]:
    """Every call of the shared corpus with a result or an error (errors as their text)."""
    from pathlib import Path

    from loopwarden import MISSING
    from loopwarden.offline.transcripts import iter_transcript_files, read_transcript

    root = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "normalized"
    if not root.is_dir():
        return []
    stream: list[tuple[str, Any, Any]] = []
    for path in iter_transcript_files([root]):
        for call in read_transcript(path):
            outcome = call.error if call.error is not None else call.result
            if outcome is not MISSING:
                stream.append((call.tool_name, call.args, outcome))
    return stream


def _bare(args: Any, result: Any) -> None:
    hashlib.sha256(orjson.dumps(args, option=orjson.OPT_SORT_KEYS)).hexdigest()
    hashlib.sha256(orjson.dumps(result, option=orjson.OPT_SORT_KEYS)).hexdigest()


def guarded(stream: list[tuple[str, Any, Any]], history_size: int) -> tuple[list[int], list[int]]:
    """Per call: the guard pair's cost, and bare hashing's cost measured right before it, so
    both see the same machine load (this VM's speed drifts by 1.5x from minute to minute)."""
    guard = LoopGuard(LoopDetectionConfig(enabled=True, history_size=history_size,
                                          warning_threshold=10_000, critical_threshold=20_000,
                                          global_circuit_breaker_threshold=30_000))
    guard.sinks.clear()
    pair_costs, bare_costs = [], []
    clock = time.perf_counter_ns
    for i, (tool, args, result) in enumerate(stream):
        cid = f"c{i}"
        _bare(args, result)  # both sides then hash data already in the CPU caches, as a live
        t0 = clock()         # guard does with a result its tool has just produced
        _bare(args, result)
        t1 = clock()
        guard.before_tool_call(tool, args, session="bench", run_id="run", call_id=cid)
        guard.after_tool_call(tool, args, session="bench", run_id="run", call_id=cid, result=result)
        t2 = clock()
        bare_costs.append(t1 - t0)
        pair_costs.append(t2 - t1)
    return pair_costs, bare_costs


def report(name: str, stream: list[tuple[str, Any, Any]], rounds: int) -> None:
    """Median pair cost and ratios; the whole measurement is repeated ``rounds`` times and the
    median round is reported with the range, since one round on a shared VM can be off by 20%."""
    warm = max(len(stream) // 10, 1000)  # history 1,000 must be full before it is measured
    guarded(stream[:2000], 30)
    results = []
    for _ in range(rounds):
        pair30, bare30 = (statistics.median(c[warm:]) for c in guarded(stream, 30))
        pair1000, bare1000 = (statistics.median(c[warm:]) for c in guarded(stream, 1000))
        results.append((pair30 / bare30, pair30, bare30, pair1000 / bare1000, pair1000))
    results.sort()
    ratio30, pair30, bare30, ratio1000, pair1000 = results[len(results) // 2]
    spread = f"(rounds: {', '.join(f'{r[0]:.2f}' for r in results)})"
    print(f"{name}: {len(stream) - warm} calls measured, median of {rounds} rounds")
    print(f"  bare hashing (median)   : {bare30 / 1000:8.2f} us per call (args + result)")
    print(f"  guard pair, history 30  : {pair30 / 1000:8.2f} us  = {ratio30:5.2f}x bare"
          f"   (target <= 8x) {spread}")
    print(f"  guard pair, history 1000: {pair1000 / 1000:8.2f} us  = {ratio1000:5.2f}x bare")
    print(f"  history 1000 / 30       : {pair1000 / pair30:5.2f}x"
          "                      (target <= 1.2x)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    report("synthetic stream", realistic_stream(options.calls), options.rounds)
    corpus = corpus_stream()
    if corpus:
        report("shared corpus stream", corpus, options.rounds)


if __name__ == "__main__":
    main()
