"""The hot-path shortcuts give exactly the answers of the paths they skip."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from loopwarden import MISSING, LoopDetectionConfig, LoopGuard, args_hash
from loopwarden.engine import LoopDetector
from loopwarden.engine.detectors import Facts, evaluate
from loopwarden.engine.history import SessionState
from loopwarden.fingerprint import digest, mask_when_spans, outcome_of
from loopwarden.fingerprint.profiles import default_registry
from loopwarden.fingerprint.volatile import has_digit, mask_volatile
from loopwarden.guard.stores.memory import MemoryStore

TOOLS = ["read", "exec", "write", "process", "mcp__srv__lookup", "flaky"]


def _random_call(rng: random.Random, previous: str) -> tuple[str, dict[str, Any]]:
    # Runs of one tool, so the streaks that start at the newest record (churn, unknown tool,
    # terminal failures) get long enough to fire.
    tool = previous if rng.random() < 0.7 else rng.choice(TOOLS)
    if tool == "process":
        return tool, {"action": rng.choice(["poll", "log", "kill"]), "sessionId": "s1"}
    if tool == "write":
        return tool, {"path": rng.choice(["a.py", "b.py"]), "content": rng.choice("uvwxyz")}
    if tool == "flaky":
        return tool, {"variant": rng.randint(0, 1)}
    return tool, {"q": rng.randint(0, 2)}


def _random_outcome(rng: random.Random, tool: str) -> tuple[Any, Any]:
    """(result, error) covering errors, unknown tools, terminal failures, write kinds, polls."""
    kind = rng.random()
    if tool == "flaky":  # fails the same way whatever its arguments: argument churn
        return None, "flaky failure"
    if kind < 0.3 and tool not in ("exec", "write"):
        return None, rng.choice(["boom", "Unknown tool: ghost", "Tool nope not found"])
    if tool == "exec":
        details = {"status": rng.choice(["completed", "failed", "running"]),
                   "exitCode": rng.choice([0, 1, 1, 2]),
                   "aggregated": rng.choice(["e1", "e2 at 10:00:01", "e2 at 10:00:02"])}
        return {"content": [{"type": "text", "text": "out"}], "details": details}, None
    if tool == "write":
        return {"content": [], "details": {"changed": rng.choice([True, False])}}, None
    if tool == "process":
        return {"content": [{"type": "text", "text": rng.choice(["(no new output)", "line"])}],
                "details": {"status": "running"}}, None
    return {"content": [{"type": "text", "text": rng.choice(["same", "other"])}]}, None


def _replay_checking_shortcut(preset: Any, warning: int, seed: int) -> dict[str, int]:
    """Drive a random history, asserting at each call that the engine's detection equals a
    full measurement; return how often each detector fired."""
    rng = random.Random(seed)
    config = LoopDetectionConfig(enabled=True, preset=preset, warning_threshold=warning,
                                 critical_threshold=warning + 2,
                                 global_circuit_breaker_threshold=warning + 4,
                                 unknown_tool_threshold=2, history_size=40)
    detector = LoopDetector(config)
    state = SessionState()
    fired: dict[str, int] = {}
    tool = "read"
    for i in range(600):
        tool, args = _random_call(rng, tool)
        call = detector.fingerprint(tool, args)
        run = rng.choice([None, "r1"])
        expected = evaluate(Facts.measure(state, run, call, detector.limits), detector.limits)
        if not state.run_records(run):
            expected = None
        assert detector.detect(state, detector.prepare(tool, args, run_id=run)) == expected
        # The gate's per-run error count matches the window, here and after a round trip.
        for view in (state, SessionState.from_dict(state.to_dict())):
            assert view.error_records(run) == sum(
                1 for r in state.history if r.run_id == run and r.error_identity_hash)
        if expected is not None:
            fired[expected.detector] = fired.get(expected.detector, 0) + 1
        if rng.random() < 0.1:
            continue  # leave the call out of the history
        result, error = _random_outcome(rng, tool)
        if rng.random() < 0.1:
            detector.record(state, detector.prepare(tool, args, run_id=run),
                            call_id=f"c{i}")  # stays pending
        else:
            detector.record_outcome(state, tool, args, result=result, error=error,
                                    call_id=f"c{i}", run_id=run)
    return fired


@pytest.mark.slow
def test_skipping_measurement_never_changes_a_detection() -> None:
    # Both presets, every seed and warning threshold (below and above the churn's own repeat
    # count), and then that the random histories reached every detector (one pass: the
    # replays are the test's whole cost).
    fired: set[str] = set()
    for preset in ("openclaw", "early"):
        for warning in (3, 7):
            for seed in range(8):
                fired |= set(_replay_checking_shortcut(preset, warning, seed))
    assert fired >= {"ping_pong", "generic_repeat", "global_circuit_breaker", "argument_churn",
                     "unknown_tool_repeat", "known_poll_no_progress", "error_repeat"}


def test_after_tool_call_matches_the_admitted_call_when_the_tool_mutated_its_args() -> None:
    # The fingerprint cache never hands the after hook a stale hash for args changed in place
    # (both variants agree), and the outcome goes to the call admitted under this call id, under
    # its admitted fingerprint (it used to append a second record for the changed args; see
    # tests/guard/test_guard_hostile_hosts.py).
    def history_of(mutate_in_place: bool | None) -> list[tuple[str, str | None]]:
        guard = LoopGuard(LoopDetectionConfig(enabled=True))
        args: dict[str, Any] = {"path": "a"}
        guard.before_tool_call("read", args, session="s", call_id="c1")
        if mutate_in_place:
            args["path"] = "b"
        elif mutate_in_place is not None:
            args = {"path": "b"}
        guard.after_tool_call("read", args, session="s", call_id="c1", result="r")
        return [(r.args_hash, r.result_hash) for r in guard.history("s")]

    assert history_of(mutate_in_place=True) == history_of(mutate_in_place=False)
    assert history_of(mutate_in_place=True) == history_of(mutate_in_place=None)  # unchanged
    assert [h for h, _ in history_of(mutate_in_place=True)] == [args_hash("read", {"path": "a"})]


@pytest.mark.parametrize("text", ["", "abc", "a1", "x" * 500 + "9", "٣", "３", "é٣", "ééé",
                                  "no digits here at all"])
def test_has_digit_is_the_regex_test(text: str) -> None:
    assert has_digit(text) == (re.search(r"\d", text) is not None)


@pytest.mark.parametrize("text", [
    "started with task id abc-1 now", "JOB_ID=77 done", "Bash ID: x", "shellid q",
    "valid side video", "İd task id z", "task\u0130d y", "withid", "WITH_id k", "nothing",
])
def test_skipping_an_extra_pattern_never_changes_the_mask(text: str) -> None:
    pattern = default_registry.get("Bash").volatile_patterns[0]  # type: ignore[union-attr]
    assert mask_volatile(text, (pattern,), builtin=False) == pattern.sub("#", text)


def test_exec_failure_identity_is_the_masked_projection() -> None:
    for output in ("no digits in this failure", "failed at 12:00:01 after 3s", "pid 4 died"):
        details = {"status": "failed", "exitCode": 1, "aggregated": output}
        outcome = outcome_of("exec", {"command": "x"}, {"content": [], "details": details})
        projection = {"status": "failed", "exitCode": 1, "timedOut": False}
        assert outcome.failure_identity_hash == digest(
            {**projection, "output": mask_when_spans(output)})


def test_memory_store_refreshes_reused_and_expired_sessions_as_most_recent() -> None:
    now = [0.0]
    store = MemoryStore(idle_ttl=10, max_sessions=2, clock=lambda: now[0])
    store.transact("a", lambda s: s.warning_buckets.update(x=1))
    now[0] = 5
    store.transact("b", lambda s: None)
    now[0] = 20  # "a" expired, "b" alive
    assert store.transact("a", lambda s: dict(s.warning_buckets)) == {}  # a fresh state
    now[0] = 21
    store.transact("c", lambda s: None)  # evicts the least recently used: "b"
    assert store.load("b") is None
    assert store.load("a") is not None and store.load("c") is not None


@pytest.mark.parametrize("preset", ["openclaw", "early"])
def test_text_results_hash_as_the_general_outcome_path_does(preset: Any) -> None:
    # The after-call hook hashes text results directly; the general path (profiles, masking,
    # projections) must agree for every built-in profile and for a tool without one.
    detector = LoopDetector(LoopDetectionConfig(enabled=True, preset=preset))
    tools = [*default_registry.names(), "mcp__srv__BashOutput", "no_such_profile"]
    texts = ["", "ok", "  padded  ", "job 4f2a done at 10:00:01", "bash_id: abc-12 started",
             "(no new output)", "Unknown tool: ghost", "é ünïcode 12ms"]
    for tool in tools:
        for text in texts:
            for args in ({}, {"action": "poll", "sessionId": "s1"}, {"command": "ls"}):
                observed, _ = detector.observe(detector.fingerprint(tool, args), args, text, MISSING)
                assert observed == detector.outcome(tool, args, text), (tool, text, args)


@pytest.mark.parametrize("ttl", [0.5, 10.0])
def test_the_session_used_last_still_expires_and_stays_alive_while_used(ttl: float) -> None:
    # The store skips expiry bookkeeping for the session used last within a sweep interval;
    # an idle gap longer than the TTL must still give that session a fresh state.
    now = [0.0]
    store = MemoryStore(idle_ttl=ttl, clock=lambda: now[0])
    store.transact("a", lambda s: s.warning_buckets.update(x=1))
    for _ in range(50):  # used more often than its TTL, for many TTLs: kept
        now[0] += ttl * 0.9
        assert store.transact("a", lambda s: dict(s.warning_buckets)) == {"x": 1}
    now[0] += ttl * 1.1  # then idle for longer than the TTL
    assert store.transact("a", lambda s: dict(s.warning_buckets)) == {}


def test_prepared_fingerprints_follow_profile_changes_and_stay_bounded() -> None:
    from loopwarden.fingerprint.profiles import ProfileRegistry

    registry = ProfileRegistry()
    detector = LoopDetector(LoopDetectionConfig(enabled=True), registry)
    assert not detector.fingerprint("check_job", {"id": 1}).known_poll
    registry.register("check_job", poll=True)
    assert detector.fingerprint("check_job", {"id": 1}).known_poll  # not the cached answer
    for i in range(5000):
        detector.fingerprint("read", {"path": f"f{i}"})
    assert len(detector._prepared) <= 1024
    big = {"path": "a.py", "content": "x" * 10_000}
    assert detector.fingerprint("write", big).args_hash == args_hash("write", big)
    assert all(len(key[1]) <= 8192 for key in detector._prepared)  # big args are not kept
    # The cached answer is the fresh one.
    fresh = LoopDetector(LoopDetectionConfig(enabled=True), registry)
    assert detector.fingerprint("check_job", {"id": 1}) == fresh.fingerprint("check_job", {"id": 1})


@pytest.mark.parametrize("preset", ["openclaw", "early"])
@pytest.mark.parametrize("seed", range(4))
def test_a_pre_check_never_says_yes_when_nothing_wakes_its_detector(preset: str,
                                                                   seed: int) -> None:
    """The engine asks a detector's ``may_fire`` only when one of its ``wakes`` holds (see
    ``WAKE_TAIL``); histories with vetoes, pending calls and failures show it would have said no
    every time it is skipped."""
    from loopwarden.engine.detectors import DETECTORS
    from loopwarden.engine.detectors.base import WAKE_ERRORS, WAKE_REPEAT, WAKE_TAIL
    from loopwarden.engine.history import OUTCOME_VETO
    from loopwarden.fingerprint import Outcome

    rng = random.Random(seed)
    config = LoopDetectionConfig(enabled=True, preset=preset, warning_threshold=3,
                                 critical_threshold=5, global_circuit_breaker_threshold=7,
                                 unknown_tool_threshold=2, history_size=40,
                                 detectors={"errorRepeat": True})
    detector = LoopDetector(config)
    limits = detector.limits
    state = SessionState()
    tool = "read"
    asked = 0
    for i in range(500):
        tool, args = _random_call(rng, tool)
        call = detector.fingerprint(tool, args)
        run = rng.choice([None, "r1"])
        view = state.run_view(run)
        if view is not None:
            last = view.records[-1]
            woken = (WAKE_ERRORS if view.errors else 0) | (
                WAKE_REPEAT if call.args_hash in view.by_key else 0) | (
                WAKE_TAIL if last.outcome_kind == OUTCOME_VETO or (last.tool_name == tool and (
                    last.result_hash is None or last.no_progress or last.outcome_kind is not None
                    or last.unknown_tool_name is not None
                    or last.echo_failure_hash is not None)) else 0)
            for d in DETECTORS:
                if d.may_fire(view, call, limits):
                    asked += 1
                    assert d.wakes & woken, (d.name, woken)
        roll = rng.random()
        if roll < 0.1:
            detector.record(state, detector.prepare(tool, args, run_id=run), call_id=f"c{i}")
        elif roll < 0.2:
            detector.record_prospect_outcome(state, call, run,
                                             Outcome(None, outcome_kind=OUTCOME_VETO), None,
                                             f"c{i}")
        else:
            result, error = _random_outcome(rng, tool)
            detector.record_outcome(state, tool, args, result=result, error=error,
                                    call_id=f"c{i}", run_id=run)
    assert asked > 50  # the histories reach the pre-checks
