"""Tables a person reads, through the console script at 80 columns: no two rows show the same
abbreviated path, ``eval`` never folds a path character by character, call numbers count from 1
(JSON keeps its 0-based ``index``), and the terminal stop is marked in the scan table, the HTML
report and ``runs``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "transcripts"
SCRIPT = "import sys; from loopwarden._entry import main; sys.exit(main())"


def loopwarden(*args: str, home: Path, columns: int = 80) -> subprocess.CompletedProcess[str]:
    """``loopwarden ARGS`` as the console script runs it, in its own HOME, output piped."""
    env = {**os.environ, "HOME": str(home), "COLUMNS": str(columns), "NO_COLOR": "1",
           "LOOPWARDEN_HOOK_SERVER": "0", "XDG_RUNTIME_DIR": str(home)}
    return subprocess.run([sys.executable, "-c", SCRIPT, *args], env=env, capture_output=True,
                          text=True, timeout=300, cwd=home)


def looping_transcript(path: Path, calls: int = 30) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"tool": "poll", "args": {"job": 7}, "result": "running"}\n' * calls)


AGENTS = ["1d88af81", "30e7d465", "07eb6c87", "aa132ed7", "eb357efd"]


def alike_files(root: Path) -> list[Path]:
    """Five deep files whose names differ only in the middle, as Claude Code exports are."""
    folder = root / "corpus" / "claude-code-md" / "goodsch+brain_explore" / "claude-prompts"
    files = [folder / f"agent-{agent}-untitled-full.jsonl" for agent in AGENTS]
    for file in files:
        looping_transcript(file)
    return files


@pytest.mark.integration
def test_no_two_rows_show_the_same_path_at_80_columns(tmp_path: Path) -> None:
    alike_files(tmp_path)
    done = loopwarden("scan", "corpus", home=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines), done.stdout
    names = [line.split()[0] for line in lines if "loopwarden" in line and "#" in line]
    assert len(names) == 5, done.stdout
    assert len(set(names)) == 5, names  # unique, each showing its own agent id
    for agent in AGENTS:  # each row shows (part of) its own agent id
        assert sum(agent[:5] in name for name in names) == 1, (agent, names)
    assert all(name.endswith(".jsonl") or "…" in name for name in names)


@pytest.mark.integration
def test_call_numbers_count_from_1_and_json_keeps_the_index(tmp_path: Path) -> None:
    table = loopwarden("scan", str(EXAMPLES / "ping-pong.jsonl"), home=tmp_path)
    data = json.loads(loopwarden("scan", "--json", str(EXAMPLES / "ping-pong.jsonl"),
                                 home=tmp_path).stdout)
    findings = data["files"][0]["findings"]
    first_warn = next(f for f in findings if f["action"] == "warn")
    first_block = next(f for f in findings if f["action"] == "block")
    assert (first_warn["index"], first_block["index"]) == (11, 21)  # 0-based, as documented
    row = next(line for line in table.stdout.splitlines() if line.startswith("ping-pong"))
    assert "#12" in row and "#22" in row and "#11 " not in row, table.stdout
    assert "call # (from 1)" in table.stdout


@pytest.mark.integration
def test_the_terminal_stop_is_marked_in_the_scan_table(tmp_path: Path) -> None:
    done = loopwarden("scan", str(EXAMPLES / "poll-loop.openclaw.jsonl"), home=tmp_path)
    header = " ".join(done.stdout.splitlines()[1:3])
    assert "run" in header and "stop" in header, done.stdout
    row = next(line for line in done.stdout.splitlines() if line.startswith("poll-loop"))
    assert row.split()[-5:-2] == ["#23", "#24", "14"] or "#24" in row, row
    assert "terminal stop" in done.stdout


@pytest.mark.integration
def test_the_terminal_stop_is_marked_in_the_html_report(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    done = loopwarden("scan", "--html", str(tmp_path / "r.html"), str(EXAMPLES), home=tmp_path)
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "r.html").read_text()
    assert "run stopped" in page
    assert "terminal stop at call #24" in page  # poll-loop: blocked at #23, stopped at #24
    assert "First block at call #23" in page and "calls 13–26" in page


@pytest.mark.integration
def test_runs_marks_the_run_that_was_stopped(tmp_path: Path) -> None:
    from loopwarden import LoopGuard, SQLiteStore

    db = tmp_path / "runs.db"
    guard = LoopGuard(store=SQLiteStore(db))
    for n in range(25):
        verdict = guard.before_tool_call("poll", {"job": 7}, session="s", run_id="r",
                                         call_id=f"c{n}")
        if verdict.terminate:
            break
        if verdict.action != "block":
            guard.after_tool_call("poll", {"job": 7}, result="running", session="s",
                                  run_id="r", call_id=f"c{n}")
    guard.store.close()
    done = loopwarden("runs", "--db", str(db), home=tmp_path)
    assert done.returncode == 0, done.stderr
    header, run = done.stdout.splitlines()[1], done.stdout.splitlines()[3]
    assert "stop" in header.split() and "yes" in run.split(), done.stdout
    actions = [line.split()[1] for line in done.stdout.splitlines()
               if re.match(r"\d\d:\d\d:\d\d ", line)]
    assert actions == ["warn", "block", "stop"], done.stdout
    data = json.loads(loopwarden("runs", "--db", str(db), "--json", home=tmp_path).stdout)
    assert [e["terminal"] for e in data["runs"][0]["loop_events"]] == [False, False, True]


@pytest.mark.integration
@pytest.mark.parametrize("by", [None, "source"])
def test_eval_never_folds_a_path(tmp_path: Path, by: str | None) -> None:
    files = alike_files(tmp_path)
    labels = [{"file": str(f.relative_to(tmp_path / "corpus")), "source": "claude-code-md",
               "loop": True, "type": "generic_repeat", "loop_start": 0, "warn_by": 9,
               "loop_end": 29} for f in files]
    (tmp_path / "labels.json").write_text(json.dumps(labels))
    args = ["eval", "labels.json", "--root", "corpus", *(["--by", by] if by else [])]
    done = loopwarden(*args, home=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines), done.stdout
    shown = [line.split()[0] for line in lines if "untitled" in line]
    assert len(shown) == 5 and len(set(shown)) == 5, done.stdout
    assert all(name.endswith("-untitled-full.jsonl") for name in shown), shown
    assert "1–30" in done.stdout and "(calls numbered from 1)" in done.stdout
    assert len(lines) < 60, done.stdout  # no path folded over many lines
