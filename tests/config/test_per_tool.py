"""``perTool``: exempt tools and per-tool thresholds (issue 13, item 6).

Config parsing, validation (file, key path, value), global + agent merging, glob precedence,
the guard's verdicts per tool, and what ``loopwarden config check`` shows.
"""

from __future__ import annotations

import json
import logging
import pickle
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from loopwarden import ConfigError, LoopDetectionConfig, LoopGuard, load_config
from loopwarden.cli.config import config_app
from loopwarden.config import PerToolConfig, config_from_mapping
from loopwarden.engine import LoopDetector
from loopwarden.engine.compaction import CompactionLoopPersistedError

# --- helpers --------------------------------------------------------------------------------


def write(tmp_path: Path, text: str, name: str = "openclaw.json5") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def actions(guard: LoopGuard, tool: str, n: int, *, session: str = "s", run: str = "r",
            args: Any = None, result: Any = "same output") -> list[str]:
    """Make ``n`` identical calls, running each one that is not blocked; their verdicts
    ("warn" also when only the ``early`` preset's post-outcome check warned)."""
    args = {"q": 1} if args is None else args
    seen = []
    for _ in range(n):
        verdict = guard.before_tool_call(tool, args, session=session, run_id=run)
        action = verdict.action
        if action != "block":
            after = guard.after_tool_call(tool, args, session=session, run_id=run, result=result)
            if after.action == "warn":
                action = "warn"
        seen.append(action)
    return seen


def first(seen: list[str], action: str) -> int | None:
    """The 1-based number of the first call with ``action``."""
    return seen.index(action) + 1 if action in seen else None


def guard_with(per_tool: dict[str, Any], **config: Any) -> LoopGuard:
    guard = LoopGuard(LoopDetectionConfig(enabled=True, per_tool=per_tool, **config))
    guard.sinks.clear()
    return guard


# --- Python config --------------------------------------------------------------------------


def test_per_tool_accepts_snake_and_camel_case_and_models() -> None:
    a = LoopDetectionConfig(per_tool={"exec": {"exempt": True},
                                      "browser*": {"warning_threshold": 3}})
    b = LoopDetectionConfig(perTool={"exec": PerToolConfig(exempt=True),
                                     "browser*": {"warningThreshold": 3}})
    assert a == b
    assert a.per_tool["exec"].exempt is True
    assert a.per_tool["browser*"].warning_threshold == 3
    assert a.per_tool["browser*"].critical_threshold is None
    assert LoopDetectionConfig().per_tool == {}


def test_per_tool_keeps_the_config_frozen_hashable_and_picklable() -> None:
    cfg = LoopDetectionConfig(per_tool={"exec": {"exempt": True}})
    with pytest.raises(TypeError):
        cfg.per_tool["read"] = PerToolConfig(exempt=True)  # type: ignore[index]
    with pytest.raises(TypeError):
        cfg.per_tool.pop("exec")  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        cfg.per_tool["exec"].exempt = False  # type: ignore[misc]
    assert hash(cfg) == hash(LoopDetectionConfig(perTool={"exec": {"exempt": True}}))
    assert hash(cfg) != hash(LoopDetectionConfig())
    again = pickle.loads(pickle.dumps(cfg))
    assert again == cfg and again.tool_thresholds("exec") is None


def test_config_without_per_tool_dumps_as_before_plus_an_empty_per_tool() -> None:
    cfg = LoopDetectionConfig(enabled=True)
    assert cfg.explicit_mapping() == {"enabled": True}  # nothing new is "explicit"
    assert LoopDetectionConfig.model_validate(cfg.model_dump()) == cfg


def test_with_overrides_merges_per_tool_per_pattern_and_key() -> None:
    base = LoopDetectionConfig(per_tool={"x": {"warningThreshold": 3}, "y": {"exempt": True}})
    cfg = base.with_overrides(per_tool={"x": {"critical_threshold": 7}, "z": {"exempt": True}})
    assert cfg.per_tool["x"] == PerToolConfig(warning_threshold=3, critical_threshold=7)
    assert cfg.per_tool["y"].exempt and cfg.per_tool["z"].exempt
    assert base.per_tool["x"].critical_threshold is None


