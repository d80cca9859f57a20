"""``loopwarden claude-hook --exit-behavior ask``: the terminal stop goes to Claude Code's own
permission prompt, and what the user answered is read back from what Claude Code sends next.

Driven through the real ``claude-hook`` command, one invocation per hook event as Claude Code
runs it (the state survives only in the SQLite file). The payloads have the shape Claude Code
2.1.332 sends (tests/integrations/fixtures/claude); the environment is the one it gives its
hooks: ``CLAUDE_CODE_SESSION_ATTENDED=1`` in an interactive session, ``0`` under ``claude -p``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from loopwarden import SQLiteStore
from loopwarden.cli import app
from loopwarden.guard import STOP_MESSAGE

ATTENDED = {"CLAUDE_CODE_SESSION_ATTENDED": "1", "CLAUDE_CODE_ENTRYPOINT": "cli"}
PRINT_MODE = {"CLAUDE_CODE_SESSION_ATTENDED": "0", "CLAUDE_CODE_ENTRYPOINT": "sdk-cli"}


@dataclass
class Answer:
    exit_code: int
    output: dict[str, Any]
    stderr: str

    @property
    def specific(self) -> dict[str, Any]:
        return dict(self.output.get("hookSpecificOutput") or {})

    @property
    def decision(self) -> str | None:
        return self.specific.get("permissionDecision")

    @property
    def ends_run(self) -> bool:
        return self.output.get("continue") is False


class Session:
    """One Claude Code session's hooks, sent to ``claude-hook`` as Claude Code sends them."""

    def __init__(self, db: Path, env: dict[str, str], *, prompt: str = "prompt-1") -> None:
        self.db = db
        self.env = env
        self.prompt = prompt
        self.calls = 0

    def hook(self, event: str, **fields: Any) -> Answer:
        payload = {"session_id": "session-1", "prompt_id": self.prompt,
                   "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
                   "permission_mode": "default", "hook_event_name": event, **fields}
        result = CliRunner().invoke(
            app, ["claude-hook", "--db", str(self.db), "--exit-behavior", "ask"],
            input=json.dumps(payload), env=self.env)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        out = result.stdout.strip()
        return Answer(result.exit_code, json.loads(out) if out else {}, result.stderr)

    def pre(self) -> tuple[str, Answer]:
        """The model's next ``echo hi``: its PreToolUse answer."""
        self.calls += 1
        call_id = f"toolu_{self.prompt}_{self.calls:03d}"
        return call_id, self.hook("PreToolUse", tool_name="Bash", tool_use_id=call_id,
                                  tool_input={"command": "echo hi"})

    def ran(self, call_id: str) -> Answer:
        """The call ran: its PostToolUse."""
        return self.hook("PostToolUse", tool_name="Bash", tool_use_id=call_id,
                         tool_input={"command": "echo hi"},
                         tool_response={"stdout": "hi", "stderr": "", "interrupted": False})

    def settled(self, call_id: str, text: str) -> Answer:
        """The batch of the call settled (PostToolBatch), its result ``text``."""
        return self.hook("PostToolBatch", tool_calls=[{
            "tool_name": "Bash", "tool_input": {"command": "echo hi"}, "tool_use_id": call_id,
            "tool_response": text}])

    def loop_until_stop(self, limit: int = 60) -> tuple[str, Answer, int]:
        """An insistent model: ``echo hi`` until the terminal stop (asked or ended); returns
        the call, its answer and how many calls ran before it."""
        ran = 0
        for _ in range(limit):
            call_id, answer = self.pre()
            assert answer.exit_code == 0, answer.stderr
            if answer.decision == "ask" or answer.ends_run:
                return call_id, answer, ran
            if answer.decision is None:  # allowed or warned: it runs
                self.ran(call_id)
                ran += 1
            else:  # denied: Claude Code hands the reason to the model, nothing runs
                self.settled(call_id, answer.specific["permissionDecisionReason"])
        raise AssertionError("the loop was never stopped")

    def events(self, *actions: str) -> list[Any]:
        with SQLiteStore(self.db) as store:
            return [e for e in store.events("session-1") if e.action in actions]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "claude-hook.db"


