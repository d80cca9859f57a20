"""loopwarden's ``cycle`` detector: no-progress cycles of period 3-6 (period 2 stays OpenClaw's
ping-pong), in the style of the spec's §i scenarios, plus the guard's handling of blocked
attempts, batch admission, calibration and the detectors' O(1) gate."""

from __future__ import annotations

import random
from typing import Any

import pytest

from loopwarden import LoopDetectionConfig, LoopEvent, LoopGuard, ToolCall, replay
from loopwarden.engine import LoopDetector
from loopwarden.engine.detectors import RULES, Detection, Facts, evaluate
from loopwarden.engine.detectors.cycle import no_progress_cycle
from loopwarden.engine.history import SessionState
from loopwarden.offline.calibration import score_run
from spec_helpers import VETO_RESULT, Spec, text_result

Step = tuple[str, dict[str, Any]]

READ: Step = ("read", {"path": "/src/app.py"})
GREP: Step = ("grep", {"pattern": "TODO"})
LS: Step = ("ls", {"path": "/src"})
TEST: Step = ("exec", {"command": "pytest -q"})
EDIT: Step = ("edit", {"path": "/src/app.py", "old": "a", "new": "b"})
DIFF: Step = ("exec", {"command": "git diff"})

PERIOD_3 = [READ, GREP, LS]
PERIOD_4 = [READ, GREP, LS, TEST]
PERIOD_5 = [READ, GREP, LS, TEST, EDIT]
PERIOD_6 = [READ, GREP, LS, TEST, EDIT, DIFF]


def _result(step: Step, i: int = 0) -> dict[str, Any]:
    return text_result(f"{step[0]} output")


def _drive(s: Spec, steps: list[Step], calls: int, *, run: str | None = None,
           result: Any = _result) -> list[Detection | None]:
    """Detect, then run, ``calls`` calls cycling through ``steps``; detections by call index."""
    seen: list[Detection | None] = []
    for i in range(calls):
        tool, args = steps[i % len(steps)]
        seen.append(s.detect(tool, args, run=run))
        s.ok(tool, args, result((tool, args), i), run=run)
    return seen


def _levels(seen: list[Detection | None]) -> list[tuple[str, str, int] | None]:
    return [None if d is None else (d.detector, d.level, d.count) for d in seen]


# -- engine scenarios ------------------------------------------------------------------------


@pytest.mark.parametrize(("steps", "first"), [
    (PERIOD_3, 10), (PERIOD_4, 10), (PERIOD_5, 10),
    (PERIOD_6, 12),  # a cycle counts only once it has run twice over (2k calls)
])
def test_cycle_warns_at_the_warning_threshold_and_blocks_at_the_critical(
        steps: list[Step], first: int) -> None:
    seen = _levels(_drive(Spec(), steps, 26))
    # The call at index i is the (i + 1)-th of the cycling tail: its count.
    assert seen[:first - 1] == [None] * (first - 1)
    assert seen[first - 1:19] == [("cycle", "warning", n) for n in range(first, 20)]
    assert seen[19:] == [("cycle", "critical", n) for n in range(20, 27)]


def test_cycle_messages_name_the_tools_from_the_current_call() -> None:
    s = Spec()
    _drive(s, PERIOD_3, 9)
    warning = s.detect(*READ)
    assert warning is not None
    assert warning.message == (
        "WARNING: You are repeating a cycle of 3 tool calls (read \u2192 grep \u2192 ls) with "
        "identical results (10 consecutive calls). This looks like a no-progress loop; change "
        "your approach or report the task as failed.")
    assert warning.paired_tool_name is None and warning.liveness_signal is None
    _drive(s, PERIOD_3, 10)
    critical = s.detect(*GREP)
    assert critical is not None and critical.count == 20
    assert critical.message == (
        "CRITICAL: You are repeating a cycle of 3 tool calls (grep \u2192 ls \u2192 read) with "
        "identical results (20 consecutive calls). This appears to be a stuck cycle. Session "
        "execution blocked to prevent resource waste.")


def test_one_warning_key_per_cycle_whatever_the_phase() -> None:
    s = Spec()
    seen = _drive(s, PERIOD_3, 15)
    keys = {d.warning_key for d in seen if d is not None}
    assert len(keys) == 1 and next(iter(keys), "").startswith("cycle:")
    other = Spec()
    reordered = _drive(other, [READ, LS, GREP], 15)  # the same calls in another cycle order
    assert {d.warning_key for d in reordered if d is not None}.isdisjoint(keys)