# --- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("per_tool", "path", "shown"),
    [
        ({"browser*": {"warningThreshold": 0}}, 'perTool["browser*"].warningThreshold', "0"),
        ({"browser*": {"warningThreshold": -3}}, 'perTool["browser*"].warningThreshold', "-3"),
        ({"exec": {"criticalThreshold": 2.5}}, "perTool.exec.criticalThreshold", "2.5"),
        ({"exec": {"criticalThreshold": "5"}}, "perTool.exec.criticalThreshold", '"5"'),
        ({"exec": {"criticalThreshold": True}}, "perTool.exec.criticalThreshold", "true"),
        ({"exec": {"globalCircuitBreakerThreshold": None}},
         "perTool.exec.globalCircuitBreakerThreshold", "null"),
        ({"exec": {"exempt": "yes"}}, "perTool.exec.exempt", '"yes"'),
        ({"exec": {"exempt": 1}}, "perTool.exec.exempt", "1"),
        ({"exec": {"exempted": True}}, "perTool.exec.exempted", "true"),
        ({"exec": 5}, "perTool.exec", "5"),
        ({"": {"exempt": True}}, 'perTool[""]', '""'),
    ],
)
def test_bad_entries_name_key_path_and_value(per_tool: Any, path: str, shown: str) -> None:
    with pytest.raises(ConfigError) as info:
        LoopDetectionConfig(per_tool=per_tool)
    assert info.value.path == path
    assert f"(got {shown})" in str(info.value)


def test_unknown_entry_key_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as info:
        LoopDetectionConfig(per_tool={"exec": {"warning": 3}})
    assert "valid keys: exempt, warningThreshold, criticalThreshold, " \
           "globalCircuitBreakerThreshold" in info.value.reason


def test_per_tool_must_be_an_object() -> None:
    with pytest.raises(ConfigError) as info:
        LoopDetectionConfig(per_tool=["exec"])
    assert info.value.path == "perTool"
    assert "must be an object" in info.value.reason


@pytest.mark.parametrize(
    ("entry", "path", "value"),
    [
        ({"warningThreshold": 5, "criticalThreshold": 5}, "criticalThreshold", 5),
        ({"warningThreshold": 8, "criticalThreshold": 3}, "criticalThreshold", 3),
        ({"criticalThreshold": 30, "globalCircuitBreakerThreshold": 30},
         "globalCircuitBreakerThreshold", 30),
    ],
)
def test_thresholds_out_of_order_in_one_entry_are_errors(
    entry: dict[str, int], path: str, value: int
) -> None:
    with pytest.raises(ConfigError) as info:
        LoopDetectionConfig(per_tool={"browser*": entry})
    assert info.value.path == f'perTool["browser*"].{path}'
    assert info.value.value == value
    assert "in the same perTool entry" in info.value.reason


def test_exempt_with_thresholds_in_one_entry_is_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        LoopDetectionConfig(per_tool={"exec": {"exempt": True, "warningThreshold": 3}})
    assert info.value.path == "perTool.exec.exempt"
    assert "warningThreshold" in info.value.reason
    # exempt: false with thresholds is an ordinary threshold entry.
    cfg = LoopDetectionConfig(per_tool={"exec": {"exempt": False, "warningThreshold": 3}})
    assert cfg.tool_thresholds("exec") == (3, 20, 30)


def test_file_errors_name_the_file_and_the_full_key_path(tmp_path: Path) -> None:
    path = write(tmp_path, """{
      // an OpenClaw config
      tools: { loopDetection: { perTool: { "browser*": { warningThreshold: 0 } } } },
    }""")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.file == str(path)
    assert info.value.path == 'tools.loopDetection.perTool["browser*"].warningThreshold'
    assert str(info.value).startswith(f"{path}: tools.loopDetection.perTool[")
    assert "(got 0)" in str(info.value)


def test_a_bad_agent_entry_is_named_at_its_agent_block(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps({
        "tools": {"loopDetection": {"perTool": {"exec": {"exempt": True}}}},
        "agents": {"list": [{"id": "coder", "tools": {"loopDetection": {
            "perTool": {"mcp__*": {"warningThreshold": 9, "criticalThreshold": 4}}}}}]},
    }))
    with pytest.raises(ConfigError) as info:
        load_config(path)  # every agent's block is validated, whichever agent is asked for
    assert info.value.path == (
        'agents.list[0].tools.loopDetection.perTool["mcp__*"].criticalThreshold')
    assert info.value.value == 4


# --- merging global + agent -------------------------------------------------------------------

