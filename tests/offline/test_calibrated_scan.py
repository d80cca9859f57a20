"""A calibrated config still catches the bundled loops (#22 item 4), driven as a user drives it:
``loopwarden calibrate`` on the good runs of the normalized corpus (``labels-dev.json``:
``loop: false``), its config saved to a file, then ``loopwarden scan examples/transcripts
--config`` that file. Also on the whole corpus (loops included, as in the issue), every
threshold it writes can fire: a loop as long as the critical threshold is blocked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "transcripts"
BUNDLED_LOOPS = {"ping-pong.jsonl": "ping_pong", "poll-loop.openclaw.jsonl":
                 "known_poll_no_progress", "unknown-tool.openai.json": "unknown_tool_repeat"}

pytestmark = pytest.mark.integration


def loopwarden(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loopwarden", *map(str, args)],
                          capture_output=True, text=True, timeout=600, check=False)


def calibrated_config(runs: Path, saved: Path) -> dict[str, Any]:
    done = loopwarden("calibrate", runs, "--json")
    assert done.returncode == 0, done.stderr
    config: dict[str, Any] = json.loads(done.stdout)["config"]
    saved.write_text(json.dumps(config), encoding="utf-8")
    block: dict[str, Any] = config["tools"]["loopDetection"]
    return block


def good_runs(corpus: Path, into: Path) -> Path:
    into.mkdir()
    for n, label in enumerate(json.loads((corpus / "labels-dev.json").read_text())):
        if not label["loop"]:
            (into / f"{n:03d}.jsonl").symlink_to(corpus / "normalized" / f"{label['file']}.jsonl")
    return into


def test_a_config_calibrated_on_the_corpus_good_runs_catches_the_bundled_loops(
    corpus: Path, tmp_path: Path,
) -> None:
    saved = tmp_path / "calibrated.json"
    block = calibrated_config(good_runs(corpus, tmp_path / "good"), saved)
    assert block["criticalThreshold"] <= block["historySize"]

    done = loopwarden("scan", EXAMPLES, "--config", saved, "--json", "--fail-on", "block")

    assert done.returncode == 1, done.stderr  # blocks found: the calibrated thresholds fire
    files = {Path(entry["path"]).name: entry for entry in json.loads(done.stdout)["files"]}
    for name, detector in BUNDLED_LOOPS.items():
        findings = files[name]["findings"]
        assert any(f["action"] == "block" for f in findings), name
        assert detector in {f["detector"] for f in findings}, name
    assert files["healthy.jsonl"]["findings"] == []


def test_thresholds_calibrated_on_the_whole_corpus_can_all_fire(
    corpus: Path, tmp_path: Path,
) -> None:
    saved = tmp_path / "calibrated.json"
    block = calibrated_config(corpus / "normalized", saved)
    critical = block["criticalThreshold"]
    assert block["warningThreshold"] < critical <= block["historySize"]
    line = json.dumps({"tool": "poll", "args": {"id": 1}, "result": "same", "run_id": "r1"})
    loop = tmp_path / "loop.jsonl"
    loop.write_text("\n".join([line] * (critical + 2)) + "\n")

    done = loopwarden("scan", loop, "--config", saved, "--json", "--fail-on", "block")

    assert done.returncode == 1, done.stderr
    (entry,) = json.loads(done.stdout)["files"]
    assert [f["action"] for f in entry["findings"]][:1] == ["warn"]
    assert any(f["action"] == "block" for f in entry["findings"])
