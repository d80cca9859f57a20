"""What the Claude Code hook answers for each release's shapes (payloads as the real binaries
send them, captured from 2.1.197 and 2.1.332), and ``install claude-code --check``."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwarden import LoopDetectionConfig, LoopGuard
from loopwarden.guard import STOP_MESSAGE, TERMINAL_TEXT, warning_note
from loopwarden.integrations.claude_code_hook import (
    ClaudeCodeHook,
    batch_stop_output,
    run_id_of,
    without_proxy_notes,
)
from loopwarden.integrations.claude_code_settings import HOOK_EVENTS, install

BASE = {"session_id": "s1", "prompt_id": "p1", "cwd": "/w", "permission_mode": "bypassPermissions"}
FIXTURES = Path(__file__).parent / "fixtures" / "claude"


def _batch(response: Any) -> dict[str, Any]:
    return {**BASE, "hook_event_name": "PostToolBatch", "tool_calls": [
        {"tool_name": "Bash", "tool_input": {"command": "echo hi"}, "tool_use_id": "t1",
         "tool_response": response}]}


def test_a_batch_holding_the_terminal_denial_ends_the_run() -> None:
    # 2.1.197 ignores continue:false on the denied call; the batch answer ends its run.
    denied = f"CRITICAL: Called Bash with identical outcomes 20 times.\n\n{TERMINAL_TEXT}"
    assert batch_stop_output(_batch(denied)) == {"continue": False, "stopReason": STOP_MESSAGE}
    # As the current release words it, with its own prefix:
    assert batch_stop_output(_batch(f"PreToolUse:Bash hook error: {denied}"))["continue"] is False


def test_other_batches_and_continue_behaviour_say_nothing() -> None:
    assert batch_stop_output(_batch("hi")) == {}
    assert batch_stop_output(_batch(f"{TERMINAL_TEXT} and then more output")) == {}
    assert batch_stop_output(_batch(TERMINAL_TEXT), exit_behavior="continue") == {}
    assert batch_stop_output({**BASE, "hook_event_name": "PostToolBatch"}) == {}


def test_the_hook_repeats_the_stop_on_the_batch_after_a_terminal_denial() -> None:
    hook = ClaudeCodeHook(LoopGuard(LoopDetectionConfig(enabled=True)))
    answers = []
    for n in range(1, 23):
        pre = {**BASE, "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": "echo hi"}, "tool_use_id": f"t{n}"}
        answer = hook.handle(pre)
        reason = answer.get("hookSpecificOutput", {}).get("permissionDecisionReason")
        if reason is None:
            hook.handle({**pre, "hook_event_name": "PostToolUse",
                         "tool_response": {"stdout": "hi", "stderr": ""}})
        answers.append(hook.handle(_batch(reason or "hi")))
    assert answers[:21] == [{}] * 21  # the first critical (21) leaves a recovery turn
    assert answers[21] == {"continue": False, "stopReason": STOP_MESSAGE}


def test_a_post_tool_use_result_marked_as_error_is_a_failure() -> None:
    def recorded(post: dict[str, Any]) -> dict[str, Any]:
        guard = LoopGuard(LoopDetectionConfig(enabled=True))
        hook = ClaudeCodeHook(guard)
        call = {**BASE, "tool_name": "mcp__jobs__run", "tool_input": {"n": 1},
                "tool_use_id": "t1"}
        hook.handle({**call, "hook_event_name": "PreToolUse"})
        hook.handle({**call, **post})
        (record,) = guard.history("s1")
        return {key: value for key, value in record.to_dict().items() if key != "timestamp"}

    as_failure = recorded({"hook_event_name": "PostToolUseFailure", "error": "job store is down"})
    as_error_result = recorded({"hook_event_name": "PostToolUse", "tool_response": {
        "isError": True, "content": [{"type": "text", "text": "job store is down"}]}})
    assert as_failure["outcome_kind"] != "success"
    assert as_error_result == as_failure


def test_an_mcp_loop_behind_the_proxy_is_denied_before_the_proxy_blocks() -> None:
    """An MCP tool behind ``loopwarden mcp-proxy`` whose result is text alone (payloads
    captured from Claude Code 2.1.332): the hook gets the content list, and on the warned call
    the proxy's note is an item of it. The note is loopwarden's, not the tool's: the hook
    counts through it, denies call 21 (before the proxy would block it) and ends the run."""
    lines = [json.loads(line) for line in
             (FIXTURES / "mcp_through_proxy.jsonl").read_text().splitlines()]
    pre, plain, noted = lines[0], lines[1], lines[3]
    assert noted["tool_response"][1] == {"type": "text", "text": warning_note(10)}
    assert without_proxy_notes(noted["tool_response"]) == plain["tool_response"]
    hook = ClaudeCodeHook(LoopGuard())
    answers = []
    for n in range(1, 23):
        call = {"tool_use_id": f"toolu_{n:04d}"}
        answer = hook.handle({**pre, **call})
        answers.append(answer)
        if answer.get("hookSpecificOutput", {}).get("permissionDecision") != "deny":
            hook.handle({**(noted if n == 11 else plain), **call})  # the note, as captured
    denied = [n for n, a in enumerate(answers, 1)
              if a.get("hookSpecificOutput", {}).get("permissionDecision") == "deny"]
    assert denied == [21, 22] and answers[21]["continue"] is False


def test_only_the_proxys_own_note_is_taken_out_of_a_result() -> None:
    note = {"type": "text", "text": warning_note(12)}
    said = {"type": "text", "text": f"the server quoted: {warning_note(12)}"}
    assert without_proxy_notes([{"type": "text", "text": "ok"}, note]) == [
        {"type": "text", "text": "ok"}]
    assert without_proxy_notes([said]) == [said]
    assert without_proxy_notes({"content": [note], "isError": False}) == {
        "content": [], "isError": False}
    assert without_proxy_notes("plain text") == "plain text"


def test_sub_agent_calls_are_their_own_run() -> None:
    assert run_id_of(BASE) == "p1"
    assert run_id_of({**BASE, "agent_id": "a7"}) == "p1/agent:a7"
    assert run_id_of({**BASE, "agent_id": "a7"}) != run_id_of({**BASE, "agent_id": "a8"})


def test_the_installer_registers_the_batch_event_without_a_matcher() -> None:
    assert "PostToolBatch" in HOOK_EVENTS
    settings = install({}, "/bin/loopwarden claude-hook")
    (group,) = settings["hooks"]["PostToolBatch"]
    assert "matcher" not in group


def _fake_claude(tmp_path: Path, version: str) -> Path:
    """A stand-in `claude` that prints a version, as the real one does (no host needed)."""
    script = tmp_path / "claude"
    script.write_text(f"#!/bin/sh\necho '{version} (Claude Code)'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _check(tmp_path: Path, version: str, *install_first: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(tmp_path)}
    if install_first:
        subprocess.run([sys.executable, "-m", "loopwarden", "install", "claude-code", "--user"],
                       env=env, capture_output=True, check=True, cwd=tmp_path)
    return subprocess.run([sys.executable, "-m", "loopwarden", "install", "claude-code",
                           "--check", "--user", "--claude", str(_fake_claude(tmp_path, version))],
                          env=env, capture_output=True, text=True, check=False, cwd=tmp_path)


@pytest.mark.integration
def test_check_reports_what_each_release_supports(tmp_path: Path) -> None:
    old = _check(tmp_path, "2.1.197", True)
    assert old.returncode == 0, old.stdout + old.stderr
    assert "Claude Code 2.1.197" in old.stdout and "supported" in old.stdout
    assert "[no ] end the run on the denied call" in old.stdout
    assert "[yes] end the run after the batch (PostToolBatch)" in old.stdout
    current = _check(tmp_path, "2.1.332")
    assert "[yes] end the run on the denied call" in current.stdout
    assert "hooks in" in current.stdout and "all events" in current.stdout


@pytest.mark.integration
def test_check_fails_for_an_unsupported_release_or_missing_hooks(tmp_path: Path) -> None:
    too_old = _check(tmp_path, "1.0.40", True)
    assert too_old.returncode == 1 and "older than the minimum 2.1.197" in too_old.stdout
    missing = _check(tmp_path / "x" if (tmp_path / "x").mkdir() is None else tmp_path, "2.1.332")
    assert missing.returncode == 1 and "not installed" in missing.stdout


@pytest.mark.integration
def test_check_wants_the_batch_hook_only_where_the_release_needs_it(tmp_path: Path) -> None:
    # Installed for 2.1.332 (no batch hook: it ends the run on the denied call itself)...
    env = {**os.environ, "HOME": str(tmp_path)}
    subprocess.run([sys.executable, "-m", "loopwarden", "install", "claude-code", "--user",
                    "--claude", str(_fake_claude(tmp_path, "2.1.332"))],
                   env=env, capture_output=True, check=True, cwd=tmp_path)
    current = _check(tmp_path, "2.1.332")
    assert current.returncode == 0, current.stdout + current.stderr
    assert "all events" in current.stdout and "[yes] end the run after the batch" in current.stdout
    # ...then Claude Code went back to 2.1.197, which would deny the terminal call forever
    # without ending the run: --check says what is missing.
    older = _check(tmp_path, "2.1.197")
    assert older.returncode == 1 and "missing PostToolBatch" in older.stdout, older.stdout

