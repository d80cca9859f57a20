"""A wrong-shaped config file says so (issue 22, friction 5): loop detection keys at the top
level are refused with the path that was expected; a file with no block, or with ``enabled``
unset, is reported by ``config check``."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from loopwarden import ConfigError, load_config
from loopwarden.cli import app


def test_a_flat_config_is_refused_naming_the_expected_path(tmp_path: Path) -> None:
    flat = tmp_path / "flat.json"
    flat.write_text('{"warningThreshold": 5}')
    with pytest.raises(ConfigError, match=r"tools\.loopDetection"):
        load_config(flat)
    done = CliRunner().invoke(app, ["config", "check", str(flat)])
    assert done.exit_code == 2 and "tools.loopDetection" in done.output


def test_a_top_level_loop_detection_block_is_refused(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"loopDetection": {"enabled": true}}')
    with pytest.raises(ConfigError, match=r"tools\.loopDetection"):
        load_config(wrong)


def test_config_check_says_nothing_was_read_and_enabled_is_unset(tmp_path: Path) -> None:
    empty = tmp_path / "other.json"
    empty.write_text('{"gateway": {"port": 1}}')
    done = CliRunner().invoke(app, ["config", "check", str(empty)], env={"COLUMNS": "200"})
    assert done.exit_code == 0
    assert "no tools.loopDetection block" in done.output
    assert "enabled is unset" in done.output


def test_a_file_without_enabled_keeps_the_contract(tmp_path: Path) -> None:
    unset = tmp_path / "unset.json"
    unset.write_text('{"tools": {"loopDetection": {"warningThreshold": 5}}}')
    config = load_config(unset)
    assert config.enabled is None and not config.rolling_enabled
    assert config.compaction_guard_enabled