MERGED = """{
  tools: { loopDetection: {
    enabled: true,
    perTool: {
      "browser*": { warningThreshold: 3, criticalThreshold: 8 },
      exec: { exempt: true },
      "mcp__*": { exempt: true },
    },
  } },
  agents: { entries: { coder: { tools: { loopDetection: {
    perTool: {
      "browser*": { criticalThreshold: 6 },  // key-wise over the global entry
      exec: { exempt: false },               // un-exempts exec for this agent
      "mcp__*": { warningThreshold: 4 },     // exempt stays: it was not changed here
      read: { warningThreshold: 2 },         // a pattern only this agent has
    },
  } } } } },
}"""


def test_agent_entries_merge_over_global_ones_per_pattern_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, MERGED)
    glob = load_config(path)
    assert set(glob.per_tool) == {"browser*", "exec", "mcp__*"}
    assert glob.tool_thresholds("browser_click") == (3, 8, 30)
    assert glob.tool_thresholds("exec") is None
    coder = load_config(path, agent_id="coder")
    assert set(coder.per_tool) == {"browser*", "exec", "mcp__*", "read"}
    assert coder.tool_thresholds("browser_click") == (3, 6, 30)
    assert coder.tool_thresholds("exec") == (10, 20, 30)
    assert coder.tool_thresholds("mcp__fs__read") is None
    assert coder.per_tool["mcp__*"] == PerToolConfig(exempt=True)  # the threshold is dropped
    assert coder.tool_thresholds("read") == (2, 20, 30)


def test_same_merge_from_a_python_mapping() -> None:
    data = {
        "tools": {"loopDetection": {"perTool": {"x*": {"warningThreshold": 5}}}},
        "agents": {"entries": {"a": {"tools": {"loopDetection": {
            "perTool": {"x*": {"globalCircuitBreakerThreshold": 12}}}}}}},
    }
    cfg = config_from_mapping(data, agent_id="a")
    assert cfg.tool_thresholds("xy") == (5, 11, 12)


def test_order_broken_across_scopes_is_repaired_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path, json.dumps({
        "tools": {"loopDetection": {"perTool": {"exec": {"warningThreshold": 5}}}},
        "agents": {"list": [{"id": "a", "tools": {"loopDetection": {
            "perTool": {"exec": {"criticalThreshold": 4}}}}}]},
    }))
    with caplog.at_level(logging.WARNING, logger="loopwarden"):
        cfg = load_config(path, agent_id="a")
    assert cfg.tool_thresholds("exec") == (5, 6, 30)
    [record] = [r for r in caplog.records if "out of order" in r.getMessage()]
    assert "perTool.exec.criticalThreshold 4 -> 6" in record.getMessage()
    assert record.loopwarden_repaired == ("perTool.exec.criticalThreshold",)  # type: ignore[attr-defined]


# --- precedence and effective thresholds ----------------------------------------------------


def test_exact_name_wins_over_any_glob() -> None:
    cfg = LoopDetectionConfig(per_tool={
        "browser_click*": {"exempt": True},
        "browser_click": {"warningThreshold": 4},
    })
    assert cfg.tool_rule("browser_click") == ("browser_click", cfg.per_tool["browser_click"])
    assert cfg.tool_thresholds("browser_click") == (4, 20, 30)
    assert cfg.tool_thresholds("browser_clicks") is None


def test_longest_glob_wins_and_ties_go_alphabetically() -> None:
    cfg = LoopDetectionConfig(per_tool={
        "*": {"warningThreshold": 9},
        "browser*": {"warningThreshold": 3},
        "browser_*": {"exempt": True},
        "*_type": {"warningThreshold": 7},
        "b?owser_t*": {"warningThreshold": 5},  # 10 characters: beats browser_* (9)
        "mcp__[ab]*": {"warningThreshold": 4},
        "mcp__?b*": {"warningThreshold": 6},
    })
    assert cfg.tool_rule("browser_type")[0] == "b?owser_t*"  # type: ignore[index]
    assert cfg.tool_rule("browser_click")[0] == "browser_*"  # type: ignore[index]
    assert cfg.tool_rule("browserx")[0] == "browser*"  # type: ignore[index]
    assert cfg.tool_rule("read")[0] == "*"  # type: ignore[index]
    # "mcp__[ab]*" (10 characters) beats "mcp__?b*" (8)
    assert cfg.tool_rule("mcp__ab")[0] == "mcp__[ab]*"  # type: ignore[index]
    tie = LoopDetectionConfig(per_tool={"ab*": {"warningThreshold": 4},
                                        "a*c": {"warningThreshold": 5}})
    assert tie.tool_rule("abc")[0] == "a*c"  # type: ignore[index]
    swapped = LoopDetectionConfig(per_tool={"a*c": {"warningThreshold": 5},
                                            "ab*": {"warningThreshold": 4}})
    assert swapped.tool_rule("abc")[0] == "a*c"  # type: ignore[index]


