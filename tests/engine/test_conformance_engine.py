"""Conformance scenarios of spec §i (groups 2–8, 10, 11) at the engine level, named by number.

Hash-only scenarios (1–7, 16, 60–68, 75–80) live in test_fingerprint.py; caller scenarios
(86–91) in test_conformance_guard.py; post-compaction (92–103) in test_compaction.py.
"""

from __future__ import annotations

import time

from loopwarden import LoopDetectionConfig
from spec_helpers import POLL_ARGS, POLL_RESULT, R_SAME, Spec, text_result

# -- Group 2: recording ---------------------------------------------------------------------------


def test_s08_record_call_on_empty_state() -> None:
    s = Spec()
    s.call("read", {"path": "/a"}, "call-1")
    assert len(s.state.history) == 1
    r = s.state.history[0]
    assert (r.tool_name, r.call_id) == ("read", "call-1")


def test_s09_history_trimmed_to_30() -> None:
    s = Spec()
    for i in range(40):
        s.call("tool", {"iteration": i})
    assert len(s.state.history) == 30
    assert s.state.history[0].args_hash == s.detector.fingerprint("tool", {"iteration": 10}).args_hash


def test_s10_timestamp_within_call() -> None:
    s = Spec()
    before = time.time() * 1000
    r = s.call("read", {"path": "/a"})
    after = time.time() * 1000
    assert before - 1 <= r.timestamp <= after + 1


def test_s11_run_id_recorded() -> None:
    s = Spec()
    assert s.call("read", {"path": "/a"}, run="run-1").run_id == "run-1"
    assert s.call("read", {"path": "/a"}, run="  ").run_id is None


def test_s12_history_size_honoured() -> None:
    s = Spec(LoopDetectionConfig(enabled=True, history_size=4))
    for i in range(10):
        s.call("tool", {"iteration": i})
    assert len(s.state.history) == 4
    assert s.state.history[0].args_hash == s.detector.fingerprint("tool", {"iteration": 6}).args_hash


def test_s13_outcome_attaches_to_pending_call() -> None:
    s = Spec()
    args = {"action": "lookup", "path": "cron.enabled"}
    s.call("gateway", args, "call-1")
    r = s.detector.record_outcome(s.state, "gateway", args, result=R_SAME, call_id="call-1")
    assert r is s.state.history[0]
    assert len(s.state.history) == 1
    assert r is not None and r.result_hash is not None


def test_s14_paired_call_and_outcome_use_one_slot() -> None:
    s = Spec()
    last = None
    for i in range(33):
        args = {"path": f"config.{i}"}
        s.call("gateway", args, f"call-{i}")
        last = s.detector.record_outcome(s.state, "gateway", args, result=R_SAME, call_id=f"call-{i}")
    assert last is not None and last.call_id == "call-32"
    assert len(s.state.history) == 30
    assert s.state.history[0].call_id == "call-3"


def test_s15_outcome_of_other_run_never_attaches() -> None:
    s = Spec()
    s.call("read", {"path": "/a"}, "call-1", run="run-1")
    s.detector.record_outcome(s.state, "read", {"path": "/a"}, result=R_SAME, call_id="call-1",
                              run_id="run-2")
    first, second = s.state.history
    assert first.result_hash is None
    assert second.run_id == "run-2" and second.result_hash is not None


# -- Group 3: enablement and run scope ------------------------------------------------------------


def test_s17_disabled_by_default() -> None:
    s = Spec(LoopDetectionConfig())
    for _ in range(20):
        s.call("read", {"path": "/same.txt"})
    assert s.detect("read", {"path": "/same.txt"}) is None


def test_s18_distinct_paths_not_stuck() -> None:
    s = Spec()
    for i in range(15):
        s.call("read", {"path": f"/f{i}"})
    assert s.detect("read", {"path": "/new"}) is None


def test_s19_other_run_not_inherited() -> None:
    s = Spec()
    for _ in range(10):
        s.call("read", {"path": "/a"}, run="heartbeat-1")
    assert s.detect("read", {"path": "/a"}, run="heartbeat-2") is None


def test_s20_same_run_detected() -> None:
    s = Spec()
    for _ in range(10):
        s.call("read", {"path": "/a"}, run="run-1")
    d = s.detect("read", {"path": "/a"}, run="run-1")
    assert d is not None and (d.detector, d.count) == ("generic_repeat", 10)


