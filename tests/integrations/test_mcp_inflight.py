"""Calls in flight count, and task-augmented calls are guarded (issue 13, item 4).

The guard: a call admitted while identical calls (same run, same arguments) still wait for
their outcome counts them as repeats, as OpenClaw counts a batch's earlier siblings — so a burst
of concurrent identical calls is stopped like the same calls made one by one, while hosts that
report each outcome before the next call see exactly OpenClaw's verdicts.

The MCP proxy: a real MCP client fires 25 identical ``call_tool`` at once at a slow server
behind ``loopwarden mcp-proxy``; task-augmented ``tools/call`` (MCP 2025-11-25) are linked to
their ``tasks/result`` (and failure, cancellation) through :class:`McpLoopGuard` and through the
proxy process, against ``mcp_task_server.py`` (raw JSON-RPC with a minimal task flow).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from loopwarden import (
    LoopBlockedError,
    LoopDetectionConfig,
    LoopGuard,
    LoopTerminatedError,
    SQLiteStore,
    ToolCall,
)
from loopwarden.integrations.mcp_proxy import McpLoopGuard

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

HERE = Path(__file__).resolve().parent
TASK_SERVER = HERE / "mcp_task_server.py"
SAME = {"content": [{"type": "text", "text": "job 7: running (0% done)"}]}
RELATED = "io.modelcontextprotocol/related-task"


def make_guard(**config: Any) -> LoopGuard:
    # LoopGuard() is enabled by default once r-doors1 is merged; until then, say it.
    guard = LoopGuard(LoopDetectionConfig(enabled=True, **config))
    guard.sinks.clear()
    return guard


# -- the guard -------------------------------------------------------------------------------


def _burst(guard: LoopGuard, n: int, *, run: str = "r", prefix: str = "c") -> list[str]:
    return [guard.before_tool_call("status", {"job": 7}, session="s", run_id=run,
                                   call_id=f"{prefix}{i}").action for i in range(n)]


def test_a_burst_of_identical_calls_is_stopped_like_sequential_ones() -> None:
    guard = make_guard()
    actions = _burst(guard, 25)
    assert actions.count("block") == 5 and "block" not in actions[:20]
    assert actions[10] == "warn"
    # As for 20 sequential identical calls: the 21st is blocked with the generic critical.
    verdict = guard.before_tool_call("status", {"job": 7}, session="s", run_id="r",
                                     call_id="late")
    assert verdict.action == "block"
    assert verdict.detection is not None
    assert (verdict.detection.detector, verdict.detection.level) == ("generic_repeat", "critical")
    assert verdict.terminate  # the run already had its critical: a door would end it


async def test_an_async_burst_gathered_at_once_is_stopped() -> None:
    guard = make_guard()
    verdicts = await asyncio.gather(*(
        guard.abefore_tool_call("status", {"job": 7}, session="s", run_id="r", call_id=f"c{i}")
        for i in range(25)))
    assert sum(v.action != "block" for v in verdicts) == 20


async def test_a_gathered_decorated_tool_runs_at_most_20_times() -> None:
    guard = make_guard()
    ran = 0

    @guard.tool
    async def job_status(job: int) -> str:
        nonlocal ran
        ran += 1
        await asyncio.sleep(0.05)  # all 25 are admitted before the first one finishes
        return "running"

    outcomes = await asyncio.gather(*(job_status(7) for _ in range(25)), return_exceptions=True)
    assert ran == 20
    # The first critical blocks; the later ones in the same run are the terminal stop.
    assert sum(isinstance(o, LoopBlockedError) for o in outcomes) == 1
    assert sum(isinstance(o, LoopTerminatedError) for o in outcomes) == 4


def test_in_flight_calls_count_across_sqlite_connections(tmp_path: Path) -> None:
    # Two workers on one database: in flight is what the shared history says, not one process.
    db = tmp_path / "lw.db"
    with SQLiteStore(db) as one, SQLiteStore(db) as two:
        first, second = (LoopGuard(LoopDetectionConfig(enabled=True), store=s) for s in (one, two))
        assert "block" not in _burst(first, 20, prefix="a")
        assert _burst(second, 3, prefix="b") == ["block"] * 3


def test_in_flight_calls_count_across_redis_workers() -> None:
    url = os.environ.get("LOOPWARDEN_REDIS_URL")
    if not url:
        pytest.skip("set LOOPWARDEN_REDIS_URL to run the Redis case")
    from loopwarden.guard.stores.redis import RedisStore

    prefix = f"loopwarden-test-inflight-{os.getpid()}-{time.time_ns()}:"
    # A fresh prefix, and keys that expire soon after the test.
    stores = [RedisStore(url, prefix=prefix, idle_ttl=60) for _ in range(2)]
    try:
        first, second = (LoopGuard(LoopDetectionConfig(enabled=True), store=s) for s in stores)
        assert "block" not in _burst(first, 20, prefix="a")
        assert _burst(second, 3, prefix="b") == ["block"] * 3
    finally:
        for store in stores:
            store.close()


def test_sequential_hosts_are_unchanged() -> None:
    guard = make_guard()
    for i in range(20):
        assert _burst(guard, 1, prefix=f"s{i}-") != ["block"]
        guard.after_tool_call("status", {"job": 7}, session="s", run_id="r", call_id=f"s{i}-0",
                              result=f"progress {i}")  # results change: real progress
    assert guard.before_tool_call("status", {"job": 7}, session="s", run_id="r",
                                  call_id="next").action != "block"
    assert not any(r.pending for r in guard.history("s")[:-1])


def test_other_calls_and_other_runs_in_flight_do_not_count() -> None:
    guard = make_guard()
    for i in range(20):
        guard.before_tool_call("status", {"job": i}, session="s", run_id="r", call_id=f"o{i}")
    _burst(guard, 15, run="other")
    assert "block" not in _burst(guard, 20)


def test_calls_pending_longer_than_the_window_are_not_in_flight() -> None:
    # A host that never reports outcomes: its old calls stop counting once they are stale.
    guard = make_guard()
    guard.in_flight_seconds = 0.2
    _burst(guard, 15, prefix="old")
    time.sleep(0.3)
    assert "block" not in _burst(guard, 20, prefix="new")
    guard.in_flight_seconds = 0  # off: nothing is in flight
    assert "block" not in _burst(guard, 10, prefix="off")


def test_replayed_calls_are_never_in_flight() -> None:
    # observe_call feeds calls that already happened; one without an outcome is not running.
    guard = make_guard()
    verdicts = [guard.observe_call("status", {"job": 7}, session="s", run_id="r",
                                   call_id=f"t{i}")[0] for i in range(25)]
    assert [v.action for v in verdicts].count("block") == 0


def test_batches_count_earlier_turns_still_in_flight() -> None:
    guard = make_guard()
    _burst(guard, 19)
    batch = guard.admit_batch([ToolCall("status", {"job": 7}, call_id=f"b{i}") for i in range(2)],
                              session="s", run_id="r")
    assert batch.intervention is not None and batch.intervention.count == 20
    assert [v.action for v in batch.verdicts] == ["block", "block"]


def test_outcomes_of_blocked_bursts_still_attach_to_their_calls() -> None:
    guard = make_guard()
    actions = _burst(guard, 25)
    for i, action in enumerate(actions):
        if action != "block":
            guard.after_tool_call("status", {"job": 7}, session="s", run_id="r",
                                  call_id=f"c{i}", result=SAME)
    history = guard.history("s")
    assert sum(1 for r in history if r.result_hash is not None) == 20
    assert sum(1 for r in history if r.is_veto) == 5
    assert not any(r.pending for r in history)


# -- the proxy core, raw JSON-RPC ------------------------------------------------------------


def _core(**config: Any) -> McpLoopGuard:
    return McpLoopGuard(make_guard(**config), session="s")


def _call(rpc_id: Any, tool: str = "slow_status", args: Any = None, *,
          task: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": {} if args is None else args}
    if task is not None:
        params["task"] = task
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params}


def _task_request(rpc_id: Any, method: str, task_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": {"taskId": task_id}}


def _task(task_id: str, status: str = "working", **extra: Any) -> dict[str, Any]:
    return {"taskId": task_id, "status": status, "createdAt": "2026-12-01T10:00:00Z",
            "lastUpdatedAt": "2026-12-01T10:00:00Z", "ttl": 60000, **extra}


def _created(rpc_id: Any, task_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "result": {"task": _task(task_id)}}


def _result(rpc_id: Any, task_id: str | None = None, text: str = "same") -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if task_id is not None:
        result["_meta"] = {RELATED: {"taskId": task_id}}
    return {"jsonrpc": "2.0", "id": rpc_id, "result": result}


def _texts(message: dict[str, Any]) -> list[str]:
    return [b["text"] for b in message["result"]["content"] if b.get("type") == "text"]


async def test_core_a_raw_burst_forwards_20_of_25() -> None:
    core = _core()
    outcomes = [await core.from_client(_call(i)) for i in range(25)]
    forwarded = [n for n, (forward, _) in enumerate(outcomes) if forward is not None]
    assert forwarded == list(range(20))
    for forward, replies in outcomes[20:]:
        assert forward is None and replies[0]["result"]["isError"] is True
        assert replies[0]["result"]["_meta"]["loopwarden/blocked"]["deniedReason"] == "tool-loop"
    for n in forwarded:  # the answers still record their outcomes
        await core.from_upstream(_result(n))
    assert core.in_flight == 0
    assert not any(r.pending for r in core.guard.history("s"))


async def _task_round(core: McpLoopGuard, n: int, text: str = "same") -> dict[str, Any]:
    """One task-augmented call: create, then fetch the result. Returns what the client got
    for the result (or the blocked answer to the call)."""
    forward, replies = await core.from_client(_call(f"c{n}", task={"ttl": 60000}))
    if forward is None:
        (blocked,) = replies
        return blocked
    task_id = f"task-{n}"
    created = _created(f"c{n}", task_id)
    assert await core.from_upstream(created) is created  # the handle passes untouched
    fetch = _task_request(f"r{n}", "tasks/result", task_id)
    assert await core.from_client(fetch) == (fetch, [])
    out: dict[str, Any] = await core.from_upstream(_result(f"r{n}", task_id, text))
    return out


async def test_core_task_results_are_linked_back_to_their_calls() -> None:
    core = _core()
    outs = [await _task_round(core, n) for n in range(1, 23)]
    history = core.guard.history("s")
    assert all(r.result_hash is not None for r in history[:20])
    assert len({r.result_hash for r in history[:20]}) == 1
    # The warned call's warning reaches the model on its tasks/result answer.
    assert [n for n, o in enumerate(outs, 1) if len(_texts(o)) > 1] == [11]
    assert _texts(outs[10])[-1].startswith("[System note: Tool-loop warning after 10")
    assert outs[10]["result"]["_meta"][RELATED] == {"taskId": "task-11"}
    # The 21st task call is answered at once with the blocked result: no task is created.
    blocked = outs[20]
    assert blocked["id"] == "c21" and blocked["result"]["isError"] is True
    assert "task" not in blocked["result"]
    assert _texts(blocked)[0].startswith("CRITICAL: Called slow_status with identical outcomes 20")
    assert not core.awaiting()


async def test_core_progressing_tasks_are_never_blocked() -> None:
    core = _core()
    outs = [await _task_round(core, n, text=f"{n}% done") for n in range(1, 31)]
    assert not any(o["result"].get("isError") for o in outs)


async def test_core_task_failure_and_cancellation() -> None:
    core = _core(warning_threshold=2, critical_threshold=3, global_circuit_breaker_threshold=4)
    # A failure seen in tasks/get is the call's outcome; tasks/result's error is not recorded
    # twice and carries the call's warning.
    for n in range(1, 4):
        await core.from_client(_call(f"c{n}", "flaky", task={}))
        await core.from_upstream(_created(f"c{n}", f"t{n}"))
        await core.from_client(_task_request(f"g{n}", "tasks/get", f"t{n}"))
        status = {"jsonrpc": "2.0", "id": f"g{n}",
                  "result": _task(f"t{n}", "failed", statusMessage="backend unavailable")}
        assert await core.from_upstream(status) is status
        await core.from_client(_task_request(f"r{n}", "tasks/result", f"t{n}"))
        error = {"jsonrpc": "2.0", "id": f"r{n}",
                 "error": {"code": -32603, "message": "backend unavailable"}}
        out = await core.from_upstream(error)
        assert out["error"]["message"].startswith("backend unavailable")
        assert ("[System note" in out["error"]["message"]) == (n == 3)
    history = core.guard.history("s")
    assert len(history) == 3 and not any(r.pending for r in history)
    assert len({r.result_hash for r in history}) == 1
    # Identical failures: the next task call is blocked before it reaches the upstream.
    forward, replies = await core.from_client(_call("c4", "flaky", task={}))
    assert forward is None and replies[0]["result"]["isError"] is True

    # A failure announced by notifications/tasks/status counts too.
    core = _core()
    await core.from_client(_call("n1", "flaky", task={}))
    await core.from_upstream(_created("n1", "tn"))
    note = {"jsonrpc": "2.0", "method": "notifications/tasks/status",
            "params": _task("tn", "failed", statusMessage="backend unavailable")}
    assert await core.from_upstream(note) is note
    (record,) = core.guard.history("s")
    assert record.result_hash is not None

    # A failed cancel (the task had finished) is not an outcome; the result still is.
    core = _core()
    await core.from_client(_call("f1", task={}))
    await core.from_upstream(_created("f1", "tf"))
    await core.from_client(_task_request("k0", "tasks/cancel", "tf"))
    refused = {"jsonrpc": "2.0", "id": "k0",
               "error": {"code": -32602, "message": "task tf is already completed"}}
    assert await core.from_upstream(refused) is refused
    assert core.guard.history("s")[0].pending
    await core.from_client(_task_request("r0", "tasks/result", "tf"))
    await core.from_upstream(_result("r0", "tf"))
    assert core.guard.history("s")[0].result_hash is not None and not core.awaiting()

    # A cancelled task records nothing and forgets the link.
    core = _core()
    await core.from_client(_call("x1", task={}))
    await core.from_upstream(_created("x1", "tx"))
    await core.from_client(_task_request("k1", "tasks/cancel", "tx"))
    cancelled = {"jsonrpc": "2.0", "id": "k1", "result": _task("tx", "cancelled")}
    assert await core.from_upstream(cancelled) is cancelled
    assert not core.awaiting()
    (record,) = core.guard.history("s")
    assert record.pending


async def test_core_tasks_of_unknown_ids_pass_through() -> None:
    core = _core()
    fetch = _task_request(1, "tasks/result", "not-ours")
    assert await core.from_client(fetch) == (fetch, [])
    answer = _result(1, "not-ours")
    assert await core.from_upstream(answer) is answer
    assert core.guard.history("s") == []


# -- through the proxy process ---------------------------------------------------------------


def _env(**extra: str) -> dict[str, str]:
    """The child runs in HERE: a relative PYTHONPATH (``src``) is made absolute so it imports
    the loopwarden under test."""
    env = {**os.environ, **extra}
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    return env


def _proxy_argv() -> list[str]:
    return [sys.executable, "-m", "loopwarden.cli", "mcp-proxy", "--",
            sys.executable, str(TASK_SERVER)]


@asynccontextmanager
async def _session(delay: str) -> AsyncIterator[ClientSession]:
    argv = _proxy_argv()
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(HERE),
                                   env=_env(SLOW_SECONDS=delay))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _dump(result: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


async def test_proxy_a_burst_of_25_concurrent_calls_reaches_the_server_at_most_20_times() -> None:
    async with _session(delay="1.0") as session:
        results = await asyncio.wait_for(asyncio.gather(*(
            session.call_tool("slow_status", {}) for _ in range(25))), timeout=120)
        dumped = [_dump(r) for r in results]
        ran = int((await session.call_tool("calls", {"tool": "slow_status"})).content[0].text)
    blocked = [d for d in dumped if d.get("isError")]
    assert ran <= 20
    assert ran == 20 and len(blocked) == 5
    assert all(b["_meta"]["loopwarden/blocked"]["deniedReason"] == "tool-loop" for b in blocked)
    answered = [d for d in dumped if not d.get("isError")]
    assert all(d["content"][0]["text"] == "job 7: running (0% done)" for d in answered)


class RawClient:
    """JSON-RPC lines to and from the proxy process, each read with a timeout."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.waiting: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.notifications: list[dict[str, Any]] = []
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            message = json.loads(line)
            if "id" in message and "method" not in message:
                self.waiting.pop(message["id"]).set_result(message)
            else:
                self.notifications.append(message)

    async def request(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        future = self.waiting[message["id"]] = asyncio.get_running_loop().create_future()
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        await self.proc.stdin.drain()
        return await asyncio.wait_for(future, timeout=60)


@asynccontextmanager
async def _raw_proxy(delay: str) -> AsyncIterator[RawClient]:
    argv = _proxy_argv()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=HERE,
        env=_env(SLOW_SECONDS=delay))
    client = RawClient(proc)
    try:
        await client.request({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                         "clientInfo": {"name": "raw", "version": "1"}}})
        yield client
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), timeout=30)
        finally:
            if proc.returncode is None:
                proc.kill()
            client.reader.cancel()


