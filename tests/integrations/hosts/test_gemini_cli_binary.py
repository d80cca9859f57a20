"""The real Gemini CLI (0.61.0, npm ``@google/gemini-cli``, installed by
``.ci/install-hosts-cg``) with ``loopwarden install gemini-cli --user`` in a fresh HOME, driven
by an insistent scripted model on 127.0.0.1 (``gemini -p --yolo``).

Gemini CLI's own loop detection is switched off here (``model.disableLoopDetection``) so that
what is measured is loopwarden; ``bench/bench_codex_gemini.py`` sets the two side by side.
Acceptance: each loop stopped within 25 executions and the run ended by the hook (Gemini obeys
``continue: false``) before the model gave up; a healthy run never denied. Each run's record is
printed and attached to the test report.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from codex_gemini_runs import LIMIT, RunRecord, binary, run_gemini

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(binary("gemini")[0] is None, reason=binary("gemini")[1]),
]


def _run(shape: str, tmp_path: Path, record_property: Callable[[str, object], None]) -> RunRecord:
    record = run_gemini(shape, tmp_path)
    print(record.row())
    record_property("run", record.row())
    assert record.returncode == 0, record.output[-2000:]
    return record


@pytest.mark.parametrize("shape", ["identical", "a-b", "a-b-c"])
def test_loop_is_stopped_and_the_run_ended(
    shape: str, tmp_path: Path, record_property: Callable[[str, object], None],
) -> None:
    record = _run(shape, tmp_path, record_property)
    assert record.executions <= 25 and record.shell_runs <= record.executions
    if shape != "a-b-c":
        # (A cycle's warning comes before a call, where Gemini shows a hook's word to the user
        # only: the model meets the cycle at the denial.)
        assert record.first_warning is not None and record.first_warning < record.first_denial
    assert record.stop is not None and record.ended_by_host


def test_same_failure_with_a_fresh_argument_is_stopped(
    tmp_path: Path, record_property: Callable[[str, object], None],
) -> None:
    record = _run("fresh-failure", tmp_path, record_property)
    assert record.ended_by_host and record.executions <= 25


def test_healthy_run_is_never_denied(tmp_path: Path,
                                     record_property: Callable[[str, object], None]) -> None:
    record = _run("healthy", tmp_path, record_property)
    assert record.first_denial is None and record.executions == LIMIT


def test_mcp_tool_through_the_proxy_is_stopped(tmp_path: Path,
                                               record_property: Callable[[str, object], None]) -> None:
    # Both guard the call. The proxy's warning note rides in the warned result's llmContent;
    # the hook counts through it, so it denies call 21 before the proxy would block it, and
    # ends the run at call 22.
    record = _run("mcp", tmp_path, record_property)
    assert record.executions == 20 and record.first_denial == 21, record.row()
    assert record.stop == 22 and record.ended_by_host, record.row()
    assert not any("Called check_job with" in text for text in record.results), \
        "the proxy blocked a call the hook should have denied"
