"""What ``loopwarden claude-hook`` does not do on an ordinary call: compile the patterns it does
not run, create the classes only ``runs`` needs. Each costs milliseconds per process, and
Claude Code starts the hook twice per tool call (bench/bench_claude_hook.py measures it; no
speed is asserted here).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwarden import LoopDetectionConfig, LoopGuard, SQLiteStore, profiles

# Run as the console script runs, reporting which module compiled which pattern and which
# modules were imported.
CHILD = """
import json, re, sys

compiled = []
_compile = re.compile


def compile(pattern, flags=0):
    frame = sys._getframe(1)
    while frame.f_globals.get("__name__") in ("re", "loopwarden.base.lazy_re"):
        frame = frame.f_back
    compiled.append([frame.f_globals.get("__name__"), str(pattern)])
    return _compile(pattern, flags)


re.compile = compile
from loopwarden.cli._entry import main

sys.argv = ["loopwarden", *sys.argv[1:]]
code = main()
sys.stdout.flush()
registry = sys.modules["loopwarden.fingerprint.profiles"].default_registry
held = sorted({p.pattern for name in registry.names()
               for p in registry.get(name).volatile_patterns})
sys.stderr.write("\\nREPORT " + json.dumps({
    "code": code, "compiled": compiled, "held": held, "modules": sorted(sys.modules)}) + "\\n")
