"""Transcript readers on small fixtures written for these tests (tests/offline/transcripts/fixtures)."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwarden.base.types import MISSING, ToolCall
from loopwarden.offline.transcripts import (
    FORMATS,
    ReadProblem,
    detect_format,
    iter_transcript_files,
    read_transcript,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def read_all(name: str, fmt: str = "auto") -> tuple[list[ToolCall], list[ReadProblem]]:
    problems: list[ReadProblem] = []
    calls = list(read_transcript(FIXTURES / name, fmt, on_problem=problems.append))
    return calls, problems


def summary(calls: list[ToolCall]) -> list[tuple[str, Any, str | None, str | None]]:
    return [(c.tool_name, c.args, c.call_id, c.run_id) for c in calls]


def problem_lines(problems: list[ReadProblem]) -> list[int | None]:
    return [p.line for p in problems]


# --- format detection ------------------------------------------------------------------


def test_formats_are_the_documented_names() -> None:
    assert FORMATS == (
        "openclaw",
        "claude-code",
        "claude-code-md",
        "openai-chat",
        "swe-agent",
        "openhands",
        "loopwarden",
    )


DETECTED = {
    "openclaw/session.jsonl": "openclaw",
    "openclaw/broken.jsonl": "openclaw",
    "claude_code/session.jsonl": "claude-code",
    "claude_code/broken.jsonl": "claude-code",
    "claude_code_md/session.md": "claude-code-md",
    "claude_code_md/broken.md": "claude-code-md",
    "openai_chat/messages.json": "openai-chat",
    "openai_chat/messages.jsonl": "openai-chat",
    "openai_chat/tau_result.json": "openai-chat",
    "openai_chat/tau_results.json": "openai-chat",
    "openai_chat/broken.json": "openai-chat",
    "openai_chat/broken.jsonl": "openai-chat",
    "swe_agent/run.traj": "swe-agent",
    "swe_agent/history_only.traj": "swe-agent",
    "swe_agent/wrong_types.traj": "swe-agent",
    "swe_agent/truncated.traj": "swe-agent",
    "openhands/events.json": "openhands",
    "openhands/output.jsonl": "openhands",
    "openhands/pairs.json": "openhands",
    "openhands/broken.jsonl": "openhands",
    "loopwarden/calls.jsonl": "loopwarden",
    "loopwarden/broken.jsonl": "loopwarden",
    "misc/empty.jsonl": None,
    "misc/junk.dat": None,
    "misc/notes.md": None,
    "misc/plain.txt": None,
    "misc/other.json": None,
}


def test_every_fixture_has_an_expected_format() -> None:
    on_disk = {str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*") if p.is_file()}
    assert on_disk == set(DETECTED)


@pytest.mark.parametrize(("name", "expected"), sorted(DETECTED.items()))
def test_detect_format(name: str, expected: str | None) -> None:
    assert detect_format(FIXTURES / name) == expected
    assert detect_format(str(FIXTURES / name)) == expected


MISLEADING = [
    ("openclaw/session.jsonl", "trajectory.traj"),
    ("claude_code/session.jsonl", "notes.md"),
    ("claude_code_md/session.md", "session.jsonl"),
    ("openai_chat/messages.json", "events.jsonl"),
    ("openai_chat/tau_results.json", "run.traj"),
    ("swe_agent/run.traj", "output.jsonl"),
    ("openhands/events.json", "chat.json"),
    ("openhands/output.jsonl", "session.md"),
    ("loopwarden/calls.jsonl", "session.json"),
    ("misc/plain.txt", "session.jsonl"),
]


@pytest.mark.parametrize(("name", "new_name"), MISLEADING)
def test_detection_ignores_the_file_name(name: str, new_name: str, tmp_path: Path) -> None:
    renamed = tmp_path / new_name
    shutil.copyfile(FIXTURES / name, renamed)
    assert detect_format(renamed) == DETECTED[name]
    original = [(c.tool_name, c.args, c.run_id) for c in read_all(name)[0]]
    assert [(c.tool_name, c.args, c.run_id) for c in read_transcript(renamed)] == original


def test_detect_format_of_missing_file_or_folder(tmp_path: Path) -> None:
    assert detect_format(tmp_path / "nope.jsonl") is None
    assert detect_format(tmp_path) is None


def test_detection_of_a_large_document_beyond_the_peeked_head(tmp_path: Path) -> None:
    # A tau-bench result whose leading "info" value is far larger than the bytes peeked.
    padding = "x" * 200_000
    path = tmp_path / "big.json"
    path.write_text(
        '{"task_id": 1, "info": {"note": "' + padding + '"}, "traj": '
        '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": null, '
        '"tool_calls": [{"id": "c1", "type": "function", '
        '"function": {"name": "f", "arguments": "{}"}}]}]}',
        encoding="utf-8",
    )
    assert detect_format(path) == "openai-chat"
    assert [c.tool_name for c in read_transcript(path)] == ["f"]


def test_detection_of_a_long_jsonl_file_with_huge_first_line(tmp_path: Path) -> None:
    path = tmp_path / "session"
    big = "y" * 100_000
    path.write_text(
        '{"type":"session","version":3,"id":"s","cwd":"/","note":"' + big + '"}\n'
        '{"type":"message","id":"a","parentId":null,"message":{"role":"assistant",'
        '"content":[{"type":"toolCall","id":"t1","name":"exec","arguments":{}}]}}\n',
        encoding="utf-8",
    )
    assert detect_format(path) == "openclaw"
    assert [c.tool_name for c in read_transcript(path)] == ["exec"]


def test_detection_reads_a_whole_first_line_when_its_telling_keys_come_late(
    tmp_path: Path,
) -> None:
    path = tmp_path / "session"
    prompt = json.dumps({"role": "user", "content": "z" * 100_000})
    path.write_text(
        f'{{"message": {prompt}, "type": "user", "uuid": "u1", "sessionId": "s"}}\n'
        '{"type": "assistant", "uuid": "u2", "sessionId": "s", "message": {"role": '
        '"assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", '
        '"input": {"command": "ls"}}]}}\n',
        encoding="utf-8",
    )
    assert detect_format(path) == "claude-code"
    assert [(c.tool_name, c.run_id) for c in read_transcript(path)] == [("Bash", "u1")]


# --- OpenClaw --------------------------------------------------------------------------


def test_openclaw_calls_in_call_order_with_results_paired_by_id() -> None:
    calls, problems = read_all("openclaw/session.jsonl")
    assert problems == []
    assert summary(calls) == [
        ("exec", {"command": "ls"}, "c1", "u1"),
        ("read", {"path": "a.txt"}, "c2", "u1"),
        ("exec", {"command": "pytest"}, "c3", "u2"),
        ("web_search", {}, "c9", "u2"),
        ("process", {"action": "poll", "sessionId": "s1"}, "c4", "u2"),
    ]
    exec_ls, read, pytest_run, orphan, poll = calls
    # OpenClaw's own result shape, details included only when the record has them
    assert exec_ls.result == {
        "content": [{"type": "text", "text": "a.txt\n"}],
        "details": {"status": "completed", "exitCode": 0},
    }
    assert read.result == {"content": [{"type": "text", "text": "hello"}]}
    assert exec_ls.error is None and read.error is None
    assert pytest_run.error == "1 failed"
    assert pytest_run.result["details"]["status"] == "failed"
    assert orphan.error == "Tool web_search not found"
    assert poll.result is MISSING and poll.error is None


def test_openclaw_broken_lines_are_reported_and_skipped() -> None:
    calls, problems = read_all("openclaw/broken.jsonl")
    assert summary(calls) == [("read", {"path": "b"}, "c2", "u1")]
    assert calls[0].result == {"content": [{"type": "text", "text": "contents of b"}]}
    assert problem_lines(problems) == [3, 4, 5, 7, 8, 10, 11]
    assert all(p.path == str(FIXTURES / "openclaw/broken.jsonl") for p in problems)
    assert "invalid JSON" in problems[0].message
    assert "not UTF-8" in problems[-1].message


# --- Claude Code -----------------------------------------------------------------------


def test_claude_code_jsonl() -> None:
    calls, problems = read_all("claude_code/session.jsonl")
    assert problems == []
    assert summary(calls) == [
        ("Read", {"file_path": "/p/a.py"}, "toolu_1", "u2"),
        ("Bash", {"command": "pytest -q"}, "toolu_2", "u2"),
        ("Bash", {"command": "git commit -am fix"}, "toolu_3", "u3"),
    ]
    read, test_run, commit = calls
    assert read.result == "     1\tdef f(): pass\n" and read.error is None
    assert test_run.result == [{"type": "text", "text": "1 failed"}]
    assert test_run.error == "1 failed"
    assert commit.result is MISSING


def test_claude_code_jsonl_broken() -> None:
    calls, problems = read_all("claude_code/broken.jsonl")
    assert summary(calls) == [("Grep", {"pattern": "x"}, "toolu_1", "u1")]
    assert calls[0].result == "x.py:1: x"
    assert problem_lines(problems) == [3, 4, 5, 6]
    assert "toolu_404" in problems[-1].message


def test_claude_code_markdown_export() -> None:
    calls, problems = read_all("claude_code_md/session.md")
    assert problems == []
    # the "---" and "### User" typed inside the first prompt do not start a message
    assert summary(calls) == [
        ("Grep", {"pattern": "load_config"}, "toolu_a", "u1"),
        ("Glob", {"pattern": "**/*.toml"}, "toolu_b", "u1"),
        ("Read", {"file_path": "/home/me/proj/pyproject.toml"}, "toolu_c", "u2"),
    ]
    grep, glob, read = calls
    assert grep.error == "<tool_use_error>Path does not exist</tool_use_error>"
    assert grep.result == grep.error
    assert glob.result == "pyproject.toml" and glob.error is None
    assert read.result is MISSING


def test_claude_code_markdown_export_broken() -> None:
    calls, problems = read_all("claude_code_md/broken.md")
    assert summary(calls) == [
        ("Bash", {"command": "ls"}, "toolu_a", "u1"),
        ("Bash", {"command": "ls -la"}, "toolu_b", "u1"),
    ]
    assert all(c.result is MISSING for c in calls)
    assert problem_lines(problems) == [37, 64]  # the "### User" lines of the bad messages
    assert "not valid block JSON" in problems[0].message


def test_claude_code_markdown_and_jsonl_agree(tmp_path: Path) -> None:
    """The export and the session file it came from give the same calls."""
    jsonl, _ = read_all("claude_code/session.jsonl")
    lines = ["# Claude Session Export", "", "## Conversation", ""]
    for raw in (FIXTURES / "claude_code/session.jsonl").read_text().splitlines():
        record = json.loads(raw)
        if record.get("type") not in ("user", "assistant"):
            continue
        content = record["message"]["content"]
        body = content if isinstance(content, str) else json.dumps(content, indent=2)
        role = "User" if record["type"] == "user" else "Assistant"
        lines += [f"### {role}", "> 6/1/2025, 10:00:00 AM", "", body, "", "---", ""]
    export = tmp_path / "export.md"
    export.write_text("\n".join(lines), encoding="utf-8")
    markdown = list(read_transcript(export, "claude-code-md"))
    assert [(c.tool_name, c.args, c.call_id, c.run_id, c.result, c.error) for c in markdown] == [
        (c.tool_name, c.args, c.call_id, c.run_id, c.result, c.error) for c in jsonl
    ]


# --- OpenAI chat / tau-bench -----------------------------------------------------------


def test_openai_chat_messages() -> None:
    calls, problems = read_all("openai_chat/messages.json")
    assert problems == []
    assert summary(calls) == [
        ("search_flights", {"to": "OSL", "date": "2024-05-20"}, "call_1", "u1"),
        ("get_user", {"user_id": "u7"}, "call_2", "u1"),
        # arguments that are not valid JSON stay the raw string
        ("search_flights", '{"to": "OSL", "date": "2024-05-21"', "call_3", "u2"),
        ("lookup", {"q": "OSL"}, None, "u2"),  # legacy function_call / function message
        ("cancel", {}, "call_x", "u2"),  # a tool message whose call is missing
        ("book", {"flight": "SK1"}, "call_4", "u2"),
    ]
    search, user, retry, lookup, cancel, book = calls
    assert search.result == "Error: no flights on 2024-05-20"
    assert search.error == search.result
    assert user.result == '{"name": "Ana"}' and user.error is None
    assert retry.error == "[]"  # status: "error"
    assert lookup.result == "Oslo Gardermoen"
    assert cancel.result == "cancelled"
    assert book.result is MISSING


def test_openai_chat_jsonl_and_tau_shapes_agree() -> None:
    full, _ = read_all("openai_chat/messages.json")
    for name in ("openai_chat/messages.jsonl", "openai_chat/tau_result.json"):
        calls, problems = read_all(name)
        assert problems == []
        assert [(c.tool_name, c.args, c.run_id, c.result, c.error) for c in calls] == [
            (c.tool_name, c.args, c.run_id, c.result, c.error) for c in full[:2]
        ]


def test_tau_bench_results_file_keeps_conversations_apart() -> None:
    calls, problems = read_all("openai_chat/tau_results.json")
    assert problems == []
    assert [(c.tool_name, c.run_id) for c in calls] == [
        ("search_flights", "c1.u1"),
        ("get_user", "c1.u1"),
        ("cancel", "c2.u1"),
    ]
    assert calls[2].result == "ok"


def test_openai_chat_broken() -> None:
    calls, problems = read_all("openai_chat/broken.jsonl")
    assert [(c.tool_name, c.call_id) for c in calls] == [
        ("search_flights", "call_1"),
        ("get_user", "call_2"),
    ]
    assert calls[0].error == "Error: no flights on 2024-05-20"
    assert calls[1].result is MISSING  # its result line was truncated
    assert problem_lines(problems) == [3, 4, 5, 6]

    calls, problems = read_all("openai_chat/broken.json")
    assert calls == []
    assert len(problems) == 1 and problems[0].line == 36
    assert "invalid JSON" in problems[0].message


# --- SWE-agent -------------------------------------------------------------------------


def test_swe_agent_trajectory() -> None:
    calls, problems = read_all("swe_agent/run.traj")
    assert problems == []
    assert [(c.tool_name, c.args["command"], c.run_id) for c in calls] == [
        ("find_file", 'find_file "setup.py"\n', None),
        ("open", "open setup.py\n", None),
        ("edit", 'edit 4:4\n    version="1.1",\nend_of_edit\n', None),
        ("python", "python -m pytest -q\n", None),  # the empty action is not a call
        ("submit", "submit\n", None),
    ]
    assert calls[3].result == "3 passed"
    assert all(c.error is None and c.call_id is None for c in calls)


def test_swe_agent_history_only_trajectory() -> None:
    calls, problems = read_all("swe_agent/history_only.traj")
    assert problems == []
    assert [(c.tool_name, c.result) for c in calls] == [
        ("ls", "setup.py\nsrc/"),
        ("open", "[File: /repo/setup.py (10 lines total)]"),
        ("submit", MISSING),
    ]


def test_swe_agent_broken() -> None:
    calls, problems = read_all("swe_agent/wrong_types.traj")
    assert [c.tool_name for c in calls] == ["ls", "cat"]
    assert [p.message for p in problems] == [
        "trajectory[1] is a str, not an object",
        "trajectory[2].action is not a string",
    ]
    calls, problems = read_all("swe_agent/truncated.traj")
    assert calls == [] and len(problems) == 1 and problems[0].line is not None


# --- OpenHands -------------------------------------------------------------------------


def test_openhands_events() -> None:
    calls, problems = read_all("openhands/events.json")
    assert problems == []
    assert summary(calls) == [
        ("execute_bash", {"command": "ls /workspace", "is_input": False, "blocking": False},
         "toolu_1", "u1"),
        ("str_replace_editor",
         {"path": "/workspace/a.py", "start": 0, "end": -1, "impl_source": "oh_aci",
          "view_range": None},
         "toolu_2", "u1"),
        ("str_replace_editor",
         {"command": "create", "path": "/workspace/test_a.py", "file_text": "def test(): pass"},
         "toolu_3", "u2"),
        ("think", {}, "toolu_4", "u2"),
        ("finish", {"final_thought": "Done", "task_completed": "true", "outputs": {}},
         "toolu_5", "u2"),
    ]  # fmt: skip
    bash, read, edit, think, finish = calls
    assert bash.result == "a.py" and read.result == "print('a')"  # paired by cause
    assert edit.error == "File already exists at: /workspace/test_a.py"
    assert think.result == "Your thought has been logged." and think.error is None
    assert finish.result is MISSING


def test_openhands_evaluation_output_and_old_pairs() -> None:
    calls, problems = read_all("openhands/output.jsonl")
    assert problems == []
    assert [(c.tool_name, c.run_id, c.result) for c in calls] == [
        ("execute_bash", "c1.u1", "a.py"),
        ("str_replace_editor", "c1.u1", "print('a')"),
        ("execute_bash", "c2.u1", "a.py"),
    ]
    calls, problems = read_all("openhands/pairs.json")
    assert problems == []
    assert [(c.tool_name, c.args, c.run_id, c.result, c.error) for c in calls] == [
        ("run", {"command": "ls"}, "u1", "a.py", None),
        ("browse", {"url": "http://127.0.0.1:8000"}, "u1", "connection refused",
         "connection refused"),
    ]  # fmt: skip


def test_openhands_broken() -> None:
    calls, problems = read_all("openhands/broken.jsonl")
    assert [(c.tool_name, c.result) for c in calls] == [("execute_bash", "a.py")]
    assert problem_lines(problems) == [3, 4]


# --- loopwarden JSONL ------------------------------------------------------------------


def test_loopwarden_jsonl() -> None:
    calls, problems = read_all("loopwarden/calls.jsonl")
    assert problems == []
    assert summary(calls) == [
        ("read", {"path": "a"}, "c1", "r1"),
        ("exec", {"command": "make"}, "c2", "r1"),
        ("process", {"action": "poll"}, None, "2"),
        ("noop", {}, None, None),
    ]
    assert calls[0].result == "A" and calls[0].error is None
    assert calls[1].result["details"] == {"status": "failed"} and calls[1].error == "boom"
    assert calls[2].result is MISSING  # null means the result never arrived
    assert calls[3].result is MISSING and calls[3].error is None


def test_loopwarden_jsonl_broken() -> None:
    calls, problems = read_all("loopwarden/broken.jsonl")
    assert [c.args for c in calls] == [{"path": "a"}, {"path": "c"}]
    assert problem_lines(problems) == [2, 3, 4, 5]


def test_loopwarden_jsonl_round_trips_other_readers(tmp_path: Path) -> None:
    calls, _ = read_all("openai_chat/messages.json")
    path = tmp_path / "calls.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for c in calls:
            record = {
                "tool": c.tool_name,
                "args": c.args,
                "result": None if c.result is MISSING else c.result,
                "error": c.error,
                "call_id": c.call_id,
                "run_id": c.run_id,
            }
            fh.write(json.dumps(record) + "\n")
    again = list(read_transcript(path))
    assert [(c.tool_name, c.args, c.call_id, c.run_id, c.result, c.error) for c in again] == [
        (c.tool_name, c.args, c.call_id, c.run_id, c.result, c.error) for c in calls
    ]


# --- read_transcript contract ----------------------------------------------------------


@pytest.mark.parametrize("name", ["misc/empty.jsonl", "misc/junk.dat", "misc/notes.md"])
def test_undetectable_file_is_one_problem_and_no_calls(name: str) -> None:
    calls, problems = read_all(name)
    assert calls == []
    assert len(problems) == 1 and problems[0].line is None
    assert problems[0].path == str(FIXTURES / name)


def test_missing_file_and_folder_are_problems(tmp_path: Path) -> None:
    for path in (tmp_path / "missing.jsonl", tmp_path):
        problems: list[ReadProblem] = []
        assert list(read_transcript(path, on_problem=problems.append)) == []
        assert len(problems) == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_reader_survives_binary_junk(fmt: str) -> None:
    calls, problems = read_all("misc/junk.dat", fmt)
    assert calls == []
    assert problems  # reported, never raised


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_reader_survives_an_empty_file(fmt: str) -> None:
    assert read_all("misc/empty.jsonl", fmt) == ([], [])


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_reader_survives_every_fixture(fmt: str) -> None:
    for name in DETECTED:
        calls, _ = read_all(name, fmt)
        assert all(isinstance(c, ToolCall) and isinstance(c.tool_name, str) for c in calls)


def test_problem_flood_is_capped(tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    path.write_text('{"tool": "a"}\n' + "not json\n" * 500, encoding="utf-8")
    problems: list[ReadProblem] = []
    calls = list(read_transcript(path, on_problem=problems.append))
    assert len(calls) == 1
    assert len(problems) == 51
    assert problems[-1].message == "450 more problems not reported"


def test_problems_go_to_the_log_without_a_callback(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="loopwarden.transcripts"):
        calls = list(read_transcript(FIXTURES / "loopwarden/broken.jsonl"))
    assert len(calls) == 2
    messages = [r.getMessage() for r in caplog.records if r.name == "loopwarden.transcripts"]
    assert len(messages) == 4
    assert messages[0].startswith(f"{FIXTURES / 'loopwarden/broken.jsonl'}:2: invalid JSON")


def test_a_raising_callback_stops_the_read() -> None:
    class Stop(Exception):
        pass

    def strict(problem: ReadProblem) -> None:
        raise Stop(str(problem))

    with pytest.raises(Stop, match=r"broken\.jsonl:2: invalid JSON"):
        list(read_transcript(FIXTURES / "loopwarden/broken.jsonl", on_problem=strict))


def test_unknown_format_name_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown transcript format"):
        read_transcript(FIXTURES / "loopwarden/calls.jsonl", "yaml")


def _openclaw_lines(count: int) -> list[str]:
    lines = ['{"type":"session","version":3,"id":"s","cwd":"/"}']
    for i in range(count):
        lines.append(
            f'{{"type":"message","id":"a{i}","message":{{"role":"assistant","content":'
            f'[{{"type":"toolCall","id":"t{i}","name":"exec","arguments":{{}}}}]}}}}'
        )
        lines.append(
            f'{{"type":"message","id":"r{i}","message":{{"role":"toolResult","toolCallId":"t{i}",'
            f'"toolName":"exec","content":[{{"type":"text","text":"ok"}}],"isError":false}}}}'
        )
    return lines


def test_calls_are_released_as_soon_as_settled(tmp_path: Path) -> None:
    """Readers stream: the first call comes out before the rest of the file is parsed."""
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join([*_openclaw_lines(3), "not json"]) + "\n", encoding="utf-8")
    problems: list[ReadProblem] = []
    stream = read_transcript(path, on_problem=problems.append)
    assert next(stream).call_id == "t0"
    assert problems == []  # the broken last line has not been reached yet
    assert [c.call_id for c in stream] == ["t1", "t2"]
    assert problem_lines(problems) == [8]


def test_a_call_without_result_holds_back_later_calls_until_the_end(tmp_path: Path) -> None:
    lines = _openclaw_lines(3)
    del lines[2]  # t0 never gets its result
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    calls = list(read_transcript(path))
    assert [(c.call_id, c.result is MISSING) for c in calls] == [
        ("t0", True),
        ("t1", False),
        ("t2", False),
    ]


# --- iter_transcript_files -------------------------------------------------------------


def test_iter_transcript_files_walks_sorted_and_skips_hidden_and_binary(tmp_path: Path) -> None:
    for name in (
        "b/2.jsonl",
        "b/1.jsonl",
        "a.md",
        "c/picture.png",
        "c/archive.tar.gz",
        ".git/config",
        "b/.hidden.jsonl",
        ".openclaw/agents/main/sessions/s.jsonl",
        ".claude/projects/p/s.jsonl",
        "x.jsonl.deleted.2026-03-24T12-19-55.678Z",
    ):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}", encoding="utf-8")
    found = [p.relative_to(tmp_path).as_posix() for p in iter_transcript_files([tmp_path])]
    assert found == [
        ".claude/projects/p/s.jsonl",
        ".openclaw/agents/main/sessions/s.jsonl",
        "a.md",
        "b/1.jsonl",
        "b/2.jsonl",
        "x.jsonl.deleted.2026-03-24T12-19-55.678Z",
    ]


def test_iter_transcript_files_keeps_explicit_files_and_dedupes(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    inside = tmp_path / "d" / "s.jsonl"
    inside.write_text("{}", encoding="utf-8")
    hidden = tmp_path / ".secret.jsonl"
    hidden.write_text("{}", encoding="utf-8")
    missing = tmp_path / "missing.jsonl"
    found = list(iter_transcript_files([inside, str(tmp_path / "d"), hidden, missing]))
    assert found == [inside, hidden, missing]


def test_scan_of_many_files_is_never_aborted() -> None:
    problems: list[ReadProblem] = []
    calls = [
        call
        for path in iter_transcript_files([FIXTURES])
        for call in read_transcript(path, on_problem=problems.append)
    ]
    assert len(calls) > 30
    assert {Path(p.path).name for p in problems} >= {"junk.dat", "broken.jsonl", "broken.md"}


# --- robustness: mutated fixtures never raise ------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _nodes(value: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key) position in a JSON value, to pick one to replace."""
    if isinstance(value, dict):
        for key, item in value.items():
            out.append((value, key))
            _nodes(item, out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.append((value, index))
            _nodes(item, out)
    return out


def _mutated_copy(name: str, data: st.DataObject, tmp_path: Path) -> Path:
    """The fixture with one value somewhere deep inside replaced by a random JSON value."""
    source = FIXTURES / name
    jsonl = source.read_text(encoding="utf-8").lstrip().startswith("{") and "\n{" in (
        source.read_text(encoding="utf-8")
    )
    if jsonl:
        records: Any = [json.loads(line) for line in source.read_text().splitlines() if line]
    else:
        records = json.loads(source.read_text(encoding="utf-8"))
    positions = _nodes(records, [])
    container, key = positions[data.draw(st.integers(0, len(positions) - 1), label="position")]
    container[key] = data.draw(JSON_VALUES, label="replacement")
    target = tmp_path / source.name
    if jsonl:
        target.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    else:
        target.write_text(json.dumps(records, indent=1), encoding="utf-8")
    return target


HEALTHY = [
    ("openclaw/session.jsonl", "openclaw"),
    ("claude_code/session.jsonl", "claude-code"),
    ("openai_chat/messages.json", "openai-chat"),
    ("openai_chat/tau_results.json", "openai-chat"),
    ("swe_agent/run.traj", "swe-agent"),
    ("swe_agent/history_only.traj", "swe-agent"),
    ("openhands/events.json", "openhands"),
    ("openhands/output.jsonl", "openhands"),
    ("openhands/pairs.json", "openhands"),
    ("loopwarden/calls.jsonl", "loopwarden"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "fmt"), HEALTHY)
@settings(
    max_examples=int(os.environ.get("LOOPWARDEN_FUZZ_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_wrong_types_anywhere_never_raise(
    name: str, fmt: str, data: st.DataObject, tmp_path: Path
) -> None:
    path = _mutated_copy(name, data, tmp_path)
    detect_format(path)  # must not raise either
    for chosen in (fmt, "auto"):
        problems: list[ReadProblem] = []
        calls = list(read_transcript(path, chosen, on_problem=problems.append))
        assert all(isinstance(c, ToolCall) and isinstance(c.tool_name, str) for c in calls)
        assert not any(p.message.startswith("reader failed") for p in problems), problems


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(blob=st.binary(max_size=300))
def test_random_bytes_never_raise(fmt: str, blob: bytes, tmp_path: Path) -> None:
    path = tmp_path / "blob"
    path.write_bytes(blob)
    detect_format(path)
    for chosen in (fmt, "auto"):
        problems: list[ReadProblem] = []
        list(read_transcript(path, chosen, on_problem=problems.append))
        assert not any(p.message.startswith("reader failed") for p in problems), problems
