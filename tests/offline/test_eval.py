"""``loopwarden eval``: label loading, judging, metrics, the CLI, and the shared corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from loopwarden import LoopDetectionConfig
from loopwarden.cli.scan import register
from loopwarden.offline.evaluation import (
    Label,
    LabelError,
    evaluate,
    judge,
    load_labels,
    parse_labels,
    summarize,
)
from loopwarden.offline.findings import Finding

METRIC_KEYS = {"transcripts", "loops", "detected", "timely", "blocked", "healthy",
               "false_warnings", "false_blocks", "recall", "timely_recall", "block_recall",
               "false_warning_rate", "false_block_rate"}


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Keeps scan and eval as subcommands."""

    register(app)
    return app


def _write_jsonl(path: Path, calls: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(c) + "\n" for c in calls), encoding="utf-8")


def _call(tool: str, arg: str, result: str) -> dict[str, Any]:
    return {"tool": tool, "args": {"x": arg}, "result": result, "run_id": "r1"}


def _varied(n: int, prefix: str = "v") -> list[dict[str, Any]]:
    return [_call("read", f"{prefix}{i}", f"text {i}") for i in range(n)]


def _label(file: str, source: str, loop: bool, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"file": file, "source": source, "loop": loop, "type": None,
                             "loop_start": None, "warn_by": None, "loop_end": None,
                             "hard_negative": False, "notes": ""}
    entry.update(extra)
    return entry


@pytest.fixture
def labelled(tmp_path: Path) -> Path:
    """Five transcripts of two sources plus one missing file; returns the labels path."""
    root = tmp_path / "corpus"
    repeat = [_call("read", "same", "same")] * 25
    # a: 25 identical calls from index 2; the default guard warns at index 12, blocks at 22.
    _write_jsonl(root / "alpha" / "loop.jsonl", _varied(2) + repeat)
    # b: a loop labelled as ending before the guard could speak (missed).
    _write_jsonl(root / "alpha" / "short.jsonl", _varied(3) + [_call("read", "s", "s")] * 6)
    # c: healthy, clean.
    _write_jsonl(root / "beta" / "clean.jsonl", _varied(30))
    # d: "healthy" by label, yet repeats 22 times: a false warning and a false block.
    _write_jsonl(root / "beta" / "noisy.jsonl", [_call("exec", "poll", "same")] * 22)
    # e: normalised twin: the label names the raw file, the root holds `<file>.jsonl`.
    _write_jsonl(root / "beta" / "raw.traj.jsonl", _varied(5, "w"))
    labels = [
        _label("alpha/loop.jsonl", "alpha", True, type="generic_repeat", loop_start=2,
               warn_by=11, loop_end=26),
        _label("alpha/short.jsonl", "alpha", True, type="ping_pong", loop_start=3, warn_by=8,
               loop_end=8),
        _label("beta/clean.jsonl", "beta", False),
        _label("beta/noisy.jsonl", "beta", False, hard_negative=True),
        _label("beta/raw.traj", "beta", False),
        _label("beta/gone.jsonl", "beta", False),
    ]
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(labels), encoding="utf-8")
    return path


def test_evaluate_counts_recall_timeliness_and_false_alarms(labelled: Path) -> None:
    report = evaluate(load_labels(labelled), labelled.parent / "corpus",
                      LoopDetectionConfig(enabled=True))
    assert report.missing == ["beta/gone.jsonl"]
    outcomes = {o.file: o for o in report.outcomes}
    loop = outcomes["alpha/loop.jsonl"]
    assert loop.detected and loop.blocked_in_loop and loop.first_in_loop == 12
    assert not loop.timely  # the first finding (12) came after warn_by (11)
    assert not outcomes["alpha/short.jsonl"].detected
    assert outcomes["beta/noisy.jsonl"].false_warning and outcomes["beta/noisy.jsonl"].false_block
    assert not outcomes["beta/clean.jsonl"].false_warning
    assert outcomes["beta/raw.traj"].calls == 5  # found through its normalised twin

    overall = report.summary.overall
    assert (overall.transcripts, overall.loops, overall.healthy) == (5, 2, 3)
    assert overall.recall == 0.5 and overall.timely_recall == 0.0 and overall.block_recall == 0.5
    assert overall.false_warning_rate == pytest.approx(1 / 3)
    assert overall.false_block_rate == pytest.approx(1 / 3)
    assert report.summary.by_source["alpha"].recall == 0.5
    assert report.summary.by_source["alpha"].false_warning_rate is None  # no healthy ones
    assert set(report.summary.by_type) == {"generic_repeat", "ping_pong"}
    assert report.summary.by_type["ping_pong"].recall == 0.0
    assert report.summary.hard_negatives.false_blocks == 1


def test_early_preset_warns_in_time(labelled: Path) -> None:
    report = evaluate(load_labels(labelled), labelled.parent / "corpus",
                      LoopDetectionConfig(enabled=True, preset="early"))
    loop = next(o for o in report.outcomes if o.file == "alpha/loop.jsonl")
    assert loop.timely


