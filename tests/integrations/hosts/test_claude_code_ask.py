"""``exit_behavior="ask"`` in a real, interactive Claude Code session: the terminal stop shows
up in Claude Code's own permission prompt, and a scripted human answers it at the terminal.

Claude Code runs interactively in a pseudo-terminal (no ``-p``: a print-mode session has no
one to ask, and the hook ends its run instead), fully offline against the scripted model, with
``loopwarden install claude-code --user --exit-behavior ask`` in a fresh HOME. The scripted
human reads the screen: at loopwarden's prompt it presses ``1`` (Yes) the first time and ``2``
(No) the second, then types a new prompt. What the hooks recorded is read from the SQLite file
the installed hooks write; what ran, from the calls log the commands append to.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from anthropic_server import serve
from claude_code import bash, claude_binary, host_env, install_hooks, run_claude

from loopwarden import SQLiteStore

pytestmark = pytest.mark.integration

_ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-B]|\x1b[=>]")
_API_KEY = "dummy-key-for-the-scripted-model"
_TIMEOUT_SECONDS = 900
# Low thresholds, so that each budget takes a few host turns instead of twenty: what is tested
# is the ask and its answers, not where the default thresholds fall (other host tests do that).
_QUICK = {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3,
                                      "criticalThreshold": 6,
                                      "globalCircuitBreakerThreshold": 9}}}
_CRITICAL = 6


def _quick_config(tmp: Path) -> str:
    path = tmp / "quick.json"
    path.write_text(json.dumps(_QUICK))
    return str(path)


def _screen_text(data: bytes) -> str:
    """What the terminal shows, without escapes or spaces (the UI moves the cursor between
    words, so spaces are not reliable)."""
    return re.sub(r"\s", "", _ANSI.sub(b"", data).decode("utf-8", "replace"))


def _trust(home: Path, work: Path) -> None:
    """The first-run screens answered ahead: onboarding done, the folder trusted, the API key
    approved, bypass mode's warning accepted."""
    (home / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "theme": "dark", "bypassPermissionsModeAccepted": True,
        "customApiKeyResponses": {"approved": [_API_KEY[-20:]], "rejected": []},
        "projects": {str(work): {"hasTrustDialogAccepted": True,
                                 "hasCompletedProjectOnboarding": True}},
    }))


def _events(db: Path) -> list[Any]:
    if not db.exists():
        return []
    with SQLiteStore(db) as store:
        return [e for e in store.events() if e.action in ("ask", "continue", "stop")]


def _stop_hook_servers(home: Path) -> None:
    """Stop the resident hook servers of this HOME's private runtime folder, by the pid each
    lock file names."""
    for lock in (home / "run").glob("loopwarden-*/*.lock"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            os.kill(int(lock.read_text().split()[0]), signal.SIGTERM)


def _executions(work: Path) -> int:
    log = work / "calls.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.mark.parametrize("release", ["current"])
def test_user_answers_the_terminal_stop_in_claude_codes_permission_prompt(
        release: str, tmp_path: Path) -> None:
    binary = claude_binary(release)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    install_hooks(home, "--exit-behavior", "ask", "--config", _quick_config(tmp_path),
                  binary=binary)
    _trust(home, work)
    db = home / ".loopwarden" / "loopwarden.db"
    # The resident hook server, as users get it (a hook per process would take minutes here).
    env = {**host_env(home), "ANTHROPIC_API_KEY": _API_KEY, "TERM": "xterm-256color",
           "COLUMNS": "120", "LINES": "40", "LOOPWARDEN_HOOK_SERVER": "1"}
    answers = [b"1", b"2"]  # Yes, then No
    executions_at: list[int] = []
    with serve(lambda n: bash(work, "echo hi") if n <= 59 else None) as (url, model):
        env["ANTHROPIC_BASE_URL"] = url
        pid, fd = pty.fork()
        if pid == 0:  # the child: Claude Code, interactive, on the pty
            os.chdir(work)
            os.execve(str(binary), [str(binary), "--dangerously-skip-permissions",
                                    "Do the task."], env)
        try:
            _drive(fd, answers, executions_at, work, db)
        finally:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(fd)
            _stop_hook_servers(home)

    events = _events(db)
    print([(e.action, e.run, e.call_id, e.grants, e.answered_by) for e in events])
    print("executions when asked:", executions_at, "turns:", len(model.turns))
    actions = [e.action for e in events]
    assert actions[:4] == ["ask", "continue", "ask", "stop"], actions
    first, granted, second, stopped = events[:4]
    assert granted.call_id == first.call_id and granted.answered_by == "claude-code user"
    assert granted.grants == 1 and second.grants == 1
    assert stopped.call_id == second.call_id and stopped.answered_by == "claude-code user"
    # The loop was stopped within the budget; the approved call ran, with a fresh budget after
    # it (the count started over); the denied one never ran.
    assert executions_at[0] <= _CRITICAL + 1
    assert executions_at[1] - executions_at[0] >= _CRITICAL - 2


def _drive(fd: int, answers: list[bytes], executions_at: list[int], work: Path,
           db: Path) -> None:
    """The scripted human at the terminal, until both questions are answered and the next
    prompt recorded the "no"."""
    seen = b""
    deadline = time.monotonic() + _TIMEOUT_SECONDS
    prompted_again = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
        screen = _screen_text(seen[-20000:])
        if answers and "requiresconfirmation" in screen and "loopwarden" in screen \
                and "Doyouwanttoproceed?" in screen:
            time.sleep(1.0)  # let the prompt settle before the key press
            executions_at.append(_executions(work))
            os.write(fd, answers.pop(0))
            seen = b""
            time.sleep(2.0)
        elif not answers and not prompted_again and "Interrupted" in screen:
            # The "no" interrupted the turn: the user types the next prompt.
            time.sleep(1.0)
            os.write(fd, b"Try something else.")
            time.sleep(0.5)
            os.write(fd, b"\r")
            prompted_again = True
        elif prompted_again and any(e.action == "stop" for e in _events(db)):
            return
    raise AssertionError(f"the session did not get through both questions: {answers=}, "
                         f"{executions_at=}, screen tail: {_screen_text(seen[-3000:])[-800:]}")


@pytest.mark.parametrize("release", ["current", "2.1.197"])
def test_print_mode_has_no_one_to_ask_and_ends_the_run(release: str, tmp_path: Path) -> None:
    """``claude -p``: the hook is told no user is there (2.1.332:
    ``CLAUDE_CODE_SESSION_ATTENDED=0``; 2.1.197: ``CLAUDE_CODE_ENTRYPOINT=sdk-cli``) and ends
    the run as ``"end"`` does, instead of a prompt Claude Code would refuse."""
    work = tmp_path / "work"
    tmp_path.mkdir(exist_ok=True)
    record = run_claude(claude_binary(release), tmp_path, lambda n: bash(work, "echo hi"),
                        install_options=("--exit-behavior", "ask",
                                         "--config", _quick_config(tmp_path)))
    print(record)
    assert record.executions <= _CRITICAL and record.denied_at is not None and record.ended, \
        record
    assert _events(tmp_path / "home" / ".loopwarden" / "loopwarden.db") == []
