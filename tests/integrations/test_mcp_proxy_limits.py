"""The MCP proxy's limits (issue 24, items 8, 9 and the proxy part of 11).

- 8: the calls awaiting the server's answer are bounded in count and bytes; the oldest is
  evicted with a log line and a stat, and an answer with an id of another type leaks nothing.
- 9: a client line the proxy cannot read never reaches the server unguarded: a BOM is dropped
  and the call guarded, 1,000-deep arguments are read and guarded, invalid UTF-8 is answered
  with a parse error. 25 identical such calls against real servers are stopped as the
  thresholds say.
- 11: a proxy killed outright (SIGKILL) takes its server along on Linux, even one that ignores
  end of input and SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from test_mcp_proxy_hostile_traffic import (
    ECHO_SERVER,
    Proxy,
    _alive,
    _call,
    _config,
    _env,
    _pids,
    _stubborn,
    _texts,
    _wait_gone,
    proxies,
)

from loopwarden import LoopDetectionConfig, LoopGuard
from loopwarden.integrations.mcp_proxy import McpLoopGuard

__all__ = ["proxies"]  # the fixture, re-used from the hostile-traffic tests

# A lenient JSON-RPC server: it reads what a strict parser would not (a BOM, invalid UTF-8,
# nesting of any depth) and runs every tools/call; "ran" reports how many calls it ran. The
# kind of server that turned the proxy's unread lines into real tool runs.
LENIENT_SERVER = r'''
import json, sys
sys.setrecursionlimit(100000)
ran = 0
for raw in sys.stdin.buffer:
    text = raw.decode("utf-8", "surrogateescape").lstrip("\ufeff")
    try:
        message = json.loads(text)
    except ValueError:
        continue
    if not isinstance(message, dict) or "id" not in message:
        continue
    name = (message.get("params") or {}).get("name")
    if name == "ran":
        text = str(ran)
    else:
        ran += 1
        text = "same"
    answer = {"jsonrpc": "2.0", "id": message["id"],
              "result": {"content": [{"type": "text", "text": text}]}}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
'''

# Answers nothing but "initialize"-free pings; reads to the end of its input, then exits.
SILENT_SERVER = r'''
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "ping":
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}) + "\n")
        sys.stdout.flush()
'''

# Answers every call with its id turned into a string ("1" for 1).
RETYPING_SERVER = r'''
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    answer = {"jsonrpc": "2.0", "id": str(message["id"]),
              "result": {"content": [{"type": "text", "text": "ok"}]}}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
'''

DEEP_ARGS = b'{"a":' + b"[" * 1000 + b"]" * 1000 + b"}"


def _guard() -> LoopGuard:
    guard = LoopGuard(LoopDetectionConfig(enabled=True))
    guard.sinks.clear()
    return guard


def _raw_call(rpc_id: int, args: bytes, tool: bytes = b"t", prefix: bytes = b"") -> bytes:
    return (prefix + b'{"jsonrpc":"2.0","id":' + str(rpc_id).encode()
            + b',"method":"tools/call","params":{"name":"' + tool + b'","arguments":' + args
            + b"}}\n")


# -- 8: bounded pending calls ----------------------------------------------------------------


async def test_unanswered_calls_keep_the_pending_calls_bounded() -> None:
    calls = 10_000  # over 150 times the bound
    core = McpLoopGuard(_guard(), session="s", max_pending_calls=64)
    for n in range(calls):
        forward, replies = await core.from_client(_call(n, "read", {"path": f"f{n}"}))
        assert forward is not None and replies == []
        assert core.in_flight <= 64
    assert core.in_flight == 64
    assert core.stats.evicted_calls == calls - 64
    # The newest are kept: an answer to one of them is still matched and recorded.
    recorded = core.guard.stats.outcomes
    await core.from_upstream({"jsonrpc": "2.0", "id": calls - 1,
                              "result": {"content": [{"type": "text", "text": "x"}]}})
    assert core.guard.stats.outcomes == recorded + 1 and core.in_flight == 63
    # An evicted one's late answer passes through untouched, and records nothing.
    late = {"jsonrpc": "2.0", "id": 5, "result": {"content": []}}
    assert await core.from_upstream(late) is late
    assert core.guard.stats.outcomes == recorded + 1


async def test_the_byte_bound_evicts_the_oldest_calls() -> None:
    core = McpLoopGuard(_guard(), session="s", max_pending_bytes=10_000)
    for n in range(100):
        await core.from_client(_call(n, "write", {"text": "x" * 1000, "n": n}), size=1100)
    assert core.in_flight == 9 and core.in_flight_bytes == 9 * 1100
    assert core.stats.evicted_calls == 91 and core.stats.evicted_bytes == 91 * 1100
    # Without a size (a library caller), the request's JSON length is counted.
    measured = McpLoopGuard(_guard(), session="s", max_pending_bytes=10_000)
    await measured.from_client(_call(1, "write", {"text": "x" * 1000}))
    assert 1000 < measured.in_flight_bytes < 1200


async def test_an_answer_with_an_id_of_another_type_is_logged_and_evicted_in_time(
        caplog: pytest.LogCaptureFixture) -> None:
    core = McpLoopGuard(_guard(), session="s", max_pending_calls=4)
    await core.from_client(_call(1, "read", {"path": "a"}))
    answer = {"jsonrpc": "2.0", "id": "1", "result": {"content": []}}
    with caplog.at_level("WARNING", logger="loopwarden.mcp"):
        assert await core.from_upstream(answer) is answer  # "1" is not 1: no match
    assert core.stats.mismatched_ids == 1 and core.in_flight == 1
    assert 'answered id "1", but the call was sent with id 1' in caplog.text
    for n in range(2, 6):
        await core.from_client(_call(n, "read", {"path": f"f{n}"}))
    assert core.in_flight == 4 and core.stats.evicted_calls == 1  # call 1 went first


async def test_an_evicted_call_completes_its_batch() -> None:
    guard = LoopGuard(LoopDetectionConfig(enabled=True, warning_threshold=2,
                                          critical_threshold=3,
                                          global_circuit_breaker_threshold=4))
    guard.sinks.clear()
    core = McpLoopGuard(guard, session="s", max_pending_calls=2)
    for n in range(3):  # the next identical call is blocked
        await core.from_client(_call(f"r{n}"))
        await core.from_upstream({"jsonrpc": "2.0", "id": f"r{n}",
                                  "result": {"content": [{"type": "text", "text": "s"}]}})
    forward, replies = await core.from_client([_call(1), _call(2, "other")])
    assert [m["id"] for m in forward] == [2] and replies == []
    # Call 2 is evicted by newer ones: the batch's blocked answer must not wait for it forever.
    _, replies = await core.from_client(_call(3, "x"))
    assert replies == []
    _, replies = await core.from_client(_call(4, "y"))
    assert [[m["id"] for m in r] for r in replies] == [[1]]


@pytest.mark.integration
def test_the_proxy_bounds_what_a_silent_server_leaves_pending(proxies: list[Proxy]) -> None:
    proxy = Proxy("--max-pending-calls", "8", "--max-pending-bytes", "64K",
                  server=[sys.executable, "-c", SILENT_SERVER])
    proxies.append(proxy)
    for n in range(200):
        proxy.send(_call(n, "read", {"path": f"f{n}"}))
    proxy.send({"jsonrpc": "2.0", "id": "p", "method": "ping"})
    assert proxy.recv()["id"] == "p"  # every call before it was read and guarded
    assert proxy.close() == 0
    log = proxy.stderr
    # Logged at the 1st, 2nd, 4th ... 128th eviction, then summed up at the end.
    assert log.count("evicted the oldest call awaiting the server's answer") == 8
    assert "192 calls evicted unanswered" in log
    assert "f1" not in log  # argument text never reaches the log


@pytest.mark.integration
def test_a_server_that_retypes_ids_is_reported(proxies: list[Proxy]) -> None:
    proxy = Proxy("--max-pending-calls", "4", server=[sys.executable, "-c", RETYPING_SERVER])
    proxies.append(proxy)
    for n in range(10):
        assert proxy.call(n, "read", {"path": f"f{n}"})["id"] == str(n)
    assert proxy.close() == 0
    assert "10 answers with an id of another type" in proxy.stderr
    assert "6 calls evicted unanswered" in proxy.stderr


def test_the_bound_options_are_checked() -> None:
    for option, value in (("--max-pending-calls", "0"), ("--max-pending-bytes", "lots")):
        import subprocess

        bad = subprocess.run([sys.executable, "-m", "loopwarden.cli", "mcp-proxy", option, value,
                              "--", sys.executable, "-c", ""], capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, timeout=60, env=_env())
        assert bad.returncode == 2, (option, bad.stderr)


# -- 9: lines the proxy could not read -------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["bom", "deep", "invalid-utf8"])
def test_25_identical_unreadable_calls_are_stopped_by_a_lenient_server(
        tmp_path: Path, proxies: list[Proxy], kind: str) -> None:
    proxy = Proxy("--config", _config(tmp_path), server=[sys.executable, "-c", LENIENT_SERVER])
    proxies.append(proxy)
    line = {"bom": _raw_call(0, b'{"x":1}', prefix=b"\xef\xbb\xbf"),
            "deep": _raw_call(0, DEEP_ARGS),
            "invalid-utf8": _raw_call(0, b'{"x":"\xff"}')}[kind]
    answers = []
    for n in range(1, 26):
        proxy.write(line.replace(b'"id":0', b'"id":%d' % n))
        answers.append(proxy.recv())
    assert [a["id"] for a in answers] == list(range(1, 26))
    ran = int(_texts(proxy.call(99, "ran"))[0])
    if kind == "invalid-utf8":
        assert ran == 0  # answered with parse errors; the server never saw one
        assert all(a["error"]["code"] == -32700 for a in answers)
    else:
        # warning 2, critical 3: three ran (the third warned), the rest were blocked.
        assert ran == 3
        assert "Tool-loop warning" in _texts(answers[2])[-1]
        assert all(a["result"]["isError"] is True for a in answers[3:])
    assert proxy.close() == 0


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["bom", "invalid-utf8"])
async def test_25_identical_unreadable_calls_against_the_sdk_server(tmp_path: Path,
                                                                    kind: str) -> None:
    # The MCP SDK's own server, driven over raw lines after a proper initialize.
    pytest.importorskip("mcp")
    import asyncio

    argv = [sys.executable, "-m", "loopwarden.cli", "mcp-proxy", "--config", _config(tmp_path),
            "--", sys.executable, str(ECHO_SERVER)]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env=_env())
    assert proc.stdin is not None and proc.stdout is not None

    async def ask(data: bytes) -> Any:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(data)
        await proc.stdin.drain()
        return json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))

    try:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}
        assert "result" in await ask(json.dumps(init).encode() + b"\n")
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        text = b'"\xff"' if kind == "invalid-utf8" else b'"hi"'
        prefix = b"\xef\xbb\xbf" if kind == "bom" else b""
        answers = [await ask(_raw_call(n, b'{"text":' + text + b"}", b"echo", prefix))
                   for n in range(1, 26)]
        ran = await ask(json.dumps(_call(99, "calls", {"tool": "echo"})).encode() + b"\n")
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    assert [a["id"] for a in answers] == list(range(1, 26))
    if kind == "invalid-utf8":
        assert all(a["error"]["code"] == -32700 for a in answers)
        assert _texts(ran) == ["0"]
    else:
        assert _texts(ran) == ["3"]
        assert all(a["result"]["isError"] is True for a in answers[3:])


# -- 11: a proxy killed outright -------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's parent-death signal")
def test_a_sigkilled_proxy_takes_its_server_along(tmp_path: Path,
                                                  proxies: list[Proxy]) -> None:
    server, pidfile = _stubborn(tmp_path, "ignore-term")  # ignores EOF and SIGTERM
    proxy = Proxy(server=server)
    proxies.append(proxy)
    server_pid, grandchild = _pids(pidfile, proxy)
    try:
        proxy.proc.kill()
        proxy.proc.wait(timeout=15)
        assert _wait_gone([server_pid]) == [], "the server outlived its SIGKILLed proxy"
    finally:
        for pid in (server_pid, grandchild):  # the server's own child is not ours to reach
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
