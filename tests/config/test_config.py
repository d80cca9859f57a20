"""LoopDetectionConfig, presets, validation, repair and OpenClaw config loading (spec §a)."""

from __future__ import annotations

import json
import logging
import math
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loopwarden.config import (
    PRESETS,
    ConfigError,
    DetectorsConfig,
    LoopDetectionConfig,
    PostCompactionGuardConfig,
    config_from_mapping,
    load_config,
)

WARNING_ORDER = "tools.loopDetection.warningThreshold must be lower than criticalThreshold."
CRITICAL_ORDER = (
    "tools.loopDetection.criticalThreshold must be lower than globalCircuitBreakerThreshold."
)

NUMERIC_KEYS = [
    ("historySize", "history_size"),
    ("warningThreshold", "warning_threshold"),
    ("criticalThreshold", "critical_threshold"),
    ("unknownToolThreshold", "unknown_tool_threshold"),
    ("globalCircuitBreakerThreshold", "global_circuit_breaker_threshold"),
    ("errorRepeatThreshold", "error_repeat_threshold"),
]
DETECTOR_KEYS = [
    ("genericRepeat", "generic_repeat"),
    ("knownPollNoProgress", "known_poll_no_progress"),
    ("pingPong", "ping_pong"),
    ("argumentChurn", "argument_churn"),
]
BAD_POSITIVE_INTS: list[tuple[object, str]] = [
    (0, "0"),
    (-3, "-3"),
    (2.5, "2.5"),
    (True, "true"),
    (False, "false"),
    ("10", '"10"'),
    (None, "null"),
    (math.inf, "Infinity"),
    ([10], "a list"),
    ({"n": 10}, "an object"),
]


def write(tmp_path: Path, text: str, name: str = "openclaw.json") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def write_json(tmp_path: Path, data: object, name: str = "openclaw.json") -> Path:
    return write(tmp_path, json.dumps(data), name)


