"""Issue 6 behaviours on transcripts written here: post-outcome warnings, volatile masking,
learned volatile fields, ecosystem profiles, namespaced unknown tools, error repeat, presets."""

from __future__ import annotations

from typing import Any

import pytest

from loopwarden import LoopDetectionConfig, ToolCall, profiles, replay
from loopwarden.fingerprint.volatile import mask_volatile

EARLY = LoopDetectionConfig(enabled=True, preset="early")
OPENCLAW = LoopDetectionConfig(enabled=True)


def first(findings: list[Any], action: str | None = None) -> Any:
    return next((f for f in findings if action is None or f.action == action), None)


# -- post-outcome warnings ------------------------------------------------------------------------


def test_warning_arrives_with_the_result_that_completes_the_pattern() -> None:
    calls = [ToolCall("deploy_status", {"id": 7}, result="pending") for _ in range(8)]
    early = first(replay(calls, EARLY))
    assert (early.index, early.timing, early.action) == (5, "after", "warn")  # the 6th call
    spec = first(replay(calls + calls + calls, OPENCLAW))
    assert (spec.index, spec.timing) == (10, "before")  # OpenClaw: before the 11th call


def test_post_outcome_critical_is_announced_then_blocked_before_the_next_call() -> None:
    calls = [ToolCall("ghost", {"i": i}, error="Tool ghost not found") for i in range(7)]
    findings = replay(calls, EARLY)
    announced = first(findings)
    assert (announced.index, announced.timing, announced.detector) == (4, "after", "unknown_tool_repeat")
    blocked = first(findings, "block")
    assert (blocked.index, blocked.timing) == (5, "before")


# -- volatile masking -----------------------------------------------------------------------------


@pytest.mark.parametrize("a,b", [
    ("job 4 running since 2026-11-29T10:00:01Z", "job 4 running since 2026-11-29T10:00:07Z"),
    ("elapsed 12s, uptime 3h", "elapsed 19s, uptime 3h"),
    ("took 1.5 seconds at 10:01:02", "took 2.25 seconds at 10:01:09"),
    ("id 123e4567-e89b-12d3-a456-426614174000", "id 9b2c7d2e-1f5a-4c3b-8e6d-0a1b2c3d4e5f"),
    ("nonce deadbeefcafe0123456789ab", "nonce 0123456789abcdefdeadbeef"),
    ("worker pid=4411 still busy", "worker pid=4420 still busy"),
])
def test_volatile_spans_are_masked(a: str, b: str) -> None:
    assert mask_volatile(a) == mask_volatile(b)


@pytest.mark.parametrize("a,b", [
    ("3 tests failed", "4 tests failed"),
    ("exit code 1", "exit code 2"),
    ("on 2026-05-31", "on 2026-06-01"),
])
def test_meaningful_numbers_stay(a: str, b: str) -> None:
    assert mask_volatile(a) != mask_volatile(b)


def _poll(i: int) -> ToolCall:
    return ToolCall("check_job", {"job": "build"},
                    result={"status": "running", "checked": f"2026-11-29T10:{i:02d}:00Z"})


def test_timestamps_only_is_no_progress_in_early_preset() -> None:
    calls = [_poll(i) for i in range(12)]
    assert first(replay(calls, EARLY), "block") is not None
    assert first(replay(calls, OPENCLAW), "block") is None  # OpenClaw: every result is new


def test_profile_can_switch_masking_per_tool() -> None:
    registry = profiles.default_registry.copy()
    registry.register("check_job", mask_volatile=False)
    calls = [_poll(i) for i in range(12)]
    assert first(replay(calls, EARLY, profiles=registry), "block") is None
    registry.register("check_job", mask_volatile=True)
    assert first(replay(calls * 2, OPENCLAW, profiles=registry), "block") is not None


def test_profile_volatile_patterns() -> None:
    registry = profiles.default_registry.copy()
    registry.register("queue", volatile_patterns=[r"ticket-[a-z]+"])
    calls = [ToolCall("queue", {}, result=f"waiting ticket-{c}{c}") for c in "abcdefghijklmnopqrstuvwxyz"]
    assert first(replay(calls, OPENCLAW, profiles=registry), "block") is not None


# -- learned volatile fields ----------------------------------------------------------------------


def _pm2(i: int) -> ToolCall:
    return ToolCall("service_status", {"name": "api"},
                    result={"state": "errored", "restarts": 15, "cpu": f"{i % 7}.{i % 3}%",
                            "token": f"tok-{['ab', 'cd', 'ef', 'gh'][i % 4]}{i}"})


def test_learned_fields_make_churning_results_no_progress() -> None:
    calls = [_pm2(i) for i in range(14)]
    findings = replay(calls, EARLY)
    block = first(findings, "block")
    assert block is not None and block.detector == "generic_repeat"
    assert set(block.learned) >= {"$.token", "$.cpu#digits"}
    assert first(replay(calls, OPENCLAW), "block") is None


