"""The MCP proxy: a real MCP client (the ``mcp`` SDK) talks over stdio to ``loopwarden mcp-proxy``,
which fronts the small real server in ``mcp_echo_server.py``; plus the message translation
(:class:`McpLoopGuard`) driven with raw JSON-RPC messages for the cases a client library will not
produce on demand (reused ids, batches, cancellations, input-required retries)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from loopwarden import LoopDetectionConfig, LoopGuard
from loopwarden.cli.mcp_proxy import proxy_config
from loopwarden.integrations.mcp_proxy import McpLoopGuard, blocked_response

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

HERE = Path(__file__).resolve().parent
ECHO_SERVER = HERE / "mcp_echo_server.py"
NOTE_11 = ("[System note: Tool-loop warning after 10 repeated calls. Change your approach or "
           "stop if you are not making progress.]")


def _proxy_argv(*options: str, server: list[str] | None = None) -> list[str]:
    upstream = server or [sys.executable, str(ECHO_SERVER)]
    return [sys.executable, "-m", "loopwarden.cli", "mcp-proxy", *options, "--", *upstream]


def _child_env() -> dict[str, str]:
    """The SDK hands a server only a few variables (PATH, HOME...): PYTHONPATH (made absolute,
    the child runs in HERE) keeps the proxy on the loopwarden under test."""
    env = dict(os.environ)
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    return env


@asynccontextmanager
async def _connect(argv: list[str]) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(HERE),
                                   env=_child_env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def _call(session: ClientSession, tool: str, args: dict[str, Any],
                meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The tool result as it went over the wire (camelCase), whatever the SDK's version."""
    if meta is None:
        result = await session.call_tool(tool, args)
    else:
        result = await session.call_tool(tool, args, meta=meta)
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


def _texts(result: dict[str, Any]) -> list[str]:
    return [block["text"] for block in result["content"] if block.get("type") == "text"]


async def _ran(session: ClientSession, tool: str) -> int:
    result = await _call(session, "calls", {"tool": tool})
    return int(_texts(result)[0])


async def _tools(session: ClientSession) -> list[dict[str, Any]]:
    listing = await session.list_tools()
    return [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listing.tools]


# -- end to end ------------------------------------------------------------------------------


async def test_looping_poll_is_warned_at_11_and_blocked_at_21() -> None:
    async with _connect([sys.executable, str(ECHO_SERVER)]) as direct:
        upstream_tools = await _tools(direct)

    async with _connect(_proxy_argv()) as session:
        assert await _tools(session) == upstream_tools  # mirrored, schemas included
        assert {t["name"] for t in upstream_tools} == {"check_job", "echo", "fail", "calls"}

        results = [await _call(session, "check_job", {"job_id": "build-42"}) for _ in range(21)]

        for n, result in enumerate(results[:20], start=1):
            assert result.get("isError") is not True, n
            assert _texts(result)[0] == "job build-42: running (0% done)"
            assert (NOTE_11 in _texts(result)) == (n == 11), n
        assert _texts(results[10]) == ["job build-42: running (0% done)", NOTE_11]
        # The structured result is the upstream's own; only the model-facing text gains a note.
        assert results[10]["structuredContent"] == results[0]["structuredContent"]

        blocked = results[20]
        assert blocked["isError"] is True
        assert _texts(blocked) == [
            "CRITICAL: Called check_job with identical outcomes 20 times. Session execution "
            "blocked to prevent runaway loops."
        ]
        assert blocked["_meta"]["loopwarden/blocked"]["deniedReason"] == "tool-loop"
        assert blocked["_meta"]["loopwarden/blocked"]["count"] == 20
        assert await _ran(session, "check_job") == 20  # the 21st never reached the server

        # Other work goes on: a different tool is neither warned nor blocked.
        echoed = await _call(session, "echo", {"text": "hello"})
        assert _texts(echoed) == ["hello"] and echoed.get("isError") is not True


async def test_modern_protocol_client_gets_the_same_guard() -> None:
    # mcp 2's high-level Client negotiates the 2026-07-28 per-request protocol when it can.
    client_cls = getattr(mcp, "Client", None)
    if client_cls is None:
        pytest.skip("this mcp SDK has no high-level Client")
    argv = _proxy_argv()
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(HERE),
                                   env=_child_env())
    async with client_cls(params) as client:
        results = [await client.call_tool("check_job", {"job_id": "x"}) for _ in range(21)]
        ran = await client.call_tool("calls", {"tool": "check_job"})
    dumped = [r.model_dump(by_alias=True, mode="json", exclude_none=True) for r in results]
    assert [n for n, r in enumerate(dumped, 1) if NOTE_11 in _texts(r)] == [11]
    assert [n for n, r in enumerate(dumped, 1) if r.get("isError")] == [21]
    assert _texts(ran.model_dump(by_alias=True, mode="json"))[0] == "20"


