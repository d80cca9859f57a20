"""``loopwarden.config`` as a package: its names load on first use, each preset's switches
read from its ``Preset`` row, and a config error or per-tool config survives pickling (the
modules' size is tests/test_code_shape.py's)."""

from __future__ import annotations

import pickle

import pytest

import loopwarden.config as config_module
from loopwarden.config import PRESETS, ConfigError, LoopDetectionConfig

SWITCHES = ("post_outcome_warnings", "mask_volatile", "learn_volatile", "progress_aware",
            "extended_unknown_tools")


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        config_module.no_such_name  # type: ignore[attr-defined]  # noqa: B018


def test_presets_table_is_the_threshold_view_of_the_preset_rows() -> None:
    assert list(PRESETS) == ["openclaw", "early"]
    for name, thresholds in PRESETS.items():
        config = LoopDetectionConfig(preset=name)
        assert thresholds == {field: getattr(config, field) for field in thresholds}


@pytest.mark.parametrize(("preset", "on"), [("openclaw", False), ("early", True)])
def test_feature_switches_follow_the_preset(preset: str, on: bool) -> None:
    cfg = LoopDetectionConfig(preset=preset)
    for switch in SWITCHES:
        assert getattr(cfg, switch) is on, switch
    assert cfg.error_repeat_enabled is on
    # An explicit detectors.errorRepeat still wins over the preset's choice.
    overridden = LoopDetectionConfig(preset=preset, detectors={"errorRepeat": not on})
    assert overridden.error_repeat_enabled is (not on)


def test_switches_follow_a_preset_changed_by_with_overrides() -> None:
    early = LoopDetectionConfig().with_overrides(preset="early")
    assert all(getattr(early, s) for s in SWITCHES)
    assert not any(getattr(early.with_overrides(preset="openclaw"), s) for s in SWITCHES)


def test_a_config_error_and_a_per_tool_config_survive_pickling() -> None:
    err = ConfigError("must be a positive integer", file="f.json", path="historySize", value=-1)
    loaded = pickle.loads(pickle.dumps(err))
    assert isinstance(loaded, ConfigError)
    assert (str(loaded), loaded.path, loaded.value) == (str(err), err.path, err.value)
    cfg = LoopDetectionConfig(perTool={"browser*": {"exempt": True}})
    assert pickle.loads(pickle.dumps(cfg)) == cfg