def test_s21_unscoped_ignores_run_records() -> None:
    s = Spec()
    for _ in range(10):
        s.call("read", {"path": "/a"}, run="run-1")
    assert s.detect("read", {"path": "/a"}) is None


def test_s22_empty_history() -> None:
    assert Spec().detect("read", {"path": "/a"}) is None


def _terminal(i: int) -> dict[str, object]:
    return text_result("Traceback: missing package\n\n(Command exited with code 1)",
                       status="completed", exitCode=1,
                       aggregated="Traceback: missing package")


def test_s23_exec_failures_scoped_by_run() -> None:
    s = Spec()
    for i in range(20):
        s.ok("exec", {"command": f"python job-{i}.py"}, _terminal(i), run="old-run")
    assert s.detect("exec", {"command": "python next.py"}, run="new-run") is None


# -- Group 4: generic repeat ----------------------------------------------------------------------


def test_s24_generic_warning_on_pending_calls() -> None:
    s = Spec()
    for _ in range(10):
        s.call("read", {"path": "/same.txt"})
    d = s.detect("read", {"path": "/same.txt"})
    assert d is not None
    assert (d.level, d.detector, d.count) == ("warning", "generic_repeat", 10)
    assert "WARNING" in d.message and "10 times" in d.message


def test_s25_generic_critical_on_identical_outcomes() -> None:
    s = Spec()
    for _ in range(20):
        s.ok("read", {"path": "/same.txt"}, R_SAME)
    d = s.detect("read", {"path": "/same.txt"})
    assert d is not None and (d.level, d.detector) == ("critical", "generic_repeat")
    assert "identical outcomes" in d.message


def test_s27_global_circuit_breaker() -> None:
    s = Spec()
    for _ in range(30):
        s.ok("read", {"path": "/same.txt"}, R_SAME)
    d = s.detect("read", {"path": "/same.txt"})
    assert d is not None and (d.level, d.detector, d.count) == ("critical", "global_circuit_breaker", 30)
    assert "global circuit breaker" in d.message


CYCLE = ["a", "b", "a", "a", "b"]


def test_s28_side_effect_cycle_warns_without_liveness() -> None:
    s = Spec()
    for i in range(20):
        s.ok("side_effect", {"path": CYCLE[i % 5]}, text_result("done"))
    d = s.detect("side_effect", {"path": "a"})
    assert d is not None and (d.level, d.detector) == ("warning", "generic_repeat")
    assert d.liveness_signal is None


def test_s29_same_args_streak_skips_other_args() -> None:
    s = Spec()
    for _ in range(20):
        s.ok("write", {"path": "a.md", "content": "x"}, text_result("wrote a"))
    for _ in range(10):
        s.ok("write", {"path": "b.md", "content": "x"}, text_result("wrote b"))
    d = s.detect("write", {"path": "a.md", "content": "x"})
    assert d is not None and (d.level, d.detector) == ("critical", "generic_repeat")


def test_s30_distinct_writes_not_stuck() -> None:
    s = Spec()
    for i in range(30):
        s.ok("write", {"path": f"/tmp/file-{i}.md"}, text_result(f"wrote {i}"))
    assert s.detect("write", {"path": "/tmp/next.md"}) is None


def test_s31_changed_writes_cycling_not_stuck() -> None:
    s = Spec()
    for i in range(30):
        path = f"/tmp/{i % 15}.md"
        s.ok("write", {"path": path, "content": f"v{i}"},
             text_result(f"wrote {path}", changed=True, diff=f"+v{i} {path}"))
    assert s.detect("write", {"path": "/tmp/next.md", "content": "x"}) is None


def test_s32_alternating_writes_with_revisions_not_stuck() -> None:
    s = Spec()
    for i in range(30):
        path = "/tmp/a.md" if i % 2 else "/tmp/b.md"
        s.ok("write", {"path": path}, text_result("ok", revision=i))
    assert s.detect("write", {"path": "/tmp/c.md"}) is None