def agents_list(agents: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The older shape: ``agents.list[]`` with ``id``."""
    return {"list": [{"id": agent, "tools": {"loopDetection": ld}} for agent, ld in agents.items()]}


def agents_entries(agents: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The current shape: ``agents.entries.<id>``."""
    return {"entries": {agent: {"tools": {"loopDetection": ld}} for agent, ld in agents.items()}}


AGENT_SHAPES: list[Callable[[dict[str, dict[str, Any]]], dict[str, Any]]] = [
    agents_list,
    agents_entries,
]


def openclaw_config(
    global_ld: dict[str, Any] | None,
    agents: dict[str, dict[str, Any]] | None = None,
    shape: Callable[[dict[str, dict[str, Any]]], dict[str, Any]] = agents_entries,
) -> dict[str, Any]:
    data: dict[str, Any] = {"gateway": {"port": 18789}}
    if global_ld is not None:
        data["tools"] = {"profile": "coding", "loopDetection": global_ld}
    if agents is not None:
        data["agents"] = shape(agents)
    return data


def raises_config_error(fn: Callable[[], object]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        fn()
    return info.value


def effective(cfg: LoopDetectionConfig) -> tuple[int, int, int, int, int]:
    return (
        cfg.history_size,
        cfg.warning_threshold,
        cfg.critical_threshold,
        cfg.unknown_tool_threshold,
        cfg.global_circuit_breaker_threshold,
    )


# --- defaults and presets ---------------------------------------------------------------


def test_defaults_are_the_spec_defaults() -> None:
    cfg = LoopDetectionConfig()
    assert effective(cfg) == (30, 10, 20, 10, 30)
    assert cfg.post_compaction_guard.window_size == 3
    assert cfg.enabled is None
    assert cfg.preset == "openclaw"
    assert cfg.error_repeat_threshold == 10
    d = cfg.detectors
    assert (d.generic_repeat, d.known_poll_no_progress, d.ping_pong, d.argument_churn) == (
        True,
        True,
        True,
        True,
    )
    assert d.error_repeat is None
    assert not cfg.error_repeat_enabled
    assert not cfg.post_outcome_warnings
    assert not cfg.mask_volatile


def test_presets_table() -> None:
    assert PRESETS["openclaw"] == {
        "history_size": 30,
        "warning_threshold": 10,
        "critical_threshold": 20,
        "unknown_tool_threshold": 10,
        "global_circuit_breaker_threshold": 30,
        "error_repeat_threshold": 10,
    }
    early = PRESETS["early"]
    assert (
        early["warning_threshold"],
        early["critical_threshold"],
        early["unknown_tool_threshold"],
        early["global_circuit_breaker_threshold"],
        early["error_repeat_threshold"],
    ) == (6, 10, 5, 20, 6)


def test_early_preset_supplies_unset_thresholds_and_switches() -> None:
    cfg = LoopDetectionConfig(preset="early")
    for name, value in PRESETS["early"].items():
        assert getattr(cfg, name) == value
    assert cfg.error_repeat_enabled
    assert cfg.post_outcome_warnings
    assert cfg.mask_volatile


def test_explicit_values_win_over_preset_defaults() -> None:
    cfg = LoopDetectionConfig(preset="early", warningThreshold=7, historySize=50)
    assert cfg.warning_threshold == 7
    assert cfg.history_size == 50
    assert cfg.critical_threshold == PRESETS["early"]["critical_threshold"]
    assert cfg.model_fields_set == {"preset", "warning_threshold", "history_size"}


@pytest.mark.parametrize(
    ("preset", "switch", "expected"),
    [
        ("openclaw", None, False),
        ("openclaw", True, True),
        ("early", None, True),
        ("early", False, False),
    ],
)
def test_error_repeat_switch_overrides_preset(
    preset: str, switch: bool | None, expected: bool
) -> None:
    cfg = LoopDetectionConfig(preset=preset, detectors={"errorRepeat": switch})
    assert cfg.error_repeat_enabled is expected


@pytest.mark.parametrize(
    ("enabled", "rolling", "compaction"),
    [(None, False, True), (True, True, True), (False, False, False)],
)
def test_enabled_is_tri_state(enabled: bool | None, rolling: bool, compaction: bool) -> None:
    # Spec §k.2: rolling detectors need exactly True; the compaction guard runs unless False.
    cfg = LoopDetectionConfig(enabled=enabled)
    assert cfg.rolling_enabled is rolling
    assert cfg.compaction_guard_enabled is compaction


# --- spellings ----------------------------------------------------------------------------


@pytest.mark.parametrize(("camel", "snake"), NUMERIC_KEYS)
def test_camel_and_snake_numeric_keys_are_equivalent(camel: str, snake: str) -> None:
    value = 37 if snake == "global_circuit_breaker_threshold" else 17
    a = LoopDetectionConfig(**{camel: value})
    b = LoopDetectionConfig(**{snake: value})
    c = LoopDetectionConfig.model_validate({camel: value})
    assert a == b == c
    assert getattr(a, snake) == value
    assert a.model_fields_set == {snake}


@pytest.mark.parametrize(("camel", "snake"), DETECTOR_KEYS)
def test_camel_and_snake_detector_keys_are_equivalent(camel: str, snake: str) -> None:
    a = LoopDetectionConfig(detectors={camel: False})
    b = LoopDetectionConfig(detectors={snake: False})
    c = LoopDetectionConfig.model_validate({"detectors": {camel: False}})
    d = LoopDetectionConfig(detectors=DetectorsConfig(**{snake: False}))
    assert a == b == c == d
    assert getattr(a.detectors, snake) is False
    others = [s for _, s in DETECTOR_KEYS if s != snake]
    assert all(getattr(a.detectors, s) is True for s in others)


def test_post_compaction_guard_in_either_spelling() -> None:
    configs = [
        LoopDetectionConfig(postCompactionGuard={"windowSize": 5}),
        LoopDetectionConfig(post_compaction_guard={"window_size": 5}),
        LoopDetectionConfig(postCompactionGuard={"window_size": 5}),
        LoopDetectionConfig(post_compaction_guard=PostCompactionGuardConfig(windowSize=5)),
        LoopDetectionConfig.model_validate({"postCompactionGuard": {"windowSize": 5}}),
    ]
    assert all(c == configs[0] for c in configs)
    assert configs[0].post_compaction_guard.window_size == 5


def test_model_validate_full_camel_case_block() -> None:
    cfg = LoopDetectionConfig.model_validate(
        {
            "enabled": True,
            "historySize": 40,
            "warningThreshold": 6,
            "criticalThreshold": 12,
            "unknownToolThreshold": 4,
            "globalCircuitBreakerThreshold": 24,
            "errorRepeatThreshold": 3,
            "detectors": {
                "genericRepeat": False,
                "knownPollNoProgress": True,
                "pingPong": False,
                "argumentChurn": False,
                "errorRepeat": True,
            },
            "postCompactionGuard": {"windowSize": 4},
            "preset": "early",
        }
    )
    assert effective(cfg) == (40, 6, 12, 4, 24)
    assert cfg.error_repeat_threshold == 3
    assert cfg.rolling_enabled
    assert cfg.detectors == DetectorsConfig(
        generic_repeat=False,
        known_poll_no_progress=True,
        ping_pong=False,
        argument_churn=False,
        error_repeat=True,
    )
    assert cfg.post_compaction_guard.window_size == 4
    dumped = cfg.model_dump(by_alias=True)
    assert dumped["warningThreshold"] == 6
    assert dumped["detectors"]["pingPong"] is False
    assert LoopDetectionConfig.model_validate(dumped) == cfg


def test_integral_float_is_accepted_as_int() -> None:
    cfg = LoopDetectionConfig(warningThreshold=10.0, postCompactionGuard={"windowSize": 4.0})
    assert cfg.warning_threshold == 10
    assert type(cfg.warning_threshold) is int
    assert type(cfg.post_compaction_guard.window_size) is int


def test_the_same_key_in_both_spellings_is_an_error() -> None:
    err = raises_config_error(lambda: LoopDetectionConfig(warningThreshold=5, warning_threshold=6))
    assert err.path == "warningThreshold"
    assert "given twice" in str(err)


# --- conformance scenarios 12, 37, 38 at config level ---------------------------------------


def test_scenario_12_history_size_is_accepted() -> None:
    cfg = LoopDetectionConfig(historySize=4)
    assert cfg.history_size == 4


def test_scenario_37_low_thresholds_and_switches_are_accepted() -> None:
    cfg = LoopDetectionConfig(
        enabled=True,
        warningThreshold=2,
        criticalThreshold=4,
        detectors={"genericRepeat": False, "knownPollNoProgress": True, "pingPong": False},
    )
    assert (cfg.warning_threshold, cfg.critical_threshold) == (2, 4)
    assert cfg.global_circuit_breaker_threshold == 30
    assert not cfg.detectors.generic_repeat
    assert cfg.detectors.known_poll_no_progress
    assert not cfg.detectors.ping_pong


def test_scenario_38_all_detectors_can_be_switched_off() -> None:
    cfg = LoopDetectionConfig(
        enabled=True,
        detectors={"genericRepeat": False, "knownPollNoProgress": False, "pingPong": False},
    )
    d = cfg.detectors
    assert not (d.generic_repeat or d.known_poll_no_progress or d.ping_pong)
    assert cfg.rolling_enabled


# --- validation errors from the constructor -------------------------------------------------


@pytest.mark.parametrize(("camel", "snake"), NUMERIC_KEYS)
@pytest.mark.parametrize(("bad", "shown"), BAD_POSITIVE_INTS)
def test_numeric_keys_must_be_positive_integers(
    camel: str, snake: str, bad: object, shown: str
) -> None:
    for key in (camel, snake):
        err = raises_config_error(lambda key=key: LoopDetectionConfig(**{key: bad}))
        assert isinstance(err, ValueError)
        assert err.path == camel
        assert err.value == bad
        assert err.file is None
        assert str(err) == f"{camel}: must be a positive integer (got {shown})"


def test_nan_is_not_a_positive_integer() -> None:
    err = raises_config_error(lambda: LoopDetectionConfig(historySize=math.nan))
    assert err.path == "historySize"
    assert "NaN" in str(err)


@pytest.mark.parametrize(("bad", "shown"), BAD_POSITIVE_INTS)
def test_window_size_must_be_a_positive_integer(bad: object, shown: str) -> None:
    err = raises_config_error(lambda: LoopDetectionConfig(postCompactionGuard={"windowSize": bad}))
    assert err.path == "postCompactionGuard.windowSize"
    assert str(err) == f"postCompactionGuard.windowSize: must be a positive integer (got {shown})"
    direct = raises_config_error(lambda: PostCompactionGuardConfig(window_size=bad))
    assert direct.path == "windowSize"


@pytest.mark.parametrize(("camel", "snake"), DETECTOR_KEYS)
@pytest.mark.parametrize(("bad", "shown"), [(1, "1"), ("true", '"true"'), (None, "null")])
def test_detector_switches_must_be_booleans(
    camel: str, snake: str, bad: object, shown: str
) -> None:
    err = raises_config_error(lambda: LoopDetectionConfig(detectors={snake: bad}))
    assert err.path == f"detectors.{camel}"
    assert err.value == bad
    assert str(err) == f"detectors.{camel}: must be true or false (got {shown})"


@pytest.mark.parametrize("bad", [1, "yes", 0])
def test_enabled_must_be_a_boolean_or_unset(bad: object) -> None:
    err = raises_config_error(lambda: LoopDetectionConfig(enabled=bad))
    assert err.path == "enabled"
    assert err.value == bad


def test_unknown_top_level_key() -> None:
    # PR #33182: users copying old docs hit this with repeatThreshold.
    err = raises_config_error(lambda: LoopDetectionConfig.model_validate({"repeatThreshold": 3}))
    assert err.path == "repeatThreshold"
    assert err.value == 3
    assert str(err).startswith("repeatThreshold: unknown key (valid keys: enabled, historySize,")
    assert str(err).endswith("(got 3)")


def test_unknown_detector_key() -> None:
    err = raises_config_error(lambda: LoopDetectionConfig(detectors={"pingpong": False}))
    assert err.path == "detectors.pingpong"
    assert err.value is False
    assert "unknown key" in str(err)
    assert "pingPong" in str(err)


def test_unknown_post_compaction_guard_key() -> None:
    err = raises_config_error(lambda: LoopDetectionConfig(postCompactionGuard={"window": 3}))
    assert err.path == "postCompactionGuard.window"
    assert "unknown key (valid keys: windowSize)" in str(err)


@pytest.mark.parametrize("key", ["detectors", "postCompactionGuard"])
@pytest.mark.parametrize("bad", [True, 3, "on", [1]])
def test_nested_objects_must_be_objects(key: str, bad: object) -> None:
    err = raises_config_error(lambda: LoopDetectionConfig.model_validate({key: bad}))
    assert err.path == key
    assert "must be an object" in str(err)


@pytest.mark.parametrize("bad", [[1], "x", 3, None])
def test_block_must_be_an_object(bad: object) -> None:
    err = raises_config_error(lambda: LoopDetectionConfig.model_validate(bad))
    assert err.path == ""
    assert "must be an object" in str(err)


def test_unknown_preset() -> None:
    err = raises_config_error(lambda: LoopDetectionConfig(preset="paranoid"))
    assert err.path == "preset"
    assert str(err) == 'preset: must be one of "openclaw", "early" (got "paranoid")'


def test_several_problems_are_all_reported() -> None:
    err = raises_config_error(
        lambda: LoopDetectionConfig(historySize=0, detectors={"pingPong": "no", "x": 1})
    )
    text = str(err)
    assert err.path == "historySize"
    assert "also: detectors.pingPong: must be true or false" in text
    assert "also: detectors.x: unknown key" in text


def test_nested_model_constructors_raise_config_error() -> None:
    err = raises_config_error(lambda: DetectorsConfig(pingPong="off"))
    assert err.path == "pingPong"
    err = raises_config_error(lambda: DetectorsConfig(bogus=True))
    assert err.path == "bogus"


def test_config_error_survives_pickling() -> None:
    err = raises_config_error(lambda: LoopDetectionConfig(warningThreshold=-3))
    copy = pickle.loads(pickle.dumps(err))
    assert isinstance(copy, ConfigError)
    assert (copy.path, copy.value, copy.file, str(copy)) == (err.path, -3, None, str(err))


# --- cross-field rule (spec §a.2) -----------------------------------------------------------


@pytest.mark.parametrize(("warning", "critical"), [(20, 20), (25, 20), (5, 4)])
def test_warning_not_below_critical_in_one_object_is_an_error(warning: int, critical: int) -> None:
    err = raises_config_error(
        lambda: LoopDetectionConfig(warning_threshold=warning, critical_threshold=critical)
    )
    assert err.path == "criticalThreshold"
    assert err.value == critical
    assert err.reason == WARNING_ORDER
    assert str(err) == f"criticalThreshold: {WARNING_ORDER} (got {critical})"


@pytest.mark.parametrize(("critical", "breaker"), [(30, 30), (40, 30)])
def test_critical_not_below_breaker_in_one_object_is_an_error(critical: int, breaker: int) -> None:
    err = raises_config_error(
        lambda: LoopDetectionConfig.model_validate(
            {"criticalThreshold": critical, "globalCircuitBreakerThreshold": breaker}
        )
    )
    assert err.path == "globalCircuitBreakerThreshold"
    assert err.value == breaker
    assert err.reason == CRITICAL_ORDER


def test_order_rule_ignores_unknown_tool_threshold_and_history_size() -> None:
    cfg = LoopDetectionConfig(
        warningThreshold=3,
        criticalThreshold=4,
        globalCircuitBreakerThreshold=5,
        unknownToolThreshold=100,
        historySize=2,
    )
    assert effective(cfg) == (2, 3, 4, 100, 5)


# --- run-time repair (spec §a.3) ------------------------------------------------------------


def repair_messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "loopwarden" and r.levelno == logging.WARNING
    ]


def test_single_side_is_repaired_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="loopwarden")
    cfg = LoopDetectionConfig(warning_threshold=25)
    assert (cfg.warning_threshold, cfg.critical_threshold) == (25, 26)
    assert cfg.global_circuit_breaker_threshold == 30  # already above 26
    [message] = repair_messages(caplog)
    assert "criticalThreshold 20 -> 26" in message
    assert "warningThreshold 25" in message


