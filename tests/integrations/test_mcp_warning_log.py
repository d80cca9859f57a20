"""``loopwarden mcp-proxy`` logs a loop warning once per warning bucket (spec §f.2's dedupe:
the same key and bucket the guard warns by), not on every call from the 10th to the 19th;
criticals are logged every time they block. A real MCP client talks over stdio to the proxy
in front of ``mcp_echo_server.py``; the proxy's stderr is what its client shows in its logs."""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from pathlib import Path

import pytest

from loopwarden import LoopDetectionConfig, LoopGuard

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

HERE = Path(__file__).resolve().parent
ECHO_SERVER = HERE / "mcp_echo_server.py"
DETECTOR_LINE = re.compile(r"Loop warning: check_job called (\d+) times with identical arguments")
CALLER_LINE = re.compile(r"Loop warning for check_job: WARNING: You have called check_job (\d+) ")
ACTION_LINE = re.compile(r"tool loop: .* action=warn .* count=(\d+) ")


def child_env() -> dict[str, str]:
    env = dict(os.environ)  # PYTHONPATH made absolute: the proxy runs in HERE
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    return env


async def proxy_log(tmp_path: Path, calls: int, *options: str) -> str:
    """The proxy's stderr after ``calls`` identical ``check_job`` calls."""
    argv = [sys.executable, "-m", "loopwarden.cli", "mcp-proxy", *options, "--",
            sys.executable, str(ECHO_SERVER)]
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(HERE),
                                   env=child_env())
    stderr = tmp_path / "proxy.stderr"
    with stderr.open("w", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(calls):
                await session.call_tool("check_job", {"job_id": "build-42"})
    return stderr.read_text(encoding="utf-8")


def counts(pattern: re.Pattern[str], text: str) -> list[int]:
    return [int(match.group(1)) for match in pattern.finditer(text)]


async def test_fifteen_identical_calls_log_one_warning(tmp_path: Path) -> None:
    text = await proxy_log(tmp_path, 15)
    # The 11th call (count 10) is warned: each of OpenClaw's three lines once, not five times.
    assert counts(DETECTOR_LINE, text) == [10]
    assert counts(CALLER_LINE, text) == [10]
    assert counts(ACTION_LINE, text) == [10]
    assert text.count(" WARNING ") == 3, text


async def test_a_warning_is_logged_when_it_reaches_each_bucket_and_blocks_every_time(
    tmp_path: Path,
) -> None:
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps({"tools": {"loopDetection": {
        "warningThreshold": 3, "criticalThreshold": 12}}}), encoding="utf-8")
    text = await proxy_log(tmp_path, 15, "--config", str(config))
    # Buckets of warningThreshold (3) calls: counts 3-5, 6-8, 9-11.
    assert counts(DETECTOR_LINE, text) == [3, 6, 9]
    assert counts(CALLER_LINE, text) == [3, 6, 9]
    # Counts 12, 13, 14 are blocked: every block is logged.
    assert counts(re.compile(r"Critical generic loop detected: check_job repeated (\d+)"),
                  text) == [12, 13, 14]
    assert len(re.findall(r"Blocking check_job due to critical loop", text)) == 3


def test_the_library_logs_the_detector_warning_once_per_bucket_and_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = LoopGuard(LoopDetectionConfig(enabled=True))
    caplog.set_level(logging.WARNING, logger="loopwarden")
    for tool in ("poll_a", "poll_b"):  # one after the other: two keys, no ping-pong
        for n in range(15):
            guard.before_tool_call(tool, {"id": 1}, session="s", call_id=f"{tool}-{n}")
            guard.after_tool_call(tool, {"id": 1}, session="s", call_id=f"{tool}-{n}",
                                  result="same")
    # A second session starts its own buckets.
    for n in range(11):
        guard.before_tool_call("poll_a", {"id": 1}, session="t", call_id=f"t-{n}")
        guard.after_tool_call("poll_a", {"id": 1}, session="t", call_id=f"t-{n}", result="same")
    detector = [r.getMessage() for r in caplog.records if r.name == "loopwarden.detection"]
    assert detector == [
        "Loop warning: poll_a called 10 times with identical arguments",
        "Loop warning: poll_b called 10 times with identical arguments",
        "Loop warning: poll_a called 10 times with identical arguments",
    ]
