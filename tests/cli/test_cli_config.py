"""``loopwarden config check`` (the ``config_app`` Typer sub-application)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from loopwarden.cli.config import config_app

CONFIG = """
// OpenClaw gateway config
{
  tools: {
    loopDetection: {
      enabled: true,
      warningThreshold: 25,          // repaired: default critical is 20
      detectors: { pingPong: false, },
    },
  },
  agents: {
    entries: {
      coder: { tools: { loopDetection: {
        preset: "early",
        criticalThreshold: 12,
        postCompactionGuard: { windowSize: 5 },
      } } },
    },
  },
}
"""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "openclaw.json5"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def check_json(runner: CliRunner, *args: str) -> dict[str, Any]:
    result = runner.invoke(config_app, ["check", *args, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_json_output_has_effective_camel_case_config(runner: CliRunner, config_file: Path) -> None:
    data = check_json(runner, str(config_file))
    assert data["path"] == str(config_file)
    assert data["agent"] is None
    cfg = data["config"]
    assert cfg == {
        "enabled": True,
        "historySize": 30,
        "warningThreshold": 25,
        "criticalThreshold": 26,
        "unknownToolThreshold": 10,
        "globalCircuitBreakerThreshold": 30,
        "errorRepeatThreshold": 10,
        "detectors": {
            "genericRepeat": True,
            "knownPollNoProgress": True,
            "pingPong": False,
            "argumentChurn": True,
            "cycle": True,
            "oneToolCycle": True,
            "failureRepeat": True,
            "equivalentArguments": True,
            "errorRepeat": None,
        },
        "postCompactionGuard": {"windowSize": 3},
        "preset": "openclaw",
    }
    assert data["derived"] == {
        "rollingEnabled": True,
        "compactionGuardEnabled": True,
        "errorRepeatEnabled": False,
        "postOutcomeWarnings": False,
        "maskVolatile": False,
    }
    [repair] = data["repairs"]
    assert "criticalThreshold 20 -> 26" in repair


def test_json_output_applies_agent_override(runner: CliRunner, config_file: Path) -> None:
    data = check_json(runner, str(config_file), "--agent", "coder")
    cfg = data["config"]
    assert data["agent"] == "coder"
    assert cfg["preset"] == "early"
    assert cfg["warningThreshold"] == 25
    assert cfg["criticalThreshold"] == 26
    assert cfg["globalCircuitBreakerThreshold"] == 27
    assert cfg["unknownToolThreshold"] == 5
    assert cfg["detectors"]["pingPong"] is False
    assert cfg["postCompactionGuard"]["windowSize"] == 5
    assert data["derived"]["errorRepeatEnabled"] is True
    assert len(data["repairs"]) == 1


def test_json_output_round_trips_through_the_model(runner: CliRunner, config_file: Path) -> None:
    from loopwarden.config import LoopDetectionConfig, load_config

    data = check_json(runner, str(config_file), "--agent", "coder")
    assert LoopDetectionConfig.model_validate(data["config"]) == load_config(config_file, "coder")


def test_table_output(runner: CliRunner, config_file: Path) -> None:
    result = runner.invoke(config_app, ["check", str(config_file), "--agent", "coder"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    for key in (
        "enabled",
        "historySize",
        "warningThreshold",
        "criticalThreshold",
        "globalCircuitBreakerThreshold",
        "detectors.pingPong",
        "postCompactionGuard.windowSize",
        "rollingEnabled",
    ):
        assert key in out
    lines = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") >= 4}
    assert "26" in lines["criticalThreshold"] and "repaired" in lines["criticalThreshold"]
    assert "25" in lines["warningThreshold"] and "config" in lines["warningThreshold"]
    assert "preset early" in lines["unknownToolThreshold"]
    assert "false" in lines["detectors.pingPong"]
    assert "note:" in out


def test_defaults_when_file_has_no_loop_detection(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json"
    path.write_text('{"gateway": {"port": 18789}}', encoding="utf-8")
    data = check_json(runner, str(path))
    cfg = data["config"]
    assert (cfg["warningThreshold"], cfg["criticalThreshold"]) == (10, 20)
    assert cfg["enabled"] is None
    assert data["repairs"] == []
    assert data["derived"]["rollingEnabled"] is False
    assert data["derived"]["compactionGuardEnabled"] is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{agents: {list: [{id: "coder", tools: {loopDetection: {warningThreshold: -3}}}]}}',
            "agents.list[0].tools.loopDetection.warningThreshold: "
            "must be a positive integer (got -3)",
        ),
        (
            "{tools: {loopDetection: {warningThreshold: 20, criticalThreshold: 20}}}",
            "tools.loopDetection.criticalThreshold: tools.loopDetection.warningThreshold "
            "must be lower than criticalThreshold. (got 20)",
        ),
        ("{tools: {loopDetection: {enabled: true,,}}}", "invalid JSON5"),
        ("{tools: {loopDetection: {repeatThreshold: 3}}}", "repeatThreshold: unknown key"),
    ],
)
def test_invalid_config_exits_2_with_message(
    runner: CliRunner, tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "openclaw.json"
    path.write_text(text, encoding="utf-8")
    for extra in ([], ["--json"]):
        result = runner.invoke(config_app, ["check", str(path), *extra])
        assert result.exit_code == 2
        assert result.stdout == ""
        assert result.stderr.startswith(f"error: {path}: ")
        assert expected in result.stderr
        assert "Traceback" not in result.output


def test_missing_file_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    result = runner.invoke(config_app, ["check", str(path)])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {path}: config file not found"
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_check_is_a_named_subcommand(runner: CliRunner) -> None:
    result = runner.invoke(config_app, ["--help"])
    assert result.exit_code == 0
    assert "check" in result.stdout
    result = runner.invoke(config_app, ["check", "--help"])
    assert result.exit_code == 0
    assert "--agent" in result.stdout
    assert "--json" in result.stdout