def test_repair_cascades_to_the_breaker(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="loopwarden")
    cfg = LoopDetectionConfig(warning_threshold=25, preset="early")
    assert (
        cfg.warning_threshold,
        cfg.critical_threshold,
        cfg.global_circuit_breaker_threshold,
    ) == (25, 26, 27)
    [message] = repair_messages(caplog)
    assert "criticalThreshold 10 -> 26" in message
    assert "globalCircuitBreakerThreshold 20 -> 27" in message


def test_lone_low_critical_is_raised_above_the_default_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="loopwarden")
    cfg = LoopDetectionConfig(criticalThreshold=5)
    assert (cfg.warning_threshold, cfg.critical_threshold) == (10, 11)
    assert len(repair_messages(caplog)) == 1


def test_lone_high_critical_raises_the_breaker(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="loopwarden")
    cfg = LoopDetectionConfig(criticalThreshold=50)
    assert cfg.global_circuit_breaker_threshold == 51
    assert "globalCircuitBreakerThreshold 30 -> 51" in repair_messages(caplog)[0]


def test_ordered_config_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="loopwarden")
    LoopDetectionConfig(warningThreshold=3, criticalThreshold=5)
    LoopDetectionConfig.model_validate({"preset": "early"})
    assert repair_messages(caplog) == []


