"""The CLI against hostile inputs: special files, damaged transcripts, odd text, foreign
databases, missing paths, and crashes (exit codes 0 / 1 / 2).

Everything that could hang or crash runs the real ``loopwarden`` CLI in a child process with a
timeout, so that one failure cannot take the suite down.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from loopwarden import LoopDetectionConfig, LoopGuard
from loopwarden.guard.stores.sqlite import SQLiteStore
from loopwarden.offline.scan import scan_file
from loopwarden.offline.transcripts import detect_format

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "offline" / "transcripts" / "fixtures"
EXAMPLES = REPO / "examples" / "transcripts"
TIMEOUT = 60  # generous: these commands take well under a second; only a hang reaches it
ENABLED = LoopDetectionConfig(enabled=True)

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")


def cli(*args: str | bytes | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``loopwarden ARGS`` in a child process; a hang fails the test instead of stalling."""
    command = [sys.executable, "-m", "loopwarden.cli", *(os.fspath(a) for a in args)]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT,
                              input=stdin, errors="backslashreplace",
                              env={**os.environ, "COLUMNS": "200"})
    except subprocess.TimeoutExpired:
        pytest.fail(f"loopwarden {' '.join(map(str, args))} hung (no exit in {TIMEOUT}s)")


def in_child(code: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"child process hung: {code}")


def loop_lines(n: int = 25, tool: str = "poll") -> bytes:
    """loopwarden JSONL: ``n`` identical calls, enough for a warning and a block."""
    line = json.dumps({"tool": tool, "args": {"id": 1}, "result": "same", "run_id": "r1"})
    return ("\n".join([line] * n) + "\n").encode()


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def scan_json(*args: str | bytes | Path, code: int = 0) -> dict[str, Any]:
    result = cli("scan", "--json", *args)
    assert result.returncode == code, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def names(entries: list[Any]) -> list[str]:
    return [Path(e if isinstance(e, str) else e["path"]).name for e in entries]


def signature(scan: Any) -> tuple[Any, ...]:
    return (scan.format, scan.calls,
            [(f.index, f.detector, f.action, f.count) for f in scan.findings])


# -- 5: FIFOs, devices, sockets, dangling links ----------------------------------------------


