"""Soak and per-call cost of the stores (a benchmark that prints numbers, not a timed test).

1. Soak: one million short sessions (one guarded call each) through ``MemoryStore`` with a small
   idle TTL on a fake clock that advances 1 ms per session, and no session cap — so only the
   TTL bounds memory. Prints the live session count and RSS every 10% and the peak RSS.
2. Per-call cost of a guarded call (``before_tool_call`` + ``after_tool_call``) in steady state
   (histories full) for ``MemoryStore``, ``SQLiteStore`` (a temp file) and ``RedisStore`` (at
   ``$LOOPWARDEN_REDIS_URL``, else a ``redis-server`` started here on a free port, else skipped).

    python bench/bench_stores.py [--sessions 1000000] [--pairs 3000]
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from loopwarden import LoopDetectionConfig, LoopGuard, MemoryStore

CONFIG = LoopDetectionConfig(enabled=True)
TTL_SECONDS = 1.0
TICK_SECONDS = 0.001


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def rss_mb() -> float:
    """Current resident set size (Linux /proc; falls back to the peak elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return peak_rss_mb()


def peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if os.uname().sysname == "Darwin" else peak / 1024  # bytes vs KiB


def guarded_call(guard: LoopGuard, session: str, tool: str, args: dict[str, Any],
                 result: str, call_id: str) -> None:
    verdict = guard.before_tool_call(tool, args, session=session, call_id=call_id)
    if verdict.action != "block":
        guard.after_tool_call(tool, args, session=session, result=result, call_id=call_id)


# -- 1. soak --------------------------------------------------------------------------------


def soak(sessions: int) -> None:
    clock = FakeClock()
    store = MemoryStore(idle_ttl=TTL_SECONDS, max_sessions=None, clock=clock)
    guard = LoopGuard(CONFIG, store=store)
    bound = int(TTL_SECONDS / TICK_SECONDS) + 1
    print(f"soak: {sessions:,} sessions, idle TTL {TTL_SECONDS:g} s, clock +{TICK_SECONDS * 1000:g}"
          f" ms per session (at most {bound:,} alive), no session cap")
    print(f"{'sessions':>12} {'alive':>7} {'rss MB':>8} {'us/call':>8}")
    step = max(sessions // 10, 1)
    started = last = time.perf_counter()
    most_alive = 0
    for i in range(sessions):
        clock.now += TICK_SECONDS
        guarded_call(guard, f"session-{i}", "read", {"path": f"f{i % 100}"}, "ok", "c1")
        most_alive = max(most_alive, len(store))
        if (i + 1) % step == 0:
            now = time.perf_counter()
            print(f"{i + 1:>12,} {len(store):>7,} {rss_mb():>8.1f} "
                  f"{(now - last) / step * 1e6:>8.1f}")
            last = now
    elapsed = time.perf_counter() - started
    verdict = "bounded" if most_alive <= bound else "NOT BOUNDED"
    print(f"soak: most sessions alive at once {most_alive:,} ({verdict}); "
          f"peak RSS {peak_rss_mb():.1f} MB; {elapsed:.1f} s\n")


# -- 2. per-call cost -----------------------------------------------------------------------


def workload(n: int) -> Iterator[tuple[str, str, dict[str, Any], str, str]]:
    """A steady mix over 20 sessions: varied reads and commands, some repeats, no loops."""
    for i in range(n):
        tool = ("read", "grep", "exec")[i % 3]
        yield (f"session-{i % 20}", tool, {"path": f"src/f{i % 37}.py", "q": i % 11},
               f"result {i % 13}", f"call-{i}")


def per_call_cost(name: str, guard: LoopGuard, pairs: int) -> None:
    warmup = 400  # fills every session's history to its steady size
    for session, tool, args, result, call_id in workload(warmup):
        guarded_call(guard, session, tool, args, result, call_id)
    durations = []
    for session, tool, args, result, call_id in workload(pairs):
        started = time.perf_counter()
        guarded_call(guard, session, tool, args, result, f"timed-{call_id}")
        durations.append(time.perf_counter() - started)
    failures = guard.stats.store_failures
    durations.sort()
    p99 = durations[int(len(durations) * 0.99) - 1]
    print(f"{name:<12} {statistics.fmean(durations) * 1e6:>9.1f} "
          f"{statistics.median(durations) * 1e6:>9.1f} {p99 * 1e6:>9.1f}   "
          f"{pairs:,} calls{f', {failures} store failures' if failures else ''}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_reachable(url: str) -> bool:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=0.3, socket_timeout=0.3)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


@contextmanager
def redis_url() -> Iterator[str | None]:
    """``$LOOPWARDEN_REDIS_URL`` if reachable, else a private redis-server, else None."""
    env = os.environ.get("LOOPWARDEN_REDIS_URL")
    if env and redis_reachable(env):
        yield env
        return
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not redis_reachable(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                yield None
                return
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def cost_table(pairs: int) -> None:
    print(f"per-call cost (before + after, steady state, µs)\n"
          f"{'store':<12} {'mean':>9} {'median':>9} {'p99':>9}")

    def run(name: str, store: Any, n: int) -> None:
        per_call_cost(name, LoopGuard(CONFIG, store=store), n)

    run("memory", MemoryStore(), pairs * 5)
    with tempfile.TemporaryDirectory() as tmp:
        from loopwarden.guard.stores.sqlite import SQLiteStore

        with SQLiteStore(Path(tmp) / "bench.db") as sqlite_store:
            run("sqlite", sqlite_store, pairs)
    with redis_url() as url:
        if url is None:
            print(f"{'redis':<12} skipped: no server reachable and redis-server not installed")
            return
        from loopwarden.guard.stores.redis import RedisStore

        prefix = f"loopwarden-bench:{uuid.uuid4().hex}:"
        redis_store = RedisStore(url, prefix=prefix)
        try:
            run("redis", redis_store, pairs)
        finally:
            keys = list(redis_store.client.scan_iter(match=f"{prefix}*"))
            if keys:
                redis_store.client.delete(*keys)
            redis_store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=1_000_000)
    parser.add_argument("--pairs", type=int, default=3000, help="timed calls per persistent store")
    args = parser.parse_args()
    # Warnings would be logged once per session; the bench measures the store, not log I/O.
    logging.getLogger("loopwarden").setLevel(logging.CRITICAL)
    soak(args.sessions)
    cost_table(args.pairs)


if __name__ == "__main__":
    main()