def _finding(index: int, action: str = "warn") -> Finding:
    level = "critical" if action == "block" else "warning"
    return Finding(index, None, "read", level, action, "generic_repeat", 10, "m")


def test_judge_only_counts_findings_inside_the_loop_span() -> None:
    label = Label("f", "s", True, "generic_repeat", loop_start=10, warn_by=19, loop_end=30)
    before = judge(label, [_finding(3)], 40)
    assert not before.detected and before.first_finding == 3 and before.first_in_loop is None
    timely = judge(label, [_finding(3), _finding(19), _finding(25, "block")], 40)
    assert timely.detected and timely.timely and timely.blocked_in_loop
    late = judge(label, [_finding(20)], 40)
    assert late.detected and not late.timely
    after = judge(label, [_finding(31, "block")], 40)
    assert not after.detected and not after.blocked_in_loop


def test_summarize_rates_are_none_without_a_denominator() -> None:
    summary = summarize([])
    assert summary.overall.recall is None and summary.overall.false_block_rate is None


def test_labels_are_validated_with_the_entry_named() -> None:
    with pytest.raises(LabelError, match=r"\[0\]\.loop"):
        parse_labels([{"file": "a", "loop": "yes"}])
    with pytest.raises(LabelError, match=r"\[1\]\.loop_start"):
        parse_labels([{"file": "a", "loop": False}, {"file": "b", "loop": True, "loop_start": -1,
                                                       "loop_end": 3}])
    with pytest.raises(LabelError, match="loop_start <= loop_end"):
        parse_labels([{"file": "a", "loop": True, "loop_start": 5, "loop_end": 2}])
    with pytest.raises(LabelError, match="list"):
        parse_labels({"file": "a"})
    (label,) = parse_labels([{"file": "src/x.jsonl", "loop": True, "loop_start": 1,
                              "loop_end": 4}])
    assert (label.source, label.type, label.warn_by) == ("src", "other", 4)


def test_eval_cli_json_shape(labelled: Path) -> None:
    result = CliRunner().invoke(_app(), ["eval", str(labelled), "--root",
                                         str(labelled.parent / "corpus"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {"overall", "by_source", "by_type", "hard_negatives", "transcripts", "missing",
            "config", "labels", "root"} <= set(data)
    assert set(data["overall"]) == METRIC_KEYS
    assert set(data["by_source"]) == {"alpha", "beta"}
    for group in (*data["by_source"].values(), *data["by_type"].values()):
        assert set(group) == METRIC_KEYS
    assert len(data["transcripts"]) == 5 and data["missing"] == ["beta/gone.jsonl"]
    first = data["transcripts"][0]
    assert {"file", "source", "loop", "type", "detected", "timely", "false_warning",
            "false_block", "first_in_loop", "detectors"} <= set(first)


def test_eval_cli_tables(labelled: Path) -> None:
    result = CliRunner().invoke(_app(), ["eval", str(labelled), "--root",
                                         str(labelled.parent / "corpus")],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "per source" in out and "per loop type" in out and "labelled loops" in out
    assert "1/2 (50%)" in out  # overall recall
    assert "false block: beta/noisy.jsonl" in out
    assert "gone.jsonl" in result.stderr


def test_eval_cli_errors(tmp_path: Path) -> None:
    bad = tmp_path / "labels.json"
    bad.write_text("{oops")
    result = CliRunner().invoke(_app(), ["eval", str(bad)])
    assert result.exit_code == 2 and "invalid JSON" in result.stderr
    bad.write_text(json.dumps([_label("nowhere.jsonl", "x", False)]))
    result = CliRunner().invoke(_app(), ["eval", str(bad)])
    assert result.exit_code == 2 and "none of the 1 labelled files" in result.stderr


@pytest.mark.corpus
def test_corpus_eval_default_preset_has_no_false_blocks(corpus: Path) -> None:
    labels = corpus / "labels-dev.json"
    root = corpus / "normalized"
    if not labels.is_file() or not root.is_dir():
        pytest.skip("corpus labels or normalized tree missing")
    result = CliRunner().invoke(_app(), ["eval", str(labels), "--root", str(root), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["config"]["preset"] == "openclaw"
    assert set(data["overall"]) == METRIC_KEYS
    assert data["missing"] == []
    assert data["overall"]["transcripts"] == len(json.loads(labels.read_text()))
    assert data["overall"]["false_blocks"] == 0
    assert data["overall"]["false_block_rate"] == 0.0
    assert data["overall"]["loops"] > 0 and data["overall"]["healthy"] > 0


def test_eval_cli_markdown_table(labelled: Path) -> None:
    result = CliRunner().invoke(_app(), ["eval", str(labelled), "--root",
                                         str(labelled.parent / "corpus"), "--markdown"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("| group | transcripts | recall |")
    assert lines[2] == "| all | 5 | 1/2 (50%) | 0/2 (0%) | 1/2 (50%) | 1/3 (33%) | 1/3 (33%) |"
    assert "| loop type ping_pong | 1 | 0/1 (0%) |" in result.stdout
