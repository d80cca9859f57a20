"""`loopwarden calibrate`: split-conformal thresholds hold their false-alarm bound on simulated
good runs measured with the real guard."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from loopwarden import LoopDetectionConfig, ToolCall, replay
from loopwarden.cli import app
from loopwarden.offline.calibration import CalibrationError, calibrate, score_run


def good_run(rng: random.Random, n_calls: int = 40) -> list[ToolCall]:
    """A healthy agent: mostly fresh calls, some re-reads and re-runs with skewed popularity,
    results that usually change when a command is re-run, now and then a failing command."""
    calls = []
    for i in range(n_calls):
        kind = rng.random()
        if kind < 0.5:
            path = f"src/f{min(int(rng.paretovariate(1.2)), 40)}.py"
            calls.append(ToolCall("read", {"path": path}, result={"content": [
                {"type": "text", "text": f"contents of {path}"}], "details": {}}))
        elif kind < 0.8:
            cmd = f"pytest -k t{min(int(rng.paretovariate(1.5)), 12)}"
            if rng.random() < 0.15:
                calls.append(ToolCall("exec", {"command": cmd}, error="Error: exit status 1"))
            else:
                calls.append(ToolCall("exec", {"command": cmd}, result=f"{rng.randint(1, 3)} passed"))
        else:
            calls.append(ToolCall("search", {"q": f"term {i}"}, result=f"hit {rng.random()}"))
    return calls


def alarm_rates(runs: list[list[ToolCall]], config: LoopDetectionConfig) -> tuple[float, float]:
    warned = blocked = 0
    for run in runs:
        findings = replay(run, config)
        warned += bool(findings)
        blocked += any(f.action == "block" for f in findings)
    return warned / len(runs), blocked / len(runs)


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["openclaw", "early"])
def test_calibrated_thresholds_hold_their_bound_on_fresh_runs(preset: str) -> None:
    rng = random.Random(11)
    base = LoopDetectionConfig(enabled=True, preset=preset)
    calibration_runs = [good_run(rng) for _ in range(300)]
    fresh_runs = [good_run(rng) for _ in range(600)]
    alpha, beta = 0.2, 0.05
    result = calibrate([score_run(r, base) for r in calibration_runs], alpha=alpha, block_alpha=beta)
    config = result.config(base)
    warn_rate, block_rate = alarm_rates(fresh_runs, config)
    slack = 3 * math.sqrt(alpha * (1 - alpha) / len(fresh_runs))
    assert warn_rate <= alpha + slack
    assert block_rate <= beta + 3 * math.sqrt(beta * (1 - beta) / len(fresh_runs))
    # the bound is not met by refusing to ever warn: looser thresholds would warn more often
    looser = config.with_overrides(warning_threshold=3, critical_threshold=4,
                                   global_circuit_breaker_threshold=5, error_repeat_threshold=3)
    assert alarm_rates(fresh_runs[:200], looser)[0] > warn_rate


def test_calibrated_config_still_catches_a_loop() -> None:
    rng = random.Random(3)
    base = LoopDetectionConfig(enabled=True)
    result = calibrate([score_run(good_run(rng), base) for _ in range(200)], alpha=0.2,
                       block_alpha=0.05)
    loop = [ToolCall("exec", {"command": "status"}, result="still running") for _ in range(40)]
    actions = {f.action for f in replay(loop, result.config(base))}
    assert actions == {"warn", "block"}


def test_too_few_runs_is_refused_with_the_number_needed() -> None:
    scores = [score_run(good_run(random.Random(i))) for i in range(10)]
    with pytest.raises(CalibrationError, match=r"10 good runs are too few .* need at least"):
        calibrate(scores, alpha=0.05)
    with pytest.raises(CalibrationError):
        calibrate([], alpha=0.1)
    with pytest.raises(CalibrationError):
        calibrate(scores, alpha=0.1, block_alpha=0.5)


def test_score_run_measures_each_threshold() -> None:
    calls = [ToolCall("read", {"p": 1}, result="same") for _ in range(5)]
    calls += [ToolCall("x", {"i": i}, error="Unknown tool: x") for i in range(3)]
    scores = score_run(calls)
    assert scores.warning == 4 and scores.critical == 4
    assert scores.unknown_tool == 2 and scores.error_repeat == 2


def test_calibrate_command(tmp_path: Path) -> None:
    rng = random.Random(5)
    for n in range(80):
        lines = [json.dumps({"tool": c.tool_name, "args": c.args,
                             "result": c.result if isinstance(c.result, (str, dict)) else None,
                             "error": c.error}) for c in good_run(rng, 20)]
        (tmp_path / f"run{n}.jsonl").write_text("\n".join(lines) + "\n")
    runner = CliRunner()
    result = runner.invoke(app, ["calibrate", str(tmp_path), "--alpha", "0.3", "--block-alpha",
                                 "0.1", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    block = data["config"]["tools"]["loopDetection"]
    assert data["runs"] == 80 and block["enabled"] is True
    assert block["warningThreshold"] < block["criticalThreshold"]
    LoopDetectionConfig.model_validate({k: v for k, v in block.items()})
    refused = runner.invoke(app, ["calibrate", str(tmp_path), "--alpha", "0.01"])
    assert refused.exit_code == 2 and "too few" in refused.stderr


def test_calibrated_thresholds_always_fit_in_the_history_written_with_them() -> None:
    """Issue 22 friction 4: good runs that fill a 30-call history used to yield thresholds of
    31/32 with historySize 30, which can never fire. The history is raised with them, and the
    guarantee says which history the bound was measured with."""
    from loopwarden.offline.calibration import RunScores, calibrate

    saturated = [RunScores(warning=30, critical=30, unknown_tool=1, error_repeat=2)] * 600
    result = calibrate(saturated)
    config = result.config()
    assert config.history_size >= config.global_circuit_breaker_threshold
    assert config.history_size >= config.critical_threshold > config.warning_threshold > 30
    assert f"historySize {config.history_size}" in result.guarantee
    assert "measured with a history of 30" in result.guarantee
