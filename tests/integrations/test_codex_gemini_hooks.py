"""The Codex CLI and Gemini CLI doors on payloads captured from the real binaries (Codex CLI
0.171.0, Gemini CLI 0.61.0: ``fixtures/codex``, ``fixtures/gemini_cli``), their installers in a
temporary HOME, and the hook commands sharing one store with ``claude-hook``.

The captured payloads are replayed as the host sends them — Codex: PreToolUse / PostToolUse with
a ``tool_use_id`` and a ``turn_id``; Gemini: BeforeTool / AfterTool without any call id, the
shell's result in ``llmContent`` with its changing PGID line and, on failure, ``Exit Code``.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from loopwarden.stores.sqlite import SQLiteStore
from loopwarden.types import MISSING

from loopwarden import LoopGuard
from loopwarden.guard import STOP_MESSAGE, TERMINAL_TEXT, warning_note
from loopwarden.integrations.codex_hook import CodexHook
from loopwarden.integrations.gemini_cli_hook import GeminiCliHook, outcome_of

FIXTURES = Path(__file__).parent / "fixtures"


def captured(host: str, name: str, event: str) -> dict[str, Any]:
    """The first payload of ``event`` in a capture."""
    for line in (FIXTURES / host / name).read_text().splitlines():
        payload = json.loads(line)
        if payload["hook_event_name"] == event:
            return dict(payload)
    raise AssertionError(f"no {event} in {host}/{name}")


# -- Codex CLI ----------------------------------------------------------------------------


def codex_call(n: int, *, command: str | None = None, turn: str | None = None
               ) -> tuple[dict[str, Any], dict[str, Any]]:
    pre = copy.deepcopy(captured("codex", "identical.jsonl", "PreToolUse"))
    post = copy.deepcopy(captured("codex", "identical.jsonl", "PostToolUse"))
    for payload in (pre, post):
        payload["tool_use_id"] = f"call_{n}"
        if command is not None:
            payload["tool_input"] = {"command": command}
        if turn is not None:
            payload["turn_id"] = turn
    return pre, post


def test_codex_identical_loop_is_warned_denied_and_the_turn_kept_stopped() -> None:
    hook = CodexHook(LoopGuard())
    answers = []
    for n in range(1, 23):
        pre, post = codex_call(n)
        answer = hook.handle(pre)
        answers.append(answer)
        if "permissionDecision" not in json.dumps(answer):
            hook.handle(post)  # Codex sends no PostToolUse for a denied call
    notes = [i for i, a in enumerate(answers, 1) if "additionalContext" in json.dumps(a)]
    denied = [i for i, a in enumerate(answers, 1)
              if a.get("hookSpecificOutput", {}).get("permissionDecision") == "deny"]
    assert notes[0] == 11 and denied == [21, 22]  # (the note: before call 11 runs)
    assert not any("continue" in a for a in answers)  # Codex rejects a deny with continue
    assert TERMINAL_TEXT in answers[21]["hookSpecificOutput"]["permissionDecisionReason"]
    # Whatever the model asks next in this turn is denied with the stop message...
    pre, _ = codex_call(23, command="git status")
    later = hook.handle(pre)["hookSpecificOutput"]
    assert later["permissionDecision"] == "deny"
    assert later["permissionDecisionReason"] == STOP_MESSAGE
    # ...and the next turn (the user's next prompt) starts afresh.
    pre, _ = codex_call(24, command="git status", turn="another-turn")
    assert hook.handle(pre) == {}


def test_codex_failure_output_is_recorded_as_the_result_text() -> None:
    guard = LoopGuard()
    hook = CodexHook(guard)
    pre = captured("codex", "failure_and_deny.jsonl", "PreToolUse")
    post = captured("codex", "failure_and_deny.jsonl", "PostToolUse")
    assert hook.handle(pre) == {} and hook.handle(post) == {}
    (record,) = guard.history(pre["session_id"])
    assert record.call_id == "call_1" and record.result_hash  # paired by Codex's call id


def test_codex_apply_patch_results_differing_only_in_wall_time_are_identical() -> None:
    """apply_patch's response (captured from Codex 0.171.0) carries its wall time, which the
    machine's load changes: the same patch's results must still be the same outcome."""
    guard = LoopGuard()
    hook = CodexHook(guard)
    hashes = []
    for n, wall in enumerate(("0", "0.1", "0.02"), 1):
        pre, post = codex_call(n)
        patch = "*** Begin Patch\n*** Update File: notes.txt\n@@\n-x\n+x\n*** End Patch\n"
        for payload in (pre, post):
            payload.update(tool_name="apply_patch", tool_input={"command": patch})
        post["tool_response"] = (f"Exit code: 0\nWall time: {wall} seconds\nOutput:\n"
                                 "Success. Updated the following files:\nM notes.txt\n")
        hook.handle(pre)
        hook.handle(post)
        hashes.append(guard.history(pre["session_id"])[-1].result_hash)
    assert hashes[0] and len(set(hashes)) == 1


def test_codex_mcp_loop_behind_the_proxy_is_denied_despite_the_proxys_notes() -> None:
    """An MCP tool behind ``loopwarden mcp-proxy`` (payloads captured from Codex 0.171.0): from
    the 11th call on the proxy adds its warning note to the result the hook sees. The note is
    loopwarden's, not the tool's: the outcomes stay identical and the hook denies call 21."""
    lines = [json.loads(line) for line in
             (FIXTURES / "codex" / "mcp_through_proxy.jsonl").read_text().splitlines()]
    pre, plain, noted = lines[0], lines[1], lines[3]
    assert pre["tool_name"] == "mcp__jobs__check_job"
    assert [item["text"] for item in noted["tool_response"]["content"]][1:] == [warning_note(10)]
    hook = CodexHook(LoopGuard())
    denied = []
    for n in range(1, 23):
        post = copy.deepcopy(plain)
        if n > 10:  # the proxy's note, as in the capture, its count rising with the calls
            post["tool_response"]["content"].append({"type": "text", "text": warning_note(n - 1)})
        answer = hook.handle({**pre, "tool_use_id": f"call_{n}"})
        if answer.get("hookSpecificOutput", {}).get("permissionDecision") == "deny":
            denied.append(n)
        else:
            hook.handle({**post, "tool_use_id": f"call_{n}"})
    assert denied == [21, 22]


def test_gemini_mcp_loop_behind_the_proxy_is_denied_before_the_proxy_blocks() -> None:
    """An MCP tool behind ``loopwarden mcp-proxy`` (payloads captured from Gemini CLI 0.61.0):
    the proxy's warning note rides in the warned call's ``llmContent`` as a part of its own,
    wrapped in ``<untrusted_context>``. It is loopwarden's, not the tool's: the hook counts
    through it and denies call 21, before the proxy would block it."""
    lines = [json.loads(line) for line in
             (FIXTURES / "gemini_cli" / "mcp_through_proxy.jsonl").read_text().splitlines()]
    before, plain, noted = lines[0], lines[1], lines[2]
    assert before["tool_name"] == "mcp_echo_check_job"
    assert warning_note(10) in noted["tool_response"]["llmContent"][1]["text"]
    assert outcome_of(noted["tool_response"]) == outcome_of(plain["tool_response"])
    hook = GeminiCliHook(LoopGuard())
    answers = []
    for n in range(1, 23):
        answer = hook.handle(before)
        answers.append(answer)
        if answer.get("decision") != "deny":
            hook.handle(noted if n == 10 else plain)  # the note on the 10th, as captured
    assert [n for n, a in enumerate(answers, 1) if a.get("decision") == "deny"] == [21, 22]
    assert answers[21]["continue"] is False


def test_codex_ignores_other_events_and_reports_unreadable_payloads() -> None:
    hook = CodexHook(LoopGuard())
    assert hook.handle(captured("codex", "identical.jsonl", "SessionStart")) == {}
    bad = captured("codex", "identical.jsonl", "PreToolUse")
    del bad["session_id"]
    with pytest.raises(ValueError, match="session_id"):
        hook.handle(bad)


# -- Gemini CLI ---------------------------------------------------------------------------


def gemini_call(pgid: int, *, command: str | None = None, exit_code: int | None = None
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    before = copy.deepcopy(captured("gemini_cli", "identical.jsonl", "BeforeTool"))
    after = copy.deepcopy(captured("gemini_cli", "identical.jsonl", "AfterTool"))
    if command is not None:
        before["tool_input"] = after["tool_input"] = {"command": command}
    text = f"Output: {command or 'hi'}\n"
    if exit_code is not None:
        text += f"Exit Code: {exit_code}\n"
    after["tool_response"] = {
        "llmContent": f"<untrusted_context>\n{text}Process Group PGID: {pgid}\n"
                      "</untrusted_context>", "returnDisplay": "hi"}
    return before, after


def test_gemini_pgid_is_masked_and_exit_codes_read_as_failures() -> None:
    _, first = gemini_call(100)
    _, second = gemini_call(200)
    assert outcome_of(first["tool_response"]) == outcome_of(second["tool_response"])
    _, failed = gemini_call(300, exit_code=2)
    result, error = outcome_of(failed["tool_response"])
    assert result is MISSING and "Exit Code: 2" in error
    _, fine = gemini_call(300, exit_code=0)
    assert outcome_of(fine["tool_response"])[1] is MISSING
    assert outcome_of({"llmContent": "x", "error": "File not found"}) == (MISSING,
                                                                         "File not found")


def test_gemini_identical_loop_warned_after_the_call_denied_then_run_ended() -> None:
    guard = LoopGuard()
    hook = GeminiCliHook(guard)
    befores, afters = [], []
    for n in range(1, 23):
        before, after = gemini_call(1000 + n)  # a new PGID every call, as Gemini gives
        answer = hook.handle(before)
        befores.append(answer)
        afters.append(hook.handle(after) if answer.get("decision") != "deny" else {})
    noted = [i for i, a in enumerate(afters, 1) if a]
    assert noted[0] == 10  # the only place Gemini takes a hook's context: after the call
    assert afters[9]["hookSpecificOutput"]["hookEventName"] == "AfterTool"
    assert "Tool-loop warning" in afters[9]["hookSpecificOutput"]["additionalContext"]
    denied = [i for i, a in enumerate(befores, 1) if a.get("decision") == "deny"]
    assert denied == [21, 22]
    assert "continue" not in befores[20]  # the first critical leaves one recovery turn
    assert befores[21]["continue"] is False and befores[21]["stopReason"] == STOP_MESSAGE
    assert "permissionDecision" not in json.dumps(befores)  # Gemini ignores Claude's form
    # No call ids: every outcome found its call (nothing left pending).
    assert not any(r.pending for r in guard.history(befores and "857d9570-95e7-4091-9492-"
                                                                  "198a7b1115bc"))


def test_gemini_continue_exit_behaviour_only_denies() -> None:
    hook = GeminiCliHook(LoopGuard(), exit_behavior="continue")
    answers = []
    for n in range(1, 23):
        before, after = gemini_call(n)
        answers.append(hook.handle(before))
        if answers[-1].get("decision") != "deny":
            hook.handle(after)
    assert answers[21]["decision"] == "deny" and "continue" not in answers[21]


def test_gemini_changing_output_of_one_command_is_never_denied() -> None:
    hook = GeminiCliHook(LoopGuard())
    for n in range(1, 41):
        before, after = gemini_call(n, command="wc -l < log")
        after["tool_response"]["llmContent"] = f"Output: {n}\nProcess Group PGID: {n}"
        # (Warned, from 10 on — the same arguments again and again — but never denied.)
        assert hook.handle(before).get("decision") is None
        assert "continue" not in hook.handle(after)


# -- the hook commands: one store for all three hosts ---------------------------------------


def hook(command: str, payload: dict[str, Any], db: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "loopwarden", command, "--db", str(db)],
                          input=json.dumps(payload), capture_output=True, text=True,
                          timeout=120, check=True,
                          env={**os.environ, "LOOPWARDEN_HOOK_SERVER": "0"})
    return json.loads(proc.stdout) if proc.stdout.strip() else {}


@pytest.mark.integration
def test_claude_codex_and_gemini_hooks_share_one_history_per_session(tmp_path: Path) -> None:
    db = tmp_path / "loopwarden.db"
    session = "shared-session"
    claude = {"session_id": session, "prompt_id": "p1", "hook_event_name": "PreToolUse",
              "tool_name": "Bash", "tool_input": {"command": "echo claude"},
              "tool_use_id": "toolu_1"}
    codex, _ = codex_call(1, command="echo codex")
    codex["session_id"] = session
    gemini, _ = gemini_call(1, command="echo gemini")
    gemini["session_id"] = session
    assert hook("claude-hook", claude, db) == {}
    assert hook("codex-hook", codex, db) == {}
    assert hook("gemini-hook", gemini, db) == {}
    store = SQLiteStore(db)
    try:
        tools = [r.tool_name for r in LoopGuard(store=store).history(session)]
    finally:
        store.close()
    assert tools == ["Bash", "Bash", "run_shell_command"]


# -- the installers ------------------------------------------------------------------------


def install(host: str, *args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    # A --project install writes the bare `loopwarden`, found on PATH: this install's scripts.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "HOME": str(home), "LOOPWARDEN_HOOK_SERVER": "0", "PATH": path}
    env.pop("CODEX_HOME", None)
    return subprocess.run([sys.executable, "-m", "loopwarden", "install", host, *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd, env=env,
                          check=False)


@pytest.mark.integration
@pytest.mark.parametrize(("host", "relative", "events", "subcommand"), [
    ("codex", ".codex/hooks.json", ["PreToolUse", "PostToolUse"], "codex-hook"),
    ("gemini-cli", ".gemini/settings.json", ["BeforeTool", "AfterTool", "PreCompress"],
     "gemini-hook"),
])
def test_install_dry_run_install_again_and_uninstall(
    tmp_path: Path, host: str, relative: str, events: list[str], subcommand: str,
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    path = home / relative
    path.parent.mkdir(parents=True)
    foreign = {"hooks": {events[0]: [{"matcher": "x", "hooks": [
        {"type": "command", "command": "audit.sh"}]}]}}
    path.write_text(json.dumps(foreign))
    dry = install(host, "--dry-run", home=home, cwd=project)
    assert dry.returncode == 0 and f"{subcommand}" in dry.stdout and "+++" in dry.stdout
    assert json.loads(path.read_text()) == foreign  # nothing written
    done = install(host, "--user", home=home, cwd=project)
    assert done.returncode == 0, done.stderr
    assert list(path.parent.glob(path.name + ".*.bak"))  # the old file kept
    settings = json.loads(path.read_text())
    assert sorted(settings["hooks"]) == sorted(events)
    assert settings["hooks"][events[0]][0]["hooks"][0]["command"] == "audit.sh"
    ours = settings["hooks"][events[0]][1]["hooks"][0]["command"]
    assert ours.split()[-1] == subcommand
    if host == "gemini-cli":
        assert settings["hooksConfig"] == {"enabled": True}
    else:
        assert "/hooks" in done.stdout  # the trust step, said where the user sees it
    assert "nothing to change" in install(host, home=home, cwd=project).stdout
    removed = install(host, "--uninstall", home=home, cwd=project)
    assert removed.returncode == 0
    left = json.loads(path.read_text())
    assert left["hooks"] == foreign["hooks"]
    project_install = install(host, "--project", home=home, cwd=project)
    assert project_install.returncode == 0 and (project / relative).is_file()
    assert install(host, "--user", "--project", home=home, cwd=project).returncode == 2
