"""``loopwarden claude-hook`` driven by hook payloads recorded from Claude Code 2.1.332.

Every invocation is a fresh command run, as in Claude Code, so the guard's state only survives
through the SQLite file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from loopwarden import SQLiteStore, warning_note
from loopwarden.cli import app

FIXTURES = Path(__file__).parent / "fixtures" / "claude"


@dataclass
class Exchange:
    payload: dict[str, Any]
    exit_code: int
    output: dict[str, Any] | None  # None: the command printed nothing

    @property
    def event(self) -> str:
        return str(self.payload["hook_event_name"])

    @property
    def decision(self) -> str | None:
        return ((self.output or {}).get("hookSpecificOutput") or {}).get("permissionDecision")

    @property
    def context(self) -> str | None:
        return ((self.output or {}).get("hookSpecificOutput") or {}).get("additionalContext")


def payloads(name: str) -> list[dict[str, Any]]:
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def run_hook(payload: dict[str, Any] | str, *args: str, env: dict[str, str] | None = None) -> Exchange:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    result = CliRunner().invoke(app, ["claude-hook", *args], input=text, env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    out = result.stdout.strip()
    data = payload if isinstance(payload, dict) else {"hook_event_name": None}
    return Exchange(data, result.exit_code, json.loads(out) if out else None)


def replay(name: str, *args: str, skip: str | None = None) -> list[Exchange]:
    return [run_hook(p, *args) for p in payloads(name) if p["hook_event_name"] != skip]


def of(exchanges: list[Exchange], event: str) -> list[Exchange]:
    return [x for x in exchanges if x.event == event]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "claude-hook.db"


def test_recorded_bash_loop_warns_before_the_11th_call_and_denies_from_the_21st(db: Path) -> None:
    exchanges = replay("bash_loop.jsonl", "--db", str(db))

    assert all(x.exit_code == 0 for x in exchanges)
    pre = of(exchanges, "PreToolUse")
    assert len(pre) == 25
    assert [i for i, x in enumerate(pre, 1) if x.context] == [11]
    assert pre[10].context == warning_note(10)
    assert pre[10].decision is None  # a warned call still runs, under Claude Code's own rules
    assert [i for i, x in enumerate(pre, 1) if x.decision == "deny"] == list(range(21, 26))
    reason = pre[20].output["hookSpecificOutput"]["permissionDecisionReason"]  # type: ignore[index]
    assert reason.startswith("CRITICAL: Called Bash with identical outcomes 20 times")
    assert "loopwarden blocked Bash" in pre[20].output["systemMessage"]  # type: ignore[index]
    # The hook never says "allow": that would skip Claude Code's permission checks.
    assert not any(x.decision == "allow" for x in exchanges)
    assert all(x.output is None for x in exchanges if x.event != "PreToolUse")


def test_state_and_run_record_persist_in_sqlite_with_claude_ids(db: Path) -> None:
    recorded = payloads("bash_loop.jsonl")
    replay("bash_loop.jsonl", "--db", str(db))

    session, prompt = recorded[0]["session_id"], recorded[1]["prompt_id"]
    tool_uses = [p["tool_use_id"] for p in recorded if p["hook_event_name"] == "PreToolUse"]
    with SQLiteStore(db) as store:
        history = [r for r in store.load(session).history]  # type: ignore[union-attr]
        events = store.events(session)
    assert {r.run_id for r in history} == {prompt}
    assert all(r.tool_name == "Bash" for r in history)
    assert [(e.action, e.call_id, e.run) for e in events] == [
        ("warn", tool_uses[10], prompt),
        *[("block", t, prompt) for t in tool_uses[20:]],
    ]


def test_recorded_auto_compaction_loop_stops_claude(db: Path) -> None:
    exchanges = replay("compaction_loop.jsonl", "--db", str(db))

    answered = [x for x in exchanges if x.output is not None]
    assert len(answered) == 1
    last = answered[0]
    assert last is of(exchanges, "PostToolUse")[-1]
    assert last.output is not None and last.output["continue"] is False
    assert "after auto-compaction" in last.output["stopReason"]
    assert last.output["stopReason"].startswith("CRITICAL: tool Bash repeated 3 times")


def test_without_pre_compact_the_same_calls_do_not_stop_claude(db: Path) -> None:
    exchanges = replay("compaction_loop.jsonl", "--db", str(db), skip="PreCompact")
    assert all(x.output is None for x in exchanges)


def test_failures_are_recorded_as_error_outcomes(db: Path) -> None:
    recorded = payloads("failure.jsonl")
    exchanges = replay("failure.jsonl", "--db", str(db))

    assert len(of(exchanges, "PostToolUseFailure")) == 3
    with SQLiteStore(db) as store:
        history = store.load(recorded[0]["session_id"]).history  # type: ignore[union-attr]
    assert len(history) == 3
    assert not any(r.pending for r in history)
    assert len({r.result_hash for r in history}) == 1  # same error, same outcome


def write_config(tmp_path: Path, block: str) -> Path:
    path = tmp_path / "openclaw.json"
    path.write_text(block, encoding="utf-8")
    return path


def test_config_thresholds_and_agent_override_are_honoured(db: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path, """{
      // JSON5, as OpenClaw writes it
      tools: { loopDetection: { warningThreshold: 8, criticalThreshold: 12 } },
      agents: { list: [ { id: "coder", tools: { loopDetection: {
        warningThreshold: 3, criticalThreshold: 5 } } } ] },
    }""")
    pre = of(replay("bash_loop.jsonl", "--db", str(db), "--config", str(config),
                    "--agent", "coder"), "PreToolUse")
    assert [i for i, x in enumerate(pre, 1) if x.context] == [4]
    assert pre[3].context == warning_note(3)
    assert [i for i, x in enumerate(pre, 1) if x.decision == "deny"] == list(range(6, 26))
    with SQLiteStore(db) as store:
        assert {e.agent for e in store.events()} == {"coder"}


def test_config_can_turn_detection_off(db: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path, '{"tools": {"loopDetection": {"enabled": false}}}')
    exchanges = replay("bash_loop.jsonl", "--db", str(db), "--config", str(config))
    assert all(x.output is None and x.exit_code == 0 for x in exchanges)


def test_bad_config_is_a_non_blocking_error(db: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path, '{"tools": {"loopDetection": {"warningThreshold": 0}}}')
    x = run_hook(payloads("bash_loop.jsonl")[2], "--db", str(db), "--config", str(config))
    assert x.exit_code == 1  # Claude Code treats 2 as "block"; 1 shows the error and goes on
    assert x.output is None


def test_db_path_from_environment_and_default(tmp_path: Path) -> None:
    payload = payloads("bash_loop.jsonl")[2]
    env_db = tmp_path / "env" / "hook.db"
    assert run_hook(payload, env={"LOOPWARDEN_DB": str(env_db)}).exit_code == 0
    assert env_db.is_file()

    home = tmp_path / "home"
    x = run_hook(payload, env={"LOOPWARDEN_DB": "", "HOME": str(home)})
    assert x.exit_code == 0
    assert (home / ".loopwarden" / "loopwarden.db").is_file()  # the file `runs` reads


def test_events_loopwarden_ignores_touch_nothing(db: Path) -> None:
    for payload in payloads("bash_loop.jsonl"):
        if payload["hook_event_name"] in ("SessionStart", "UserPromptSubmit", "Stop"):
            x = run_hook(payload, "--db", str(db))
            assert (x.exit_code, x.output) == (0, None)
    assert not db.exists()


@pytest.mark.parametrize("stdin", ["not json", "[1, 2]", '{"hook_event_name": "PreToolUse"}'])
def test_unreadable_input_is_a_non_blocking_error(db: Path, stdin: str) -> None:
    result = CliRunner().invoke(app, ["claude-hook", "--db", str(db)], input=stdin)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "loopwarden:" in result.stderr


def test_unusable_store_fails_open(tmp_path: Path) -> None:
    # A directory where the database file should be: every store call fails.
    db = tmp_path / "db"
    db.mkdir()
    exchanges = replay("bash_loop.jsonl", "--db", str(db))
    assert all(x.exit_code == 0 and x.output is None for x in exchanges)


def test_console_command_continues_the_session_across_processes(db: Path) -> None:
    recorded = payloads("bash_loop.jsonl")
    pre_tool_uses = [i for i, p in enumerate(recorded) if p["hook_event_name"] == "PreToolUse"]
    eleventh = pre_tool_uses[10]
    for payload in recorded[:eleventh]:
        run_hook(payload, "--db", str(db))

    env = {**os.environ, "LOOPWARDEN_DB": str(db)}
    proc = subprocess.run(
        [sys.executable, "-m", "loopwarden.cli", "claude-hook"],
        input=json.dumps(recorded[eleventh]), capture_output=True, text=True, env=env,
        timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "additionalContext": warning_note(10)}}
