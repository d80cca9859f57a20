"""Each detector object keeps its own O(1) pre-check honest: whenever one of its rules fires,
its ``may_fire`` said yes (issue 12, item 2).

The engine measures a call only when some detector's ``may_fire`` is True, so a detector whose
``may_fire`` misses a case silently loses detections. The property is checked per detector on
random histories (repeats, polls, alternations, cycles, churn, unknown tools, errors, terminal
exec failures, vetoes, pending calls, pacing calls, per-tool thresholds), and the checker
itself is shown to catch wrong pre-checks.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from loopwarden import LoopDetectionConfig
from loopwarden.engine import LoopDetector
from loopwarden.engine.detectors import (
    DETECTORS,
    RULES,
    Detector,
    Facts,
    Limits,
    Prospect,
    Score,
    evaluate,
)
from loopwarden.engine.detectors.churn import ARGUMENT_CHURN
from loopwarden.engine.detectors.cycle import CYCLE, cycle_possible
from loopwarden.engine.detectors.error_repeat import ERROR_REPEAT
from loopwarden.engine.detectors.failure_repeat import FAILURE_REPEAT
from loopwarden.engine.detectors.no_progress import NO_PROGRESS
from loopwarden.engine.detectors.one_tool_cycle import ONE_TOOL_CYCLE
from loopwarden.engine.detectors.pingpong import PING_PONG
from loopwarden.engine.detectors.unknown_tool import UNKNOWN_TOOL
from loopwarden.engine.history import RunView, SessionState
from spec_helpers import POLL_RESULT, VETO_RESULT, text_result

Call = tuple[str, dict[str, Any]]
Gate = Callable[[RunView, Prospect, Limits], bool]

READ: Call = ("read", {"path": "a.py"})
READ_DEFAULTS: Call = ("read", {"path": "a.py", "offset": 0})  # an equivalent form of READ
GREP: Call = ("grep", {"pattern": "TODO"})
LS: Call = ("ls", {"path": "src"})
POLL: Call = ("process", {"action": "poll", "sessionId": "s1"})
SLEEP: Call = ("exec", {"command": "sleep 30"})


def _exec(i: int) -> Call:
    return "exec", {"command": f"make target{i}"}


def _outcome(rng: random.Random, call: Call) -> tuple[Any, Any]:
    """(result, error): mostly stable per call, so that loops form, sometimes different."""
    tool, args = call
    if rng.random() < 0.08:
        return text_result(f"fresh {rng.random()}"), None
    if tool == "ghost":
        return None, rng.choice(["Unknown tool: ghost", "Tool ghost not found"])
    if tool == "flaky":
        return None, "flaky failure"
    if tool == "process":
        return POLL_RESULT, None
    if tool == "exec" and args["command"].startswith("make"):
        details = {"status": "failed", "exitCode": 1, "aggregated": "make: *** Error 1"}
        return {"content": [{"type": "text", "text": "error"}], "details": details}, None
    if tool == "exec":
        return "", None
    if tool == "write":
        return {"content": [], "details": {"changed": True}}, None
    if tool == "cat":  # one output per file
        return text_result(f"cat {args['path']}"), None
    return text_result(f"{tool} output"), None


def _pattern(rng: random.Random) -> list[Call]:
    """One burst of calls in a loop shape, or noise."""
    kind = rng.randrange(10)
    n = rng.randint(3, 14)
    if kind == 0:
        return [READ if rng.random() < 0.6 else READ_DEFAULTS for _ in range(n)]
    if kind == 1:
        return [POLL if rng.random() < 0.8 else SLEEP for _ in range(n)]
    if kind == 2:
        return [(READ, GREP)[i % 2] for i in range(n)]
    if kind == 3:
        steps = [READ, GREP, LS, _exec(0)][: rng.choice([3, 4])]
        return [steps[i % len(steps)] for i in range(3 * n)]
    if kind == 4:
        return [("flaky", {"variant": rng.randint(0, 2)}) for _ in range(n)]
    if kind == 5:
        return [("write", {"path": "x.py", "content": str(i)}) for i in range(n)]
    if kind == 6:
        return [("ghost", {"q": rng.randint(0, 1)}) for _ in range(n)]
    if kind == 7:
        return [_exec(rng.randint(0, 3)) for _ in range(n)]
    if kind == 8:
        period = rng.choice([3, 4])
        return [("cat", {"path": f"f{i % period}"}) for i in range(3 * n)]
    return [rng.choice([READ, GREP, LS, POLL, SLEEP, _exec(1), ("edit", {"i": i})])
            for i in range(n)]


@dataclass
class Report:
    fired: set[str] = field(default_factory=set)  # detectors whose rules fired at least once
    misses: list[str] = field(default_factory=list)  # fired while may_fire said no


CONFIGS = [
    dict(preset="openclaw", warning_threshold=3, critical_threshold=5,
         global_circuit_breaker_threshold=7, unknown_tool_threshold=2),
    dict(preset="openclaw", warning_threshold=2, critical_threshold=4,
         global_circuit_breaker_threshold=6, unknown_tool_threshold=1,
         detectors={"errorRepeat": True}, error_repeat_threshold=2),
    dict(preset="early", warning_threshold=3, critical_threshold=5,
         global_circuit_breaker_threshold=8, unknown_tool_threshold=2, error_repeat_threshold=2),
    dict(preset="early", warning_threshold=5, critical_threshold=7,
         global_circuit_breaker_threshold=9, per_tool={"read": {"warningThreshold": 2}}),
    dict(preset="openclaw", warning_threshold=4, critical_threshold=6,
         global_circuit_breaker_threshold=8,
         detectors={"genericRepeat": False, "knownPollNoProgress": False, "pingPong": False}),
]


def check(config: dict[str, Any], seed: int, gates: dict[Detector[Any], Gate] | None = None,
          calls: int = 500) -> Report:
    """Drive a random history; at each call, for each detector whose rules fire on the full
    measurement, require ``enabled`` and ``may_fire`` (or the override in ``gates``, in which
    case the first miss ends the history)."""
    rng = random.Random(seed)
    detector = LoopDetector(LoopDetectionConfig(enabled=True, history_size=30, **config))
    state = SessionState()
    report = Report()
    pending: list[Call] = []
    i = 0
    run: str | None = None
    while i < calls:
        if not pending:
            pending = _pattern(rng)
            run = "r1" if rng.random() < 0.2 else None  # a burst stays in one run
        tool, args = pending.pop(0)
        i += 1
        call = detector.fingerprint(tool, args)
        limits = detector.limits_for_tool(call.tool_name)
        view = state.run_view(run)
        if limits is not None and view is not None:
            facts = Facts.measure(state, run, call, limits)
            for family in DETECTORS:
                own = [rule for rule in RULES if rule.family is family]
                found = evaluate(facts, limits, own)
                if found is None:
                    continue
                report.fired.add(family.name)
                may_fire = (gates or {}).get(family, family.may_fire)
                if not (family.enabled(limits) and may_fire(view, call, limits)):
                    report.misses.append(f"call {i}: {family.name} fired {found.detector} "
                                         f"({found.level}, {found.count}) but may_fire said no")
            if gates is None:  # the engine's own gate gives the full measurement's answer
                prepared = detector.prepare(tool, args, run_id=run)
                assert detector.detect(state, prepared) == evaluate(facts, limits)
            elif report.misses:
                return report
        roll = rng.random()
        cid = f"c{i}"
        if roll < 0.08:
            detector.record_outcome(state, tool, args, result=VETO_RESULT, call_id=cid, run_id=run)
            if rng.random() < 0.5:
                pending.insert(0, (tool, args))  # the model insists after a block
        elif roll < 0.13:
            detector.record_call(state, tool, args, call_id=cid, run_id=run)  # stays pending
        elif roll < 0.16:
            continue  # never recorded
        else:
            result, error = _outcome(rng, (tool, args))
            detector.record_call(state, tool, args, call_id=cid, run_id=run)
            detector.record_outcome(state, tool, args, result=result, error=error, call_id=cid,
                                    run_id=run)
    return report


SEEDS = range(6)


@pytest.mark.slow
def test_may_fire_is_true_whenever_a_rule_of_the_detector_fires() -> None:
    # Every configuration and seed, and then that the random histories made every detector
    # fire: otherwise the property would hold for a detector by never testing it. (One pass:
    # the replays are the test's whole cost.)
    fired: set[str] = set()
    for config in CONFIGS:
        for seed in SEEDS:
            report = check(config, seed)
            assert report.misses == [], (config, seed)
            fired |= report.fired
    assert fired == {d.name for d in DETECTORS}


def _never(view: RunView, call: Prospect, limits: Limits) -> bool:
    return False


def _strict_repeat(view: RunView, call: Prospect, limits: Limits) -> bool:
    """NO_PROGRESS's pre-check with an off-by-one (needs one identical record more)."""
    return len(view.by_key.get(call.args_hash, ())) > limits.warning