def test_s33_writes_with_probes_not_stuck() -> None:
    s = Spec()
    for i in range(30):
        if i in (8, 19):
            s.ok("write", {"path": f"/tmp/probe-{i}.md"}, text_result(f"probe {i}"))
        else:
            s.ok("write", {"path": f"/tmp/{i % 2}.md"}, text_result("stable"))
    assert s.detect("write", {"path": "/tmp/a.md"}) is None


# -- Group 5: known polling -----------------------------------------------------------------------


def test_s34_poll_warning() -> None:
    s = Spec()
    for _ in range(10):
        s.ok("process", POLL_ARGS, POLL_RESULT)
    d = s.detect("process", POLL_ARGS)
    assert d is not None and (d.level, d.detector) == ("warning", "known_poll_no_progress")
    assert "no progress" in d.message


def test_s35_poll_critical() -> None:
    s = Spec()
    for _ in range(20):
        s.ok("process", POLL_ARGS, POLL_RESULT)
    d = s.detect("process", POLL_ARGS)
    assert d is not None and (d.level, d.detector) == ("critical", "known_poll_no_progress")
    assert "CRITICAL" in d.message


def test_s36_progressing_poll_not_stuck() -> None:
    s = Spec()
    for i in range(25):
        s.ok("process", POLL_ARGS,
             text_result(f"line {i}", status="running", aggregated=f"line {i}"))
    assert s.detect("process", POLL_ARGS) is None


def test_s37_custom_thresholds_and_switches() -> None:
    cfg = LoopDetectionConfig(enabled=True, warning_threshold=2, critical_threshold=4,
                              detectors={"genericRepeat": False, "knownPollNoProgress": True,
                                         "pingPong": False})
    s = Spec(cfg)
    for _ in range(2):
        s.ok("process", POLL_ARGS, POLL_RESULT)
    d = s.detect("process", POLL_ARGS)
    assert d is not None and (d.level, d.detector) == ("warning", "known_poll_no_progress")
    for _ in range(2):
        s.ok("process", POLL_ARGS, POLL_RESULT)
    d = s.detect("process", POLL_ARGS)
    assert d is not None and (d.level, d.detector) == ("critical", "known_poll_no_progress")


def test_s38_all_detectors_off() -> None:
    cfg = LoopDetectionConfig(enabled=True, detectors={
        "genericRepeat": False, "knownPollNoProgress": False, "pingPong": False})
    s = Spec(cfg)
    for _ in range(20):
        s.ok("process", POLL_ARGS, POLL_RESULT)
    assert s.detect("process", POLL_ARGS) is None


def test_s40_wait_is_critical_at_warning_threshold() -> None:
    s = Spec()
    for _ in range(10):
        s.ok("wait", {"seconds": 30}, text_result("still waiting"))
    d = s.detect("wait", {"seconds": 30})
    assert d is not None and (d.level, d.detector, d.count) == ("critical", "known_poll_no_progress", 10)


# -- Group 6: ping-pong ---------------------------------------------------------------------------

READ_A = {"path": "/a.txt"}
LIST_W = {"dir": "/workspace"}


def test_s41_ping_pong_warning_on_pending_calls() -> None:
    s = Spec()
    for i in range(9):
        if i % 2 == 0:
            s.call("read", READ_A)
        else:
            s.call("list", LIST_W)
    d = s.detect("list", LIST_W)
    assert d is not None and (d.level, d.detector, d.count) == ("warning", "ping_pong", 10)
    assert "ping-pong loop" in d.message
    assert d.paired_tool_name == "read"


def _alternate(s: Spec, n: int, changing: bool) -> None:
    for i in range(n):
        suffix = f" {i}" if changing else ""
        if i % 2 == 0:
            s.ok("read", READ_A, text_result("read stable" + suffix))
        else:
            s.ok("list", LIST_W, text_result("list stable" + suffix))


def test_s42_ping_pong_critical_with_stable_results() -> None:
    s = Spec()
    _alternate(s, 19, changing=False)
    d = s.detect("list", LIST_W)
    assert d is not None and (d.level, d.detector, d.count) == ("critical", "ping_pong", 20)


def test_s43_ping_pong_changing_results_only_warns() -> None:
    s = Spec()
    _alternate(s, 19, changing=True)
    d = s.detect("list", LIST_W)
    assert d is not None and (d.level, d.detector, d.count) == ("warning", "ping_pong", 20)