def test_terminal_stop_is_asked_in_the_permission_prompt(db: Path) -> None:
    session = Session(db, ATTENDED)
    call_id, answer, ran = session.loop_until_stop()

    assert ran <= 20
    assert answer.output == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "ask",
        "permissionDecisionReason": answer.specific["permissionDecisionReason"]}}
    reason = answer.specific["permissionDecisionReason"]
    assert reason.startswith("loopwarden stopped a loop: `Bash`, the same call with identical "
                             "results, 21 times.")
    assert "Continue" in reason and "stop the run?" in reason
    [asked] = session.events("ask")
    assert (asked.call_id, asked.run, asked.message) == (call_id, "prompt-1", reason)
    assert asked.answered_by == "claude-code prompt" and asked.grants == 0


def test_approved_call_is_recorded_as_continue_and_the_count_starts_over(db: Path) -> None:
    session = Session(db, ATTENDED)
    call_id, _, _ = session.loop_until_stop()

    after = session.ran(call_id)  # the user said yes: Claude Code ran the call

    assert after.exit_code == 0 and not after.ends_run
    [granted] = session.events("continue")
    assert (granted.call_id, granted.answered_by, granted.grants) == (
        call_id, "claude-code user", 1)
    with SQLiteStore(db) as store:  # the call ran in the fresh window, its outcome recorded
        [record] = [r for r in store.load("session-1").history if r.call_id == call_id]
        assert record.result_hash is not None
    # A fresh budget: the same call runs again until the warning threshold, unwarned.
    for _ in range(8):
        next_id, answer = session.pre()
        assert answer.output == {}, answer.output
        session.ran(next_id)


def test_denied_call_is_recorded_as_stop_and_the_next_stop_asks_again(db: Path) -> None:
    session = Session(db, ATTENDED)
    call_id, first, _ = session.loop_until_stop()

    # The user said no (or `claude -p` refused the prompt): the call never ran, its batch
    # settled with the reason as its result, and the model tried again.
    session.settled(call_id, first.specific["permissionDecisionReason"])
    [stopped] = session.events("stop")
    assert (stopped.call_id, stopped.answered_by) == (call_id, "claude-code user")

    _, again = session.pre()
    assert again.decision == "ask"
    assert len(session.events("ask")) == 2


def test_denial_that_interrupted_the_turn_is_recorded_at_the_next_prompt(db: Path) -> None:
    session = Session(db, ATTENDED)
    call_id, _, _ = session.loop_until_stop()

    # "No": Claude Code interrupts the turn, no batch settles; the user's next prompt runs.
    Session(db, ATTENDED, prompt="prompt-2").pre()

    [stopped] = session.events("stop")
    assert stopped.call_id == call_id and stopped.run == "prompt-1"


def test_user_who_always_continues_is_bounded_by_the_grants(db: Path) -> None:
    session = Session(db, ATTENDED)
    for grant in (1, 2):
        call_id, answer, _ = session.loop_until_stop()
        assert answer.decision == "ask", grant
        session.ran(call_id)

    _, last, ran = session.loop_until_stop()

    assert last.ends_run and last.decision == "deny"
    assert last.output["stopReason"] == STOP_MESSAGE
    assert [e.grants for e in session.events("continue")] == [1, 2]
    assert 0 < ran <= 20


def test_run_that_goes_on_after_every_no_is_asked_at_most_max_grants_plus_one_times(
        db: Path) -> None:
    session = Session(db, ATTENDED)
    asked = 0
    for _ in range(10):
        call_id, answer, _ = session.loop_until_stop()
        if answer.ends_run:
            break
        asked += 1
        session.settled(call_id, answer.specific["permissionDecisionReason"])

    assert asked == 3  # max_grants (2) + 1
    assert answer.ends_run and answer.decision == "deny"
    assert "asked 3 times" in answer.stderr