def test_matching_is_case_sensitive_and_whole_name() -> None:
    cfg = LoopDetectionConfig(per_tool={"Browser*": {"exempt": True}, "exec": {"exempt": True}})
    assert cfg.tool_rule("browser_click") is None
    assert cfg.tool_rule("EXEC") is None
    assert cfg.tool_rule("exec2") is None
    assert cfg.tool_thresholds("browser_click") == (10, 20, 30)


def test_one_entry_applies_whole_keys_it_lacks_come_from_the_top_level() -> None:
    cfg = LoopDetectionConfig(warningThreshold=6, criticalThreshold=12, per_tool={
        "browser*": {"criticalThreshold": 8},
        "browser_*": {"warningThreshold": 2},
    })
    # browser_* applies alone: its critical is the top-level 12, not browser*'s 8.
    assert cfg.tool_thresholds("browser_click") == (2, 12, 30)
    # An empty entry shadows a glob: browser_type gets the top-level thresholds.
    shadow = cfg.with_overrides(per_tool={"browser_type": {}})
    assert shadow.tool_thresholds("browser_type") == (6, 12, 30)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"warningThreshold": 3}, (3, 20, 30)),
        ({"criticalThreshold": 5}, (4, 5, 30)),           # inherited warning moves below
        ({"criticalThreshold": 1}, (1, 2, 30)),           # not below 1: critical is repaired
        ({"warningThreshold": 25}, (25, 26, 30)),         # inherited critical moves above
        ({"criticalThreshold": 50}, (10, 50, 51)),        # and the inherited breaker
        ({"globalCircuitBreakerThreshold": 5}, (3, 4, 5)),
        ({"globalCircuitBreakerThreshold": 60}, (10, 20, 60)),
        ({"warningThreshold": 2, "globalCircuitBreakerThreshold": 4}, (2, 3, 4)),
    ],
)
def test_thresholds_an_entry_leaves_out_fit_around_those_it_sets(
    entry: dict[str, int], expected: tuple[int, int, int]
) -> None:
    cfg = LoopDetectionConfig(per_tool={"t": entry})
    assert cfg.tool_thresholds("t") == expected
    assert cfg.tool_thresholds("other") == (10, 20, 30)


def test_per_tool_thresholds_follow_the_preset() -> None:
    cfg = LoopDetectionConfig(preset="early", per_tool={"t": {"warningThreshold": 3}})
    assert cfg.tool_thresholds("t") == (3, 10, 20)


def test_no_per_tool_means_the_shared_limits() -> None:
    detector = LoopDetector(LoopDetectionConfig(enabled=True))
    assert detector.limits_for_tool("anything") is detector.limits
    assert not detector.is_exempt("anything")


# --- the guard: exempt tools ----------------------------------------------------------------


@pytest.mark.parametrize("preset", ["openclaw", "early"])
def test_exempt_tool_is_never_warned_or_blocked_while_another_tool_is(preset: str) -> None:
    guard = guard_with({"exec": {"exempt": True}}, preset=preset)
    exempt = actions(guard, "exec", 40, args={"command": "make"})
    assert exempt == ["allow"] * 40
    # The exempt calls were recorded (history shows them), they just never get a verdict.
    assert [r.tool_name for r in guard.history("s")] == ["exec"] * 30
    other = actions(guard, "read", 40, args={"path": "a.py"})
    assert first(other, "block") == (21 if preset == "openclaw" else 11)
    assert "warn" in other


def test_exempt_by_glob_and_by_alias() -> None:
    guard = guard_with({"mcp__fs__*": {"exempt": True}, "exec": {"exempt": True}})
    assert actions(guard, "mcp__fs__read_file", 40) == ["allow"] * 40
    # The pattern matches the canonical tool name: "bash" is an alias of "exec".
    assert actions(guard, "bash", 40, args={"command": "ls"}, run="r2") == ["allow"] * 40
    assert first(actions(guard, "mcp__git__status", 40, run="r3"), "block") == 21