def test_period_two_stays_ping_pong() -> None:
    s = Spec()
    seen = _drive(s, [READ, LS], 24)
    assert {d.detector for d in seen if d is not None} == {"ping_pong"}
    assert _levels(seen)[9] == ("ping_pong", "warning", 10)
    assert _levels(seen)[19] == ("ping_pong", "critical", 20)
    # Period 4 or 6 made of a period-2 alternation is still only ping-pong.
    assert no_progress_cycle(s.state, None, s.detector.fingerprint(*READ)).count == 0


def test_period_one_stays_generic_repeat() -> None:
    s = Spec()
    seen = _drive(s, [READ], 21)
    assert {d.detector for d in seen if d is not None} == {"generic_repeat"}


def test_one_tool_cycling_its_arguments_is_not_a_cycle() -> None:
    # §i scenario 28's shape: OpenClaw leaves one tool's argument variants to generic repeat
    # and argument churn, which never block for it.
    s = Spec()
    steps = [("side_effect", {"path": p}) for p in "abc"]
    seen = _drive(s, steps, 30, result=lambda step, i: text_result("done"))
    assert not any(d is not None and d.detector == "cycle" for d in seen)


def test_a_step_whose_result_changes_never_fires() -> None:
    def changing(step: Step, i: int) -> dict[str, Any]:
        return text_result(f"{step[0]} run {i}") if step == LS else _result(step)

    seen = _drive(Spec(), PERIOD_3, 29, result=changing)
    assert seen == [None] * 29


def test_cycle_counts_from_where_results_stopped_changing() -> None:
    def settles(step: Step, i: int) -> dict[str, Any]:
        return text_result(f"grep run {i}") if step == GREP and i < 10 else _result(step)

    seen = _levels(_drive(Spec(), PERIOD_3, 24, result=settles))
    # The last changed grep ran at index 7; the tail starts right after it.
    assert seen[17] == ("cycle", "warning", 10)
    assert seen[:17] == [None] * 17


def test_a_different_call_breaks_the_cycle() -> None:
    s = Spec()
    _drive(s, PERIOD_3, 8)
    s.ok("web_search", {"q": "how to fix"}, text_result("answers"))
    seen = _levels(_drive(s, PERIOD_3, 21))
    assert seen[:9] == [None] * 9  # the count restarts after the interruption
    assert seen[9] == ("cycle", "warning", 10)
    assert seen[19] == ("cycle", "critical", 20)


def test_a_pending_call_in_the_tail_ends_it() -> None:
    s = Spec()
    _drive(s, PERIOD_3, 3)
    s.call(*READ)  # its outcome never arrived
    s.call(*GREP)
    seen = _levels(_drive(s, [LS, READ, GREP], 12))
    assert seen[:9] == [None] * 9
    assert seen[9] == ("cycle", "warning", 10)


def test_switch_off_disables_cycles() -> None:
    off = Spec(LoopDetectionConfig(enabled=True, detectors={"cycle": False}))
    assert _drive(off, PERIOD_3, 30) == [None] * 30


@pytest.mark.parametrize("preset", ["openclaw", "early"])
def test_switch_defaults_on_in_both_presets(preset: str) -> None:
    config = LoopDetectionConfig.model_validate({"enabled": True, "preset": preset})
    assert config.detectors.cycle is True
    assert LoopDetectionConfig.model_validate(
        {"detectors": {"cycle": False}}).detectors.cycle is False
    seen = _drive(Spec(config), PERIOD_3, 12)
    first = next(d for d in seen if d is not None)
    assert (first.detector, first.count) == ("cycle", config.warning_threshold)


def test_cycles_are_run_scoped() -> None:
    s = Spec()
    for i in range(9):
        tool, args = PERIOD_3[i % 3]
        s.ok(tool, args, _result((tool, args)), run="run-1")
        # Another run's calls share the window but are not part of run-1's tail.
        s.ok("heartbeat", {"n": i}, text_result("ok"), run="hb")
    assert s.detect(*READ, run="run-2") is None
    assert s.detect(*READ) is None
    d = s.detect(*READ, run="run-1")
    assert d is not None and (d.detector, d.count) == ("cycle", 10)


def test_a_cycle_warning_never_downgrades_an_existing_critical() -> None:
    s = Spec()
    for _ in range(17):
        s.ok(*READ, _result(READ))
    _drive(s, [GREP, LS, READ], 11)  # read's identical outcomes now number 20
    d = s.detect(*READ)
    assert d is not None and (d.level, d.detector, d.count) == ("critical", "generic_repeat", 20)
    assert no_progress_cycle(s.state, None, s.detector.fingerprint(*READ)).count == 13


