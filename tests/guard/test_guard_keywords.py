"""``LoopGuard(preset=..., **overrides)`` guards, and a guard whose config leaves ``enabled``
unset says so once in a WARNING (issue 22, friction 1): no path guards nothing in silence."""

from __future__ import annotations

import logging

import pytest

from loopwarden import ConfigError, LoopDetectionConfig, LoopGuard


def _first_block(guard: LoopGuard, calls: int = 40) -> int | None:
    """The 1-based number of the first blocked identical call, or None."""
    for number in range(1, calls + 1):
        verdict = guard.before_tool_call("read", {"path": "a"}, session="s")
        if verdict.action == "block":
            return number
        guard.after_tool_call("read", {"path": "a"}, session="s", result="same")
    return None


def test_preset_keyword_guards_and_blocks_sooner_than_the_default() -> None:
    early = _first_block(LoopGuard(preset="early"))
    default = _first_block(LoopGuard())
    assert early is not None and default is not None and early < default


def test_threshold_overrides_apply_on_top_of_the_enabled_default() -> None:
    guard = LoopGuard(warning_threshold=5, critical_threshold=8)
    assert guard.config.enabled is True
    assert _first_block(guard) == 9


def test_a_misspelt_override_or_unknown_preset_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="warning_treshold"):
        LoopGuard(warning_treshold=5)
    with pytest.raises(ConfigError, match="preset"):
        LoopGuard(preset="fastest")


def test_enabled_unset_warns_once_naming_the_key(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="loopwarden"):
        guard = LoopGuard(LoopDetectionConfig(preset="early"))
    notes = [r for r in caplog.records if "enabled" in r.getMessage()]
    assert len(notes) == 1 and notes[0].levelno == logging.WARNING
    assert "tools.loopDetection.enabled" in notes[0].getMessage()
    # The contract stays: the rolling detectors are off for an explicit config without enabled.
    assert _first_block(guard) is None


def test_an_enabled_guard_says_nothing_about_enabled(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="loopwarden"):
        LoopGuard(preset="early")
        LoopGuard(LoopDetectionConfig(enabled=True))
    assert not [r for r in caplog.records if "enabled" in r.getMessage()]
