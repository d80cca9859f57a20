"""``loopwarden scan``: JSON shape, table, config handling, loop spans, streaming pieces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from loopwarden import LoopDetectionConfig
from loopwarden.base.types import MISSING, ToolCall
from loopwarden.cli._common import resolve_config
from loopwarden.cli.scan import register
from loopwarden.offline.findings import Finding
from loopwarden.offline.scan import CallTrace, loop_spans, output_chars, scan_file

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "transcripts"
FINDING_KEYS = {"index", "call_id", "tool", "level", "action", "detector", "count", "message"}
FILE_KEYS = {"path", "format", "calls", "findings"}


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Keeps scan and eval as subcommands."""

    register(app)
    return app


def _run(*args: str) -> Any:
    return CliRunner().invoke(_app(), list(args), catch_exceptions=False)


def _scan_json(*args: str) -> dict[str, Any]:
    result = _run("scan", "--json", *args)
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _by_name(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {Path(entry["path"]).name: entry for entry in data["files"]}


def _jsonl(path: Path, calls: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(call) + "\n" for call in calls), encoding="utf-8")
    return path


def _repeats(tool: str, args: dict[str, Any], result: str, n: int) -> list[dict[str, Any]]:
    return [{"tool": tool, "args": args, "result": result, "run_id": "r1"} for _ in range(n)]


# -- JSON shape ----------------------------------------------------------------------------------


def test_json_has_the_design_shape_for_every_file() -> None:
    data = _scan_json(str(EXAMPLES))
    assert isinstance(data["files"], list) and len(data["files"]) >= 4
    for entry in data["files"]:
        assert set(entry) >= FILE_KEYS
        assert isinstance(entry["path"], str) and isinstance(entry["calls"], int)
        for finding in entry["findings"]:
            assert set(finding) == FINDING_KEYS  # no extra keys inside findings
            assert 0 <= finding["index"] < entry["calls"]
            assert finding["action"] in ("warn", "block")
            assert finding["level"] in ("warning", "critical")


def test_examples_show_poll_ping_pong_and_unknown_tool_loops() -> None:
    files = _by_name(_scan_json(str(EXAMPLES)))
    poll = files["poll-loop.openclaw.jsonl"]
    assert poll["format"] == "openclaw"
    first = {f["action"]: f for f in reversed(poll["findings"])}
    # 24 polls start at call 2: the 11th poll warns, the 21st blocks.
    assert (first["warn"]["index"], first["warn"]["detector"]) == (12, "known_poll_no_progress")
    assert (first["block"]["index"], first["block"]["detector"]) == (22, "known_poll_no_progress")
    assert poll["loop_calls"] == 14  # calls 12..25

    pong = files["ping-pong.jsonl"]
    assert {f["detector"] for f in pong["findings"]} == {"ping_pong"}
    assert any(f["action"] == "block" for f in pong["findings"])

    unknown = files["unknown-tool.openai.json"]
    assert unknown["format"] == "openai-chat"
    assert {f["detector"] for f in unknown["findings"]} == {"unknown_tool_repeat"}
    assert all(f["tool"] == "search_web" for f in unknown["findings"])

    healthy = files["healthy.jsonl"]
    assert healthy["findings"] == [] and healthy["loop_calls"] == 0


def test_json_totals_and_config_are_top_level_extras() -> None:
    data = _scan_json(str(EXAMPLES))
    assert data["config"]["enabled"] is True and data["config"]["preset"] == "openclaw"
    assert data["totals"]["calls"] == sum(entry["calls"] for entry in data["files"])
    assert data["totals"]["findings"] == sum(len(entry["findings"]) for entry in data["files"])