def test_precedence_puts_cycles_right_after_ping_pong() -> None:
    order = [(r.detector, r.level) for r in RULES]
    ping = order.index(("ping_pong", "critical"))
    # Cycles of several tools, then one-tool cycles (each: its breaker, its critical).
    assert order[ping + 1:ping + 6] == [
        ("global_circuit_breaker", "critical"), ("cycle", "critical"),
        ("global_circuit_breaker", "critical"), ("cycle", "critical"), ("ping_pong", "warning")]
    assert order.index(("cycle", "warning")) == max(
        i for i, (_, level) in enumerate(order) if level == "critical") + 1


# -- blocked attempts ------------------------------------------------------------------------


@pytest.mark.parametrize("insist", ["continue", "retry"])
def test_engine_blocked_attempts_keep_counting(insist: str) -> None:
    s = Spec()
    _drive(s, PERIOD_3, 19)
    blocked = s.detect(*GREP)
    assert blocked is not None and (blocked.level, blocked.count) == ("critical", 20)
    s.veto(*GREP)
    again = s.detect(*(LS if insist == "continue" else GREP))
    assert again is not None and (again.detector, again.level, again.count) == ("cycle", "critical", 21)


def _insistent(guard: LoopGuard, steps: list[Step], calls: int, *,
               insist: str) -> list[tuple[str, str | None, int]]:
    """A scripted model that keeps requesting the cycle: after a block it either moves on to
    the next step or asks for the blocked one again. Blocked calls never run."""
    out: list[tuple[str, str | None, int]] = []
    position = 0
    for i in range(calls):
        tool, args = steps[position % len(steps)]
        verdict = guard.before_tool_call(tool, args, session="s", run_id="r", call_id=f"c{i}")
        d = verdict.detection
        out.append((verdict.action, d.detector if d else None, d.count if d else 0))
        if verdict.action == "block":
            if insist == "continue":
                position += 1
            continue
        guard.after_tool_call(tool, args, session="s", run_id="r", call_id=f"c{i}",
                              result=_result((tool, args)))
        position += 1
    return out


@pytest.mark.parametrize("insist", ["continue", "retry"])
def test_guard_insistent_caller_climbs_to_the_global_breaker(insist: str) -> None:
    events: list[LoopEvent] = []
    guard = LoopGuard(LoopDetectionConfig(enabled=True), sinks=[events.append])
    out = _insistent(guard, PERIOD_3, 40, insist=insist)
    assert [a for a, _, _ in out[:19]] == ["allow"] * 9 + ["warn"] + ["allow"] * 9
    assert all(action == "block" for action, _, _ in out[19:])
    assert out[19] == ("block", "cycle", 20)
    assert [n for _, _, n in out[19:30]] == list(range(20, 31))
    assert out[29] == ("block", "global_circuit_breaker", 30)
    assert {d for _, d, _ in out[29:]} == {"global_circuit_breaker"}
    breaker = next(e for e in events if e.detector == "global_circuit_breaker")
    tools = "ls \u2192 read \u2192 grep" if insist == "continue" else "grep \u2192 ls \u2192 read"
    assert breaker.message == (
        f"CRITICAL: You are repeating a cycle of 3 tool calls ({tools}) with identical results "
        "(30 consecutive calls). Session execution blocked by global circuit breaker to prevent "
        "runaway loops.")
    assert [(e.action, e.count) for e in events if e.action == "warn"] == [("warn", 10)]
    # Blocked calls never ran: the window holds calls 10-18 with their outcomes, then 21 vetoes.
    assert [r.is_veto for r in guard.history("s")] == [False] * 9 + [True] * 21


def test_batch_admission_counts_earlier_siblings_of_the_cycle() -> None:
    guard = LoopGuard(LoopDetectionConfig(enabled=True))
    interventions = []
    for turn in range(7):
        calls = [ToolCall(t, a, call_id=f"t{turn}-{j}") for j, (t, a) in enumerate(PERIOD_3)]
        admission = guard.admit_batch(calls, session="s", run_id="r")
        if admission.intervention is not None:
            interventions.append((turn, admission.intervention))
            break
        for call in calls:
            guard.after_tool_call(call.tool_name, call.args, session="s", run_id="r",
                                  call_id=call.call_id, result=_result((call.tool_name, call.args)))
    # Turn 6 asks for calls 19-21: grep, the 20th, trips with read already projected.
    assert [(t, i.detector, i.count, i.tool_name) for t, i in interventions] == [
        (6, "cycle", 20, "grep")]


# -- calibration and the gate ----------------------------------------------------------------


def test_calibration_scores_cycles() -> None:
    calls = [ToolCall(t, a, result=_result((t, a))) for t, a in (PERIOD_3 * 5)]
    scores = score_run(calls)
    assert scores.warning == 15 and scores.critical == 15


