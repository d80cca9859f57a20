"""CLI conventions of ``scan`` and ``runs``: readable at 80 columns and when piped, paths named
relative to the scanned root, ``--only-findings``, ``--sort``, clean files counted, ``-`` for
stdin, ``--jobs`` with output identical to one process."""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

from loopwarden import LoopDetectionConfig, LoopGuard
from loopwarden.cli import app
from loopwarden.guard.stores.sqlite import SQLiteStore
from loopwarden.offline.report.table import (
    CLEAN_LIST_LIMIT,
    Row,
    ShownNames,
    middle_ellipsis,
    one_line,
    print_scan_table,
    wrap_names,
)
from loopwarden.offline.scan import scan_file, scanning

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "transcripts"
FIXTURES = REPO / "tests" / "offline" / "transcripts" / "fixtures"
ENABLED = LoopDetectionConfig(enabled=True)
TIMEOUT = 120  # generous: only a hang gets near it


def cli(*args: str | Path, columns: int = 80,
        stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """``loopwarden ARGS`` in this process, stdout captured (not a terminal) at ``columns``."""
    result = CliRunner().invoke(app, [str(arg) for arg in args], input=stdin,
                                env={"COLUMNS": str(columns), "NO_COLOR": None})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def cli_process(*args: str | Path, columns: int = 80, stdin: bytes | None = None,
                cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """``loopwarden ARGS`` in a child process: a real pipe for stdout and stdin."""
    env = {**os.environ, "COLUMNS": str(columns)}
    env.pop("NO_COLOR", None)
    if env.get("PYTHONPATH"):  # a child in another folder must still import this checkout
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p)
                                            for p in env["PYTHONPATH"].split(os.pathsep))
    try:
        done = subprocess.run([sys.executable, "-m", "loopwarden.cli", *map(str, args)],
                              capture_output=True, input=stdin, timeout=TIMEOUT, env=env,
                              cwd=cwd, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"loopwarden {' '.join(map(str, args))} hung")
    return subprocess.CompletedProcess(done.args, done.returncode,
                                       done.stdout.decode("utf-8", "backslashreplace"),
                                       done.stderr.decode("utf-8", "backslashreplace"))


def scan_json(*args: str | Path, stdin: bytes | None = None, code: int = 0) -> dict[str, Any]:
    done = cli("scan", "--json", *args, stdin=stdin)
    assert done.returncode == code, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def loop_lines(n: int, tool: str = "poll") -> str:
    """loopwarden JSONL: ``n`` identical calls (a warning at 10, a block at 20)."""
    line = json.dumps({"tool": tool, "args": {"id": 1}, "result": "same", "run_id": "r1"})
    return "\n".join([line] * n) + "\n"


def clean_lines(n: int) -> str:
    """``n`` calls that all differ: no loop."""
    return "".join(json.dumps({"tool": "read", "args": {"path": f"f{i}"}, "result": f"r{i}",
                               "run_id": "r1"}) + "\n" for i in range(n))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def assert_fits(out: str, width: int) -> None:
    too_wide = [line for line in out.splitlines() if cell_len(line) > width]
    assert not too_wide, f"lines wider than {width}: {too_wide}"


def shown_as(token: str, name: str) -> bool:
    """``token`` is ``name``, or ``name`` with its middle replaced by one ellipsis."""
    if token == name:
        return True
    head, sep, tail = token.partition("…")
    return bool(sep) and name.startswith(head) and name.endswith(tail) and len(token) < len(name)


