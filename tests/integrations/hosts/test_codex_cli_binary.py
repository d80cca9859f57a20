"""The real Codex CLI (0.171.0, npm ``@openai/codex``, installed by ``.ci/install-hosts-cg``)
with ``loopwarden install codex --user`` in a fresh HOME, driven by an insistent scripted model
on 127.0.0.1 (``codex exec``, hooks trusted with ``--dangerously-bypass-hook-trust`` as an
unattended run would).

Codex cannot end a run from a tool hook, so the acceptance there is: each loop stopped within
25 executions, and every later call of the turn denied, none executed (the model gives up after
its 30th call). A healthy run (the same command, a new answer each time) is never denied.
Each run's record (executions, first warning, first denial, stop) is printed and attached to
the test report (``record_property``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from codex_gemini_runs import LIMIT, RunRecord, binary, run_codex

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(binary("codex")[0] is None, reason=binary("codex")[1]),
]


def _run(shape: str, tmp_path: Path, record_property: Callable[[str, object], None]) -> RunRecord:
    record = run_codex(shape, tmp_path)
    print(record.row())
    record_property("run", record.row())
    assert record.returncode == 0, record.output[-2000:]
    return record


@pytest.mark.parametrize("shape", ["identical", "a-b"])
def test_loop_is_stopped_and_the_rest_of_the_turn_denied(
    shape: str, tmp_path: Path, record_property: Callable[[str, object], None],
) -> None:
    record = _run(shape, tmp_path, record_property)
    assert record.executions <= 25 and record.shell_runs == record.executions
    assert record.first_warning is not None and record.first_warning < record.first_denial
    assert record.stop is not None
    assert record.ran_after_stop == 0 and record.denied_after_stop == LIMIT - record.stop


def test_three_step_cycle_over_two_tools_is_stopped(
    tmp_path: Path, record_property: Callable[[str, object], None],
) -> None:
    # loopwarden's cycles span two tools (one tool's changing commands are progress): the
    # shell, apply_patch, the shell again (codex_gemini_runs._codex_two_tool_cycle).
    record = _run("a-b-c", tmp_path, record_property)
    assert record.executions <= 25 and record.shell_runs <= record.executions, record.results
    assert record.stop is not None, record.results
    assert record.ran_after_stop == 0 and record.denied_after_stop == LIMIT - record.stop


def test_same_failure_with_a_fresh_argument_is_stopped(
    tmp_path: Path, record_property: Callable[[str, object], None],
) -> None:
    # Codex hands hooks a failed command's output without its exit code: the failure is
    # read from the text (an errno line), its echoed path masked.
    record = _run("fresh-failure", tmp_path, record_property)
    assert record.first_denial is not None
    assert record.executions <= 25 and record.ran_after_stop == 0


def test_healthy_run_is_never_denied(tmp_path: Path,
                                     record_property: Callable[[str, object], None]) -> None:
    record = _run("healthy", tmp_path, record_property)
    assert record.first_denial is None and record.executions == LIMIT


def test_mcp_tool_through_the_proxy_is_stopped(tmp_path: Path,
                                               record_property: Callable[[str, object], None]) -> None:
    # The counter server behind `loopwarden mcp-proxy`, as a user configures it in Codex
    # (`required = true`: codex_gemini_runs.run_codex). Codex defers MCP tools behind
    # `tool_search` for gpt-5.5: the scripted model searches first, then calls
    # `mcp__jobs__check_job` again and again. The server counts what really ran.
    pytest.importorskip("mcp")
    record = _run("mcp", tmp_path, record_property)
    assert record.executions <= 25 and record.shell_runs == record.executions, record.results
    assert record.first_warning is not None and record.first_denial is not None
    assert record.first_warning < record.first_denial
    assert record.stop is not None, record.results
    assert record.ran_after_stop == 0 and record.denied_after_stop == LIMIT - record.stop