def test_learning_does_not_hide_real_progress() -> None:
    calls = [ToolCall("service_status", {"name": "api"},
                      result={"state": state, "cpu": f"{i}%"})
             for i, state in enumerate(["starting", "starting", "starting", "degraded",
                                        "degraded", "online", "online", "healthy", "healthy",
                                        "ready", "ready", "serving"])]
    assert first(replay(calls, EARLY), "block") is None


# -- ecosystem profiles ---------------------------------------------------------------------------


def _bash_output(i: int) -> ToolCall:
    return ToolCall("BashOutput", {"bash_id": "465bc5"},
                    result=f"<status>running</status>\n\n<timestamp>2025-12-01T18:47:{i:02d}.811Z</timestamp>")


@pytest.mark.parametrize("config,warn_at,block_at", [(OPENCLAW, 10, 20), (EARLY, 5, 10)])
def test_claude_code_background_polls(config: LoopDetectionConfig, warn_at: int, block_at: int) -> None:
    calls = [_bash_output(i) for i in range(25)]
    findings = replay(calls, config)
    assert first(findings).detector == "known_poll_no_progress"
    assert first(findings).index == warn_at
    assert first(findings, "block").index == block_at


def test_namespaced_tools_use_the_bare_tool_profile() -> None:
    registry = profiles.default_registry.copy()
    registry.register("check_job", poll=True)
    assert registry.is_known_poll("mcp__jobs__check_job", {})
    assert registry.is_known_poll("jobs:check_job", {})
    assert not registry.is_known_poll("check_jobs", {})
    assert registry.canonical_name("mcp__jobs__check_job") == "mcp__jobs__check_job"


def test_codex_empty_stdin_write_is_a_poll() -> None:
    assert profiles.is_known_poll("write_stdin", {"session_id": 3, "chars": ""})
    assert not profiles.is_known_poll("write_stdin", {"session_id": 3, "chars": "y\n"})


# -- unknown tools from other frameworks ----------------------------------------------------------

WORDINGS = [
    "Tool google:search not found",
    "<tool_use_error>Error: No such tool available: mcp__web__fetch</tool_use_error>",
    "Error: search_web is not a valid tool, try one of [read, write].",
    "Tool lookup_order not found in agent Support",
    "Unknown tool: 'crm.find'",
]


@pytest.mark.parametrize("wording", WORDINGS)
def test_unknown_tool_wordings_in_early_preset(wording: str) -> None:
    calls = [ToolCall("call_tool", {"attempt": i}, error=wording) for i in range(8)]
    blocked = first(replay(calls, EARLY), "block")
    assert blocked is not None and blocked.detector == "unknown_tool_repeat"


def test_openclaw_preset_keeps_the_spec_pattern() -> None:
    calls = [ToolCall("t", {"attempt": i}, error="Tool google:search not found") for i in range(25)]
    assert all(f.detector != "unknown_tool_repeat" for f in replay(calls, OPENCLAW))


# -- error repeat ---------------------------------------------------------------------------------


def test_same_error_with_changing_arguments() -> None:
    calls = [ToolCall("download", {"book": f"b{i}"}, error=f"MCP error 0: No downloads left (request {i}ms)")
             for i in range(12)]
    findings = replay(calls, EARLY)
    warn = first(findings)
    assert (warn.detector, warn.index) == ("error_repeat", 5)
    assert first(findings, "block").detector == "error_repeat"
    # OpenClaw's own rules see no loop; loopwarden's failure_repeat (on in both presets) warns
    # at the 10th failure over fresh arguments.
    assert replay(calls, OPENCLAW.with_overrides(detectors={"failureRepeat": False})) == []
    assert [(f.detector, f.index) for f in replay(calls, OPENCLAW)] == [("failure_repeat", 10)]
    switched_on = LoopDetectionConfig(enabled=True, detectors={"errorRepeat": True},
                                      error_repeat_threshold=4)
    assert first(replay(calls, switched_on)).index == 4


def test_different_errors_or_successes_break_the_streak() -> None:
    calls = []
    for i in range(12):
        calls.append(ToolCall("download", {"book": f"b{i}"},
                              error="quota exceeded" if i % 2 else "not found"))
    assert all(f.detector != "error_repeat" for f in replay(calls, EARLY))


# -- presets --------------------------------------------------------------------------------------


def test_early_preset_values_and_overrides() -> None:
    assert (EARLY.warning_threshold, EARLY.critical_threshold) == (6, 10)
    custom = LoopDetectionConfig(enabled=True, preset="early", warning_threshold=8)
    assert (custom.warning_threshold, custom.critical_threshold) == (8, 10)
    assert OPENCLAW.warning_threshold == 10 and not OPENCLAW.post_outcome_warnings