async def test_run_id_from_meta_scopes_detection() -> None:
    async with _connect(_proxy_argv()) as session:
        first = [await _call(session, "check_job", {"job_id": "a"}, meta={"runId": "run-1"})
                 for _ in range(12)]
        second = [await _call(session, "check_job", {"job_id": "a"}, meta={"runId": "run-2"})
                  for _ in range(11)]

    warned_first = [n for n, r in enumerate(first, 1) if NOTE_11 in _texts(r)]
    warned_second = [n for n, r in enumerate(second, 1) if NOTE_11 in _texts(r)]
    assert warned_first == [11]
    assert warned_second == [11]  # a new run starts counting afresh


async def test_config_thresholds_and_failures_are_guarded(tmp_path: Path) -> None:
    config = tmp_path / "openclaw.json5"
    config.write_text("{tools: {loopDetection: {warningThreshold: 3, criticalThreshold: 5, "
                      "globalCircuitBreakerThreshold: 8}}}")
    async with _connect(_proxy_argv("--config", str(config))) as session:
        results = [await _call(session, "fail", {"reason": "disk full"}) for _ in range(6)]
        ran = await _ran(session, "fail")

    assert all(r["isError"] is True for r in results)
    assert ["disk full" in _texts(r)[0] for r in results] == [True] * 5 + [False]
    note = ("[System note: Tool-loop warning after 3 repeated calls. Change your approach or "
            "stop if you are not making progress.]")
    assert [note in _texts(r) for r in results] == [False, False, False, True, False, False]
    assert _texts(results[5])[0].startswith("CRITICAL: Called fail with identical outcomes 5 times")
    assert ran == 5


def test_proxy_exits_with_the_upstream() -> None:
    # The client keeps stdin open; the proxy must still end when its server dies.
    argv = _proxy_argv(server=[sys.executable, "-c", "import sys; sys.exit(3)"])
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=HERE, env=_child_env())
    try:
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert code == 3


def test_bad_config_and_missing_command_are_reported(tmp_path: Path) -> None:
    config = tmp_path / "openclaw.json"
    config.write_text('{"tools": {"loopDetection": {"warningThreshold": 0}}}')
    bad = subprocess.run(_proxy_argv("--config", str(config)), capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=60, env=_child_env())
    assert bad.returncode == 2
    assert "warningThreshold" in bad.stderr and bad.stdout == ""

    missing = subprocess.run(_proxy_argv(server=[str(tmp_path / "no-such-server")]),
                             capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60,
                             env=_child_env())
    assert missing.returncode == 127
    assert "cannot start" in missing.stderr and missing.stdout == ""


def test_proxy_config_turns_detection_on_unless_disabled(tmp_path: Path) -> None:
    assert proxy_config(None, None).enabled is True
    unset = tmp_path / "unset.json"
    unset.write_text('{"tools": {"loopDetection": {"warningThreshold": 4}}}')
    assert proxy_config(unset, None).enabled is True
    assert proxy_config(unset, None).warning_threshold == 4
    off = tmp_path / "off.json"
    off.write_text('{"tools": {"loopDetection": {"enabled": false}}}')
    assert proxy_config(off, None).enabled is False


# -- the message translation -----------------------------------------------------------------


def _core(**config: Any) -> McpLoopGuard:
    guard = LoopGuard(LoopDetectionConfig(enabled=True, **config))
    guard.sinks.clear()
    return McpLoopGuard(guard, session="s")


def _request(rpc_id: Any, tool: str = "check_job", args: Any = None,
             meta: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": {"job_id": "a"} if args is None else args}
    if meta is not None:
        params["_meta"] = meta
    params.update(extra)
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params}


def _response(rpc_id: Any, text: str = "running", **extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id,
            "result": {"content": [{"type": "text", "text": text}], **extra}}


async def _round_trip(core: McpLoopGuard, request: dict[str, Any],
                      response: dict[str, Any]) -> dict[str, Any]:
    forward, replies = await core.from_client(request)
    if forward is None:
        assert len(replies) == 1
        return replies[0]
    assert forward is request and replies == []
    out: dict[str, Any] = await core.from_upstream(response)
    return out


async def test_reused_request_ids_still_count_every_call() -> None:
    core = _core()
    outs = [await _round_trip(core, _request(1), _response(1)) for _ in range(21)]
    assert [n for n, o in enumerate(outs, 1) if NOTE_11 in _texts(o["result"])] == [11]
    assert outs[20]["result"]["isError"] is True and outs[20]["id"] == 1
    assert core.in_flight == 0