def test_model_validate_repairs_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="loopwarden")
    cfg = LoopDetectionConfig.model_validate({"warningThreshold": 25, "preset": "early"})
    assert (cfg.critical_threshold, cfg.global_circuit_breaker_threshold) == (26, 27)
    assert len(repair_messages(caplog)) == 1


# --- immutability and with_overrides --------------------------------------------------------


def test_config_is_frozen_and_hashable() -> None:
    cfg = LoopDetectionConfig()
    with pytest.raises(ValueError):
        cfg.warning_threshold = 3  # type: ignore[misc]
    with pytest.raises(ValueError):
        cfg.detectors.ping_pong = False  # type: ignore[misc]
    with pytest.raises(ValueError):
        cfg.post_compaction_guard.window_size = 9  # type: ignore[misc]
    assert cfg.warning_threshold == 10
    assert hash(cfg) == hash(LoopDetectionConfig())
    assert cfg == LoopDetectionConfig(warningThreshold=10)


def test_with_overrides_returns_a_validated_copy() -> None:
    base = LoopDetectionConfig(warningThreshold=4, detectors={"pingPong": False})
    on = base.with_overrides(enabled=True)
    assert on.rolling_enabled and not base.rolling_enabled
    assert on.warning_threshold == 4
    assert on.detectors.ping_pong is False
    assert base.with_overrides(historySize=12) == base.with_overrides(history_size=12)