async def test_proxy_guards_task_augmented_calls_end_to_end() -> None:
    async with _raw_proxy(delay="0.01") as client:
        answers = []
        for n in range(1, 23):
            created = await client.request(_call(f"c{n}", task={"ttl": 60000}))
            if "task" not in created["result"]:
                answers.append(created)
                continue
            task_id = created["result"]["task"]["taskId"]
            answers.append(await client.request(_task_request(f"r{n}", "tasks/result", task_id)))
        ran = await client.request(_call("count", "calls", {"tool": "slow_status"}))
    assert int(_texts(ran)[0]) == 20
    assert [n for n, a in enumerate(answers, 1) if a["result"].get("isError")] == [21, 22]
    assert "[System note: Tool-loop warning after 10" in _texts(answers[10])[-1]
    assert answers[20]["id"] == "c21"  # answered at once, as the call's own result


async def test_proxy_a_concurrent_burst_of_task_calls_is_stopped_too() -> None:
    async with _raw_proxy(delay="1.0") as client:
        created = await asyncio.gather(*(client.request(_call(f"c{n}", task={}))
                                         for n in range(25)))
        blocked = [c for c in created if "task" not in c["result"]]
        results = await asyncio.gather(*(
            client.request(_task_request(f"r{n}", "tasks/result", c["result"]["task"]["taskId"]))
            for n, c in enumerate(created) if "task" in c["result"]))
        ran = await client.request(_call("count", "calls", {"tool": "slow_status"}))
    assert len(blocked) == 5 and all(b["result"]["isError"] for b in blocked)
    assert int(_texts(ran)[0]) == 20
    assert all(not r["result"].get("isError") for r in results)