def test_s44_broken_alternation_not_stuck() -> None:
    s = Spec()
    s.call("read", READ_A)
    s.call("list", LIST_W)
    s.call("read", READ_A)
    s.call("write", {"path": "/x"})
    assert s.detect("list", LIST_W) is None


def _noop(path: str) -> dict[str, object]:
    return text_result(f"No changes to {path}", changed=False)


def test_s45_ping_pong_of_write_noops_carries_liveness() -> None:
    s = Spec()
    for i in range(10):
        path = "a.md" if i % 2 == 0 else "b.md"
        s.ok("write", {"path": path}, _noop(path))
    d = s.detect("write", {"path": "a.md"})
    assert d is not None and (d.level, d.detector) == ("warning", "ping_pong")
    assert d.liveness_signal == "argument_churn"


# -- Group 7: unknown tool ------------------------------------------------------------------------


def test_s46_nine_unknown_tool_failures_not_stuck() -> None:
    s = Spec()
    for i in range(9):
        s.fail("exec", {"command": f"x{i}"}, RuntimeError("Tool exec not found"))
    assert s.detect("exec", {"command": "y"}) is None


def test_s47_unknown_tool_critical_whatever_the_args() -> None:
    s = Spec()
    for i in range(20):
        s.fail("exec", {"shape": i, "v" * (i + 1): i}, RuntimeError("Tool exec not found"))
    d = s.detect("exec", {"command": "y"})
    assert d is not None and (d.level, d.detector) == ("critical", "unknown_tool_repeat")


def test_s48_unknown_tool_evidence_survives_vetoes() -> None:
    s = Spec()
    for _ in range(10):
        s.fail("tool_call", {"tool": "missing_a"}, "Unknown tool: missing_a")
    s.veto("tool_call", {"tool": "missing_a"})
    s.veto("read", {"path": "/x"})
    d = s.detect("tool_call", {"tool": "missing_a"})
    assert d is not None and (d.detector, d.count) == ("unknown_tool_repeat", 10)
    assert "unavailable tool missing_a" in d.message
    s.fail("tool_call", {"tool": "missing_b"}, "Unknown tool id: missing_b")
    assert s.detect("tool_call", {"tool": "missing_b"}) is None


# -- Group 8: exec normalisation ------------------------------------------------------------------


def test_s49_exec_completed_ignores_duration_and_cwd() -> None:
    s = Spec()
    args = {"command": "grafana-api.sh datasources"}
    for i in range(20):
        s.ok("exec", args, text_result("ok", status="completed", exitCode=0, aggregated="[]",
                                       durationMs=100 + i, cwd=f"/tmp/{i}"))
    d = s.detect("exec", args)
    assert d is not None and (d.level, d.detector) == ("critical", "generic_repeat")


def test_s50_exec_running_hashed_by_tail() -> None:
    s = Spec()
    args = {"command": "npm run dev", "background": True}
    for i in range(20):
        s.ok("exec", args, text_result(f"Command still running (session s{i}, pid {1000 + i})",
                                       status="running", sessionId=f"s{i}", pid=1000 + i,
                                       startedAt=i, cwd=f"/w{i}", tail="listening on 3000"))
    d = s.detect("exec", args)
    assert d is not None and (d.level, d.detector) == ("critical", "generic_repeat")


def test_s51_exec_changing_output_only_warns() -> None:
    s = Spec()
    for i in range(30):
        s.ok("exec", {"command": "date"}, text_result(f"tick {i}", status="completed", exitCode=0,
                                                       aggregated=f"tick {i}"))
    d = s.detect("exec", {"command": "date"})
    assert d is not None and (d.level, d.detector) == ("warning", "generic_repeat")


def test_s52_exec_failed_without_exit_code_only_warns() -> None:
    s = Spec()
    for i in range(30):
        s.ok("exec", {"command": "flaky"}, text_result(f"failed ... attempt {i}", status="failed",
                                                        exitCode=None, aggregated=""))
    d = s.detect("exec", {"command": "flaky"})
    assert d is not None and (d.level, d.detector) == ("warning", "generic_repeat")


TERMINALS = [
    dict(status="completed", exitCode=1, aggregated="Traceback: missing package",
         text="Traceback: missing package\n\n(Command exited with code 1)"),
    dict(status="failed", exitCode=126, aggregated="",
         text="Command not executable (permission denied)"),
    dict(status="failed", exitCode=127, aggregated="", text="Command not found"),
]


