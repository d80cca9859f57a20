"""The MCP proxy under hostile and broken traffic, driven as a subprocess over stdio.

A real MCP client (the ``mcp`` SDK) where one fits; raw JSON-RPC lines for what no client
library produces on demand: lone surrogates, messages nested 1,000 deep, invalid UTF-8, lines of
hundreds of MiB or without a newline, batches, signals. Every test that could crash or hang the
proxy reads its answers with a timeout, so a proxy that dies or stalls fails the test.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ECHO_SERVER = HERE / "mcp_echo_server.py"
POSIX = os.name == "posix"

# A minimal JSON-RPC server that reports what it received, byte for byte (sha256 and size), in
# a top-level "server" member the proxy passes through, and answers a few tools specially.
RAW_SERVER = r'''
import hashlib, json, sys
out = sys.stdout.buffer
seen = 0

def send(data):
    out.write(data + b"\n")
    out.flush()

def report(line):
    return {"seen": seen, "size": len(line), "sha256": hashlib.sha256(line).hexdigest()}

def write_big(prefix, n, suffix):
    out.write(prefix)
    piece = b"x" * (1 << 20)
    while n > 0:
        out.write(piece[:n])
        n -= len(piece)
    out.write(suffix + b"\n")
    out.flush()

def answer(req, line):
    if "id" not in req or "method" not in req:
        return None
    rid = json.dumps(req["id"]).encode()
    params = req.get("params") or {}
    name = params.get("name") if req["method"] == "tools/call" else None
    args = params.get("arguments") or {}
    if name == "deep":  # a result nested 1,000 deep (json.dumps itself could not write it)
        return (b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"content":[],"deep":'
                + b"[" * 1000 + b"]" * 1000 + b"}}")
    if name == "cesu":  # a surrogate encoded as UTF-8 bytes: not valid UTF-8
        return (b'{"jsonrpc":"2.0","id":' + rid
                + b',"result":{"content":[{"type":"text","text":"\xed\xa0\xbd"}]}}')
    if name == "big":
        write_big(b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"content":[{"type":"text",'
                  b'"text":"', args["bytes"], b'"}]}}')
        return None
    if name == "notify_big":
        write_big(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"',
                  args["bytes"], b'"}}')
    text = args.get("text", "same") if isinstance(args, dict) else "same"
    return json.dumps({"jsonrpc": "2.0", "id": req["id"], "server": report(line),
                       "result": {"content": [{"type": "text", "text": text}]}}).encode()

for line in sys.stdin.buffer:
    seen += 1
    try:
        message = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):
        send(json.dumps({"jsonrpc": "2.0", "method": "unparsed", "params": report(line)}).encode())
        continue
    if isinstance(message, list):
        answers = [answer(m, line) for m in message if isinstance(m, dict)]
        answers = [a for a in answers if a is not None]
        if answers:
            send(b"[" + b",".join(answers) + b"]")
    elif isinstance(message, dict):
        reply = answer(message, line)
        if reply is not None:
            send(reply)
'''

# A server that never answers and ignores end-of-stdin; it starts a child of its own, and
# writes both pids. With "ignore-term" it also ignores SIGTERM.
STUBBORN_SERVER = r'''
import os, signal, subprocess, sys, time
if "ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
sys.stdin.read()  # EOF: and on we go
while True:
    time.sleep(1)
'''


def _env(**extra: str) -> dict[str, str]:
    """Our environment for a child run in another directory: a relative PYTHONPATH (``src``)
    made absolute, so the child imports the same loopwarden as the tests."""
    env = {**os.environ, **extra}
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    return env


class Proxy:
    """``loopwarden mcp-proxy`` as a subprocess, with line reads that time out."""

    def __init__(self, *options: str, server: list[str] | None = None,
                 env: dict[str, str] | None = None) -> None:
        upstream = server or [sys.executable, "-c", RAW_SERVER]
        argv = [sys.executable, "-m", "loopwarden.cli", "mcp-proxy", *options, "--", *upstream]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=HERE,
                                     env=_env(**(env or {})))
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._stderr: list[bytes] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(b"")

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.write(json.dumps(message).encode() + b"\n")

    def recv_line(self, timeout: float = 60) -> bytes:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer within {timeout}s; stderr:\n{self.stderr}") from None
        assert line, f"the proxy closed its stdout (exit {self.proc.poll()}); stderr:\n{self.stderr}"
        return line

    def recv(self, timeout: float = 60) -> Any:
        # Strict UTF-8 JSON: what a client must be able to read.
        return json.loads(self.recv_line(timeout).decode("utf-8"))

    def call(self, rpc_id: Any, tool: str = "t", args: Any = None) -> Any:
        self.send(_call(rpc_id, tool, args))
        return self.recv()

    def close(self, timeout: float = 30) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=timeout)
        self._stderr_reader.join(timeout=10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def proxies() -> Iterator[list[Proxy]]:
    started: list[Proxy] = []
    yield started
    for proxy in started:
        proxy.kill()


def _call(rpc_id: Any, tool: str = "t", args: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call",
            "params": {"name": tool, "arguments": {} if args is None else args}}


def _texts(response: dict[str, Any]) -> list[str]:
    return [block["text"] for block in response["result"]["content"]]


def _config(tmp_path: Path, warning: int = 2, critical: int = 3) -> str:
    path = tmp_path / "openclaw.json"
    path.write_text(json.dumps({"tools": {"loopDetection": {
        "warningThreshold": warning, "criticalThreshold": critical,
        "globalCircuitBreakerThreshold": critical + 1}}}))
    return str(path)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_in_thread(proxy: Proxy, data: bytes, piece: int = 1 << 20) -> threading.Thread:
    """Writes ``data`` without blocking the test (a stalled proxy stops reading)."""
    def write() -> None:
        try:
            for start in range(0, len(data), piece):
                proxy.write(data[start:start + piece])
        except (BrokenPipeError, ValueError, OSError):
            pass
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


# -- 4: what the proxy cannot parse or annotate does not kill it ----------------------------


def test_lone_surrogates_in_warned_and_blocked_calls(tmp_path: Path,
                                                     proxies: list[Proxy]) -> None:
    proxy = Proxy("--config", _config(tmp_path))
    proxies.append(proxy)
    # "\ud83d" as a JSON escape, the way JavaScript cuts text mid-emoji, in the tool's name
    # (it reaches the block message) and in the result text (it is re-sent with the note).
    line = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t\\ud83d",' \
           b'"arguments":{"text":"x\\ud83d"}}}\n'
    answers = []
    for n in range(1, 5):
        proxy.write(line % n)
        answers.append(proxy.recv())
    assert [_texts(a)[0] for a in answers[:3]] == ["x\ud83d"] * 3
    assert "Tool-loop warning" in _texts(answers[2])[-1]  # warned: annotated and re-encoded
    assert answers[3]["result"]["isError"] is True  # blocked: the message names the tool
    assert "Called t\ud83d with identical outcomes" in _texts(answers[3])[0]
    assert proxy.call(9, "other")["id"] == 9
    assert proxy.close() == 0


def test_messages_nested_1000_deep_pass_both_ways(proxies: list[Proxy]) -> None:
    proxy = Proxy()
    proxies.append(proxy)
    deep = (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",'
            b'"arguments":{"a":' + b"[" * 1000 + b"]" * 1000 + b"}}}\n")
    proxy.write(deep)
    got = proxy.recv()  # the server could not parse it either, and says what it got
    assert got["method"] == "unparsed" and got["params"]["sha256"] == _sha(deep)

    proxy.send(_call(2, "deep"))
    answer = proxy.recv_line()
    assert answer.startswith(b'{"jsonrpc":"2.0","id":2,"result":{"content":[],"deep":[[[')
    assert answer.count(b"[") == 1001  # unchanged
    assert proxy.call(3)["id"] == 3
    assert proxy.close() == 0


def test_unreadable_client_lines_get_a_parse_error_and_never_reach_the_server(
        tmp_path: Path, proxies: list[Proxy]) -> None:
    proxy = Proxy("--config", _config(tmp_path))
    proxies.append(proxy)
    # Not UTF-8, not JSON, and a call whose argument is a surrogate encoded as UTF-8 bytes
    # (not UTF-8 either): none can be guarded, so none goes on (issue 24, item 9).
    for line, rpc_id in ((b"\xff\xfe not json\n", None), (b"{\"jsonrpc\": \"2.0\", oops}\n", None),
                         (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",'
                          b'"arguments":{"text":"\xed\xa0\xbd"}}}\n', 1)):
        proxy.write(line)
        got = proxy.recv()
        assert got["id"] == rpc_id and got["error"]["code"] == -32700, line
    assert proxy.call(9, "other")["server"]["seen"] == 1  # the first line the server saw

    # The third identical call is warned; its result is not UTF-8, so it reaches the client as
    # the server wrote it (JSON's bytes cannot be re-encoded to carry the note).
    for n in (2, 3):
        proxy.send(_call(n, "cesu"))
        proxy.recv_line()
    proxy.send(_call(4, "cesu"))
    assert proxy.recv_line() == (b'{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text",'
                                 b'"text":"\xed\xa0\xbd"}]}}\n')
    assert proxy.call(5, "other")["id"] == 5
    assert proxy.close() == 0
    assert proxy.stderr.count("refused an unreadable line from the client") == 3
    assert "3 unreadable client lines refused" in proxy.stderr


# -- 4: bounded lines ------------------------------------------------------------------------


def test_overlong_client_requests_get_a_json_rpc_error(proxies: list[Proxy]) -> None:
    proxy = Proxy(env={"LOOPWARDEN_MCP_MAX_MESSAGE_BYTES": "1M"})
    proxies.append(proxy)
    big = "y" * (2 << 20)
    # The Python SDK writes the id near the start, the TypeScript SDK at the end.
    proxy.send(_call(7, "t", {"text": big}))
    head_id = proxy.recv()
    proxy.write(b'{"method":"tools/call","params":{"name":"t","arguments":{"text":"'
                + big.encode() + b'"}},"jsonrpc":"2.0","id":"abc"}\n')
    tail_id = proxy.recv()
    proxy.write(b"z" * (3 << 20) + b"\n")
    no_id = proxy.recv()

    assert [head_id["id"], tail_id["id"], no_id["id"]] == [7, "abc", None]
    for error in (head_id, tail_id, no_id):
        assert error["error"]["code"] == -32600
        assert "request too large" in error["error"]["message"]
        assert "1048576" in error["error"]["message"]
    normal = proxy.call(8)
    assert normal["server"]["seen"] == 1  # none of the over-long lines reached the server
    assert proxy.close() == 0
    assert proxy.stderr.count("dropped a request from the client") == 3
    assert "yyyy" not in proxy.stderr and "zzzz" not in proxy.stderr


def test_the_limit_option(proxies: list[Proxy]) -> None:
    proxy = Proxy("--max-message-bytes", "64KiB")
    proxies.append(proxy)
    assert proxy.call(1, "t", {"text": "y" * 60_000})["id"] == 1
    assert proxy.call(2, "t", {"text": "y" * 70_000})["error"]["code"] == -32600
    assert proxy.close() == 0

    bad = subprocess.run([sys.executable, "-m", "loopwarden.cli", "mcp-proxy",
                          "--max-message-bytes", "lots", "--", sys.executable, "-c", ""],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60,
                         env=_env())
    assert bad.returncode == 2 and "not a positive size" in bad.stderr


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc for memory")
def test_a_client_that_never_sends_a_newline_cannot_grow_memory(proxies: list[Proxy]) -> None:
    proxy = Proxy()  # the default limit: 64 MiB
    proxies.append(proxy)
    assert proxy.call(1)["id"] == 1  # started and serving
    start = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"t","arguments":'
    writer = _write_in_thread(proxy, start + b'{"text":"' + b"x" * (256 << 20))
    writer.join(timeout=120)
    assert not writer.is_alive(), "the proxy stopped reading"
    peak_kib = _peak_rss_kib(proxy.proc.pid)
    proxy.write(b'"}}}\n')
    error = proxy.recv()
    assert error["id"] == 9 and error["error"]["code"] == -32600
    assert proxy.call(10)["id"] == 10
    assert proxy.close() == 0
    # 256 MiB went through; the proxy held at most the 64 MiB limit of it.
    assert peak_kib < 160 * 1024, peak_kib


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_overlong_server_lines_are_dropped_and_the_proxy_lives_on(proxies: list[Proxy]) -> None:
    proxy = Proxy()  # the default limit: 64 MiB
    proxies.append(proxy)
    # A notification past the old 256 MiB StreamReader limit, then an ordinary answer.
    proxy.send(_call(1, "notify_big", {"bytes": 260 << 20}))
    answer = proxy.recv(timeout=120)
    assert answer["id"] == 1 and _texts(answer) == ["same"]  # the notification was dropped

    # A response over the limit: the client gets an error for its call instead of silence.
    proxy.send(_call(2, "big", {"bytes": 65 << 20}))
    error = proxy.recv(timeout=120)
    assert error["id"] == 2 and error["error"]["code"] == -32603
    assert "server's response was" in error["error"]["message"]
    assert proxy.call(3)["id"] == 3
    assert proxy.close() == 0
    assert "dropped a message from the server" in proxy.stderr
    assert "dropped a response from the server" in proxy.stderr
    assert "xxxx" not in proxy.stderr


# -- 17: linear framing ----------------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
def test_a_large_request_read_in_small_pieces_is_framed_in_linear_time(
        proxies: list[Proxy]) -> None:
    import fcntl

    proxy = Proxy()
    proxies.append(proxy)
    assert proxy.proc.stdin is not None
    # A one-page pipe: the proxy reads the request 4 KiB at a time, 8,192 reads. Re-scanning
    # the whole buffer on every read is 128 GB of work (minutes); scanning new bytes, 32 MiB.
    fcntl.fcntl(proxy.proc.stdin.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)
    request = json.dumps(_call(1, "t", {"text": "y" * (32 << 20)})).encode() + b"\n"
    writer = _write_in_thread(proxy, request, piece=len(request))
    answer = proxy.recv(timeout=60)
    writer.join(timeout=5)
    assert answer["id"] == 1
    assert answer["server"]["sha256"] == _sha(request)  # forwarded byte for byte
    assert proxy.close() == 0


# -- 20: batches -----------------------------------------------------------------------------


def test_a_batch_with_a_blocked_call_is_answered_with_one_array(tmp_path: Path,
                                                                proxies: list[Proxy]) -> None:
    proxy = Proxy("--config", _config(tmp_path))
    proxies.append(proxy)
    for n in range(3):
        proxy.call(n, "t", {"text": "same"})
    proxy.send([_call(10, "t", {"text": "same"}), _call(11, "other", {"text": "ok"}),
                {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}])
    answer = proxy.recv()
    assert isinstance(answer, list) and [a["id"] for a in answer] == [10, 11]
    assert answer[0]["result"]["isError"] is True and "CRITICAL" in _texts(answer[0])[0]
    assert _texts(answer[1]) == ["ok"]

    # Nothing forwarded awaits an answer: the blocked calls are answered at once, as an array.
    proxy.send([_call(20, "t", {"text": "same"}),
                {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}])
    only_blocked = proxy.recv()
    assert isinstance(only_blocked, list) and [a["id"] for a in only_blocked] == [20]

    assert proxy.call(99, "other")["id"] == 99  # no stray separate answers came before it
    assert proxy.close() == 0


async def test_batch_bookkeeping_survives_cancellation_and_piecewise_answers() -> None:
    from loopwarden import LoopDetectionConfig, LoopGuard
    from loopwarden.integrations.mcp_proxy import McpLoopGuard

    guard = LoopGuard(LoopDetectionConfig(enabled=True, warning_threshold=2,
                                          critical_threshold=3,
                                          global_circuit_breaker_threshold=4))
    guard.sinks.clear()
    core = McpLoopGuard(guard, session="s")
    for n in range(3):  # the next call of t is blocked
        await core.from_client(_call(f"r{n}"))
        await core.from_upstream({"jsonrpc": "2.0", "id": f"r{n}",
                                  "result": {"content": [{"type": "text", "text": "s"}]}})

    # The forwarded call is cancelled: nothing will come back, so the batch is answered then.
    forward, replies = await core.from_client([_call(1), _call(2, "other")])
    assert [m["id"] for m in forward] == [2] and replies == []
    _, replies = await core.from_client({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                         "params": {"requestId": 2}})
    assert [[m["id"] for m in r] for r in replies] == [[1]]
    assert not core.awaiting()

    # An upstream that answers a batch item by item: the blocked answers go with the first.
    forward, _ = await core.from_client([_call(3), _call(4, "other"), _call(5, "other2")])
    assert [m["id"] for m in forward] == [4, 5]
    first = await core.from_upstream({"jsonrpc": "2.0", "id": 4, "result": {"content": []}})
    assert [m["id"] for m in first] == [4, 3]
    second = {"jsonrpc": "2.0", "id": 5, "result": {"content": []}}
    assert await core.from_upstream(second) is second
    assert not core.awaiting()


# -- 15: signals and exit status -------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    if status.exists():
        try:
            return "\nState:\tZ" not in status.read_text()  # a zombie has exited
        except OSError:
            return False
    return True


def _wait_gone(pids: list[int], timeout: float = 15) -> list[int]:
    deadline = time.monotonic() + timeout
    while (alive := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def _stubborn(tmp_path: Path, *flags: str) -> tuple[list[str], Path]:
    pidfile = tmp_path / "server.pids"
    return [sys.executable, "-c", STUBBORN_SERVER, str(pidfile), *flags], pidfile


def _pids(pidfile: Path, proxy: Proxy) -> list[int]:
    deadline = time.monotonic() + 30
    while not pidfile.exists():
        assert proxy.proc.poll() is None and time.monotonic() < deadline, proxy.stderr
        time.sleep(0.05)
    return [int(p) for p in pidfile.read_text().split()]


@pytest.mark.skipif(not POSIX, reason="POSIX signals and process groups")
@pytest.mark.parametrize(("signum", "flags"), [
    (signal.SIGTERM, ()), (signal.SIGTERM, ("ignore-term",)),
    (getattr(signal, "SIGINT", 2), ()), (getattr(signal, "SIGHUP", 1), ()),
])
def test_a_signal_stops_the_server_and_what_it_started(
        tmp_path: Path, proxies: list[Proxy], signum: int, flags: tuple[str, ...]) -> None:
    server, pidfile = _stubborn(tmp_path, *flags)
    proxy = Proxy(server=server)
    proxies.append(proxy)
    pids = _pids(pidfile, proxy)
    try:
        # What the TypeScript MCP client does: close our stdin, then signal our pid only.
        assert proxy.proc.stdin is not None
        proxy.proc.stdin.close()
        time.sleep(0.3)
        proxy.proc.send_signal(signum)
        assert proxy.proc.wait(timeout=15) == 128 + signum
        assert _wait_gone(pids) == [], "the server (or its child) outlived the proxy"
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not POSIX, reason="POSIX process groups")
def test_a_clean_close_exits_0_even_when_the_server_must_be_stopped(
        tmp_path: Path, proxies: list[Proxy]) -> None:
    server, pidfile = _stubborn(tmp_path)
    proxy = Proxy(server=server)
    proxies.append(proxy)
    pids = _pids(pidfile, proxy)
    try:
        assert proxy.close(timeout=30) == 0  # the server ignored EOF and was terminated
        assert _wait_gone(pids) == []
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not POSIX, reason="POSIX signals")
def test_a_server_killed_by_a_signal_gives_128_plus_n(proxies: list[Proxy]) -> None:
    proxy = Proxy(server=[sys.executable, "-c",
                          "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    proxies.append(proxy)
    assert proxy.proc.wait(timeout=30) == 128 + signal.SIGKILL


def test_a_clean_close_exits_0(proxies: list[Proxy]) -> None:
    proxy = Proxy()
    proxies.append(proxy)
    assert proxy.call(1)["id"] == 1
    assert proxy.close() == 0


# -- 16: what reaches the log ----------------------------------------------------------------

async def test_argument_text_never_reaches_the_log(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    # The echo server's own stderr is silenced: only what the proxy writes is checked.
    quiet_echo = ("import os, runpy, sys; os.dup2(os.open(os.devnull, os.O_WRONLY), 2); "
                  f"sys.argv = [{str(ECHO_SERVER)!r}]; "
                  f"runpy.run_path({str(ECHO_SERVER)!r}, run_name='__main__')")
    argv = [sys.executable, "-m", "loopwarden.cli", "mcp-proxy", "--",
            sys.executable, "-c", quiet_echo]
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(HERE), env=_env())
    errlog = tmp_path / "proxy.stderr"
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            # The failing tool's error quotes its argument, and reads like an unknown tool.
            results = [await session.call_tool("fail", {"reason": "Unknown tool: sk-live-secret42"})
                       for _ in range(11)]
    log = errlog.read_text()
    blocked = results[-1].model_dump(by_alias=True, mode="json")
    assert blocked["isError"] is True
    assert "sk-live-secret42" in blocked["content"][0]["text"]  # the model may see its own text
    assert "detector=unknown_tool_repeat" in log and "tool=fail" in log
    assert "attempted unavailable tool fail 10 times" in log
    assert "secret42" not in log


def test_tool_names_in_the_log_are_escaped_and_cut(tmp_path: Path,
                                                   proxies: list[Proxy]) -> None:
    proxy = Proxy("--config", _config(tmp_path))
    proxies.append(proxy)
    forged = "evil\nloopwarden ERROR forged line"
    long_name = "n" * 5000
    for n in range(4):
        proxy.call(n, forged)
    for n in range(4):
        proxy.call(100 + n, long_name)
    assert proxy.close() == 0
    lines = proxy.stderr.splitlines()
    assert lines and all(line.startswith("loopwarden ") for line in lines), lines
    assert any("evil\\nloopwarden ERROR forged line" in line for line in lines)
    assert f"tool={'n' * 120}...(5000 chars) level=critical" in proxy.stderr
    assert max(len(line) for line in lines) < 2400  # messages are cut too
