"""Issue 14: the ``early`` preset counts a repeat as loop evidence only without progress.

Each pattern of the issue has a looping variant (still flagged) and a progressing variant (no
longer flagged). Every sequence is synthetic and goes through the real guard (``replay``) or
detector; ``openclaw`` verdicts must not move.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from loopwarden import LoopDetectionConfig, LoopDetector, SessionState, ToolCall, profiles, replay

EARLY = LoopDetectionConfig(enabled=True, preset="early")
OPENCLAW = LoopDetectionConfig(enabled=True)


def first(findings: list[Any], action: str | None = None) -> Any:
    return next((f for f in findings if action is None or f.action == action), None)


def sh(command: str, result: Any = "", error: Any = None) -> ToolCall:
    return ToolCall("exec", {"command": command}, result=result, error=error)


def error_json(message: str, tool: str = "exec") -> str:
    return json.dumps({"status": "error", "tool": tool, "error": message}, indent=2)


# -- 1. identical arguments are not enough: the outcomes must not progress ----------------------


def test_rerun_with_changing_results_is_not_warned() -> None:
    calls = [sh("pytest tests/x.py", f"{12 - i} failed, {i} passed") for i in range(12)]
    assert replay(calls, EARLY) == []


def test_browser_snapshots_of_a_changing_page_are_not_warned() -> None:
    calls = [ToolCall("browser", {"action": "snapshot", "targetId": "T1"},
                      result=f"page step {i}: form field {i} filled") for i in range(12)]
    assert replay(calls, EARLY) == []


def test_rerun_with_identical_results_is_warned_then_blocked() -> None:
    calls = [sh("pytest tests/x.py", "3 failed, 9 passed") for _ in range(12)]
    findings = replay(calls, EARLY)
    assert (first(findings).index, first(findings).detector) == (5, "generic_repeat")
    assert first(findings, "block").index == 10


# -- 2. a fresh mutation between repeats makes the repeat a new experiment ----------------------


def _edit(i: int) -> ToolCall:
    return ToolCall("edit", {"path": "src/x.py", "old_string": f"v{i}", "new_string": f"v{i + 1}"},
                    result="Successfully replaced text in src/x.py.")


def test_tests_rerun_after_each_edit_are_not_warned() -> None:
    calls = [c for i in range(10) for c in (_edit(i), sh("pytest tests/x.py", "1 failed"))]
    assert replay(calls, EARLY) == []


def test_replaying_the_same_edit_is_not_a_fresh_mutation() -> None:
    same_edit = ToolCall("edit", {"path": "src/x.py", "old_string": "a", "new_string": "b"},
                         result="Successfully replaced text in src/x.py.")
    calls = [c for _ in range(10) for c in (same_edit, sh("pytest tests/x.py", "1 failed"))]
    assert first(replay(calls, EARLY)) is not None


def test_a_failed_mutation_changes_nothing() -> None:
    broken = [ToolCall("edit", {"path": "src/x.py", "old_string": f"v{i}", "new_string": "w"},
                       error="String to replace not found in file.") for i in range(10)]
    calls = [c for edit in broken for c in (edit, sh("pytest tests/x.py", "1 failed"))]
    assert any(f.tool == "exec" and f.detector == "generic_repeat" for f in replay(calls, EARLY))


def test_clicks_between_identical_snapshots_are_progress_attempts() -> None:
    calls = []
    for i in range(10):
        calls.append(ToolCall("browser", {"action": "act", "request": {"kind": "click", "ref": f"e{i}"}},
                              result={"ok": True}))
        calls.append(ToolCall("browser", {"action": "snapshot"}, result="the same page"))
    assert replay(calls, EARLY) == []
    unchanged = [c for c in calls if c.args["action"] == "snapshot"]
    assert first(replay(unchanged, EARLY)) is not None


@pytest.mark.parametrize("tool", ["mcp__db__update_row", "createIssue", "Write", "apply_patch"])
def test_builtin_and_naming_convention_mutations(tool: str) -> None:
    calls = [c for i in range(10) for c in (ToolCall(tool, {"n": i}, result="done"),
                                             ToolCall("query", {"q": "count"}, result="7 rows"))]
    assert replay(calls, EARLY) == []


def test_user_registered_mutations() -> None:
    registry = profiles.default_registry.copy()
    calls = [c for i in range(10) for c in (ToolCall("deploy", {"build": i}, result="queued"),
                                             ToolCall("status", {}, result="failing"))]
    assert first(replay(calls, EARLY, profiles=registry)) is not None
    registry.register("deploy", mutating=True)
    assert replay(calls, EARLY, profiles=registry) == []
    registry.register("deploy", mutating=lambda args: args["build"] % 2 == 0)
    assert replay(calls, EARLY, profiles=registry) == []  # every other deploy still breaks


def test_conservative_shell_mutations() -> None:
    assert profiles.is_mutating("exec", {"command": "sed -i s/a/b/ f.py"})
    assert profiles.is_mutating("Bash", {"command": "cd x && echo hi > notes.txt"})
    assert profiles.is_mutating("shell", {"command": ["bash", "-lc", "git commit -am wip"]})
    for command in ("pytest -x 2>&1 | tail", "grep -r foo . > /dev/null", "cat a.txt", "ls -la"):
        assert not profiles.is_mutating("exec", {"command": command})


# -- 3. pacing calls are neutral ------------------------------------------------------------------


def test_sleeps_are_never_loop_evidence_on_their_own() -> None:
    calls = [sh("sleep 30", "") for _ in range(15)]
    assert replay(calls, EARLY) == []
    waits = [ToolCall("browser", {"action": "act", "kind": "wait", "timeMs": 2000},
                      result={"ok": True}) for _ in range(15)]
    assert replay(waits, EARLY) == []
    assert first(replay(calls, OPENCLAW)) is not None  # OpenClaw itself is unchanged


def test_a_sleep_between_fast_polls_is_not_a_ping_pong() -> None:
    poll = ToolCall("check_job", {"id": 7}, result="running")
    calls = [c for _ in range(10) for c in (poll, sh("sleep 2", ""))]
    findings = replay(calls, EARLY)
    assert findings and all(f.detector != "ping_pong" and f.tool == "check_job" for f in findings)


def test_endless_sleeps_still_meet_the_hard_cap() -> None:
    calls = [sh("sleep 30", "") for _ in range(25)]
    blocked = first(replay(calls, EARLY), "block")
    assert blocked is not None and blocked.detector == "global_circuit_breaker"


# -- 4. back-off is compliance, fast polling is a loop -------------------------------------------


def _paced_poll(seconds: list[int]) -> list[ToolCall]:
    poll = ToolCall("process", {"action": "poll", "sessionId": "job"}, result="(no new output)")
    calls = [poll]
    for wait in seconds:
        calls += [sh(f"sleep {wait}", ""), poll]
    return calls


def test_growing_sleeps_between_polls_are_not_warned() -> None:
    assert replay(_paced_poll([30, 60, 90, 120, 150, 180, 210, 240]), EARLY) == []


def test_fast_polling_is_warned_and_blocked() -> None:
    findings = replay(_paced_poll([0] * 0) * 12, EARLY)
    assert first(findings).index == 5
    assert first(findings, "block").detector == "known_poll_no_progress"


def test_constant_pacing_warns_but_only_the_hard_cap_blocks() -> None:
    findings = replay(_paced_poll([30] * 24), EARLY)
    assert (first(findings).action, first(findings).count) == ("warn", 6)
    blocked = first(findings, "block")
    assert blocked is not None and blocked.count == 15  # not at criticalThreshold 10


def test_backing_off_still_meets_the_hard_cap() -> None:
    findings = replay(_paced_poll([30 * (i + 1) for i in range(24)]), EARLY)
    assert first(findings).level == "critical" and first(findings).count == 15


def _timed_polls(gaps_s: list[int]) -> tuple[LoopDetector, SessionState, dict[str, Any]]:
    """A poll recorded at the given gaps (record timestamps, as a live guard sees them)."""
    detector = LoopDetector(EARLY)
    state = SessionState()
    args = {"action": "poll", "sessionId": "job"}
    now = 1_700_000_000_000
    for i, gap in enumerate([0, *gaps_s]):
        now += gap * 1000
        record = detector.record_call(state, "process", args, call_id=f"c{i}")
        record.timestamp = now
        detector.record_outcome(state, "process", args, result="(no new output)", call_id=f"c{i}")
    return detector, state, args


def test_growing_gaps_between_record_timestamps_are_back_off() -> None:
    detector, state, args = _timed_polls([20, 40, 80, 160, 320, 640, 900, 900])
    assert detector.detect(state, "process", args) is None
    detector, state, args = _timed_polls([1] * 8)
    detection = detector.detect(state, "process", args)
    assert detection is not None and detection.level == "warning"


# -- 5. only volatile-looking fields are learned away ---------------------------------------------


def test_growing_output_of_a_poll_is_progress() -> None:
    lines: list[str] = []
    calls = []
    for i in range(14):
        lines.append(f"ingested batch {chr(97 + i)}")
        calls.append(ToolCall("ingest_status", {"job": 3}, result="\n".join(lines)))
    assert replay(calls, EARLY) == []


def test_growing_counts_are_progress() -> None:
    calls = [ToolCall("ingest_status", {"job": 3}, result={"state": "running", "rows": 100 * i})
             for i in range(14)]
    assert replay(calls, EARLY) == []


def test_changing_prose_is_not_learned_as_volatile() -> None:
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu", "xi"]
    calls = [ToolCall("job_log", {"id": 1}, result={"status": "running", "last": f"step {w} done"})
             for w in words]
    assert replay(calls, EARLY) == []


def test_volatile_tokens_and_jittering_measurements_are_learned() -> None:
    nonces = [hashlib.sha256(bytes([i])).hexdigest()[:6] + str(i) for i in range(14)]
    calls = [ToolCall("svc", {"name": "api"},
                      result={"state": "errored", "nonce": nonces[i],
                              "mem": f"{480 + (i * 37) % 11}.{i % 10}mb"}) for i in range(14)]
    findings = replay(calls, EARLY)
    assert first(findings).index == 6 and first(findings, "block") is not None
    assert {"$.nonce", "$.mem#digits"} <= set(first(findings).learned)


def test_a_text_result_learns_for_its_own_call_only() -> None:
    noisy = [sh("pm2 status", f"api online mem {400 + i % 3}.{i}mb cpu {i % 4}%") for i in range(4)]
    progressing = [sh("pytest -q", f"{9 - i} failed, {i} passed") for i in range(10)]
    assert replay(noisy + progressing, EARLY) == []


# -- 6. errors reported inside results are errors --------------------------------------------------


@pytest.mark.parametrize("body", [
    error_json("fetch failed: network unreachable", "web_fetch"),
    {"ok": False, "error": "fetch failed: network unreachable"},
    {"isError": True, "content": [{"type": "text", "text": "fetch failed: network unreachable"}]},
    "Exit code 1\nfetch failed: network unreachable",
])
def test_error_shaped_results_repeat_as_errors(body: Any) -> None:
    calls = [ToolCall("web_fetch", {"url": f"https://example.com/{i}"}, result=body)
             for i in range(12)]
    findings = replay(calls, EARLY)
    warned = first(findings)
    assert (warned.detector, warned.index) == ("error_repeat", 5)
    assert first(findings, "block").detector == "error_repeat"
    # OpenClaw's own rules see no loop; loopwarden's failure_repeat (issue 21, on in both
    # presets) warns at the 10th failure over fresh URLs.
    assert replay(calls, OPENCLAW.with_overrides(detectors={"failureRepeat": False})) == []
    assert [(f.detector, f.index) for f in replay(calls, OPENCLAW)] == [("failure_repeat", 10)]


@pytest.mark.parametrize("body", [
    {"ok": True, "error": None},
    {"results": ["a", "b"], "error": "one source timed out"},
    {"status": "ok", "errors": []},
    json.dumps({"data": [1, 2], "error": ""}),
])
def test_successful_results_with_error_fields_are_not_errors(body: Any) -> None:
    calls = [ToolCall("search", {"q": f"term {i}"}, result=body) for i in range(12)]
    assert all(f.detector != "error_repeat" for f in replay(calls, EARLY))


# -- 7. the 6th identical no-progress call carries the warning -----------------------------------


@pytest.mark.parametrize("calls", [
    [sh("pm2 status", "api errored") for _ in range(6)],
    [ToolCall("process", {"action": "poll", "sessionId": "s"}, result="(no new output)")] * 6,
    [ToolCall("fetch", {"url": f"u{i}"}, result=error_json("HTTP 503", "fetch")) for i in range(6)],
    [c for _ in range(6) for c in (ToolCall("check", {}, result="pending"), sh("sleep 1", ""))],
])
def test_six_call_loops_are_warned_on_the_sixth_call(calls: list[ToolCall]) -> None:
    warned = first(replay(calls, EARLY))
    assert warned is not None and warned.timing == "after"
    assert calls[warned.index] is calls[-1] or calls[warned.index + 1].args == {"command": "sleep 1"}
    assert sum(c.tool_name == calls[warned.index].tool_name for c in calls[: warned.index + 1]) == 6


def test_five_repeats_and_a_change_are_not_warned() -> None:
    calls = [sh("pm2 status", "api errored")] * 5 + [sh("pm2 status", "api online")]
    assert replay(calls, EARLY) == []


# -- 8. the same error with fresh arguments -------------------------------------------------------


def test_missing_subcommand_retried_with_new_ids() -> None:
    message = "error: unknown command 'describe'\n\nCommand exited with code 1"
    calls = [sh(f"openclaw nodes describe --id n{i:03d}", error_json(message)) for i in range(10)]
    warned = first(replay(calls, EARLY))
    assert (warned.detector, warned.index) == ("error_repeat", 5)


def test_malformed_browser_requests_failing_the_same_way() -> None:
    calls = [ToolCall("browser", {"action": "act", "request": {"kind": "clik", "ref": f"e{i}"}},
                      result=error_json("Invalid request: unknown kind", "browser"))
             for i in range(10)]
    warned = first(replay(calls, EARLY))
    assert (warned.detector, warned.index) == ("error_repeat", 5)


def test_distinct_calls_that_only_report_an_exit_status_are_not_one_error() -> None:
    calls = [ToolCall("Bash", {"command": f"grep -q pattern{i} src/"}, error="Exit code 1")
             for i in range(12)]
    assert replay(calls, EARLY) == []
    same = [ToolCall("Bash", {"command": "grep -q pattern src/"}, error="Exit code 1")] * 8
    assert first(replay(same, EARLY)) is not None


def test_a_batch_of_distinct_successful_calls_is_not_flagged() -> None:
    calls = [ToolCall("read", {"path": f"src/m{i}.py"}, result=f"module {i}") for i in range(25)]
    assert replay(calls, EARLY) == []


# -- eval --by and calibrate with few runs ---------------------------------------------------------


def _labelled_corpus(tmp_path: Any) -> Any:
    """Two sources, three repositories: one loop per repository but the last, which misses."""
    root = tmp_path / "corpus"
    labels = []
    plans = [("alpha", "o+r1", True), ("alpha", "o+r2", True), ("beta", "o+r3", True),
             ("beta", "o+r3", False), ("alpha", "o+r1", False)]
    for n, (source, repo, loop) in enumerate(plans):
        result = "stuck" if loop and repo != "o+r3" else None
        lines = [json.dumps({"tool": "check", "args": {"n": n}, "result": result or f"step {i}"})
                 for i in range(12)]
        path = root / source / repo / f"t{n}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        labels.append({"file": f"{source}/{repo}/t{n}.jsonl", "source": source, "loop": loop,
                       "loop_start": 0 if loop else None, "warn_by": 9 if loop else None,
                       "loop_end": 11 if loop else None})
    (root / "labels.json").write_text(json.dumps(labels))
    return root


def test_eval_by_source_reports_repositories_and_holds_each_group_out(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from loopwarden.cli import app

    root = _labelled_corpus(tmp_path)
    result = CliRunner().invoke(app, ["eval", str(root / "labels.json"), "--preset", "early",
                                      "--by", "source", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data["by_repository"]) == {"o+r1", "o+r2", "o+r3"}
    assert data["by_repository"]["o+r3"]["loops"] == 1
    assert data["by_repository"]["o+r3"]["timely"] == 0
    held = {g["group"]: g for g in data["leave_one_out"]["groups"]}
    assert held["alpha"]["loops_lost"] == 0  # both its loops caught
    assert held["beta"]["expected_timely"] == 1.0 and held["beta"]["loops_lost"] == 1.0
    text = CliRunner().invoke(app, ["eval", str(root / "labels.json"), "--preset", "early",
                                    "--by", "repository", "--markdown"])
    assert "| held-out repository |" in text.stdout and "| o+r3 | 1 | 0 | 1 | 1 |" in text.stdout


@pytest.mark.slow
def test_calibrate_defaults_work_from_a_hundred_runs() -> None:
    from loopwarden.offline.calibration import calibrate, score_run

    runs = [[ToolCall("read", {"p": f"f{(i * j) % 23}"}, result=f"text {j}") for j in range(30)]
            for i in range(100)]
    result = calibrate([score_run(r, EARLY) for r in runs], base=EARLY)
    assert result.bounded == ("warnings",) and "need 199" in result.note
    assert result.critical_threshold >= EARLY.critical_threshold
    assert result.critical_threshold > result.warning_threshold
    assert "Blocks are NOT bounded" in result.guarantee
    enough = calibrate([score_run(r, EARLY) for r in runs] * 2, base=EARLY)
    assert enough.bounded == ("warnings", "blocks") and enough.note == ""