def _scenario(guard: LoopGuard, name: str) -> list[str]:
    """45 calls of one loop shape; every verdict of the tools involved."""
    seen: list[str] = []

    def call(tool: str, args: Any, **outcome: Any) -> None:
        verdict = guard.before_tool_call(tool, args, session="s", run_id="r")
        action = verdict.action
        if action != "block":
            after = guard.after_tool_call(tool, args, session="s", run_id="r", **outcome)
            action = "warn" if after.action == "warn" else action
        seen.append(action)

    for i in range(45):
        if name == "known poll":  # process poll: a known poll, blocked at the critical
            call("process", {"action": "poll", "sessionId": "s1"}, result="running")
        elif name == "unknown tool":
            call("process", {"i": 0}, error="Tool process not found")
        elif name == "repeat":
            call("process", {"i": 0}, result="same")
        elif name == "ping-pong":
            call("process" if i % 2 else "exec", {"i": 0}, result="same")
        elif name == "error repeat":  # early: new args, the same error every time
            call("process", {"i": i}, error="permission denied: /etc/shadow")
    return seen


@pytest.mark.parametrize(
    ("name", "preset"),
    [("known poll", "openclaw"), ("unknown tool", "openclaw"), ("repeat", "openclaw"),
     ("ping-pong", "openclaw"), ("error repeat", "early"), ("repeat", "early")],
)
def test_exempt_tools_escape_every_detector(name: str, preset: str) -> None:
    # (History 50: long enough for every count involved.)
    unexempt = _scenario(guard_with({}, preset=preset, history_size=50), name)
    assert "block" in unexempt
    exempt = _scenario(
        guard_with({"process": {"exempt": True}, "exec": {"exempt": True}}, preset=preset,
                   history_size=50),
        name)
    assert exempt == ["allow"] * 45


def test_exempt_tool_escapes_the_global_breaker() -> None:
    def verdicts(per_tool: dict[str, Any]) -> list[str | None]:
        # Generic repeat off: only the breaker (30) stops identical no-progress calls.
        guard = guard_with(per_tool, history_size=50, detectors={"genericRepeat": False})
        seen = []
        for _ in range(40):
            verdict = guard.before_tool_call("t", {}, session="s", run_id="r")
            seen.append(verdict.detection.detector if verdict.action == "block"
                        and verdict.detection else None)
            if verdict.action != "block":
                guard.after_tool_call("t", {}, session="s", run_id="r", result="same")
        return seen

    unexempt = verdicts({})
    assert unexempt.index("global_circuit_breaker") == 30  # the 31st call
    assert verdicts({"t": {"exempt": True}}) == [None] * 40


def test_in_a_batch_an_exempt_tool_is_never_the_subject() -> None:
    """[read, exec] every turn: read's loop is stopped as it is without perTool; exec gets no
    verdict of its own (refused only as the blocked batch's sibling)."""
    from loopwarden.guard import ToolCall

    def turns(per_tool: dict[str, Any]) -> list[tuple[str, str, str | None]]:
        guard = guard_with(per_tool)
        seen = []
        for turn in range(15):
            batch = [ToolCall("read", {"path": "x"}, f"b{turn}"),
                     ToolCall("exec", {"command": "make"}, f"a{turn}")]
            admission = guard.admit_batch(batch, session="s", run_id="r")
            read, exec_ = admission.verdicts
            trigger = admission.intervention.tool_name if admission.intervention else None
            seen.append((read.action, exec_.action, trigger))
            assert exec_.detection is None or not per_tool
            for call, verdict in zip(batch, admission.verdicts, strict=True):
                if verdict.action != "block":
                    guard.after_tool_call(call.tool_name, call.args, session="s", run_id="r",
                                          call_id=call.call_id, result="same")
        return seen

    exempt = turns({"exec": {"exempt": True}})
    assert [i + 1 for i, t in enumerate(exempt) if t[0] == "block"][:1] == [11]
    assert {t[2] for t in exempt} <= {None, "read"}
    assert all(t[1] != "warn" for t in exempt)