def _exact_forms_only(view: RunView, call: Prospect, limits: Limits) -> bool:
    """NO_PROGRESS's pre-check blind to equivalent argument forms (READ and READ_DEFAULTS)."""
    return len(view.by_key.get(call.args_hash, ())) >= limits.warning or (
        call.tool_name == "exec" and len(view.records) >= limits.warning)


def _cycle_without_vetoes(view: RunView, call: Prospect, limits: Limits) -> bool:
    """CYCLE's pre-check without its newest-veto case (a retry takes no step)."""
    return bool(view.by_key.get(call.args_hash)) and cycle_possible(
        view.records, call.args_hash, limits.warning)


@pytest.mark.slow
@pytest.mark.parametrize(("family", "wrong"), [
    *[(d, _never) for d in DETECTORS],
    (NO_PROGRESS, _strict_repeat),
    (NO_PROGRESS, _exact_forms_only),
    (CYCLE, _cycle_without_vetoes),
], ids=lambda v: getattr(v, "name", None) or getattr(v, "__name__", ""))
def test_a_wrong_may_fire_is_caught(family: Detector[Any], wrong: Gate) -> None:
    misses = [m for config in CONFIGS for seed in SEEDS
              for m in check(config, seed, gates={family: wrong}).misses]
    assert misses and all(f": {family.name} fired" in m for m in misses)