@pytest.mark.parametrize("env", [PRINT_MODE, {"CLAUDE_CODE_ENTRYPOINT": "sdk-cli"}],
                         ids=["attended-0", "entrypoint-sdk-cli"])
def test_session_without_a_user_ends_the_run_and_says_why(db: Path,
                                                          env: dict[str, str]) -> None:
    session = Session(db, {"CLAUDE_CODE_SESSION_ATTENDED": "", **env})
    _, answer, _ = session.loop_until_stop()

    assert answer.ends_run and answer.decision == "deny"
    assert "no human can be asked here" in answer.stderr
    assert session.events("ask") == []


@pytest.mark.integration
def test_ask_payload_from_the_command_in_its_own_process(db: Path) -> None:
    """The installed command's path: ``python -m loopwarden claude-hook`` per event."""
    session = Session(db, ATTENDED)
    session.loop_until_stop()  # (up to the stop in-process: 20 processes would be slow)
    session.calls += 1
    payload = {"session_id": "session-1", "prompt_id": "prompt-1",
               "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_use_id": f"toolu_prompt-1_{session.calls:03d}",
               "tool_input": {"command": "echo hi"}}
    env = {"PATH": "/usr/bin:/bin", "LOOPWARDEN_HOOK_SERVER": "0", **ATTENDED}
    proc = subprocess.run(
        [sys.executable, "-m", "loopwarden", "claude-hook", "--db", str(db),
         "--exit-behavior", "ask"], input=json.dumps(payload), env=env,
        capture_output=True, text=True, timeout=120, check=False)

    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "ask"
    assert "Continue" in answer["permissionDecisionReason"]


def _codex_or_gemini_loop(db: Path, host: str) -> Answer:
    """An insistent model's identical shell call through ``codex-hook`` / ``gemini-hook``
    under ``--exit-behavior ask``, up to the terminal stop."""
    pre, post = ("PreToolUse", "PostToolUse") if host == "codex" else ("BeforeTool", "AfterTool")
    tool = "Bash" if host == "codex" else "run_shell_command"
    response: Any = "hi\n" if host == "codex" else {"llmContent": "hi", "returnDisplay": "hi"}
    for n in range(1, 40):
        payload = {"session_id": f"{host}-session", "turn_id": "turn-1", "tool_name": tool,
                   "tool_input": {"command": "echo hi"}, "tool_use_id": f"call-{n}"}
        result = CliRunner().invoke(
            app, ["claude-hook", "--host", host, "--db", str(db), "--exit-behavior", "ask"],
            input=json.dumps({**payload, "hook_event_name": pre}), env=ATTENDED)
        out = result.stdout.strip()
        answer = Answer(result.exit_code, json.loads(out) if out else {}, result.stderr)
        if "Critical tool-loop recovery failed" in json.dumps(answer.output):
            return answer
        if "deny" not in json.dumps(answer.output):
            CliRunner().invoke(
                app, ["claude-hook", "--host", host, "--db", str(db), "--exit-behavior", "ask"],
                input=json.dumps({**payload, "hook_event_name": post,
                                  "tool_response": response}), env=ATTENDED)
    raise AssertionError("never stopped")


def test_codex_has_no_ask_answer_the_run_is_stopped_as_with_end_and_logged(db: Path) -> None:
    # Codex 0.171.0 answers "unsupported permissionDecision:ask" and runs the call.
    answer = _codex_or_gemini_loop(db, "codex")

    assert answer.decision == "deny" and "continue" not in answer.output
    assert "no human can be asked here" in answer.stderr


def test_gemini_ask_would_hang_print_mode_the_run_ends_as_with_end_and_logged(db: Path) -> None:
    answer = _codex_or_gemini_loop(db, "gemini-cli")

    assert answer.output["decision"] == "deny" and answer.ends_run
    assert "no human can be asked here" in answer.stderr