def test_exempt_calls_still_count_in_other_tools_patterns() -> None:
    """Recorded like any call: a ping-pong between an exempt and a non-exempt tool still
    warns and blocks the non-exempt side."""
    guard = guard_with({"poll": {"exempt": True}})
    seen: dict[str, list[str]] = {"poll": [], "read": []}
    for i in range(44):
        tool = "poll" if i % 2 == 0 else "read"
        verdict = guard.before_tool_call(tool, {"x": 1}, session="s", run_id="r")
        seen[tool].append(verdict.action)
        if verdict.action != "block":
            guard.after_tool_call(tool, {"x": 1}, session="s", run_id="r", result="same")
    assert set(seen["poll"]) == {"allow"}
    assert "warn" in seen["read"] and "block" in seen["read"]


def _replay(guard: LoopGuard, calls: list[tuple[str, int]]) -> list[tuple[str, str]]:
    out = []
    for tool, arg in calls:
        verdict = guard.before_tool_call(tool, {"a": arg}, session="s", run_id="r")
        out.append((tool, verdict.action))
        if verdict.action != "block":
            guard.after_tool_call(tool, {"a": arg}, session="s", run_id="r",
                                  result=f"{tool}-{arg}")
    return out


def test_exempting_a_tool_changes_no_verdict_of_the_others() -> None:
    """As long as the exempt tool was not blocked before (a blocked call is recorded as a
    veto, an exempt one with its real outcome), the other tools' verdicts are the same."""
    compared = 0
    for seed in range(40):
        rng = random.Random(seed)
        calls = [(rng.choice("AABBC"), rng.randrange(2)) for _ in range(90)]
        before = _replay(guard_with({}), calls)
        if ("C", "block") in before:
            continue
        after = _replay(guard_with({"C": {"exempt": True}}), calls)
        assert [v for v in after if v[0] != "C"] == [v for v in before if v[0] != "C"]
        assert {a for t, a in after if t == "C"} == {"allow"}
        compared += any(a != "allow" for t, a in before if t != "C")
    assert compared >= 5  # enough sequences where the other tools got verdicts


def test_post_compaction_guard_ignores_an_exempt_tool() -> None:
    def run_after_compaction(per_tool: dict[str, Any]) -> bool:
        guard = guard_with(per_tool)
        actions(guard, "exec", 3, args={"command": "make"})
        guard.compaction_retried(session="s", run_id="r")
        try:
            actions(guard, "exec", 3, args={"command": "make"})
        except CompactionLoopPersistedError:
            return True
        return False

    assert run_after_compaction({}) is True
    assert run_after_compaction({"exec": {"exempt": True}}) is False


# --- the guard: per-tool thresholds ---------------------------------------------------------


def test_lower_thresholds_warn_and_block_that_tool_earlier_only() -> None:
    guard = guard_with({"browser*": {"warningThreshold": 3, "criticalThreshold": 5}})
    seen = actions(guard, "browser_click", 10, args={"ref": "e1"})
    assert (first(seen, "warn"), first(seen, "block")) == (4, 6)
    other = actions(guard, "read", 25, args={"path": "a"}, run="r2")
    assert (first(other, "warn"), first(other, "block")) == (11, 21)


def test_higher_thresholds_let_that_tool_run_longer() -> None:
    # A threshold above historySize could never be reached (the window holds the evidence).
    guard = guard_with({"wait_for": {"warningThreshold": 25, "criticalThreshold": 35}},
                       history_size=50)
    seen = actions(guard, "wait_for", 40)
    # The breaker (inherited 30) moved to 36 for this tool: the critical at 35 blocks first.
    assert (first(seen, "warn"), first(seen, "block")) == (26, 36)


def test_per_tool_breaker() -> None:
    guard = guard_with({"t": {"globalCircuitBreakerThreshold": 12}})
    seen = actions(guard, "t", 15)
    # Thresholds (10, 11, 12): warned on the 11th call, blocked on the 12th.
    assert (first(seen, "warn"), first(seen, "block")) == (11, 12)


def test_per_tool_critical_alone_warns_one_call_before() -> None:
    guard = guard_with({"t": {"criticalThreshold": 5}})
    seen = actions(guard, "t", 8)
    assert (first(seen, "warn"), first(seen, "block")) == (5, 6)


def test_warning_dampening_uses_the_tools_warning_threshold() -> None:
    guard = guard_with({"t": {"warningThreshold": 3, "criticalThreshold": 20}})
    seen = actions(guard, "t", 13)
    # Buckets of 3 calls: warned at counts 3, 6, 9, 12 (calls 4, 7, 10, 13).
    assert [i + 1 for i, a in enumerate(seen) if a == "warn"] == [4, 7, 10, 13]