def _term(kind: int) -> dict[str, object]:
    t = dict(TERMINALS[kind])
    text = str(t.pop("text"))
    return text_result(text, **t)


def test_s53_terminal_failures_across_commands() -> None:
    for kind in range(3):
        s = Spec()
        for i in range(20):
            s.ok("exec", {"command": f"python job-{i}.py"}, _term(kind))
        assert all(r.outcome_kind == "terminal-exec-failure" for r in s.state.history)
        d = s.detect("exec", {"command": "python next-job.py"})
        assert d is not None and (d.level, d.detector, d.count) == ("critical", "generic_repeat", 20)


DRIFTS = [
    lambda i: f"2026-05-{10 + i % 9:02d}T10:{i:02d}:00Z error: boom",
    lambda i: f"10:{i:02d}:33 error: boom",
    lambda i: f"error: boom attempt {i}",
    lambda i: f"error: boom retry={i}",
    lambda i: f"error: boom after {i}ms",
    lambda i: f"error: boom after {i}s",
    lambda i: f"error: boom pid={4000 + i}",
]


def _fail_out(out: str, code: int = 1) -> dict[str, object]:
    return text_result(out, status="failed", exitCode=code, aggregated=out)


def test_s54_terminal_failure_identity_masks_when_spans() -> None:
    for drift in DRIFTS:
        s = Spec()
        for i in range(20):
            s.ok("exec", {"command": "node job.js"}, _fail_out(drift(i)))
        d = s.detect("exec", {"command": "node job.js"})
        assert d is not None and (d.level, d.detector, d.count) == ("critical", "generic_repeat", 20), drift(1)


def test_s55_significant_change_resets_streak() -> None:
    cases = [
        (lambda i: _fail_out(f"error: boom pid={i}"), _fail_out("error: boom pid=99", code=2)),
        (lambda i: _fail_out(f"error: boom pid={i}"), _fail_out("error: something else")),
        (lambda i: _fail_out("error: boom errno 12"), _fail_out("error: boom errno 13")),
        (lambda i: _fail_out("error: boom on 2026-05-31"), _fail_out("error: boom on 2026-06-01")),
    ]
    for before, last in cases:
        s = Spec()
        for i in range(19):
            s.ok("exec", {"command": "node job.js"}, before(i))
        s.ok("exec", {"command": "node job.js"}, last)
        d = s.detect("exec", {"command": "node job.js"})
        assert d is not None and (d.level, d.detector) == ("warning", "generic_repeat"), last


def test_s56_other_command_interrupts_identity() -> None:
    s = Spec()
    for i in range(19):
        s.ok("exec", {"command": "node first.js"}, _fail_out(f"error: boom pid={i}"))
    s.ok("exec", {"command": "node second.js"}, _fail_out("error: other failure"))
    d = s.detect("exec", {"command": "node first.js"})
    assert d is not None and (d.level, d.detector) == ("warning", "generic_repeat")
    s.ok("exec", {"command": "node first.js"}, _fail_out("error: boom pid=99"))
    d = s.detect("exec", {"command": "node first.js"})
    assert d is not None and (d.level, d.detector) == ("warning", "generic_repeat")


def test_s57_vetoes_climb_to_global_breaker() -> None:
    s = Spec()
    for i in range(20):
        s.ok("exec", {"command": f"python job-{i}.py"}, _term(0))
    for i in range(20, 30):
        args = {"command": f"python job-{i}.py"}
        d = s.detect("exec", args)
        assert d is not None and (d.level, d.detector, d.count) == ("critical", "generic_repeat", i)
        r = s.veto("exec", args)
        assert r is not None and r.outcome_kind == "tool-loop-veto" and r.result_hash is None
    d = s.detect("exec", {"command": "python final-job.py"})
    assert d is not None and (d.detector, d.count) == ("global_circuit_breaker", 30)


