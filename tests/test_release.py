"""The package as a user meets it: one version, ``--version``, ``python -m loopwarden``, a
closed stdout, one default database, and (where ``build`` is installed) the release files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import loopwarden
from loopwarden.cli import app

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "transcripts"
BROKEN_PIPE = 141
# Output is compared across processes: same width, no colour.
ENV = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}


def loopwarden_cmd(*args: str, module: str = "loopwarden", **kwargs: Any,
                   ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          timeout=120, check=False, env=ENV, **kwargs)


# -- one version -------------------------------------------------------------------------------


def test_the_version_is_written_once_in_the_package() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = pyproject.split("[project]", 1)[1].split("\n[", 1)[0]
    assert not re.search(r"^version\s*=", project, re.M)
    assert re.search(r'^dynamic = \["version"\]', project, re.M)
    hatch = pyproject.split("\n[tool.hatch.version]\n", 1)[1].split("\n[", 1)[0]
    assert 'path = "src/loopwarden/__init__.py"' in hatch
    init = (ROOT / "src" / "loopwarden" / "__init__.py").read_text(encoding="utf-8")
    assert re.findall(r'^__version__ = "(.+)"', init, re.M) == [loopwarden.__version__]


@pytest.mark.parametrize("module", ["loopwarden", "loopwarden.cli"])
def test_version_option(module: str) -> None:
    proc = loopwarden_cmd("--version", module=module)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        0, f"loopwarden {loopwarden.__version__}\n", "")


def test_version_option_in_the_app() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert (result.exit_code, result.stdout) == (0, f"loopwarden {loopwarden.__version__}\n")


# -- python -m loopwarden -----------------------------------------------------------------------


def test_python_m_loopwarden_with_arguments_is_the_command_line() -> None:
    proc = loopwarden_cmd("--help")
    assert proc.returncode == 0, proc.stderr
    assert "Usage:" in proc.stdout and "scan" in proc.stdout and "claude-hook" in proc.stdout
    assert "BLOCKED" not in proc.stdout  # not the demo

    as_module = loopwarden_cmd("scan", str(EXAMPLES))
    as_cli = loopwarden_cmd("scan", str(EXAMPLES), module="loopwarden.cli")
    assert (as_module.returncode, as_module.stdout) == (as_cli.returncode, as_cli.stdout)
    assert "ping-pong.jsonl" in as_module.stdout


# -- a closed stdout ---------------------------------------------------------------------------


def closed_stdout_run(*args: str, module: str = "loopwarden", stdin: str = "",
                      buffered: bool = False) -> subprocess.CompletedProcess[str]:
    """Run with stdout a pipe whose reader is already gone: the first write fails."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {k: v for k, v in ENV.items() if not (buffered and k == "PYTHONUNBUFFERED")}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    try:
        return subprocess.run([sys.executable, "-m", module, *args], stdout=write_end,
                              stderr=subprocess.PIPE, input=stdin, text=True, timeout=120,
                              check=False, env=env)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("buffered", [False, True])
@pytest.mark.parametrize(("module", "args"), [
    ("loopwarden", ()),  # the demo
    ("loopwarden", ("--help",)),
    ("loopwarden", ("scan", str(EXAMPLES))),
    ("loopwarden.cli", ("scan", str(EXAMPLES))),
    ("loopwarden", ("claude-hook", "--help")),
])
def test_a_closed_stdout_exits_141_without_a_traceback(
    module: str, args: tuple[str, ...], buffered: bool,
) -> None:
    proc = closed_stdout_run(*args, module=module, buffered=buffered)
    assert (proc.returncode, proc.stderr) == (BROKEN_PIPE, "")