async def test_ids_from_meta_reach_the_guard() -> None:
    core = _core()
    await _round_trip(core, _request("a", meta={"runId": "r-7", "toolCallId": "toolu_1"}),
                      _response("a"))
    await _round_trip(core, _request("b"), _response("b"))
    first, second = core.guard.history("s")
    assert (first.run_id, first.call_id) == ("r-7", "toolu_1")
    assert second.run_id is None and second.call_id is not None
    assert first.result_hash is not None and second.result_hash is not None


async def test_other_traffic_passes_through_untouched() -> None:
    core = _core()
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "file:///x"}},
    ):
        assert await core.from_client(message) == (message, [])
        assert (await core.from_client(message))[0] is message
    upstream = [
        {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}},
        {"jsonrpc": "2.0", "id": 9, "method": "sampling/createMessage", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}},
    ]
    for message in upstream:
        assert await core.from_upstream(message) is message
    assert core.guard.history("s") == []


async def test_error_responses_are_recorded_and_carry_the_warning() -> None:
    core = _core(warning_threshold=2, critical_threshold=4, global_circuit_breaker_threshold=5)
    outs = []
    for n in range(1, 6):
        error = {"jsonrpc": "2.0", "id": n, "error": {"code": -32603, "message": "upstream down"}}
        outs.append(await _round_trip(core, _request(n), error))
    assert outs[0]["error"]["message"] == "upstream down"
    assert outs[2]["error"]["message"].startswith("upstream down\n\n[System note: Tool-loop")
    assert outs[4]["result"]["isError"] is True  # identical failures: blocked, not forwarded
    history = core.guard.history("s")
    assert [r.result_hash is not None for r in history] == [True] * 4 + [False]
    assert history[4].is_veto


async def test_batches_forward_only_what_is_allowed() -> None:
    core = _core(warning_threshold=2, critical_threshold=3, global_circuit_breaker_threshold=4)
    for n in range(3):
        await _round_trip(core, _request(n), _response(n))
    batch = [_request(10), _request(11, tool="echo", args={"text": "x"}),
             {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    forward, replies = await core.from_client(batch)
    assert forward == batch[1:]
    # JSON-RPC answers a batch with one array: the blocked call's response waits for the
    # upstream's array and is merged into it, in the batch's order.
    assert replies == []

    answer = [_response(11, "x")]
    merged = await core.from_upstream(answer)
    assert [r["id"] for r in merged] == [10, 11]
    assert merged[0]["result"]["isError"] is True and merged[1] == answer[0]


async def test_cancelled_and_input_required_calls() -> None:
    core = _core()
    forward, _ = await core.from_client(_request(1))
    assert forward is not None and core.in_flight == 1
    await core.from_client({"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": 1, "reason": "user"}})
    assert core.in_flight == 0

    # An upstream that asks for input first: the retry with the answers is the same call.
    await core.from_client(_request(2))
    asked = {"jsonrpc": "2.0", "id": 2,
             "result": {"resultType": "input_required", "requestState": "opaque"}}
    assert await core.from_upstream(asked) is asked
    await _round_trip(core, _request(3, requestState="opaque"), _response(3))
    history = core.guard.history("s")
    assert len(history) == 2  # the cancelled call and the answered one, not three
    assert history[-1].result_hash is not None


def test_blocked_result_is_a_plain_mcp_tool_result() -> None:
    # What a client receives must parse as the SDK's own CallToolResult.
    guard = LoopGuard(LoopDetectionConfig(enabled=True, warning_threshold=1, critical_threshold=2,
                                          global_circuit_breaker_threshold=3))
    guard.sinks.clear()
    for _ in range(2):
        guard.before_tool_call("t", {}, session="s")
        guard.after_tool_call("t", {}, session="s", result="same")
    verdict = guard.before_tool_call("t", {}, session="s")
    assert verdict.action == "block"
    response = blocked_response(5, verdict)
    parsed = mcp.types.CallToolResult.model_validate(response["result"])
    dumped = parsed.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert dumped["isError"] is True
    assert dumped["content"][0]["text"] == verdict.message
    assert json.loads(json.dumps(response))["id"] == 5

    # Each protocol version's own wire schema accepts it too (mcp 2 validates per version).
    methods = pytest.importorskip("mcp_types.methods")
    for version in ("2025-06-18", "2025-11-25", "2026-07-28"):
        methods.validate_server_result("tools/call", version, response["result"])