def test_s58_non_terminal_results_have_no_outcome_kind() -> None:
    results = [
        text_result("\n\n(Command exited with code 1)", status="completed", exitCode=1,
                    aggregated="\n\n(Command exited with code 1)"),
        text_result("done", status="completed", exitCode=0, aggregated="done"),
        text_result("slow", status="failed", exitCode=1, timedOut=True, aggregated="slow"),
        text_result("inf", status="failed", exitCode=float("inf"), aggregated="inf"),
        text_result("none", status="failed", exitCode=None, aggregated="none"),
    ]
    s = Spec()
    for i in range(30):
        s.ok("exec", {"command": f"cmd-{i}"}, results[i % len(results)])
    assert all(r.outcome_kind is None for r in s.state.history)
    assert s.detect("exec", {"command": "cmd-next"}) is None


def test_s59_interruption_ends_terminal_tail() -> None:
    interruptions = [
        ("exec", {"command": "other"}, _fail_out("a distinct failure", code=3)),
        ("exec", {"command": "other"}, text_result("ok", status="completed", exitCode=0, aggregated="ok")),
        ("exec", {"command": "other"}, text_result("t", status="failed", exitCode=1, timedOut=True, aggregated="t")),
        ("read", {"path": "/x"}, text_result("file")),
    ]
    for tool, args, result in interruptions:
        s = Spec()
        for i in range(19):
            s.ok("exec", {"command": f"python job-{i}.py"}, _term(0))
        s.ok(tool, args, result)
        s.ok("exec", {"command": "python last.py"}, _term(0))
        assert s.detect("exec", {"command": "python next.py"}) is None, tool


# -- Group 10: write outcomes and argument churn --------------------------------------------------


def test_s69_reconcile_rewritten_call_reports_churn() -> None:
    s = Spec(LoopDetectionConfig(enabled=True, warning_threshold=6, critical_threshold=12,
                                 global_circuit_breaker_threshold=18))
    for i in range(6):
        path = "/tmp/a.md" if i % 2 == 0 else "/tmp/b.md"
        s.ok("write", {"path": "/tmp/a.md", "content": f"v{i}"},
             text_result(f"wrote {path}", changed=True, diff=f"+v{i}"))
    s.call("write", {"path": "/tmp/original.md", "content": "x"}, "rewritten-call")
    got = s.detector.reconcile_call(s.state, "write", {"path": "/tmp/a.md", "content": "new"},
                                    call_id="rewritten-call")
    assert got == {"active": True, "count": 6, "variantCount": 6, "matchedPendingCall": True,
                   "executionParamsChanged": True}


def test_s70_reconcile_without_id_rebinds_pending_not_veto() -> None:
    s = Spec()
    s.call("write", {"content": "pending-args"})
    s.veto("write", {"content": "vetoed-args"})
    veto_hash = s.state.history[1].args_hash
    got = s.detector.reconcile_call(s.state, "write", {"content": "final-args"})
    assert got == {"active": False, "count": 0, "variantCount": 0, "matchedPendingCall": True,
                   "executionParamsChanged": True}
    assert s.state.history[0].args_hash == s.detector.fingerprint("write", {"content": "final-args"}).args_hash
    assert s.state.history[1].args_hash == veto_hash


def test_s71_write_noop_churn_warns() -> None:
    s = Spec()
    for i in range(30):
        path = CYCLE[i % 5] + ".md"
        s.ok("write", {"path": path}, _noop(path))
    s.call("write", {"path": "a.md"})
    d = s.detect("write", {"path": "b.md"})
    assert d is not None and (d.level, d.detector) == ("warning", "argument_churn")
    assert d.liveness_signal == "argument_churn"


def test_s72_error_churn_warns_with_liveness() -> None:
    s = Spec()
    for i in range(20):
        s.fail("side_effect", {"path": CYCLE[i % 5]}, RuntimeError("permission denied"))
    d = s.detect("side_effect", {"path": "a"})
    assert d is not None and (d.level, d.detector) == ("warning", "argument_churn")
    assert d.liveness_signal == "argument_churn"


def test_s73_churn_counts_and_novel_args() -> None:
    s = Spec()
    for i in range(30):
        path = CYCLE[i % 5] + ".md"
        s.ok("write", {"path": path}, _noop(path))
    d = s.detect("write", {"path": "a.md"})
    assert d is not None and (d.detector, d.count) == ("argument_churn", 30)
    s.call("write", {"path": "a.md"})
    d = s.detect("write", {"path": "b.md"})
    assert d is not None and (d.detector, d.count) == ("argument_churn", 29)
    assert s.detect("write", {"path": "c.md"}) is None