"""


def run_hook(payload: dict[str, Any], db: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, "claude-hook", "--db", str(db)],
        input=json.dumps(payload), capture_output=True, text=True, timeout=60, check=False,
        env={k: v for k, v in os.environ.items() if k != "LOOPWARDEN_DB"},
    )
    _, _, report = proc.stderr.rpartition("\nREPORT ")
    assert report, proc.stderr
    data: dict[str, Any] = json.loads(report)
    assert data["code"] == 0, proc.stderr
    data["answer"] = proc.stdout
    return data


def bash_call(n: int, event: str = "PreToolUse") -> dict[str, Any]:
    payload: dict[str, Any] = {
        "hook_event_name": event, "session_id": "s1", "prompt_id": "p1", "tool_name": "Bash",
        "tool_input": {"command": f"ls -la /tmp/dir-{n}"}, "tool_use_id": f"t{n}"}
    if event == "PostToolUse":
        payload["tool_response"] = {"stdout": f"total {n}\n2024-05-01 12:00:00 x\n", "stderr": ""}
    return payload


#: How the shell profile's "this command writes files" patterns begin (a command that writes,
#: a redirection into a file).
SHELL_MUTATION_PATTERNS = (r"(?:^|&&|\|\||[;|(`]|\$\()\s*(?:sudo", r"(?<![0-9&>=<-])>>?")


def compiled_by(report: dict[str, Any], module: str, *, package: bool = False) -> list[str]:
    """Patterns compiled by ``module`` (with ``package``: by it or any module inside it)."""
    return [pattern for name, pattern in report["compiled"]
            if name == module or (package and name and name.startswith(module + "."))]


@pytest.mark.integration
def test_an_ordinary_call_compiles_no_masking_or_shell_pattern(tmp_path: Path) -> None:
    db = tmp_path / "hook.db"
    run_hook(bash_call(0), db)  # validates and caches the config
    for report in (run_hook(bash_call(1), db), run_hook(bash_call(1, "PostToolUse"), db)):
        # OpenClaw's default preset masks nothing in a Bash result and reads no shell command.
        assert compiled_by(report, "loopwarden.fingerprint.volatile") == []
        # What the profiles package compiles is the profiles' own patterns (Bash's background ids)
        # and the shell command's "does it change the world" patterns, which the one-tool cycle
        # extension (detectors.oneToolCycle, on by default) reads: a mutating command is never
        # part of a cycle.
        compiled = set(compiled_by(report, "loopwarden.fingerprint.profiles", package=True))
        assert all(pattern.startswith(SHELL_MUTATION_PATTERNS)
                   for pattern in compiled - set(report["held"]))
        # Fingerprinting compiles nothing at import (error texts, envelopes, surrogates); the
        # profiles, on its floor, compile only their own patterns (checked above).
        assert [pattern for name, pattern in report["compiled"]
                if name and name.startswith("loopwarden.fingerprint")
                and not name.startswith("loopwarden.fingerprint.profiles")] == []
        assert "loopwarden.guard.stores._runs" not in report["modules"]


@pytest.mark.integration
def test_the_patterns_compile_when_a_call_needs_them(tmp_path: Path) -> None:
    # The early preset masks volatile spans and reads the shell command: same answers as before,
    # the patterns now compiled on first use.
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps({"tools": {"loopDetection": {"preset": "early"}}}),
                      encoding="utf-8")
    db = tmp_path / "hook.db"
    proc_args = [sys.executable, "-c", CHILD, "claude-hook", "--db", str(db), "--config",
                 str(config)]
    for event in ("PreToolUse", "PostToolUse"):
        proc = subprocess.run(proc_args, input=json.dumps(bash_call(1, event)),
                              capture_output=True, text=True, timeout=60, check=False)
        report = json.loads(proc.stderr.rpartition("\nREPORT ")[2])
        assert report["code"] == 0, proc.stderr
    assert compiled_by(report, "loopwarden.fingerprint.volatile")  # the result was masked
    assert compiled_by(report, "loopwarden.fingerprint.profiles", package=True)  # the command was read


def test_the_volatile_patterns_are_still_public_and_compiled() -> None:
    from loopwarden.fingerprint import volatile
    from loopwarden.fingerprint.volatile import VOLATILE_PATTERNS

    assert VOLATILE_PATTERNS is volatile.VOLATILE_PATTERNS
    assert len(VOLATILE_PATTERNS) == 8
    assert VOLATILE_PATTERNS[0].search("at 2024-05-01T12:00:00Z") is not None
    with pytest.raises(AttributeError):
        _ = volatile.NO_SUCH_NAME  # type: ignore[attr-defined]


def test_run_summary_is_still_importable_from_the_sqlite_store(tmp_path: Path) -> None:
    from loopwarden.guard.stores.sqlite import RunSummary

    config = LoopDetectionConfig(enabled=True, warning_threshold=2, critical_threshold=4)
    with SQLiteStore(tmp_path / "r.db") as store:
        guard = LoopGuard(config, store=store)
        for n in range(3):
            guard.before_tool_call("poll", {"id": 1}, session="s", run_id="r", call_id=f"c{n}")
            guard.after_tool_call("poll", {"id": 1}, session="s", run_id="r", call_id=f"c{n}",
                                  result="same")
        runs = store.runs()
    assert runs and all(isinstance(run, RunSummary) for run in runs)
    assert runs[0].to_dict()["warnings"] >= 1
    with pytest.raises(AttributeError):
        from loopwarden.guard.stores import sqlite as module

        _ = module.NoSuchName  # type: ignore[attr-defined]


def test_a_registry_built_at_once_equals_one_built_profile_by_profile() -> None:
    # The constructor installs all profiles before publishing one snapshot; add() publishes
    # after each. Names, aliases (taken over by a later profile) and projections must agree.
    builtins = profiles._builtin_profiles()
    extra = [
        profiles.ToolProfile("sh", aliases=("bash", "zsh")),  # takes `bash` from exec
        profiles.ToolProfile("exec", poll=True),  # keeps exec's projection
        profiles.ToolProfile("zsh_tool", aliases=("zsh",)),
    ]
    for given in (builtins, [*builtins, *extra]):
        at_once = profiles.ProfileRegistry(given)
        one_by_one = profiles.ProfileRegistry()
        for profile in given:
            one_by_one.add(profile)
        assert at_once.names() == one_by_one.names()
        for name in (*at_once.names(), "bash", "zsh"):
            assert at_once.get(name) == one_by_one.get(name), name
    with pytest.raises(ValueError, match="already the name"):
        profiles.ProfileRegistry([profiles.ToolProfile("a"), profiles.ToolProfile("b", aliases=("a",))])


@pytest.mark.skipif(not hasattr(sqlite3.Connection, "setconfig"),
                    reason="Connection.setconfig needs Python 3.12")
def test_closing_the_store_keeps_the_write_ahead_log(tmp_path: Path) -> None:
    # No checkpoint (and its fsyncs) at every hook's exit; the state is in the WAL all the same.
    db = tmp_path / "s.db"
    with SQLiteStore(db) as store:
        LoopGuard(LoopDetectionConfig(enabled=True), store=store).before_tool_call(
            "read", {"path": "a"}, session="s")
    assert Path(f"{db}-wal").exists()
    with SQLiteStore(db) as store:
        state = store.load("s")
    assert state is not None and len(state.history) == 1