def test_a_cycle_can_fire_right_after_a_veto_that_the_cycle_shape_check_misses() -> None:
    """Why CYCLE's pre-check says yes to a newest veto: a blocked step retried takes no step
    of the cycle, which the positional check (this call k steps back) cannot see. (The old
    single gate covered it through the unknown-tool check, which a cycle should not rely on.)"""
    detector = LoopDetector(LoopDetectionConfig(
        enabled=True, warning_threshold=5, critical_threshold=7,
        global_circuit_breaker_threshold=9))
    state = SessionState()
    for i, (tool, args) in enumerate([READ, GREP, LS] * 3):
        detector.record_call(state, tool, args, call_id=f"c{i}")
        detector.record_outcome(state, tool, args, result=text_result(tool), call_id=f"c{i}")
    detector.record_outcome(state, *READ, result=VETO_RESULT)  # blocked; the model retries
    call, view = detector.fingerprint(*READ), state.run_view(None)
    assert view is not None
    facts = Facts.measure(state, None, call, detector.limits)
    found = evaluate(facts, detector.limits, [r for r in RULES if r.family is CYCLE])
    assert found is not None and (found.detector, found.count) == ("global_circuit_breaker", 11)
    assert not cycle_possible(view.records, call.args_hash, detector.limits.warning)
    assert CYCLE.may_fire(view, call, detector.limits)


def test_every_rule_is_gated_and_scored_through_its_detector() -> None:
    """The gate and calibration ask DETECTORS, which is derived from the rules' families, so a
    new rule cannot be left out of either; every switch that turns a detector off drops its
    pre-check from the engine's gate."""
    assert {rule.family for rule in RULES} == set(DETECTORS)
    assert set(DETECTORS) == {UNKNOWN_TOOL, NO_PROGRESS, PING_PONG, CYCLE, ONE_TOOL_CYCLE,
                              ERROR_REPEAT, FAILURE_REPEAT, ARGUMENT_CHURN}
    assert all(isinstance(d, Detector) for d in DETECTORS)
    everything = LoopDetector(LoopDetectionConfig(enabled=True, detectors={"errorRepeat": True}))
    assert [gate.__self__ for _, gate in everything._gates] == list(DETECTORS)
    off = LoopDetector(LoopDetectionConfig(enabled=True, detectors={
        "pingPong": False, "cycle": False, "argumentChurn": False, "genericRepeat": False,
        "knownPollNoProgress": False}))
    # The global breaker still reads the no-progress streak; unknown tools have no switch.
    assert [gate.__self__ for _, gate in off._gates] == [UNKNOWN_TOOL, NO_PROGRESS, ONE_TOOL_CYCLE,
                                                      FAILURE_REPEAT]


def test_a_detector_scores_what_its_rules_compare() -> None:
    """A ping-pong of 6 with stable sides: calibration reads 6 for the warning threshold and 6
    for the critical one from PING_PONG, and nothing from the other detectors."""
    detector = LoopDetector(LoopDetectionConfig(enabled=True))
    state = SessionState()
    for i in range(5):
        tool, args = (READ, GREP)[i % 2]
        detector.record_call(state, tool, args, call_id=f"c{i}")
        detector.record_outcome(state, tool, args, result=text_result(tool), call_id=f"c{i}")
    facts = Facts.measure(state, None, detector.fingerprint(*GREP), detector.limits)
    assert PING_PONG.score(facts, detector.limits) == Score(warning=6, critical=6)
    assert CYCLE.score(facts, detector.limits) == Score()
    assert UNKNOWN_TOOL.score(facts, detector.limits) == Score()