def test_table_lists_each_file_with_first_warning_and_block() -> None:
    result = CliRunner().invoke(_app(), ["scan", str(EXAMPLES)], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    for name in ("healthy.jsonl", "ping-pong.jsonl", "poll-loop.openclaw.jsonl",
                 "unknown-tool.openai.json"):
        assert name in out
    poll_row = next(line for line in out.splitlines() if "poll-loop" in line)
    # Call numbers count from 1: warned at the 13th call, blocked at the 23rd, stopped at 24.
    assert "#13" in poll_row and "#23" in poll_row and "#24" in poll_row
    assert "known_poll_no_progress" in poll_row
    assert "4 transcripts" in out


# -- config --------------------------------------------------------------------------------------


def _loop_file(tmp_path: Path, n: int = 12) -> Path:
    return _jsonl(tmp_path / "loop.jsonl", _repeats("read", {"path": "a"}, "same", n))


def test_scan_turns_detection_on_when_the_config_does_not_say(tmp_path: Path) -> None:
    config = tmp_path / "openclaw.json"
    config.write_text("{tools: {loopDetection: {warningThreshold: 3, criticalThreshold: 5}}}")
    assert resolve_config(config).enabled is True
    files = _by_name(_scan_json(str(_loop_file(tmp_path)), "--config", str(config)))
    findings = files["loop.jsonl"]["findings"]
    assert findings and findings[0]["index"] == 3  # the config's threshold, not the default 10


def test_config_that_disables_detection_is_respected(tmp_path: Path) -> None:
    config = tmp_path / "openclaw.json"
    config.write_text('{"tools": {"loopDetection": {"enabled": false}}}')
    result = _run("scan", "--json", str(_loop_file(tmp_path, 25)), "--config", str(config))
    assert result.exit_code == 0
    assert json.loads(result.stdout)["files"][0]["findings"] == []
    assert "enabled: false" in result.stderr


def test_agent_override_applies(tmp_path: Path) -> None:
    config = tmp_path / "openclaw.json5"
    config.write_text("""{
      tools: {loopDetection: {enabled: true}},
      agents: {list: [{id: "fast", tools: {loopDetection: {warningThreshold: 4,
                                                           criticalThreshold: 6}}}]},
    }""")
    loop = str(_loop_file(tmp_path))
    plain = _scan_json(loop, "--config", str(config))["files"][0]["findings"]
    fast = _scan_json(loop, "--config", str(config), "--agent", "fast")["files"][0]["findings"]
    assert plain[0]["index"] == 10 and fast[0]["index"] == 4


def test_bad_config_is_an_error_naming_the_file(tmp_path: Path) -> None:
    config = tmp_path / "bad.json"
    config.write_text('{"tools": {"loopDetection": {"warningThreshold": -1}}}')
    result = _run("scan", str(EXAMPLES), "--config", str(config))
    assert result.exit_code == 2
    assert "bad.json" in result.stderr and "warningThreshold" in result.stderr


def test_preset_option_and_bad_choice(tmp_path: Path) -> None:
    assert resolve_config(preset="early").preset == "early"
    result = _run("scan", str(EXAMPLES), "--preset", "nope")
    assert result.exit_code != 0


def test_fail_on_block_sets_the_exit_code() -> None:
    assert _run("scan", str(EXAMPLES), "--fail-on", "block").exit_code == 1
    assert _run("scan", str(EXAMPLES / "healthy.jsonl"), "--fail-on", "warn").exit_code == 0


# -- files ---------------------------------------------------------------------------------------


def test_folder_walk_skips_non_transcripts_but_named_files_are_reported(tmp_path: Path) -> None:
    _loop_file(tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("just some notes\n")
    walked = _scan_json(str(tmp_path))
    assert [Path(e["path"]).name for e in walked["files"]] == ["loop.jsonl"]
    assert [Path(p).name for p in walked["skipped"]] == ["notes.txt"]

    # Named explicitly, a non-transcript is reported, not counted; alone, it is an input error.
    result = _run("scan", "--json", str(notes))
    assert result.exit_code == 2
    named = json.loads(result.stdout)
    assert named["files"] == [] and [Path(p).name for p in named["skipped"]] == ["notes.txt"]
    assert named["skip_reasons"][0]["reason"] == "not a recognised transcript format"
    assert "notes.txt" in result.stderr


def test_broken_lines_are_reported_and_skipped(tmp_path: Path) -> None:
    path = _loop_file(tmp_path, 3)
    with path.open("a") as fh:
        fh.write("{not json\n")
    entry = _scan_json(str(path))["files"][0]
    assert entry["calls"] == 3
    assert entry["problems"] and entry["problems"][0]["line"] == 4


@pytest.mark.integration
def test_cli_module_imports_and_scans_without_matplotlib() -> None:
    code = (
        "import sys, json; sys.modules['matplotlib'] = None\n"
        "import typer; from typer.testing import CliRunner\n"
        "from loopwarden.cli.scan import register\n"
        "app = typer.Typer()\n"
        "app.callback()(lambda: None)\n"
        "register(app)\n"
        f"r = CliRunner().invoke(app, ['scan', '--json', {str(EXAMPLES)!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "assert 'matplotlib' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        f"r = CliRunner().invoke(app, ['scan', {str(EXAMPLES)!r}, '--html', '/dev/null'])\n"
        "print(r.exit_code)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"  # --html asks for the report extra instead of crashing


# -- loop spans and output characters -------------------------------------------------------------


def _trace(calls: list[tuple[str, dict[str, Any], str | None, str]]) -> CallTrace:
    trace = CallTrace()
    list(trace.observe(ToolCall(tool, args, run_id=run, result=result)
                       for tool, args, run, result in calls))
    return trace


def _finding(index: int, detector: str, action: str = "warn") -> Finding:
    level = "critical" if action == "block" else "warning"
    return Finding(index, None, "t", level, action, detector, 10, "m")


def test_span_runs_from_the_finding_to_the_last_matching_call_across_small_gaps() -> None:
    poll = ("process", {"action": "poll", "sessionId": "s"}, "r1", "running")
    sleep = ("exec", {"command": "sleep 5"}, "r1", "")
    other = ("read", {"path": "x"}, "r1", "text")
    trace = _trace([poll] * 12 + [sleep, poll, sleep, poll] + [other] * 5 + [poll])
    (span,) = loop_spans(trace, [_finding(10, "known_poll_no_progress"),
                                 _finding(13, "known_poll_no_progress", "block")])
    assert (span.start, span.end, span.level) == (10, 15, "critical")
    assert span.calls == 6


def test_span_stops_at_the_end_of_the_run() -> None:
    repeat = ("read", {"path": "a"}, "r1", "same")
    trace = _trace([repeat] * 5 + [("read", {"path": "a"}, "r2", "same")] * 3)
    (span,) = loop_spans(trace, [_finding(3, "generic_repeat")])
    assert (span.start, span.end) == (3, 4)


def test_ping_pong_span_covers_both_sides_and_unknown_tool_ignores_args() -> None:
    a, b = ("read", {"path": "a"}, None, "x"), ("exec", {"command": "ls"}, None, "y")
    trace = _trace([a, b] * 8)
    (span,) = loop_spans(trace, [_finding(11, "ping_pong")])
    assert (span.start, span.end) == (11, 15)

    calls = [("search_web", {"q": str(i)}, None, "Unknown tool") for i in range(6)]
    (span,) = loop_spans(_trace(calls), [_finding(2, "unknown_tool_repeat")])
    assert (span.start, span.end, span.tool) == (2, 5, "search_web")


def test_loop_calls_and_chars_count_the_merged_spans(tmp_path: Path) -> None:
    calls = [{"tool": "read", "args": {"path": "a"}, "result": "0123456789", "run_id": "r"}] * 15
    path = _jsonl(tmp_path / "t.jsonl", calls)
    result = scan_file(path, LoopDetectionConfig(enabled=True))
    assert result.first("warn") is not None and result.first("warn").index == 10  # type: ignore[union-attr]
    assert result.loop_calls == 5 and result.loop_chars == 50 and result.output_chars == 150


def test_output_chars_reads_text_of_every_result_shape() -> None:
    openclaw = {"content": [{"type": "text", "text": "abc"}, {"type": "image", "data": "zz"}],
                "details": {"status": "ok"}}
    assert output_chars(openclaw) == 3
    assert output_chars("hello") == 5
    assert output_chars(MISSING, "Unknown tool: x") == len("Unknown tool: x")
    assert output_chars(None) == 0
    assert output_chars({"a": 1}) == len('{"a":1}')


def test_real_cli_app_mounts_scan_and_eval() -> None:
    pytest.importorskip("loopwarden.cli")
    from loopwarden.cli import app

    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "scan" in result.stdout and "eval" in result.stdout
