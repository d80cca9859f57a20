"""Did the nudge work: a model that changes course after a warning counts as heeded, one that
repeats the warned call does not, in ``scan --json``, the scan table and the HTML report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from loopwarden.cli.scan import register
from loopwarden.config import LoopDetectionConfig
from loopwarden.guard.asking import question_text
from loopwarden.offline.efficacy import CallKey, RunIndex, efficacy, judge, seen_nudge
from loopwarden.offline.report.html import render_html
from loopwarden.offline.scan import scan_file

NOTE = ("\n[System note: Tool-loop warning after 10 repeated calls. Change your approach or "
        "stop if you are not making progress.]")


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Keeps scan a subcommand."""

    register(app)
    return app


def _scan_json(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(_app(), ["scan", "--json", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def _write(path: Path, calls: list[tuple[str, dict[str, Any], str]]) -> Path:
    """A transcript in loopwarden's JSONL: one tool call a line."""
    lines = [json.dumps({"i": i, "tool": tool, "args": args, "result": result, "error": None,
                         "run_id": "run-1"}) for i, (tool, args, result) in enumerate(calls)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _polls(count: int) -> list[tuple[str, dict[str, Any], str]]:
    return [("process", {"action": "poll", "id": "7"}, "still running") for _ in range(count)]


def test_a_model_that_changes_course_after_the_seen_warning_counts_as_heeded(
        tmp_path: Path) -> None:
    calls = _polls(10)
    calls[-1] = (calls[-1][0], calls[-1][1], calls[-1][2] + NOTE)  # OpenClaw's note, call 10
    heeded = _write(tmp_path / "heeded.jsonl",
                    [*calls, ("read", {"path": "log.txt"}, "error: disk full")])
    ignored = _write(tmp_path / "ignored.jsonl", [*calls, *_polls(3)])

    data = _scan_json(str(heeded), str(ignored))

    seen = {Path(f["path"]).name: [n for n in f["nudges"] if n["source"] == "seen"]
            for f in data["files"]}
    assert seen["heeded.jsonl"] == [{"index": 9, "stage": "warn", "detector": "tool_loop_note",
                                     "tool": "process", "source": "seen",
                                     "outcome": "heeded", "after": 1}]
    assert [n["outcome"] for n in seen["ignored.jsonl"]] == ["ignored"]
    figures = data["nudge_efficacy"]["seen"]
    assert figures["within"] == 3
    assert figures["all"] == {"nudges": 2, "heeded": 1, "ignored": 1, "ended": 0,
                              "unknown": 0, "rate": 0.5}
    assert figures["by_stage"]["warn"]["rate"] == 0.5
    assert figures["by_detector"]["tool_loop_note"]["nudges"] == 2


def test_replayed_findings_are_judged_with_the_guards_own_outcome_identity(
        tmp_path: Path) -> None:
    # Results that differ only by a volatile timestamp are the same outcome to the guard: the
    # model that keeps polling them did not change course.
    polls = [("process", {"action": "poll", "id": "7"},
              json.dumps({"status": "running", "timestamp": f"2026-12-04T10:00:{i:02d}Z"}))
             for i in range(16)]
    path = _write(tmp_path / "poll.jsonl", polls)

    data = _scan_json("--preset", "early", str(path))

    replayed = [n for n in data["files"][0]["nudges"] if n["source"] == "replay"]
    assert replayed, "the early preset warns on this poll loop"
    assert {n["outcome"] for n in replayed} <= {"ignored", "ended"}
    assert "ignored" in {n["outcome"] for n in replayed}
    assert data["nudge_efficacy"]["replay"]["all"]["heeded"] == 0


def test_the_scan_table_and_the_report_show_the_rates(tmp_path: Path) -> None:
    calls = _polls(10)
    calls[-1] = (calls[-1][0], calls[-1][1], calls[-1][2] + NOTE)
    path = _write(tmp_path / "t.jsonl", [*calls, ("read", {"path": "x"}, "ok")])

    result = CliRunner().invoke(_app(), ["scan", str(path)], catch_exceptions=False,
                                env={"COLUMNS": "200"})
    assert "Nudges (within 3 calls)" in result.output
    assert "1 of 1 heeded (100%)" in result.output

    html = render_html([scan_file(path, LoopDetectionConfig(enabled=True), keep_outputs=True)])
    assert "Did the nudges work" in html
    assert "1 of 1 heeded (100%)" in html


def test_nudge_within_is_how_many_later_calls_count(tmp_path: Path) -> None:
    calls = _polls(10)
    calls[-1] = (calls[-1][0], calls[-1][1], calls[-1][2] + NOTE)
    path = _write(tmp_path / "late.jsonl",
                  [*calls, *_polls(3), ("read", {"path": "x"}, "ok")])  # turns at the 4th

    assert _scan_json(str(path))["nudge_efficacy"]["seen"]["all"]["ignored"] == 1
    late = _scan_json("--nudge-within", "4", str(path))["nudge_efficacy"]["seen"]["all"]
    assert (late["heeded"], late["ignored"]) == (1, 0)


def test_judge_rules() -> None:
    def index(*calls: tuple[str | None, str, str, object]) -> RunIndex:
        return RunIndex.of([CallKey(*call) for call in calls])

    same = ("r", "poll", "a", "x")
    assert judge(index(same, same, same, same), 0, "generic_repeat") == ("ignored", None)
    assert judge(index(same, same, ("r", "poll", "a", "y")), 0, "generic_repeat") == (
        "heeded", 2)  # the same call, now with another result
    assert judge(index(same), 0, "generic_repeat") == ("ended", None)
    assert judge(index(same, ("other", "poll", "a", "x")), 0, "generic_repeat") == (
        "ended", None)  # another run's call is not this run's next
    # ping-pong: the alternation's other side is part of the pattern
    ping, pong = ("r", "read", "p", "1"), ("r", "write", "q", "2")
    assert judge(index(ping, pong, ping, pong, ping), 1, "ping_pong") == ("ignored", None)
    # churn: the same tool with new arguments is still the loop
    assert judge(index(("r", "edit", "a", None), ("r", "edit", "b", None)), 0,
                 "argument_churn") == ("ignored", None)
    assert efficacy([])["all"]["rate"] is None


def test_seen_messages_name_their_stage_and_detector() -> None:
    assert seen_nudge("ok" + NOTE) == ("warn", "tool_loop_note")
    assert seen_nudge("CRITICAL: Called exec with identical arguments and no progress 20 "
                      "times. This appears to be a stuck polling loop.") == (
        "block", "known_poll_no_progress")
    assert seen_nudge("WARNING: You have called read 10 times with identical arguments. If "
                      "this is not making progress, stop retrying.") == ("warn", "generic_repeat")
    assert seen_nudge("CRITICAL: You are alternating between repeated tool-call patterns (20 "
                      "consecutive calls) with no progress.") == ("block", "ping_pong")
    assert seen_nudge(question_text("exec", "the same call with identical results", 20, 1)) == (
        "ask", "ask")  # loopwarden's question, where a host shows it in the transcript
    assert seen_nudge("WARNING: the build has 3 warnings") is None
    assert seen_nudge("plain output") is None
