"""``loopwarden claude-hook`` starts lean: Claude Code runs it twice per tool call.

The hook is run as the installed ``loopwarden`` console script runs it (the entry point named
in pyproject.toml), in a child process, and the child reports what it imported. Speed itself is
measured by bench/bench_claude_hook.py, not asserted here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwarden import LoopDetectionConfig, warning_note
from loopwarden.config import DetectorsConfig, PostCompactionGuardConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("typer", "rich", "click", "matplotlib")
# Loaded only to validate a config, which the hook does once per config (then cached).
VALIDATION = ("pydantic", "pydantic_core", "json5")


def console_script() -> tuple[str, str]:
    """(module, function) of the `loopwarden` console script."""
    # A regex, not tomllib: the tests run on Python 3.10 too.
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    scripts = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    match = re.search(r'^loopwarden = "([\w.]+):(\w+)"', scripts, re.M)
    assert match, scripts
    module, function = match.groups()
    return module, function


CHILD = """
import json, sys
from importlib import import_module
module, function, *argv = sys.argv[1:]
sys.argv = ["loopwarden", *argv]
try:
    code = getattr(import_module(module), function)()
except SystemExit as exc:
    code = exc.code
sys.stdout.flush()
roots = sorted({name.split(".")[0] for name in sys.modules})
sys.stderr.write("\\nMODULES " + json.dumps({"code": code, "roots": roots}) + "\\n")
"""


def run_hook(payload: dict[str, Any] | str, *args: str, env: dict[str, str] | None = None,
             ) -> tuple[int, Any, str, set[str]]:
    """(exit code, stdout (parsed if JSON, None if empty), stderr without the report, the
    top-level names of the modules the child imported)."""
    module, function = console_script()
    text = payload if isinstance(payload, str) else json.dumps(payload)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, module, function, "claude-hook", *args],
        input=text, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, **(env or {})},
    )
    stderr, _, report = proc.stderr.rpartition("\nMODULES ")
    assert report, proc.stderr
    data = json.loads(report)
    out = proc.stdout.strip()
    answer = json.loads(out) if out.startswith("{") else out or None
    return data["code"] or 0, answer, stderr, set(data["roots"])


def pre_tool_use(n: int, command: str = "ls") -> dict[str, Any]:
    return {"hook_event_name": "PreToolUse", "session_id": "s1", "prompt_id": "p1",
            "tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": f"t{n}"}


def post_tool_use(n: int, command: str = "ls") -> dict[str, Any]:
    return {**pre_tool_use(n, command), "hook_event_name": "PostToolUse",
            "tool_response": {"stdout": "same", "stderr": ""}}


@pytest.mark.integration
def test_the_hook_never_imports_typer_rich_click_or_matplotlib(tmp_path: Path) -> None:
    db = tmp_path / "hook.db"
    first = run_hook(pre_tool_use(1), "--db", str(db))
    second = run_hook(post_tool_use(1), "--db", str(db))
    for code, output, stderr, modules in (first, second):
        assert (code, output, stderr) == (0, None, "")
        assert not modules & set(HEAVY), modules & set(HEAVY)


@pytest.mark.integration
def test_after_the_first_call_the_config_comes_from_the_cache_without_pydantic(
    tmp_path: Path,
) -> None:
    db = tmp_path / "hook.db"
    *_, first = run_hook(pre_tool_use(1), "--db", str(db))
    assert "pydantic" in first  # validated once
    *_, later = run_hook(post_tool_use(1), "--db", str(db))
    assert not later & {*VALIDATION, "asyncio"}, later & {*VALIDATION, "asyncio"}


@pytest.mark.integration
def test_the_cached_config_guards_like_the_validated_one(tmp_path: Path) -> None:
    # OpenClaw's default thresholds, through the cache from the second call on.
    db = tmp_path / "hook.db"
    contexts = []
    for n in range(1, 12):
        code, output, stderr, _ = run_hook(pre_tool_use(n), "--db", str(db))
        assert (code, stderr) == (0, "")
        contexts.append(((output or {}).get("hookSpecificOutput") or {}).get("additionalContext"))
        run_hook(post_tool_use(n), "--db", str(db))
    assert contexts == [None] * 10 + [warning_note(10)]


def write_config(path: Path, warning: int, critical: int) -> Path:
    path.write_text(json.dumps({"tools": {"loopDetection": {
        "warningThreshold": warning, "criticalThreshold": critical}}}), encoding="utf-8")
    return path


def warned_at(db: Path, config: Path, session: str, calls: int = 8) -> int | None:
    """The first call of a fresh session that got a warning or a denial."""
    for n in range(1, calls + 1):
        payload = {**pre_tool_use(n), "session_id": session}
        _, output, _, _ = run_hook(payload, "--db", str(db), "--config", str(config))
        if output:
            return n
        run_hook({**post_tool_use(n), "session_id": session}, "--db", str(db),
                 "--config", str(config))
    return None


@pytest.mark.integration
def test_an_edited_config_applies_on_the_next_call(tmp_path: Path) -> None:
    db, config = tmp_path / "hook.db", write_config(tmp_path / "openclaw.json", 3, 5)
    assert warned_at(db, config, "a") == 4
    write_config(config, 5, 7)  # same size and, on a coarse clock, the same mtime
    assert warned_at(db, config, "b") == 6


@pytest.mark.integration
def test_a_damaged_cache_is_only_slower(tmp_path: Path) -> None:
    db, config = tmp_path / "hook.db", write_config(tmp_path / "openclaw.json", 3, 5)
    assert warned_at(db, config, "a") == 4
    cache = tmp_path / "hook.db.hook-config.json"
    for damage in ("{not json", "[]", json.dumps({
            key: {**value, "warning_threshold": True}
            for key, value in json.loads(cache.read_text()).items()})):
        cache.write_text(damage, encoding="utf-8")
        assert warned_at(db, config, f"after {damage[:8]}") == 4


@pytest.mark.integration
def test_a_bad_config_is_reported_every_time_and_never_cached(tmp_path: Path) -> None:
    db = tmp_path / "hook.db"
    config = tmp_path / "openclaw.json"
    config.write_text('{"tools": {"loopDetection": {"warningThreshold": 0}}}', encoding="utf-8")
    for _ in range(2):
        code, output, stderr, _ = run_hook(pre_tool_use(1), "--db", str(db), "--config",
                                           str(config))
        assert (code, output) == (1, None)
        assert "warningThreshold" in stderr
    missing = tmp_path / "missing.json"
    code, _, stderr, _ = run_hook(pre_tool_use(1), "--db", str(db), "--config", str(missing))
    assert code == 1 and "config file not found" in stderr


@pytest.mark.integration
def test_usage_errors_do_not_block_the_tool_call(tmp_path: Path) -> None:
    # Claude Code reads exit code 2 as "block": a typo in settings.json must not stop every call.
    code, output, stderr, _ = run_hook(pre_tool_use(1), "--db", str(tmp_path / "h.db"), "--bogus")
    assert (code, output) == (1, None)
    assert "unrecognized arguments: --bogus" in stderr
    code, _, stderr, _ = run_hook(pre_tool_use(1), "--db")
    assert code == 1 and "expected one argument" in stderr


@pytest.mark.integration
def test_help_lists_the_options() -> None:
    code, text, _, modules = run_hook("", "--help")
    assert code == 0
    for option in ("--db", "--config", "--agent", "$LOOPWARDEN_DB", "~/.loopwarden/loopwarden.db"):
        assert option in text
    assert not modules & set(HEAVY)


@pytest.mark.parametrize("argv", [
    [], ["--db", "x.db"], ["--db=x.db"], ["--db", "a", "--db", "b"], ["--db="],
    ["--config", "c.json", "--agent", "coder", "--db", "d"], ["--agent=a=b"],
    ["--agent", "-x"], ["--db"], ["--da", "x"], ["--help"], ["extra"], ["--agent", "a", "b"],
])
def test_the_quick_parser_reads_what_argparse_reads(argv: list[str]) -> None:
    from loopwarden.cli import claude_hook

    quick = claude_hook._quick_parse(argv)
    try:
        full: Any = vars(claude_hook._parser().parse_args(argv))
    except claude_hook._HookExit as exc:
        full = exc.code
    assert quick is None or quick == full  # None: argparse decides (help, errors)


# -- the snapshot has what the config has -----------------------------------------------------


def public_attributes(model: type[Any]) -> set[str]:
    """Fields and loopwarden-defined properties (pydantic's own machinery left out)."""
    names = set(model.model_fields)
    for klass in model.__mro__:
        if klass.__module__.startswith("loopwarden.config"):
            names |= {n for n, v in vars(klass).items()
                      if isinstance(v, property) and not n.startswith("_")}
    return names


def test_the_snapshot_has_every_public_attribute_of_the_config() -> None:
    from loopwarden.cli._config_snapshot import FIELDS, NESTED_FIELDS

    # per_tool is no field of a snapshot: a config with perTool entries is never snapshotted.
    assert public_attributes(LoopDetectionConfig) == set(FIELDS) | set(NESTED_FIELDS) | {
        "per_tool"}
    assert public_attributes(DetectorsConfig) == set()  # its switches: the declared ones
    assert public_attributes(PostCompactionGuardConfig) == set(
        NESTED_FIELDS["post_compaction_guard"])


@pytest.mark.parametrize("settings", [
    {}, {"enabled": True}, {"enabled": False, "preset": "early"},
    {"preset": "early", "warningThreshold": 4, "detectors": {"pingPong": False}},
    {"criticalThreshold": 40, "detectors": {"errorRepeat": True},
     "postCompactionGuard": {"windowSize": 5}},
])
def test_a_snapshot_reads_like_its_config(settings: dict[str, Any], tmp_path: Path) -> None:
    from loopwarden.cli._config_snapshot import (
        FIELDS,
        NESTED_FIELDS,
        snapshot_from_dict,
        snapshot_of,
    )

    path = tmp_path / "c.json"
    path.write_text(json.dumps({"tools": {"loopDetection": settings}}), encoding="utf-8")
    config = load_config(path)
    snapshot = snapshot_from_dict(json.loads(json.dumps(snapshot_of(config))))
    assert snapshot is not None
    for name in FIELDS:
        if name == "detectors":  # every declared switch, as given or by default
            assert vars(snapshot.detectors) == config.detectors.switches()
            continue
        assert getattr(snapshot, name) == getattr(config, name), name
    for name, nested in NESTED_FIELDS.items():
        for key in nested:
            assert getattr(getattr(snapshot, name), key) == getattr(getattr(config, name), key)


def test_a_config_with_per_tool_entries_is_used_as_validated(tmp_path: Path) -> None:
    """perTool rules are the config's methods (globs, fitted thresholds): no snapshot is taken,
    and the hook still applies them."""
    from loopwarden.cli._config_snapshot import snapshot_from_dict, snapshot_of

    path = tmp_path / "c.json"
    path.write_text(json.dumps({"tools": {"loopDetection": {
        "perTool": {"poll_*": {"exempt": True}}}}}), encoding="utf-8")
    assert snapshot_of(load_config(path)) is None
    plain = snapshot_from_dict(snapshot_of(LoopDetectionConfig()))
    assert plain is not None and plain.per_tool == {}
