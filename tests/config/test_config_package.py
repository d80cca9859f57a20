"""``loopwarden.config`` as a package: every name of the former single module still importable,
each preset's switches read from its ``Preset`` row, and old pickles still loading (the modules'
size is tests/test_code_shape.py's)."""

from __future__ import annotations

import importlib
import pickle

import pytest

import loopwarden.config as config_module
from loopwarden.config import PRESETS, ConfigError, LoopDetectionConfig, Preset
from loopwarden.config.presets import _PRESET_TABLE

# Every name the single-module ``loopwarden.config`` defined (its ``dir()``, imports left out),
# and the two imports tests reach through it.
FORMER_NAMES = [
    "ConfigError", "DetectorsConfig", "Issue", "LoadedConfig", "LoopDetectionConfig",
    "LoopwardenError", "MAX_CONFIG_BYTES", "PRESETS", "PerToolConfig",
    "PostCompactionGuardConfig", "PresetName", "Scope", "config_from_mapping", "json5",
    "load_config", "load_config_with_origins", "logger",
    "_Block", "_CRITICAL_ORDER_MESSAGE", "_CTX_PATH", "_CTX_VALUE", "_ConfigModel",
    "_DuplicateKeys", "_FILE_KINDS", "_FrozenDict", "_GLOB_CHARS", "_JSON5_POSITION",
    "_LoopDetectionBlock", "_MergedScopes", "_NESTED_KEYS", "_PER_TOOL", "_THRESHOLD_FIELDS",
    "_THRESHOLD_ORDER", "_TOOL_THRESHOLDS", "_UNSET", "_Unset", "_WARNING_ORDER_MESSAGE",
    "_agent_block", "_agent_blocks", "_agent_id", "_aliases_at", "_block_keys",
    "_canonical_keys", "_child_path", "_config_error", "_describe", "_duplicate_key_error",
    "_field_name", "_fit_thresholds", "_global_block", "_issues", "_join_path",
    "_join_path_text", "_key_segment", "_listed_id", "_loc_path", "_merge", "_merge_keywise",
    "_merge_per_tool", "_object_or_model", "_optional_bool", "_optional_mapping", "_parse",
    "_parse_json5", "_path_to", "_positive_int", "_read_config_text", "_rebuild_config_error",
    "_repair_text", "_require_regular_file", "_resolve_document", "_strict_bool", "_too_large",
    "_tool_patterns", "_with_value",
]

SWITCHES = ("post_outcome_warnings", "mask_volatile", "learn_volatile", "progress_aware",
            "extended_unknown_tools")


@pytest.mark.parametrize("name", FORMER_NAMES)
def test_every_former_name_is_still_importable(name: str) -> None:
    value = getattr(config_module, name)
    assert name in dir(config_module)
    home = getattr(value, "__module__", None)
    if isinstance(home, str) and home.startswith("loopwarden.config."):
        # The name is the object its new home defines, not a copy.
        assert getattr(importlib.import_module(home), name) is value


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        config_module.no_such_name  # type: ignore[attr-defined]  # noqa: B018


def test_presets_table_is_the_threshold_view_of_the_preset_rows() -> None:
    assert list(PRESETS) == list(_PRESET_TABLE) == ["openclaw", "early"]
    for name, preset in _PRESET_TABLE.items():
        assert isinstance(preset, Preset)
        assert preset.name == name
        assert PRESETS[name] == preset.thresholds()


@pytest.mark.parametrize(("preset", "on"), [("openclaw", False), ("early", True)])
def test_feature_switches_follow_the_preset(preset: str, on: bool) -> None:
    cfg = LoopDetectionConfig(preset=preset)
    for switch in SWITCHES:
        assert getattr(cfg, switch) is on, switch
        assert getattr(cfg, switch) is getattr(_PRESET_TABLE[preset], switch)
    assert cfg.error_repeat_enabled is on
    # An explicit detectors.errorRepeat still wins over the preset's choice.
    overridden = LoopDetectionConfig(preset=preset, detectors={"errorRepeat": not on})
    assert overridden.error_repeat_enabled is (not on)


def test_switches_follow_a_preset_changed_by_with_overrides() -> None:
    early = LoopDetectionConfig().with_overrides(preset="early")
    assert all(getattr(early, s) for s in SWITCHES)
    assert not any(getattr(early.with_overrides(preset="openclaw"), s) for s in SWITCHES)


def test_a_config_error_pickled_under_the_former_module_path_still_loads() -> None:
    err = ConfigError("must be a positive integer", file="f.json", path="historySize", value=-1)
    # Protocol 0 names globals as newline-terminated text, so the old path can be put back.
    data = pickle.dumps(err, protocol=0)
    assert b"loopwarden.config.errors\n_rebuild_config_error" in data
    old = data.replace(b"loopwarden.config.errors\n", b"loopwarden.config\n")
    loaded = pickle.loads(old)
    assert isinstance(loaded, ConfigError)
    assert (str(loaded), loaded.path, loaded.value) == (str(err), err.path, err.value)


def test_a_per_tool_mapping_pickled_under_the_former_module_path_still_loads() -> None:
    cfg = LoopDetectionConfig(perTool={"browser*": {"exempt": True}})
    data = pickle.dumps(cfg, protocol=0)
    assert b"loopwarden.config.model\n_FrozenDict" in data
    for home in (b"model", b"presets", b"validation"):
        data = data.replace(b"loopwarden.config." + home + b"\n", b"loopwarden.config\n")
    assert pickle.loads(data) == cfg