def test_per_tool_thresholds_in_the_early_preset() -> None:
    guard = guard_with({"t": {"criticalThreshold": 4}}, preset="early")
    seen = actions(guard, "t", 8)
    assert first(seen, "block") == 5
    assert first(actions(guard, "u", 15, run="r2"), "block") == 11


def test_loaded_file_drives_the_guard(tmp_path: Path) -> None:
    path = write(tmp_path, MERGED)
    guard = LoopGuard(load_config(path, agent_id="coder"))
    guard.sinks.clear()
    assert first(actions(guard, "browser_type", 10), "block") == 7
    assert first(actions(guard, "exec", 25, run="r2", args={"command": "x"}), "block") == 21
    assert actions(guard, "mcp__gh__list", 40, run="r3") == ["allow"] * 40


# --- config check ---------------------------------------------------------------------------


def test_config_check_table_shows_entries_and_where_values_came_from(tmp_path: Path) -> None:
    path = write(tmp_path, MERGED)
    result = CliRunner().invoke(config_app, ["check", str(path), "--agent", "coder"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = [" ".join(line.replace("│", " ").split()) for line in result.stdout.splitlines()]
    assert 'perTool["browser*"].exempt false default' in lines
    assert 'perTool["browser*"].warningThreshold 3 config (global block)' in lines
    assert 'perTool["browser*"].criticalThreshold 6 config (agent block)' in lines
    assert 'perTool["browser*"].globalCircuitBreakerThreshold 30 top-level value' in lines
    assert "perTool.exec.exempt false config (agent block)" in lines
    assert 'perTool["mcp__*"].exempt true config (global block)' in lines
    assert not any(line.startswith('perTool["mcp__*"].warning') for line in lines)
    assert "perTool.read.warningThreshold 2 config (agent block)" in lines
    assert 'note: perTool["mcp__*"] is exempt, so its warningThreshold has no effect' \
        in result.stdout.replace("\n", " ")


def test_config_check_json_shows_effective_per_tool_and_origins(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps({"tools": {"loopDetection": {"perTool": {
        "t": {"criticalThreshold": 5}, "x": {"exempt": True}}}}}))
    result = CliRunner().invoke(config_app, ["check", str(path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["config"]["perTool"] == {"t": {"exempt": False, "criticalThreshold": 5},
                                         "x": {"exempt": True}}
    assert data["effectivePerTool"] == {
        "t": {"exempt": False, "warningThreshold": 4, "criticalThreshold": 5,
              "globalCircuitBreakerThreshold": 30},
        "x": {"exempt": True},
    }
    assert data["origins"]["perTool.t.criticalThreshold"] == "global"
    assert data["origins"]["perTool.t.warningThreshold"] == "fitted"
    assert data["origins"]["perTool.t.globalCircuitBreakerThreshold"] == "inherited"
    assert data["origins"]["perTool.x.exempt"] == "global"
    assert LoopDetectionConfig.model_validate(data["config"]) == load_config(path)


def test_config_check_marks_a_repaired_entry_value(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps({
        "tools": {"loopDetection": {"perTool": {"exec": {"warningThreshold": 5}}}},
        "agents": {"list": [{"id": "a", "tools": {"loopDetection": {
            "perTool": {"exec": {"criticalThreshold": 4}}}}}]},
    }))
    result = CliRunner().invoke(config_app, ["check", str(path), "--agent", "a", "--json"])
    data = json.loads(result.stdout)
    assert data["origins"]["perTool.exec.criticalThreshold"] == "repaired"
    assert data["effectivePerTool"]["exec"]["criticalThreshold"] == 6
    [repair] = data["repairs"]
    assert "perTool.exec.criticalThreshold 4 -> 6" in repair


def test_config_check_reports_a_bad_entry(tmp_path: Path) -> None:
    path = write(tmp_path, '{tools: {loopDetection: {perTool: {"browser*": {warningThreshold: 2.5}}}}}')
    result = CliRunner().invoke(config_app, ["check", str(path)])
    assert result.exit_code == 2
    assert 'tools.loopDetection.perTool["browser*"].warningThreshold' in result.stderr
    assert "(got 2.5)" in result.stderr
