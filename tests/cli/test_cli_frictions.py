"""Command-line conventions a user relies on, driven through the console script as a user runs
it: ``-h`` on every command, plain flags shown as flags, an honest exit 141 under ``| head``,
``-`` for standard input in every command that reads a file, and invalid choices rejected with
the allowed values."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "transcripts"
SCRIPT = "import sys; from loopwarden._entry import main; sys.exit(main())"

COMMANDS = [[], ["scan"], ["eval"], ["calibrate"], ["runs"], ["config"], ["config", "check"],
            ["mcp-proxy"], ["claude-hook"], ["install"], ["install", "claude-code"]]


def loopwarden(*args: str, stdin: str | None = None, home: Path,
               columns: int = 80) -> subprocess.CompletedProcess[str]:
    """``loopwarden ARGS`` as the console script runs it, in its own HOME."""
    env = {**os.environ, "HOME": str(home), "COLUMNS": str(columns), "NO_COLOR": "1",
           "LOOPWARDEN_HOOK_SERVER": "0", "XDG_RUNTIME_DIR": str(home)}
    return subprocess.run([sys.executable, "-c", SCRIPT, *args], input=stdin, env=env,
                          capture_output=True, text=True, timeout=120, cwd=home)


@pytest.mark.integration
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "loopwarden")
def test_dash_h_is_help_on_every_command(command: list[str], tmp_path: Path) -> None:
    done = loopwarden(*command, "-h", home=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "usage:" in done.stdout.lower()
    assert "-h" in done.stdout and "--help" in done.stdout
    assert "<bool>" not in done.stdout  # plain flags are shown as flags


@pytest.mark.integration
def test_plain_flags_are_shown_as_flags(tmp_path: Path) -> None:
    done = loopwarden("scan", "--help", home=tmp_path, columns=120)
    flags = [line for line in done.stdout.splitlines() if "--json" in line or "--all" in line]
    assert flags and all("<bool>" not in line for line in flags), flags
    assert "<path>" in done.stdout or "PATH" in done.stdout  # options with values keep theirs


@pytest.mark.integration
def test_scan_json_into_head_exits_141(tmp_path: Path) -> None:
    # A --json document (about 400 KB) far larger than the pipe (64 KB) plus what head's one
    # read takes from it: with about 100 KB, the write could still finish before head exits.
    lines = "".join(f'{{"tool": "poll", "args": {{"n": {i % 3}}}, "result": "same"}}\n'
                    for i in range(60))
    for n in range(160):
        (tmp_path / f"t{n:03}.jsonl").write_text(lines)
    env = {**os.environ, "HOME": str(tmp_path), "NO_COLOR": "1"}
    done = subprocess.run(["bash", "-c", f'"{sys.executable}" -c "{SCRIPT}" scan --json . '
                           '| head -1; exit "${PIPESTATUS[0]}"'], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.stdout == "{\n"
    assert done.returncode == 141, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


FLAT_OK = '{"tools": {"loopDetection": {"enabled": true, "warningThreshold": 4}}}'


@pytest.mark.integration
def test_config_check_reads_stdin(tmp_path: Path) -> None:
    done = loopwarden("config", "check", "-", "--json", stdin=FLAT_OK, home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"warningThreshold": 4' in done.stdout
    bad = loopwarden("config", "check", "-", stdin=FLAT_OK.replace("4", "-4"), home=tmp_path)
    assert bad.returncode == 2
    assert "<stdin>: tools.loopDetection.warningThreshold: must be a positive integer" in bad.stderr


@pytest.mark.integration
def test_calibrate_reads_a_transcript_from_stdin(tmp_path: Path) -> None:
    transcript = (EXAMPLES / "healthy.jsonl").read_text()
    done = loopwarden("calibrate", "-", stdin=transcript, home=tmp_path)
    # One run is read (not "no such file: -"); one run is too few to bound anything.
    assert done.returncode == 2
    assert "1 good runs are too few" in " ".join(done.stderr.split()), done.stderr
    assert "no such file" not in done.stderr


@pytest.mark.integration
def test_eval_reads_labels_from_stdin(tmp_path: Path) -> None:
    labels = ('[{"file": "ping-pong.jsonl", "source": "x", "loop": true, "type": "ping_pong",'
              ' "loop_start": 0, "warn_by": 12, "loop_end": 23}]')
    done = loopwarden("eval", "-", "--root", str(EXAMPLES), "--json", stdin=labels,
                      home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"detected": true' in done.stdout or '"detected":true' in done.stdout


def test_on_block_rejects_an_unknown_value_with_the_allowed_list() -> None:
    from loopwarden import ConfigError, LoopGuard

    guard = LoopGuard()
    for build in (lambda: guard.tool(on_block="ignore"),  # type: ignore[call-overload]
                  lambda: guard.wrap(len, on_block="ignore")):  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match=r"on_block: must be one of 'raise', 'return'"):
            build()
