"""A transcript that does not parse as the forced ``--format`` is a per-file input error
(#22 item 5): named with what was expected, counted by the exit code (2, also under
``--fail-on block``), never "0 calls, exit 0"; the other files are still scanned."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "transcripts"
OPENAI = EXAMPLES / "unknown-tool.openai.json"
OPENCLAW = EXAMPLES / "poll-loop.openclaw.jsonl"

pytestmark = pytest.mark.integration


def scan(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loopwarden", "scan", *map(str, args)],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})


def test_an_openai_chat_transcript_forced_as_openclaw_is_an_error_under_fail_on_block() -> None:
    done = scan("--format", "openclaw", "--fail-on", "block", OPENAI)
    assert done.returncode == 2, done.stdout + done.stderr
    assert (f"error: {OPENAI}: does not parse as --format openclaw: no tool call read, it "
            "reads as openai-chat") in done.stderr
    assert "expected OpenClaw session JSONL" in done.stderr  # what the format would hold
    assert "1 transcript(s) did not parse as --format openclaw" in done.stderr


def test_the_other_files_are_still_scanned_and_the_error_outranks_their_findings() -> None:
    done = scan("--format", "openclaw", "--fail-on", "block", "--json", OPENCLAW, OPENAI)
    assert done.returncode == 2  # not 1: the gate cannot vouch for the file it could not read
    data = json.loads(done.stdout)
    (scanned,) = data["files"]
    assert scanned["format"] == "openclaw" and scanned["calls"] == 26
    assert [(r["path"], r["error"]) for r in data["skip_reasons"]] == [(str(OPENAI), True)]


def test_a_file_of_the_forced_format_and_a_folders_non_transcripts_still_pass(
    tmp_path: Path,
) -> None:
    (tmp_path / "poll.jsonl").write_bytes(OPENCLAW.read_bytes())
    (tmp_path / "README.md").write_text("# notes\n")  # found in a folder: passed over quietly
    done = scan("--format", "openclaw", "--fail-on", "block", tmp_path)
    assert done.returncode == 1, done.stderr  # the poll loop's block, nothing else
    assert "error:" not in done.stderr
    assert scan("--format", "openclaw", OPENCLAW).returncode == 0
