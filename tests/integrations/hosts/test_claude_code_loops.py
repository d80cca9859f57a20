"""The real Claude Code binaries, both releases, with ``loopwarden install claude-code --user``
(the defaults) in a fresh HOME and an insistent scripted model: every loop shape is stopped with
at most 25 executions and the run ends; a healthy run is never denied. The same through the
http hooks (``install --http``): test_claude_code_http_hooks.py.

Each test prints its run record (executions, the call whose result first carried the
warning, the first denial, whether the run ended): ``pytest -s`` shows them.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from claude_code import RunRecord, bash, claude_binary, run_claude

pytestmark = pytest.mark.integration

RELEASES = ["current", "2.1.197"]
MAX_EXECUTIONS = 25
HERE = Path(__file__).resolve().parent


def _stopped(record: RunRecord, tmp_path: Path, release: str) -> None:
    print(record)
    assert record.executions <= MAX_EXECUTIONS, record
    assert record.denied_at is not None, record
    assert record.ended, record
    # The install asked the release on PATH: the current one ends the run on the denied call
    # itself, so it got no batch hook (one hook less per tool call); 2.1.197 needs it.
    settings = json.loads((tmp_path / "home" / ".claude" / "settings.json").read_text())
    assert ("PostToolBatch" in settings["hooks"]) == (release == "2.1.197"), settings["hooks"]


def _mcp_config(work: Path, *, text_only: bool = False) -> dict[str, object]:
    proxy = [sys.executable, "-m", "loopwarden", "mcp-proxy", "--", sys.executable,
             str(HERE / "mcp_counter_server.py")]
    env = {"CALLS_LOG": str(work / "calls.log"), "LOOPWARDEN_HOOK_SERVER": "0"}
    if text_only:
        env["CHECK_JOB_TEXT_ONLY"] = "1"
    return {"mcpServers": {"jobs": {"command": proxy[0], "args": proxy[1:], "env": env}}}


@pytest.mark.parametrize(("release", "resident"), [("current", False), ("2.1.197", True)])
def test_identical_call_is_stopped_and_the_run_ends(release: str, resident: bool,
                                                    tmp_path: Path) -> None:
    # On the current release each hook answers in its own process (what a hook does when no
    # resident server can run); everywhere else the resident server answers, as users get the
    # hooks (A-B and the healthy run: test_claude_code_http_hooks.py).
    work = tmp_path / "work"
    record = run_claude(claude_binary(release), tmp_path, lambda n: bash(work, "echo hi"),
                        resident=resident)
    _stopped(record, tmp_path, release)
    assert record.warned_at is not None and record.warned_at < record.denied_at  # type: ignore[operator]


@pytest.mark.parametrize("release", RELEASES)
def test_a_b_ping_pong_is_stopped_and_the_run_ends(release: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    record = run_claude(claude_binary(release), tmp_path,
                        lambda n: bash(work, "echo A" if n % 2 else "echo B"))
    _stopped(record, tmp_path, release)


@pytest.mark.parametrize("release", RELEASES)
def test_a_healthy_run_with_changing_output_is_never_denied(release: str, tmp_path: Path) -> None:
    # The same command, a new answer each time: progress, past both thresholds (OpenClaw's
    # generic repeat still warns about the same arguments at 10; nothing is ever denied).
    work = tmp_path / "work"
    count = shlex.quote(str(work / "calls.log"))
    record = run_claude(claude_binary(release), tmp_path,
                        lambda n: bash(work, f"wc -l < {count}") if n <= 30 else None)
    print(record)
    assert record.denials == 0, record
    assert (record.issued, record.executions, record.ended) == (30, 30, False), record


@pytest.mark.parametrize("release", RELEASES)
def test_three_step_cycle_over_two_tools_is_stopped_and_the_run_ends(release: str,
                                                                      tmp_path: Path) -> None:
    # loopwarden's cycles span at least two tools (one tool's changing commands are progress):
    # Bash, the MCP poll, Bash again, over and over.
    pytest.importorskip("mcp")
    work = tmp_path / "work"
    steps = [bash(work, "echo A"), ("mcp__jobs__check_job", {"job_id": "42"}),
             bash(work, "echo C")]
    record = run_claude(claude_binary(release), tmp_path, lambda n: steps[n % 3],
                        mcp_config=_mcp_config(work))
    _stopped(record, tmp_path, release)


@pytest.mark.parametrize("release", RELEASES)
def test_same_failure_with_a_fresh_argument_is_stopped(release: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    record = run_claude(claude_binary(release), tmp_path,
                        lambda n: bash(work, f"cat missing-{n}.txt"))
    _stopped(record, tmp_path, release)


@pytest.mark.parametrize("release", RELEASES)
def test_mcp_tool_through_the_proxy_is_stopped_and_the_run_ends(release: str,
                                                                 tmp_path: Path) -> None:
    # A text-only result: Claude Code hands the hook its content, where the proxy adds its
    # warning note. The hook must count through the note and deny before the proxy blocks.
    pytest.importorskip("mcp")
    work = tmp_path / "work"
    record = run_claude(claude_binary(release), tmp_path,
                        lambda n: ("mcp__jobs__check_job", {"job_id": "42"}),
                        mcp_config=_mcp_config(work, text_only=True))
    _stopped(record, tmp_path, release)
    # 20 ran; the hook denied the 21st (2.1.197 answers the first calls "still connecting"
    # before the server is up, so count from the end): denied once, then the run ended.
    assert record.executions == 20 and record.denials == 1, record
    assert record.denied_at == record.issued - 1, record
    assert "Called check_job with" not in record.stdout, "the proxy blocked, not the hook"


def test_mcp_proxy_alone_blocks_every_call_past_the_critical(tmp_path: Path) -> None:
    """Without the hooks, the proxy is the guard: it cannot end Claude Code's run, so it
    answers every call past the critical with the block as the tool's error."""
    pytest.importorskip("mcp")
    work = tmp_path / "work"
    record = run_claude(claude_binary("current"), tmp_path,
                        lambda n: ("mcp__jobs__check_job", {"job_id": "42"}) if n <= 30 else None,
                        hooks=False, mcp_config=_mcp_config(work))
    print(record)
    assert record.executions <= MAX_EXECUTIONS, record
    assert record.denials == record.issued - record.executions, record
