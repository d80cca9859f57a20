"""Benchmark the transcript readers alone: calls per CPU-second for each JSONL format.

    .venv/bin/python bench/bench_scan_readers.py [--calls N] [--repeat N]

Writes one synthetic transcript per format into a temporary folder (small calls, a user turn
every 50 calls, every call answered), then reads each with ``read_transcript`` (format
auto-detected, as ``scan`` does) and reports the best of ``--repeat`` runs in process CPU time,
next to the floor of merely parsing the same lines with orjson. Target: 100,000 calls/s per
core.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from loopwarden.offline.transcripts import read_transcript

Records = Callable[[int], Iterator[dict[str, Any]]]


def openclaw(calls: int) -> Iterator[dict[str, Any]]:
    yield {"type": "session", "version": 3, "id": "bench", "cwd": "/"}
    for i in range(calls):
        if i % 50 == 0:
            yield _oc("user", {"content": [{"type": "text", "text": "next"}]})
        yield _oc(
            "assistant",
            {"content": [{"type": "toolCall", "id": f"t{i}", "name": "exec",
                          "arguments": {"command": f"ls {i % 7}"}}],
             "stopReason": "toolUse", "usage": {"input": 1, "output": 2}},
        )  # fmt: skip
        yield _oc(
            "toolResult",
            {"toolCallId": f"t{i}", "toolName": "exec", "isError": False,
             "content": [{"type": "text", "text": "a.txt\nb.txt"}],
             "details": {"status": "completed", "exitCode": 0}},
        )  # fmt: skip


def _oc(role: str, fields: dict[str, Any]) -> dict[str, Any]:
    message = {"role": role, **fields}
    return {"type": "message", "id": "x", "parentId": None, "message": message}


def claude_code(calls: int) -> Iterator[dict[str, Any]]:
    for i in range(calls):
        if i % 50 == 0:
            yield _cc("user", "next")
        yield _cc("assistant", [{"type": "tool_use", "id": f"t{i}", "name": "Bash",
                                 "input": {"command": f"ls {i % 7}"}}])  # fmt: skip
        yield _cc("user", [{"type": "tool_result", "tool_use_id": f"t{i}",
                            "content": "a.txt\nb.txt"}])  # fmt: skip


def _cc(role: str, content: Any) -> dict[str, Any]:
    message = {"role": role, "content": content}
    return {"type": role, "uuid": "x", "parentUuid": None, "sessionId": "s", "message": message}


def loopwarden_jsonl(calls: int) -> Iterator[dict[str, Any]]:
    for i in range(calls):
        yield {"tool": "exec", "args": {"command": f"ls {i % 7}"}, "result": "a.txt",
               "error": None, "call_id": f"t{i}", "run_id": f"u{i // 50}"}  # fmt: skip


FORMATS: dict[str, Records] = {
    "openclaw": openclaw,
    "claude-code": claude_code,
    "loopwarden": loopwarden_jsonl,
}


def _best_cpu_seconds(action: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        action()
        best = min(best, time.process_time() - start)
    return best


def _read_all(path: Path) -> int:
    return sum(1 for _ in read_transcript(path))


def _parse_only(path: Path) -> None:
    with path.open("rb") as fh:
        for line in fh:
            orjson.loads(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for name, records in FORMATS.items():
            path = Path(folder) / f"{name}.jsonl"
            with path.open("w", encoding="utf-8") as fh:
                fh.writelines(json.dumps(record) + "\n" for record in records(options.calls))
            counted = sum(1 for _ in read_transcript(path))
            assert counted == options.calls, (name, counted)
            seconds = _best_cpu_seconds(partial(_read_all, path), options.repeat)
            floor = _best_cpu_seconds(partial(_parse_only, path), options.repeat)
            size = path.stat().st_size / 1e6
            print(
                f"{name:12s} {options.calls / seconds:>10,.0f} calls/s  "
                f"{size / seconds:5.0f} MB/s  (orjson parse alone: "
                f"{options.calls / floor:,.0f} calls/s)"
            )


if __name__ == "__main__":
    main()