def test_with_overrides_replaces_a_switch_given_in_the_other_spelling() -> None:
    base = LoopDetectionConfig(detectors={"pingPong": False})
    assert base.with_overrides(detectors={"ping_pong": True}).detectors.ping_pong is True
    snake = LoopDetectionConfig(detectors={"ping_pong": False})
    assert snake.with_overrides(detectors={"pingPong": True}).detectors.ping_pong is True


def test_with_overrides_merges_nested_objects_key_wise() -> None:
    base = LoopDetectionConfig(detectors={"pingPong": False})
    changed = base.with_overrides(detectors={"generic_repeat": False})
    assert changed.detectors.ping_pong is False
    assert changed.detectors.generic_repeat is False
    assert changed.detectors.known_poll_no_progress is True


def test_with_overrides_rederives_preset_defaults_but_keeps_explicit_values() -> None:
    base = LoopDetectionConfig(criticalThreshold=15)
    early = base.with_overrides(preset="early")
    assert early.critical_threshold == 15
    assert early.warning_threshold == PRESETS["early"]["warning_threshold"]
    assert (
        early.global_circuit_breaker_threshold
        == PRESETS["early"]["global_circuit_breaker_threshold"]
    )


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"warningThreshold": 0}, "warningThreshold"),
        ({"warningThreshold": 9}, "criticalThreshold"),
        ({"bogus": 1}, "bogus"),
        ({"detectors": {"pingPong": "x"}}, "detectors.pingPong"),
    ],
)
def test_with_overrides_validates(change: dict[str, object], path: str) -> None:
    base = LoopDetectionConfig(warningThreshold=3, criticalThreshold=8)
    err = raises_config_error(lambda: base.with_overrides(**change))
    assert err.path == path


# --- load_config: files, JSON5, defaults ----------------------------------------------------