def table_body(out: str) -> list[str]:
    """The table's row lines: from under the header rule to the caption or count line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("─")) + 1
    end = next(i for i, line in enumerate(lines) if i >= start and (
        line.startswith(("first warn/block:", "… and ")) or re.match(r"\d+ transcripts", line)))
    return lines[start:end]


def assert_one_line_per_name(out: str, names: list[str]) -> None:
    """Each name is the start of exactly one line, and no line of the table starts with a piece
    of a name that was wrapped (rows start at column 0, detector lines are indented)."""
    body = [line.split()[0] for line in table_body(out) if not line.startswith(" ")]
    for name in names:
        matches = [token for token in body if shown_as(token, name)]
        assert len(matches) == 1, (name, body)
    assert len(body) == len(names), body


@pytest.fixture
def deep_tree(tmp_path: Path) -> Path:
    """A folder with long nested names, loops of three lengths and one long clean file."""
    root = tmp_path / "corpus-root"
    long = "a-rather-long-folder-name-for-session-transcripts"
    write(root / long / "another-level-of-nesting" / "poll-loop-with-a-long-name.jsonl",
          loop_lines(30))
    write(root / long / "short-loop.jsonl", loop_lines(12))
    write(root / "medium-loop.jsonl", loop_lines(21, tool="ping_the_status_endpoint"))
    write(root / "clean-but-long.jsonl", clean_lines(60))
    return root


def walked(data: dict[str, Any], root: Path) -> list[str]:
    return [os.path.relpath(entry["path"], root) for entry in data["files"]]


# -- helpers: one line, middle ellipsis ----------------------------------------------------------


def test_middle_ellipsis_keeps_the_file_name_and_cuts_the_folders() -> None:
    assert middle_ellipsis("a/very/long/folder/file.jsonl", 21) == "a/very/lo…/file.jsonl"
    assert middle_ellipsis("short.jsonl", 21) == "short.jsonl"
    cut = middle_ellipsis("poll-loop-with-a-very-long-name.openclaw.jsonl", 20)
    assert cell_len(cut) == 20 and cut.startswith("poll-loop") and cut.endswith("jsonl")
    wide = middle_ellipsis("日本語のフォルダ/日本語のファイル名.jsonl", 20)  # two cells a character
    assert cell_len(wide) <= 20 and wide.endswith(".jsonl") and "…" in wide


def test_one_line_escapes_newlines_and_undecodable_bytes() -> None:
    assert one_line("evil\nname.jsonl") == "evil\\nname.jsonl"
    assert one_line("bell\x07\t.jsonl") == "bell\\x07\\t.jsonl"
    assert one_line("bad-\udcff.jsonl") == "bad-\\xff.jsonl"


def test_detector_names_wrap_between_names_then_after_underscores() -> None:
    assert wrap_names("generic_repeat ping_pong", 30) == "generic_repeat ping_pong"
    assert wrap_names("generic_repeat ping_pong", 15) == "generic_repeat\nping_pong"
    assert wrap_names("known_poll_no_progress", 15) == "known_poll_no_\nprogress"
    assert all(len(line) <= 4 for line in wrap_names("abcdefghij", 4).split("\n"))


def test_shown_names_are_relative_to_each_argument(tmp_path: Path) -> None:
    single = ShownNames([str(tmp_path / "corpus")])
    assert single.name(str(tmp_path / "corpus" / "a" / "x.jsonl"), 0) == "a/x.jsonl"
    several = ShownNames([str(tmp_path / "corpus"), "relative/dir", str(tmp_path / "f.jsonl"),
                          "-"])
    assert several.name(str(tmp_path / "corpus" / "a" / "x.jsonl"), 0) == "corpus/a/x.jsonl"
    assert several.name("relative/dir/y.jsonl", 1) == "dir/y.jsonl"
    assert several.name(str(tmp_path / "f.jsonl"), 2) == "f.jsonl"
    assert several.name("-", 3) == "<stdin>"
    same = ShownNames([str(tmp_path / "one" / "corpus"), "two/corpus", str(tmp_path / "x")])
    assert same.name(str(tmp_path / "one" / "corpus" / "x.jsonl"), 0) == "one/corpus/x.jsonl"
    assert same.name("two/corpus/x.jsonl", 1) == "two/corpus/x.jsonl"
    assert same.name(str(tmp_path / "x" / "y.jsonl"), 2) == "x/y.jsonl"


# -- 80 columns, piped ---------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("columns", [80, 100, 160])
def test_piped_table_fits_the_width_and_never_wraps_a_path(deep_tree: Path,
                                                           columns: int) -> None:
    done = cli_process("scan", deep_tree, columns=columns)
    assert done.returncode == 0, done.stderr
    assert_fits(done.stdout, columns)
    names = walked(scan_json(deep_tree), deep_tree)
    assert_one_line_per_name(done.stdout, names)
    header = next(line for line in done.stdout.splitlines() if "format" in line)
    assert "format" in header.split()  # the format column is kept at every width
    assert "openclaw" in done.stdout or "loopwarden" in done.stdout


def test_a_very_narrow_console_still_gets_one_line_per_transcript(deep_tree: Path) -> None:
    done = cli("scan", deep_tree, columns=50)
    assert done.returncode == 0, done.stderr
    assert_fits(done.stdout, 50)
    rows = [line for line in table_body(done.stdout) if not line.startswith(" ")]
    # Names that would read alike keep their distinct part (not always the extension).
    assert len(rows) == 4 and len({row.split()[0] for row in rows}) == 4, rows


def test_rich_console_of_80_columns_gets_the_same_one_line_rows(deep_tree: Path) -> None:
    scans = [scan_file(path, ENABLED) for path in sorted(deep_tree.rglob("*.jsonl"))]
    names = ShownNames([str(deep_tree)])
    rows = [Row(names.name(scan.path, 0), scan) for scan in scans]
    out = io.StringIO()
    print_scan_table(Console(file=out, width=80, color_system=None), str(deep_tree), rows)
    assert_fits(out.getvalue(), 80)
    assert_one_line_per_name(out.getvalue(), [row.name for row in rows])


def test_the_examples_and_fixtures_fit_80_columns_with_their_format() -> None:
    done = cli("scan", "--all", EXAMPLES, FIXTURES)
    assert done.returncode == 0, done.stderr
    assert_fits(done.stdout, 80)
    # The detectors go under the name, a long one broken after an underscore.
    assert "known_poll_no_" in done.stdout
    rows = [line for line in table_body(done.stdout) if not line.startswith(" ")]
    poll = next(row for row in rows
                if shown_as(row.split()[0], "transcripts/poll-loop.openclaw.jsonl"))
    # Call numbers from 1; the run stop (the terminal stop's call) has its column.
    assert poll.split()[1:] == ["openclaw", "26", "5", "#13", "#23", "#24", "14", "546"]
    formats = {row.split()[1] for row in rows}
    assert {"claude-code-md", "openai-chat", "swe-agent", "openhands"} <= formats


def test_a_file_name_with_a_newline_stays_on_one_line(tmp_path: Path) -> None:
    write(tmp_path / "evil\nname.jsonl", loop_lines(12))
    done = cli("scan", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "evil\\nname.jsonl" in done.stdout


# -- absolute arguments: no ../ -----------------------------------------------------------------


@pytest.mark.integration
def test_an_absolute_argument_shows_paths_relative_to_it(deep_tree: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    done = cli_process("scan", deep_tree, columns=200, cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert "../" not in done.stdout
    assert "medium-loop.jsonl" in done.stdout.split()
    rows = [line.split()[0] for line in done.stdout.splitlines() if ".jsonl" in line]
    assert all(not row.startswith("/") for row in rows), rows
    # the JSON keeps the path as the file was reached: absolute, as before
    data = scan_json(deep_tree)
    assert all(entry["path"].startswith(str(deep_tree)) for entry in data["files"])


def test_several_absolute_roots_are_prefixed_by_their_names(deep_tree: Path) -> None:
    done = cli("scan", "--all", deep_tree, EXAMPLES, columns=200)
    assert done.returncode == 0, done.stderr
    assert "../" not in done.stdout
    words = done.stdout.split()
    assert "corpus-root/medium-loop.jsonl" in words
    assert "transcripts/poll-loop.openclaw.jsonl" in words


# -- --only-findings, --sort, clean files ------------------------------------------------------


def test_only_findings_lists_only_transcripts_with_findings(deep_tree: Path) -> None:
    data = scan_json("--only-findings", deep_tree)
    assert sorted(Path(entry["path"]).name for entry in data["files"]) == [
        "medium-loop.jsonl", "poll-loop-with-a-long-name.jsonl", "short-loop.jsonl"]
    assert data["totals"]["files"] == 4  # the totals still count every scanned file
    table = cli("scan", "--only-findings", deep_tree, columns=200)
    assert "clean-but-long" not in table.stdout and "medium-loop.jsonl" in table.stdout


def test_sort_orders_by_waste_calls_or_name(deep_tree: Path) -> None:
    by_name = [Path(e["path"]).name for e in scan_json(deep_tree)["files"]]
    assert by_name == [Path(e["path"]).name for e in scan_json("--sort", "name", deep_tree)["files"]]
    waste = scan_json("--sort", "waste", deep_tree)["files"]
    assert [Path(e["path"]).name for e in waste] == [
        "poll-loop-with-a-long-name.jsonl", "medium-loop.jsonl", "short-loop.jsonl",
        "clean-but-long.jsonl"]
    assert [e["loop_calls"] for e in waste] == sorted((e["loop_calls"] for e in waste),
                                                     reverse=True)
    calls = scan_json("--sort", "calls", deep_tree)["files"]
    assert [e["calls"] for e in calls] == [60, 30, 21, 12]
    table = cli("scan", "--sort", "waste", deep_tree, columns=200).stdout
    order = [line.split()[0] for line in table.splitlines() if ".jsonl" in line]
    assert [Path(name).name for name in order] == [Path(e["path"]).name for e in waste]
    assert cli("scan", "--sort", "size", deep_tree).returncode == 2


def test_many_clean_files_are_one_count_line_unless_all(tmp_path: Path) -> None:
    clean = CLEAN_LIST_LIMIT + 5
    for i in range(clean):
        write(tmp_path / f"clean-{i:02}.jsonl", clean_lines(3))
    write(tmp_path / "loop.jsonl", loop_lines(25))
    done = cli("scan", tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"… and {clean} clean files (no findings); --all to list them" in done.stdout
    assert "clean-00.jsonl" not in done.stdout and "loop.jsonl" in done.stdout
    everything = cli("scan", "--all", tmp_path)
    assert all(f"clean-{i:02}.jsonl" in everything.stdout for i in range(clean))
    assert "clean files (no findings)" not in everything.stdout
    assert len(scan_json(tmp_path)["files"]) == clean + 1  # JSON always lists every file


def test_up_to_the_limit_clean_files_are_listed(tmp_path: Path) -> None:
    for i in range(CLEAN_LIST_LIMIT):
        write(tmp_path / f"clean-{i:02}.jsonl", clean_lines(3))
    done = cli("scan", tmp_path)
    assert all(f"clean-{i:02}.jsonl" in done.stdout for i in range(CLEAN_LIST_LIMIT))
    assert "clean files (no findings)" not in done.stdout


# -- stdin ---------------------------------------------------------------------------------------


@pytest.mark.integration
def test_dash_reads_one_transcript_from_stdin_with_its_format_detected() -> None:
    poll = EXAMPLES / "poll-loop.openclaw.jsonl"
    from_file = scan_json(poll)["files"][0]
    from_stdin = scan_json("-", stdin=poll.read_bytes())["files"]
    assert len(from_stdin) == 1 and from_stdin[0]["path"] == "-"
    assert {**from_stdin[0], "path": str(poll)} == from_file
    assert from_stdin[0]["format"] == "openclaw"
    table = cli_process("scan", "-", stdin=poll.read_bytes())  # a real pipe
    # Call numbers from 1: the poll loop is blocked at its 23rd call.
    assert table.returncode == 0 and "<stdin>" in table.stdout and "#23" in table.stdout
    failing = cli("scan", "-", "--fail-on", "block", stdin=poll.read_bytes())
    assert failing.returncode == 1


def test_stdin_honours_format_and_mixes_with_paths() -> None:
    unknown = EXAMPLES / "unknown-tool.openai.json"
    forced = scan_json("-", "--format", "openai-chat", stdin=unknown.read_bytes())["files"][0]
    assert forced["format"] == "openai-chat" and forced["findings"]
    # Read as the format it was told, it does not parse: an input error, never "0 calls".
    as_openclaw = scan_json("-", "--format", "openclaw", stdin=unknown.read_bytes(), code=2)
    assert as_openclaw["files"] == []
    (reason,) = as_openclaw["skip_reasons"]
    assert reason["path"] == "-" and reason["error"] is True
    assert "does not parse as --format openclaw" in reason["reason"]
    mixed = scan_json(EXAMPLES / "healthy.jsonl", "-", stdin=unknown.read_bytes())
    assert [Path(e["path"]).name for e in mixed["files"]] == ["healthy.jsonl", "-"]


def test_empty_or_unrecognised_stdin_is_an_input_error() -> None:
    empty = cli("scan", "-", stdin=b"")
    assert empty.returncode == 2 and "skipped -: empty file" in empty.stderr
    junk = cli("scan", "-", stdin=b"just some notes\n")
    assert junk.returncode == 2 and "not a recognised transcript format" in junk.stderr


# -- --jobs --------------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("extra", [["--json"], [], ["--sort", "waste", "--all"]])
def test_jobs_output_is_byte_identical_to_one_process(extra: list[str]) -> None:
    args = [*extra, EXAMPLES, FIXTURES]
    serial = cli("scan", "--jobs", "1", *args)
    assert serial.returncode == 0, serial.stderr
    for jobs in ("2", "3"):
        parallel = cli("scan", "--jobs", jobs, *args)
        assert parallel.returncode == serial.returncode
        assert parallel.stdout == serial.stdout
        assert parallel.stderr == serial.stderr
    assert cli("scan", *args).stdout == serial.stdout  # the default (cores) too


@pytest.mark.integration
def test_jobs_output_is_identical_from_the_command_line_too() -> None:
    serial = cli_process("scan", "--json", "--jobs", "1", EXAMPLES, FIXTURES)
    parallel = cli_process("scan", "--json", "--jobs", "2", EXAMPLES, FIXTURES)
    assert serial.returncode == parallel.returncode == 0, parallel.stderr
    assert parallel.stdout == serial.stdout and parallel.stderr == serial.stderr


@pytest.mark.integration
def test_scanning_with_jobs_uses_worker_processes_and_keeps_the_order() -> None:
    files = sorted(EXAMPLES.iterdir()) + sorted(FIXTURES.rglob("*.json*"))
    serial = [scan_file(path, ENABLED) for path in files]
    with scanning(files, ENABLED, jobs=2, keep_traces=True) as results:
        first = next(results)
        assert multiprocessing.active_children(), "no worker process was started"
        parallel = [first, *results]
    assert [s.to_json() for s in parallel] == [s.to_json() for s in serial]
    assert any(scan.findings for scan in serial) and not all(scan.findings for scan in serial)
    for one, other in zip(parallel, serial, strict=True):  # what the HTML report draws
        assert other.trace is not None
        if not one.findings:  # a clean transcript's trace is not sent back: nothing draws it
            assert one.trace is None
            continue
        assert one.trace is not None
        assert (one.trace.tools, one.trace.runs, one.trace.chars) == (
            other.trace.tools, other.trace.runs, other.trace.chars)
    with scanning(files, ENABLED, jobs=2, keep_traces=False) as results:
        assert all(scan.trace is None for scan in results)


@pytest.mark.integration
def test_jobs_must_be_positive() -> None:
    assert cli("scan", "--jobs", "0", EXAMPLES).returncode == 2


# -- runs at 80 columns --------------------------------------------------------------------------

SESSION = "3f2b9c1e-5a7d-4e21-9b0c-8d6f1a2e3c4b"
RUN = "toolu_01HXa9bQ7kLmN2pR4sT6vW8y"
TOOL = "mcp__github__get_pull_request_status"


@pytest.fixture
def runs_db(tmp_path: Path) -> Path:
    db = tmp_path / "a-long-folder-name-for-the-run-record" / "loopwarden.db"
    db.parent.mkdir()
    with SQLiteStore(db) as store:
        guard = LoopGuard(ENABLED, store=store)
        for session, run, agent, tool, n in [(SESSION, RUN, "claude-code", TOOL, 22),
                                             ("alpha", "run-1", "planner", "read", 12)]:
            for i in range(n):
                call = f"{session}-{i}"
                verdict = guard.before_tool_call(tool, {"p": 1}, session=session, run_id=run,
                                                 call_id=call, agent_id=agent)
                if verdict.action != "block":
                    guard.after_tool_call(tool, {"p": 1}, session=session, run_id=run,
                                          call_id=call, result="same")
    return db


@pytest.mark.integration
def test_runs_fits_80_columns_with_one_line_per_run(runs_db: Path) -> None:
    done = cli_process("runs", "--db", runs_db)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert_fits(out, 80)
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("session "))
    assert header.split() == ["session", "run", "agent", "started", "warn", "block", "abort",
                              "detectors", "stop"]
    # A long session id keeps its head and tail; a long detector name breaks after "_".
    long_row = next(line for line in lines if line.startswith(SESSION[:3]))
    assert "claude-code" in long_row and "generic_" in long_row
    cells = long_row.split()
    at = cells.index("claude-code")
    assert cells[at + 3:at + 6] == ["1", "2", "0"]  # warn, block, abort on the same line
    assert cells[-1] == "yes"  # the run was ended by the terminal stop
    assert any(line.split()[:2] == ["alpha", "run-1"] for line in lines)
    # every message is shown whole, on the lines under its event
    text = " ".join(out.split())
    assert "report the task as failed." in text and "prevent runaway loops." in text
    assert f"session {SESSION[:8]}" in out  # each run's events under a one-line title


def test_runs_shows_whole_ids_on_a_wide_console(runs_db: Path) -> None:
    done = cli("runs", "--db", runs_db, columns=200)
    assert done.returncode == 0, done.stderr
    assert SESSION in done.stdout and RUN in done.stdout and TOOL in done.stdout


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("script") is None, reason="needs script(1) for a terminal")
def test_scan_on_a_terminal_of_80_columns_fits_too(deep_tree: Path) -> None:
    command = (f"stty cols 80 rows 50; {sys.executable} -m loopwarden.cli scan {deep_tree}")
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("COLUMNS", None)
    done = subprocess.run(["script", "-qec", command, "/dev/null"], capture_output=True,
                          timeout=TIMEOUT, env=env, check=False)
    out = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", done.stdout.decode("utf-8", "replace"))
    out = out.replace("\r", "")
    assert "medium-loop.jsonl" in out, out
    assert_fits(out, 80)


def test_help_texts_show_their_defaults() -> None:
    """Rich reads [brackets] in a help text as markup and drops them: `runs --db` once showed
    'SQLiteStore file .' with its default gone."""
    result = CliRunner().invoke(app, ["runs", "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0
    assert "$LOOPWARDEN_DB or ~/.loopwarden/loopwarden.db" in result.output