def test_a_hook_whose_stdout_is_closed_still_records_the_call_and_does_not_block(
    tmp_path: Path,
) -> None:
    config = tmp_path / "openclaw.json"
    config.write_text('{"tools": {"loopDetection": {"warningThreshold": 1, '
                      '"criticalThreshold": 2}}}', encoding="utf-8")
    db = tmp_path / "hook.db"
    payload = {"hook_event_name": "PreToolUse", "session_id": "s", "prompt_id": "p",
               "tool_name": "Bash", "tool_input": {"command": "ls"}}
    args = ("claude-hook", "--db", str(db), "--config", str(config))
    for n in (1, 2):
        call = {**payload, "tool_use_id": f"t{n}"}
        assert loopwarden_cmd(*args, input=json.dumps(call)).returncode == 0
        post = {**call, "hook_event_name": "PostToolUse", "tool_response": "same"}
        assert loopwarden_cmd(*args, input=json.dumps(post)).returncode == 0
    # The third call is denied: its answer meets a closed stdout. 141 is not 2 ("block").
    proc = closed_stdout_run(*args, stdin=json.dumps({**payload, "tool_use_id": "t3"}))
    assert (proc.returncode, proc.stderr) == (BROKEN_PIPE, "")
    listed = loopwarden_cmd("runs", "--db", str(db), "--json")
    runs = json.loads(listed.stdout)["runs"]
    assert [(r["session"], r["blocks"]) for r in runs] == [("s", 1)]


# -- one default database ----------------------------------------------------------------------


def test_runs_lists_what_claude_hook_recorded_by_default(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "LOOPWARDEN_DB": ""}
    config = tmp_path / "openclaw.json"
    config.write_text('{"tools": {"loopDetection": {"warningThreshold": 2, '
                      '"criticalThreshold": 3}}}', encoding="utf-8")
    runner = CliRunner()
    for n in range(1, 4):
        call = {"hook_event_name": "PreToolUse", "session_id": "claude-session",
                "prompt_id": "prompt-1", "tool_name": "Bash", "tool_input": {"command": "ls"},
                "tool_use_id": f"t{n}"}
        result = runner.invoke(app, ["claude-hook", "--config", str(config)],
                               input=json.dumps(call), env=env)
        assert result.exit_code == 0, result.output
        post = {**call, "hook_event_name": "PostToolUse", "tool_response": "same"}
        runner.invoke(app, ["claude-hook", "--config", str(config)], input=json.dumps(post),
                      env=env)
    listed = runner.invoke(app, ["runs", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    report = json.loads(listed.stdout)
    assert report["db"] == str(tmp_path / ".loopwarden" / "loopwarden.db")
    assert [(r["session"], r["run"], r["warnings"]) for r in report["runs"]] == [
        ("claude-session", "prompt-1", 1)]


# -- the release files -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("build")
    pytest.importorskip("hatchling")
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out),
                           str(ROOT)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_the_sdist_holds_the_sources_tests_and_docs_and_nothing_else(dist: Path) -> None:
    (sdist,) = dist.glob("loopwarden-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = [name.split("/", 1)[1] for name in tar.getnames() if "/" in name]
    for needed in ("pyproject.toml", "README.md", "CHANGELOG.md", "LICENSE",
                   "src/loopwarden/__init__.py", "src/loopwarden/py.typed", "tests/conftest.py",
                   "examples/transcripts/ping-pong.jsonl", "bench/bench_claude_hook.py",
                   "docs/index.md", "mkdocs.yml"):
        assert needed in names, needed
    bad = [n for n in names if re.search(r"(^|/)(\.venv|\.ci|\.git|__pycache__|\.\w+_cache)/|"
                                         r"\.pyc$", n)]
    assert bad == []


def test_the_wheel_has_the_metadata_and_entry_point(dist: Path) -> None:
    (wheel,) = dist.glob("loopwarden-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        info = f"loopwarden-{loopwarden.__version__}.dist-info"
        metadata = zf.read(f"{info}/METADATA").decode()
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
        assert "loopwarden/cli/_entry.py" in zf.namelist()
    assert f"\nVersion: {loopwarden.__version__}\n" in metadata
    assert "\nLicense-Expression: MIT\n" in metadata
    for classifier in ("Development Status :: 3 - Alpha",
                       "License :: OSI Approved :: MIT License",
                       *(f"Programming Language :: Python :: 3.{v}" for v in (10, 11, 12, 13))):
        assert f"\nClassifier: {classifier}\n" in metadata
    assert "loopwarden = loopwarden.cli._entry:main" in entry_points