def test_json5_comments_trailing_commas_and_unquoted_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        // OpenClaw gateway config
        {
          tools: {
            /* loop detection */
            loopDetection: {
              enabled: true,
              warningThreshold: 4,   // lower than the default
              criticalThreshold: 8.0,
              detectors: { 'pingPong': false, },
            },
          },
        }
        """,
        "openclaw.json5",
    )
    cfg = load_config(path)
    assert cfg.rolling_enabled
    assert (cfg.warning_threshold, cfg.critical_threshold) == (4, 8)
    assert cfg.detectors.ping_pong is False
    assert load_config(str(path)) == cfg


@pytest.mark.parametrize(
    "data", [{}, {"tools": {}}, {"tools": {"profile": "coding"}}, {"agents": {"list": []}}]
)
def test_missing_loop_detection_gives_defaults(tmp_path: Path, data: dict[str, Any]) -> None:
    assert load_config(write_json(tmp_path, data)) == LoopDetectionConfig()
    assert load_config(write_json(tmp_path, data), agent_id="coder") == LoopDetectionConfig()


def test_global_block_is_used_without_agent(tmp_path: Path) -> None:
    path = write_json(tmp_path, openclaw_config({"enabled": True, "historySize": 4}))
    cfg = load_config(path)
    assert cfg.enabled is True
    assert cfg.history_size == 4
    assert cfg.model_fields_set == {"enabled", "history_size"}


@pytest.mark.parametrize("shape", AGENT_SHAPES)
def test_agent_override_in_either_shape(
    tmp_path: Path, shape: Callable[[dict[str, dict[str, Any]]], dict[str, Any]]
) -> None:
    data = openclaw_config(
        {"enabled": True, "warningThreshold": 6},
        {"main": {"historySize": 12}, "coder": {"enabled": False, "warningThreshold": 3}},
        shape,
    )
    path = write_json(tmp_path, data)
    coder = load_config(path, agent_id="coder")
    assert coder.enabled is False
    assert coder.warning_threshold == 3
    assert coder.history_size == 30
    main = load_config(path, agent_id="main")
    assert (main.enabled, main.warning_threshold, main.history_size) == (True, 6, 12)
    assert load_config(path) == load_config(path, agent_id="nobody")
    assert load_config(path).warning_threshold == 6


def test_both_agent_shapes_in_one_file(tmp_path: Path) -> None:
    data = openclaw_config({"enabled": True})
    data["agents"] = {
        "entries": {"a": {"tools": {"loopDetection": {"historySize": 5}}}},
        "list": [{"id": "b", "tools": {"loopDetection": {"historySize": 6}}}],
    }
    path = write_json(tmp_path, data)
    assert load_config(path, agent_id="a").history_size == 5
    assert load_config(path, agent_id="b").history_size == 6


def test_agent_without_global_block(tmp_path: Path) -> None:
    path = write_json(tmp_path, openclaw_config(None, {"coder": {"enabled": True}}))
    assert load_config(path, agent_id="coder").rolling_enabled
    assert load_config(path).enabled is None


def test_unknown_agent_falls_back_to_global(tmp_path: Path) -> None:
    path = write_json(tmp_path, openclaw_config({"historySize": 9}, {"coder": {"historySize": 3}}))
    assert load_config(path, agent_id="writer").history_size == 9


def test_an_agent_id_listed_twice_is_an_error(tmp_path: Path) -> None:
    # Was "the first listed agent wins": which override applied depended on the file's order.
    data = openclaw_config(None)
    data["agents"] = {
        "list": [
            {"id": "x", "tools": {"loopDetection": {"historySize": 7}}},
            {"id": "x", "tools": {"loopDetection": {"historySize": 8}}},
        ]
    }
    file = write_json(tmp_path, data)
    err = raises_config_error(lambda: load_config(file, agent_id="x"))
    assert_names(err, file, "agents.list[1].id", '"x"')


# --- merge semantics (spec §a.4, V1/V2) -----------------------------------------------------


@pytest.mark.parametrize("shape", AGENT_SHAPES)
def test_agent_flips_one_detector_without_clearing_siblings(
    tmp_path: Path, shape: Callable[[dict[str, dict[str, Any]]], dict[str, Any]]
) -> None:
    data = openclaw_config(
        {"detectors": {"genericRepeat": False, "pingPong": False}},
        {"coder": {"detectors": {"pingPong": True}}},
        shape,
    )
    cfg = load_config(write_json(tmp_path, data), agent_id="coder")
    assert cfg.detectors.ping_pong is True
    assert cfg.detectors.generic_repeat is False
    assert cfg.detectors.known_poll_no_progress is True


@pytest.mark.parametrize("shape", AGENT_SHAPES)
def test_agent_post_compaction_guard_window(
    tmp_path: Path, shape: Callable[[dict[str, dict[str, Any]]], dict[str, Any]]
) -> None:
    data = openclaw_config(
        {"postCompactionGuard": {"windowSize": 5}},
        {"coder": {"postCompactionGuard": {"windowSize": 7}}, "main": {"enabled": True}},
        shape,
    )
    path = write_json(tmp_path, data)
    assert load_config(path, agent_id="coder").post_compaction_guard.window_size == 7
    assert load_config(path, agent_id="main").post_compaction_guard.window_size == 5
    assert load_config(path).post_compaction_guard.window_size == 5


def test_top_level_merge_is_field_wise(tmp_path: Path) -> None:
    data = openclaw_config(
        {"enabled": True, "warningThreshold": 5, "criticalThreshold": 9, "preset": "early"},
        {"coder": {"criticalThreshold": 12, "preset": "openclaw"}},
    )
    cfg = load_config(write_json(tmp_path, data), agent_id="coder")
    assert (cfg.enabled, cfg.warning_threshold, cfg.critical_threshold) == (True, 5, 12)
    assert cfg.preset == "openclaw"
    assert cfg.global_circuit_breaker_threshold == 30


def test_agent_enabled_null_keeps_global_value(tmp_path: Path) -> None:
    data = openclaw_config({"enabled": True}, {"coder": {"enabled": None, "historySize": 8}})
    cfg = load_config(write_json(tmp_path, data), agent_id="coder")
    assert cfg.enabled is True
    assert cfg.history_size == 8


@pytest.mark.parametrize("shape", AGENT_SHAPES)
def test_merged_order_violation_is_repaired_and_logged(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    shape: Callable[[dict[str, dict[str, Any]]], dict[str, Any]],
) -> None:
    caplog.set_level(logging.WARNING, logger="loopwarden")
    # Each block is valid alone; only the combination breaks the order (spec §a.2/§a.3).
    data = openclaw_config(
        {"warningThreshold": 15, "criticalThreshold": 18, "globalCircuitBreakerThreshold": 19},
        {"coder": {"criticalThreshold": 12}},
        shape,
    )
    path = write_json(tmp_path, data)
    cfg = load_config(path, agent_id="coder")
    assert (
        cfg.warning_threshold,
        cfg.critical_threshold,
        cfg.global_circuit_breaker_threshold,
    ) == (15, 16, 19)
    [message] = repair_messages(caplog)
    assert "criticalThreshold 12 -> 16" in message
    assert str(path) in message
    assert "coder" in message


def test_lone_global_side_is_repaired_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="loopwarden")
    path = write_json(tmp_path, openclaw_config({"warningThreshold": 25}, {"coder": {}}))
    cfg = load_config(path, agent_id="coder")
    assert (cfg.warning_threshold, cfg.critical_threshold) == (25, 26)
    assert len(repair_messages(caplog)) == 1


# --- load_config: errors name the file, the key path and the value --------------------------


def assert_names(err: ConfigError, file: Path, path: str, shown: str | None) -> None:
    text = str(err)
    assert err.file == str(file)
    assert err.path == path
    assert text.startswith(f"{file}: ")
    if path:
        assert f": {path}: " in text
    if shown is not None:
        assert f"(got {shown})" in text


@pytest.mark.parametrize("shape", AGENT_SHAPES)
def test_agent_block_error_names_its_path(
    tmp_path: Path, shape: Callable[[dict[str, dict[str, Any]]], dict[str, Any]]
) -> None:
    path = write_json(tmp_path, openclaw_config({}, {"coder": {"warningThreshold": -3}}, shape))
    err = raises_config_error(lambda: load_config(path, agent_id="coder"))
    where = (
        "agents.list[0].tools.loopDetection.warningThreshold"
        if shape is agents_list
        else "agents.entries.coder.tools.loopDetection.warningThreshold"
    )
    assert_names(err, path, where, "-3")
    assert err.value == -3
    assert str(err) == f"{path}: {where}: must be a positive integer (got -3)"


def test_error_in_another_agents_block_rejects_the_file(tmp_path: Path) -> None:
    # OpenClaw validates the whole config file; a bad block anywhere fails the load.
    data = openclaw_config({}, {"a": {}, "b": {"detectors": {"pingPong": "off"}}}, agents_list)
    path = write_json(tmp_path, data)
    err = raises_config_error(lambda: load_config(path, agent_id="a"))
    assert_names(err, path, "agents.list[1].tools.loopDetection.detectors.pingPong", '"off"')


def test_global_order_error_uses_spec_message(tmp_path: Path) -> None:
    data = openclaw_config({"warningThreshold": 20, "criticalThreshold": 20})
    path = write_json(tmp_path, data)
    err = raises_config_error(lambda: load_config(path))
    assert_names(err, path, "tools.loopDetection.criticalThreshold", "20")
    assert err.reason == WARNING_ORDER


@pytest.mark.parametrize("shape", AGENT_SHAPES)
def test_agent_order_error_uses_spec_message(
    tmp_path: Path, shape: Callable[[dict[str, dict[str, Any]]], dict[str, Any]]
) -> None:
    data = openclaw_config(
        {}, {"coder": {"criticalThreshold": 40, "globalCircuitBreakerThreshold": 35}}, shape
    )
    path = write_json(tmp_path, data)
    err = raises_config_error(lambda: load_config(path, agent_id="coder"))
    prefix = "agents.list[0]" if shape is agents_list else "agents.entries.coder"
    assert_names(err, path, f"{prefix}.tools.loopDetection.globalCircuitBreakerThreshold", "35")
    assert CRITICAL_ORDER in str(err)


def test_unknown_key_in_agent_detectors(tmp_path: Path) -> None:
    data = openclaw_config(None, {"coder": {"detectors": {"loopy": True}}}, agents_list)
    path = write_json(tmp_path, data)
    err = raises_config_error(lambda: load_config(path, agent_id="coder"))
    assert_names(err, path, "agents.list[0].tools.loopDetection.detectors.loopy", "true")
    assert "unknown key" in str(err)


def test_agent_id_with_dots_is_quoted_in_the_path(tmp_path: Path) -> None:
    data = openclaw_config(None, {"team.coder": {"historySize": 0}})
    path = write_json(tmp_path, data)
    err = raises_config_error(lambda: load_config(path))
    assert err.path == 'agents.entries["team.coder"].tools.loopDetection.historySize'


@pytest.mark.parametrize(
    ("data", "path", "shown"),
    [
        ([1, 2], "", "a list"),
        ({"tools": []}, "tools", "a list"),
        ({"tools": "x"}, "tools", '"x"'),
        ({"tools": {"loopDetection": True}}, "tools.loopDetection", "true"),
        ({"tools": {"loopDetection": None}}, "tools.loopDetection", "null"),
        ({"tools": {"loopDetection": [1]}}, "tools.loopDetection", "a list"),
        ({"agents": 3}, "agents", "3"),
        ({"agents": {"list": {"id": "a"}}}, "agents.list", "an object"),
        ({"agents": {"list": ["coder"]}}, "agents.list[0]", '"coder"'),
        ({"agents": {"list": [{"id": "a", "tools": 1}]}}, "agents.list[0].tools", "1"),
        (
            {"agents": {"list": [{"id": 7, "tools": {"loopDetection": {}}}]}},
            "agents.list[0].id",
            "7",
        ),
        ({"agents": {"entries": []}}, "agents.entries", "a list"),
        ({"agents": {"entries": {"coder": False}}}, "agents.entries.coder", "false"),
        (
            {"agents": {"entries": {"coder": {"tools": "all"}}}},
            "agents.entries.coder.tools",
            '"all"',
        ),
        (
            {"agents": {"entries": {"coder": {"tools": {"loopDetection": 5}}}}},
            "agents.entries.coder.tools.loopDetection",
            "5",
        ),
        (
            {"tools": {"loopDetection": {"detectors": True}}},
            "tools.loopDetection.detectors",
            "true",
        ),
        (
            {"tools": {"loopDetection": {"postCompactionGuard": {"windowSize": 0}}}},
            "tools.loopDetection.postCompactionGuard.windowSize",
            "0",
        ),
        ({"tools": {"loopDetection": {"preset": "fast"}}}, "tools.loopDetection.preset", '"fast"'),
    ],
)
def test_wrong_types_at_any_level(tmp_path: Path, data: object, path: str, shown: str) -> None:
    file = write_json(tmp_path, data)
    err = raises_config_error(lambda: load_config(file, agent_id="coder"))
    assert_names(err, file, path, shown)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    err = raises_config_error(lambda: load_config(path))
    assert err.file == str(path)
    assert str(err) == f"{path}: config file not found"


def test_directory_instead_of_file(tmp_path: Path) -> None:
    err = raises_config_error(lambda: load_config(tmp_path))
    assert err.file == str(tmp_path)
    assert str(err).startswith(f"{tmp_path}: ")


def test_undecodable_file(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json"
    path.write_bytes(b'{"tools": "\xff\xfe"}')
    err = raises_config_error(lambda: load_config(path))
    assert err.file == str(path)
    assert "cannot read config file" in str(err)


def test_json5_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "{\n  tools: {\n    loopDetection: { enabled: true,, }\n  }\n}\n")
    err = raises_config_error(lambda: load_config(path))
    assert err.file == str(path)
    assert err.line == 3
    assert err.column is not None and err.column > 1
    assert str(err).startswith(f"{path}: line 3, column {err.column}: invalid JSON5: ")


def test_empty_file_is_a_syntax_error(tmp_path: Path) -> None:
    err = raises_config_error(lambda: load_config(write(tmp_path, "")))
    assert "invalid JSON5" in str(err)


# --- config_from_mapping ------------------------------------------------------------------


def test_config_from_mapping_without_source() -> None:
    data = openclaw_config({"enabled": True}, {"coder": {"historySize": 0}})
    err = raises_config_error(lambda: config_from_mapping(data, agent_id="coder"))
    assert err.file is None
    assert str(err) == (
        "agents.entries.coder.tools.loopDetection.historySize: must be a positive integer (got 0)"
    )


def test_config_from_mapping_with_source_and_agent() -> None:
    data = openclaw_config({"enabled": True}, {"coder": {"historySize": 4}}, agents_list)
    cfg = config_from_mapping(data, agent_id="coder", source="openclaw.json")
    assert (cfg.enabled, cfg.history_size) == (True, 4)
    err = raises_config_error(lambda: config_from_mapping({"tools": 1}, source="openclaw.json"))
    assert str(err) == "openclaw.json: tools: must be an object (got 1)"


def test_config_from_mapping_accepts_snake_case_blocks() -> None:
    data = {"tools": {"loopDetection": {"warning_threshold": 4, "detectors": {"ping_pong": False}}}}
    data["agents"] = {
        "entries": {"c": {"tools": {"loopDetection": {"detectors": {"pingPong": True}}}}}
    }
    cfg = config_from_mapping(data, agent_id="c")
    assert cfg.warning_threshold == 4
    assert cfg.detectors.ping_pong is True


def test_config_from_mapping_rejects_non_mapping() -> None:
    err = raises_config_error(lambda: config_from_mapping([1], source="x.json"))  # type: ignore[arg-type]
    assert err.file == "x.json"
    assert "must be a JSON object" in str(err)


def test_the_json_schema_lists_the_declared_detector_switches() -> None:
    detectors = LoopDetectionConfig.model_json_schema()["$defs"]["DetectorsConfig"]
    assert detectors["properties"]["pingPong"] == {"type": "boolean", "default": True}
    assert detectors["properties"]["errorRepeat"] == {"type": ["boolean", "null"],
                                                      "default": None}
    assert len(detectors["properties"]) == len(DetectorsConfig().switches())
    assert detectors["additionalProperties"] is False