def _random_cycle_history(seed: int, warning: int) -> dict[str, int]:
    """A random walk around a few cycles (periods 2-6, one or two tools), with detours,
    changed results, pending calls, loop vetoes and retries of vetoed calls, asserting at each
    call that the engine's gated detection equals a full measurement."""
    rng = random.Random(seed)
    config = LoopDetectionConfig(enabled=True, warning_threshold=warning,
                                 critical_threshold=warning + 3,
                                 global_circuit_breaker_threshold=warning + 6, history_size=30)
    detector = LoopDetector(config)
    state = SessionState()
    tools = ["read", "grep", "ls", "exec"]
    fired: dict[str, int] = {}
    steps: list[Step] = []
    position = 0
    vetoed: Step | None = None
    for i in range(500):
        if not steps or rng.random() < 0.02:
            k = rng.randint(2, 6)
            pool = rng.sample(tools, rng.choice([1, 2, 3]))
            steps = [(rng.choice(pool), {"n": rng.randint(0, 3)}) for _ in range(k)]
            position = 0
        if vetoed is not None and rng.random() < 0.5:
            step = vetoed  # the model asks for the blocked call again
        elif rng.random() < 0.05:
            step = (rng.choice(tools), {"n": rng.randint(0, 5)})  # a detour
        else:
            step = steps[position % len(steps)]
            position += 1
        vetoed = None
        call = detector.fingerprint(*step)
        run = "r1" if rng.random() < 0.9 else rng.choice([None, "r2"])
        expected = evaluate(Facts.measure(state, run, call, detector.limits), detector.limits)
        if not state.run_records(run):
            expected = None
        assert detector.detect(state, detector.prepare(*step, run_id=run)) == expected
        if expected is not None:
            name = expected.detector
            if name == "global_circuit_breaker" and "cycle of" in expected.message:
                name += " (cycle)"
            fired[name] = fired.get(name, 0) + 1
        roll = rng.random()
        if roll < 0.12 or (expected is not None and expected.level == "critical" and roll < 0.9):
            detector.record_outcome(state, *step, result=VETO_RESULT, run_id=run)
            vetoed = step
        elif roll < 0.15:
            detector.record_call(state, *step, call_id=f"c{i}", run_id=run)  # stays pending
        else:
            result = f"out {step[1]['n']}" if rng.random() < 0.95 else f"changed {i}"
            detector.record_call(state, *step, call_id=f"c{i}", run_id=run)
            detector.record_outcome(state, *step, result=result, call_id=f"c{i}", run_id=run)
    return fired


@pytest.mark.slow
@pytest.mark.parametrize("warning", [3, 6, 10])
@pytest.mark.parametrize("seed", range(6))
def test_the_gate_never_skips_a_cycle(warning: int, seed: int) -> None:
    _random_cycle_history(seed, warning)


@pytest.mark.slow
def test_the_random_cycle_histories_reach_the_cycle_rules() -> None:
    fired: dict[str, int] = {}
    for warning in (3, 6, 10):
        for seed in range(6):
            for name, n in _random_cycle_history(seed, warning).items():
                fired[name] = fired.get(name, 0) + n
    assert fired.get("cycle", 0) >= 50
    assert fired.get("global_circuit_breaker (cycle)", 0) > 0


def test_replay_reports_a_cycle_in_a_transcript() -> None:
    calls = [ToolCall(t, a, result=_result((t, a)), run_id="turn-1") for t, a in PERIOD_4 * 8]
    findings = replay(calls, LoopDetectionConfig(enabled=True))
    assert [(f.index, f.action, f.detector, f.count) for f in findings if f.action == "warn"] == [
        (9, "warn", "cycle", 10)]
    blocks = [(f.index, f.detector, f.count) for f in findings if f.action == "block"]
    assert blocks[0] == (19, "cycle", 20)
    assert blocks[-1] == (31, "global_circuit_breaker", 31)
    assert [i for i, _, _ in blocks] == list(range(19, 32))


def test_early_leaves_a_cycle_with_a_pacing_step_to_the_paced_poll_rules() -> None:
    config = LoopDetectionConfig.model_validate({"enabled": True, "preset": "early"})
    paced = [READ, ("exec", {"command": "sleep 30"}), LS]
    assert all(d is None or d.detector != "cycle" for d in _drive(Spec(config), paced, 18))
    # The same cycle without the pause is a no-progress loop under early too.
    unpaced = _drive(Spec(config), PERIOD_3, 12)
    assert any(d is not None and d.detector == "cycle" for d in unpaced)