@pytest.fixture
def fifo_folder(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A folder holding a transcript and a FIFO whose open() for reading would be seen."""
    write(tmp_path / "good.jsonl", loop_lines())
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    yield tmp_path, fifo


class FifoWatch:
    """A writer blocked in open(): it returns only if someone opens the FIFO for reading."""

    def __init__(self, fifo: Path) -> None:
        self.fifo = fifo
        self.opened = threading.Event()
        self.thread = threading.Thread(target=self._wait, daemon=True)
        self.thread.start()

    def _wait(self) -> None:
        fd = os.open(self.fifo, os.O_WRONLY)
        self.opened.set()
        os.close(fd)

    def release(self) -> bool:
        """Unblock the writer; True when the FIFO had been opened by someone else before."""
        was_opened = self.opened.is_set()
        if not was_opened:
            reader = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)
            self.opened.wait(5)
            os.close(reader)
        self.thread.join(5)
        return was_opened


@needs_fifo
def test_a_fifo_in_a_folder_is_skipped_and_never_opened(fifo_folder: tuple[Path, Path]) -> None:
    folder, fifo = fifo_folder
    watch = FifoWatch(fifo)
    data = scan_json(folder)
    assert not watch.release(), "scan opened the FIFO"
    assert names(data["files"]) == ["good.jsonl"] and data["files"][0]["findings"]
    assert names(data["skipped"]) == ["pipe.jsonl"]
    reason = data["skip_reasons"][0]
    assert "named pipe" in reason["reason"] and reason["explicit"] is False
    table = cli("scan", folder)
    assert table.returncode == 0 and "pipe.jsonl" in table.stderr and "named pipe" in table.stderr


@needs_fifo
def test_a_fifo_named_on_the_command_line_is_an_error_not_a_hang(
    fifo_folder: tuple[Path, Path]
) -> None:
    folder, fifo = fifo_folder
    alone = cli("scan", fifo)
    assert alone.returncode == 2
    assert "pipe.jsonl" in alone.stderr and "named pipe" in alone.stderr
    with_good = scan_json(fifo, folder / "good.jsonl")  # the rest is still scanned
    assert names(with_good["files"]) == ["good.jsonl"]
    assert with_good["skip_reasons"][0]["explicit"] is True


@needs_fifo
def test_calibrate_and_eval_do_not_hang_on_fifos(fifo_folder: tuple[Path, Path]) -> None:
    folder, fifo = fifo_folder
    calibrated = cli("calibrate", folder, "--alpha", "0.5", "--block-alpha", "0.5")
    assert "named pipe" in calibrated.stderr
    labels = cli("eval", fifo)  # a FIFO as the labels file
    assert labels.returncode == 2 and "named pipe" in labels.stderr


@needs_fifo
def test_format_detection_and_scan_file_never_open_a_fifo(fifo_folder: tuple[Path, Path]) -> None:
    _, fifo = fifo_folder
    result = in_child(
        "import sys\n"
        "from loopwarden.offline.transcripts import detect_format\n"
        "from loopwarden.offline.scan import scan_file\n"
        f"assert detect_format({str(fifo)!r}) is None\n"
        f"scan = scan_file({str(fifo)!r}, format='openclaw')\n"
        "assert scan.format is None and scan.calls == 0, scan\n"
        "print(scan.problems[0].message)\n"
    )
    assert result.returncode == 0, result.stderr
    assert "named pipe" in result.stdout


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_devices_named_on_the_command_line_are_refused() -> None:
    result = cli("scan", "/dev/zero", "/dev/null")
    assert result.returncode == 2
    assert "/dev/zero: not a regular file: a character device" in result.stderr
    assert "/dev/null" in result.stderr


def test_a_dangling_link_and_a_socket_in_a_folder_are_skipped_with_a_reason(
    tmp_path: Path
) -> None:
    write(tmp_path / "good.jsonl", loop_lines())
    (tmp_path / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    reasons = {Path(r["path"]).name: r["reason"] for r in scan_json(tmp_path)["skip_reasons"]}
    assert reasons == {"gone.jsonl": "dangling symbolic link"}
    if hasattr(os, "mkfifo"):
        import socket

        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.bind(str(tmp_path / "s.jsonl"))
            reasons = {Path(r["path"]).name: r["reason"]
                       for r in scan_json(tmp_path)["skip_reasons"]}
            assert reasons["s.jsonl"] == "not a regular file: a socket"
        finally:
            sock.close()


# -- 10: damaged transcripts ------------------------------------------------------------------

# One clean transcript of each format (JSONL and whole-document readers, and Markdown).
CLEAN = [
    FIXTURES / "openclaw" / "session.jsonl",
    FIXTURES / "claude_code" / "session.jsonl",
    FIXTURES / "claude_code_md" / "session.md",
    FIXTURES / "loopwarden" / "calls.jsonl",
    FIXTURES / "openai_chat" / "messages.json",
    FIXTURES / "openai_chat" / "messages.jsonl",
    FIXTURES / "openhands" / "events.json",
    FIXTURES / "openhands" / "output.jsonl",
    FIXTURES / "swe_agent" / "run.traj",
    EXAMPLES / "poll-loop.openclaw.jsonl",
    EXAMPLES / "ping-pong.jsonl",
]
JSONL = [path for path in CLEAN if path.suffix == ".jsonl"]
DOCUMENTS = [path for path in CLEAN if path.suffix in (".json", ".traj")]
ZERO_TAIL = b"\x00" * 4096


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


@pytest.mark.parametrize("clean", CLEAN, ids=_id)
def test_a_zero_tail_is_a_problem_not_a_reason_to_skip_the_file(
    clean: Path, tmp_path: Path
) -> None:
    data = clean.read_bytes()
    damaged = write(tmp_path / clean.name, data.rstrip(b"\n") + b"\n" + ZERO_TAIL)
    before, after = scan_file(clean, ENABLED), scan_file(damaged, ENABLED)
    assert before.format is not None and before.calls
    assert signature(after) == signature(before)
    assert any("NUL bytes" in p.message for p in after.problems), after.problems


@pytest.mark.parametrize("clean", CLEAN, ids=_id)
def test_a_crash_mid_line_then_zeros_keeps_the_format(clean: Path, tmp_path: Path) -> None:
    data = clean.read_bytes()
    damaged = write(tmp_path / clean.name, data[: len(data) * 9 // 10] + ZERO_TAIL)
    assert detect_format(damaged) == detect_format(clean)


@pytest.mark.parametrize("clean", JSONL, ids=_id)
def test_a_line_of_invalid_utf8_is_reported_and_the_rest_is_read(
    clean: Path, tmp_path: Path
) -> None:
    damaged = write(tmp_path / clean.name, b"\xff\xfe\xfd\n" + clean.read_bytes())
    before, after = scan_file(clean, ENABLED), scan_file(damaged, ENABLED)
    assert signature(after) == signature(before)
    assert [(p.line, p.message) for p in after.problems] == [(1, "not UTF-8 text")]


@pytest.mark.parametrize("clean", DOCUMENTS, ids=_id)
def test_invalid_utf8_inside_a_document_is_replaced_and_the_document_read(
    clean: Path, tmp_path: Path
) -> None:
    data = clean.read_bytes()
    at = data.index(b'"content": "') + len(b'"content": "')
    damaged = write(tmp_path / clean.name, data[:at] + b"\xff\xfe\xfd" + data[at:])
    before, after = scan_file(clean, ENABLED), scan_file(damaged, ENABLED)
    assert (after.format, after.calls) == (before.format, before.calls)
    assert any("invalid UTF-8" in p.message for p in after.problems), after.problems


def test_a_short_transcript_with_a_zero_tail_is_scanned_by_the_cli(tmp_path: Path) -> None:
    write(tmp_path / "crashed.jsonl", loop_lines() + ZERO_TAIL)
    write(tmp_path / "bad-bytes.jsonl", b'{"tool": "x\xff\xfe\xfd"}\n' + loop_lines())
    data = scan_json(tmp_path)
    assert data["skipped"] == []
    files = {Path(e["path"]).name: e for e in data["files"]}
    assert files["crashed.jsonl"]["calls"] == 25 and files["crashed.jsonl"]["findings"]
    assert files["crashed.jsonl"]["problems"][0]["line"] == 26
    assert files["bad-bytes.jsonl"]["calls"] == 25
    assert files["bad-bytes.jsonl"]["problems"] == [{"line": 1, "message": "not UTF-8 text"}]
    table = cli("scan", tmp_path)
    assert "crashed.jsonl:26: 4096 NUL bytes" in table.stderr


def test_a_file_of_zeros_or_binary_junk_is_still_not_a_transcript(tmp_path: Path) -> None:
    zeros = write(tmp_path / "zeros.jsonl", ZERO_TAIL * 4)
    junk = write(tmp_path / "junk.jsonl", bytes(range(256)) * 64)
    assert detect_format(zeros) is None and detect_format(junk) is None


# -- 10: text that cannot be encoded ----------------------------------------------------------


def surrogate_transcript(path: Path) -> Path:
    """A loop whose tool name holds half an emoji: a JSON escape of a lone surrogate."""
    line = '{"tool": "poll\\ud83d", "args": {"id": 1}, "result": "same", "run_id": "r1"}'
    path.write_text("\n".join([line] * 25) + "\n", encoding="ascii")
    return path


def test_a_lone_surrogate_in_a_tool_name_does_not_crash_json_or_html(tmp_path: Path) -> None:
    path = surrogate_transcript(tmp_path / "half-emoji.jsonl")
    result = cli("scan", "--json", path, "--fail-on", "warn")
    assert result.returncode == 1, result.stderr  # the loop, not a crash
    entry = json.loads(result.stdout)["files"][0]
    assert entry["format"] == "loopwarden" and entry["calls"] == 25
    assert entry["findings"][0]["tool"] == "poll\ud83d"  # escaped, and exactly the same
    html = tmp_path / "report.html"
    result = cli("scan", path, "--html", html)
    assert result.returncode == 0, result.stderr
    assert "poll\\ud83d" in html.read_text(encoding="utf-8")


def test_a_tool_name_with_dollar_signs_does_not_break_the_timeline(tmp_path: Path) -> None:
    write(tmp_path / "dollars.jsonl", loop_lines(tool="a$\\frac{$b"))  # mathtext would choke
    html = tmp_path / "report.html"
    result = cli("scan", tmp_path, "--html", html)
    assert result.returncode == 0, result.stderr
    assert "a$\\frac{$b" in html.read_text(encoding="utf-8")


@pytest.mark.skipif(sys.platform == "darwin", reason="APFS refuses non-UTF-8 file names")
def test_a_file_name_that_is_not_utf8_does_not_crash_html_or_json(tmp_path: Path) -> None:
    folder = os.fsencode(tmp_path)
    name = folder + b"/loop-\xff.jsonl"
    with open(name, "wb") as fh:
        fh.write(loop_lines())
    html = tmp_path / "report.html"
    result = cli("scan", "--json", folder, "--html", html)
    assert result.returncode == 0, result.stderr
    entry = json.loads(result.stdout)["files"][0]
    assert os.fsencode(entry["path"]) == name  # the JSON names the very file
    assert "loop-\\xff.jsonl" in html.read_text(encoding="utf-8")
    table = cli("scan", folder)
    assert table.returncode == 0 and "loop-\\xff.jsonl" in table.stdout


# -- 10: exit codes ---------------------------------------------------------------------------

_CRASHING_COMMAND = (
    "import sys\n"
    "from loopwarden.cli import app, main\n"
    "@app.command('explode')\n"
    "def explode() -> None:\n"
    "    raise {error}\n"
    "sys.argv = ['loopwarden', 'explode']\n"
    "main()\n"
)


def test_an_unexpected_crash_exits_2_with_one_error_line() -> None:
    result = in_child(_CRASHING_COMMAND.format(error="RuntimeError('wires\\ncrossed')"))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: loopwarden explode failed unexpectedly: RuntimeError: wires crossed"]


def test_ctrl_c_exits_130_not_1() -> None:
    result = in_child(_CRASHING_COMMAND.format(error="KeyboardInterrupt()"))
    assert result.returncode == 130


def test_claude_hook_crashes_stay_non_blocking() -> None:
    from loopwarden.cli.application import crash_guarded

    def hook() -> None:
        raise RuntimeError("boom")

    app = typer.Typer()
    app.command("claude-hook")(crash_guarded(hook, "claude-hook"))
    app.command("scan")(crash_guarded(hook, "scan"))
    runner = CliRunner()
    assert runner.invoke(app, ["claude-hook"]).exit_code == 1  # 2 would block the tool call
    assert runner.invoke(app, ["scan"]).exit_code == 2


def test_findings_exit_1_only_with_fail_on(tmp_path: Path) -> None:
    path = write(tmp_path / "loop.jsonl", loop_lines())
    assert cli("scan", path).returncode == 0
    assert cli("scan", path, "--fail-on", "block").returncode == 1


# -- 11: missing paths and explicit non-transcripts -------------------------------------------


def test_a_missing_path_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder"
    result = cli("scan", missing)
    assert result.returncode == 2
    assert f"no such file or folder: {missing}" in result.stderr
    good = write(tmp_path / "good.jsonl", loop_lines())
    assert cli("scan", good, missing).returncode == 2  # a typo is never "no loops"
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "nowhere")
    assert cli("scan", dangling).returncode == 2


def test_calibrate_refuses_a_missing_path(tmp_path: Path) -> None:
    result = cli("calibrate", tmp_path / "gone")
    assert result.returncode == 2 and f"no such file or folder: {tmp_path / 'gone'}" in result.stderr


def test_a_named_non_transcript_is_reported_not_counted(tmp_path: Path) -> None:
    notes = write(tmp_path / "notes.txt", b"just some notes\n")
    good = write(tmp_path / "good.jsonl", loop_lines())
    data = scan_json(notes, good)  # one usable argument: scanned, exit as usual
    assert names(data["files"]) == ["good.jsonl"] and data["totals"]["files"] == 1
    assert data["skip_reasons"] == [{"path": str(notes), "explicit": True, "error": False,
                                     "reason": "not a recognised transcript format"}]
    result = cli("scan", notes, good)
    assert f"skipped {notes}: not a recognised transcript format" in result.stderr
    empty = write(tmp_path / "empty.jsonl", b"")
    alone = cli("scan", notes, empty)  # nothing usable: an input error
    assert alone.returncode == 2 and "nothing to scan" in alone.stderr


def test_an_empty_folder_is_not_an_error(tmp_path: Path) -> None:
    assert scan_json(tmp_path)["files"] == []


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True,
                    reason="root reads any folder")
def test_a_folder_that_cannot_be_listed_is_reported(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        result = cli("scan", locked)
        assert result.returncode == 2 and "cannot list folder" in result.stderr
    finally:
        locked.chmod(stat.S_IRWXU)


# -- 18: `runs` only reads ----------------------------------------------------------------------


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def foreign_db(path: Path, *, user_version: int = 0, wal: bool = False) -> Path:
    """Another program's database that happens to have tables named like loopwarden's."""
    conn = sqlite3.connect(path)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, what TEXT)")
    conn.execute("CREATE TABLE sessions (name TEXT)")
    conn.execute("INSERT INTO events (what) VALUES ('theirs')")
    conn.execute(f"PRAGMA user_version={user_version}")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize(("user_version", "wal"), [(0, False), (1, False), (0, True), (7, True)])
def test_runs_refuses_a_foreign_database_and_leaves_it_byte_for_byte(
    tmp_path: Path, user_version: int, wal: bool
) -> None:
    db = foreign_db(tmp_path / "foreign.db", user_version=user_version, wal=wal)
    before = digest(db)
    result = cli("runs", "--db", db)
    assert result.returncode == 2
    assert "not a loopwarden database" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert digest(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.db"]  # no -wal/-shm either


def test_runs_refuses_a_newer_loopwarden_schema_without_downgrading_it(tmp_path: Path) -> None:
    db = tmp_path / "newer.db"
    with SQLiteStore(db) as store:
        LoopGuard(ENABLED, store=store).before_tool_call("read", {}, session="s")
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version=2")
    conn.close()
    before = digest(db)
    result = cli("runs", "--db", db)
    assert result.returncode == 2 and "newer" in result.stderr
    assert digest(db) == before


def test_runs_reads_loopwardens_own_database_without_changing_it(tmp_path: Path) -> None:
    db = tmp_path / "own.db"
    with SQLiteStore(db) as store:
        guard = LoopGuard(ENABLED, store=store)
        for i in range(12):
            guard.before_tool_call("read", {"p": 1}, session="s", run_id="r", call_id=str(i))
            guard.after_tool_call("read", {"p": 1}, session="s", run_id="r", call_id=str(i),
                                  result="same")
    before = digest(db)
    result = cli("runs", "--db", db, "--json")
    assert result.returncode == 0, result.stderr
    assert [run["run"] for run in json.loads(result.stdout)["runs"]] == ["r"]
    assert digest(db) == before