# -- Group 11: messaging sends --------------------------------------------------------------------


def _send_result(i: int) -> dict[str, object]:
    payload = {"ok": True, "channel": "feishu", "chatId": "oc_chat", "runId": f"run_{i}",
               "messageId": f"om_{i}", "receipt": {"platformMessageId": f"p_{i}"}}
    return text_result(str(payload), **payload)


SEND = {"action": "send", "target": "feishu:oc_chat", "text": "ping"}


def test_s77_identical_sends_go_critical() -> None:
    s = Spec()
    for i in range(20):
        s.ok("message", SEND, _send_result(i))
    d = s.detect("message", SEND)
    assert d is not None and (d.level, d.detector) == ("critical", "generic_repeat")
    s = Spec()
    for i in range(20):
        s.ok("sessions_send", {"sessionKey": "k", "message": "hi"},
             text_result("sent", runId=f"r{i}", status="ok"))
    d = s.detect("sessions_send", {"sessionKey": "k", "message": "hi"})
    assert d is not None and d.level == "critical"
    s = Spec()
    for i in range(20):
        s.ok("telegram", {"action": "send", "to": "@chat", "text": "hi"},
             text_result(f"sent {i}", messageId=i, ok=True))
    d = s.detect("telegram", {"action": "send", "to": "@chat", "text": "hi"})
    assert d is not None and d.level == "critical"


def test_s78_sends_with_different_text_not_stuck() -> None:
    s = Spec()
    for i in range(20):
        s.ok("message", {**SEND, "text": f"line {i}"}, _send_result(i))
    assert s.detect("message", {**SEND, "text": "line final"}) is None


def test_s81_vetoed_sends_reach_global_breaker() -> None:
    s = Spec()
    for i in range(20):
        s.ok("message", SEND, _send_result(i))
    for i in range(20, 30):
        d = s.detect("message", SEND)
        assert d is not None and (d.level, d.detector, d.count) == ("critical", "generic_repeat", i)
        s.veto("message", SEND)
    d = s.detect("message", SEND)
    assert d is not None and (d.detector, d.count) == ("global_circuit_breaker", 30)


def test_s82_pending_calls_not_counted() -> None:
    s = Spec()
    for i in range(20):
        s.ok("message", SEND, _send_result(i))
    for _ in range(10):
        s.call("message", SEND)
    d = s.detect("message", SEND)
    assert d is not None and (d.level, d.detector, d.count) == ("critical", "generic_repeat", 20)


def test_s83_new_route_after_vetoes_is_progress() -> None:
    s = Spec()
    for i in range(20):
        s.ok("message", SEND, _send_result(i))
    for _ in range(5):
        s.veto("message", SEND)
    s.ok("message", SEND, text_result("sent", ok=True, route={"id": "new-route"}))
    d = s.detect("message", SEND)
    assert d is not None and (d.level, d.detector, d.count) == ("warning", "generic_repeat", 26)


def test_s84_repeated_plugin_vetoes_escalate() -> None:
    s = Spec()
    args = {"action": "read", "channel": "x"}
    for _ in range(20):
        s.ok("message", args, text_result("denied", status="blocked",
                                          deniedReason="plugin-before-tool-call"))
    d = s.detect("message", args)
    assert d is not None and d.level == "critical"


def _plugin_send(i: int, conversation: str) -> dict[str, object]:
    return {"content": [{"type": "text", "text": "sent"}], "details": {"message": {
        "id": f"qa_{i}", "accountId": "acc", "direction": "outbound",
        "conversation": {"id": conversation}, "senderId": "bot", "text": "hello",
        "timestamp": 1000 + i}}}


def test_s85_plugin_shaped_sends() -> None:
    args = {"action": "send", "to": "loop-room", "text": "hello"}
    s = Spec()
    for i in range(20):
        s.ok("message", args, _plugin_send(i, "loop-room"))
    d = s.detect("message", args)
    assert d is not None and d.level == "critical"
    s = Spec()
    for i in range(20):
        s.ok("message", args, _plugin_send(i, f"room-{i}"))
    d = s.detect("message", args)
    assert d is None or d.level != "critical"
