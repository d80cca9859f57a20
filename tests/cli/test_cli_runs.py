"""``loopwarden runs``: lists the runs of a SQLiteStore file and their loop events."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from loopwarden import LoopGuard
from loopwarden.cli.runs import default_db_path, register
from loopwarden.guard.stores.sqlite import SQLiteStore
from store_scenarios import ENABLED

runner = CliRunner()


def make_app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Stand-in for the ``loopwarden`` app (keeps ``runs`` a subcommand)."""

    register(app)
    return app


def loop(guard: LoopGuard, session: str, run: str | None, agent: str, calls: int) -> None:
    for i in range(calls):
        verdict = guard.before_tool_call("read", {"path": "a"}, session=session, run_id=run,
                                         call_id=f"{session}-{run}-{i}", agent_id=agent)
        if verdict.action != "block":
            guard.after_tool_call("read", {"path": "a"}, session=session, run_id=run,
                                  call_id=f"{session}-{run}-{i}", result="same")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    with SQLiteStore(path) as store:
        guard = LoopGuard(ENABLED, store=store)
        loop(guard, "alpha", "run-1", "planner", 22)  # warn at 10, blocks at 20 and 21
        loop(guard, "alpha", "run-2", "planner", 12)  # warn only
        loop(guard, "beta", None, "coder", 11)
        loop(guard, "quiet", "run-3", "coder", 3)  # no loop events: not a listed run
    return path


def run_json(*args: str) -> dict[str, object]:
    result = runner.invoke(make_app(), ["runs", *args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def test_json_lists_every_run_with_its_events(db: Path) -> None:
    data = run_json("--db", str(db))
    assert data["db"] == str(db)
    runs = data["runs"]
    assert isinstance(runs, list)
    assert [(r["session"], r["run"]) for r in runs] == [
        ("alpha", "run-1"), ("alpha", "run-2"), ("beta", None)]
    first = runs[0]
    assert (first["warnings"], first["blocks"], first["aborts"]) == (1, 2, 0)
    assert first["agents"] == ["planner"]
    assert [(e["action"], e["count"], e["tool"], e["level"]) for e in first["loop_events"]] == [
        ("warn", 10, "read", "warning"), ("block", 20, "read", "critical"),
        ("block", 21, "read", "critical")]
    assert {"session", "run", "agent", "tool", "level", "action", "detector", "count",
            "message", "timestamp"} <= set(first["loop_events"][0])
    assert [e["count"] for e in runs[2]["loop_events"]] == [10]


def test_session_filter_and_limit(db: Path) -> None:
    only_beta = run_json("--db", str(db), "--session", "beta")["runs"]
    assert [(r["session"], r["run"]) for r in only_beta] == [("beta", None)]  # type: ignore[union-attr]
    newest = run_json("--db", str(db), "--limit", "1")["runs"]
    assert [r["session"] for r in newest] == ["beta"]  # type: ignore[union-attr]
    assert run_json("--db", str(db), "--session", "quiet")["runs"] == []


def test_table_output(db: Path) -> None:
    result = runner.invoke(make_app(), ["runs", "--db", str(db)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Runs in" in out
    for text in ("alpha", "run-1", "run-2", "beta", "planner", "generic_repeat",
                 "session alpha run run-1: 3 loop events", "CRITICAL"):
        assert text in out
    assert "quiet" not in out


def test_db_defaults_to_the_environment_variable(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPWARDEN_DB", str(db))
    assert default_db_path() == db
    assert len(run_json()["runs"]) == 3  # type: ignore[arg-type]


def test_default_path_is_in_the_home_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("LOOPWARDEN_DB", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_db_path() == tmp_path / ".loopwarden" / "loopwarden.db"
    result = runner.invoke(make_app(), ["runs"])
    assert result.exit_code == 2
    assert "no run record" in result.stderr
    assert not (tmp_path / ".loopwarden").exists()  # listing never creates a database


def test_empty_database(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    SQLiteStore(path).transact("s", lambda s: None)
    result = runner.invoke(make_app(), ["runs", "--db", str(path)])
    assert result.exit_code == 0
    assert "No loop events recorded" in result.stdout
    assert run_json("--db", str(path))["runs"] == []


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("just text, not SQLite " * 100)
    result = runner.invoke(make_app(), ["runs", "--db", str(path)])
    assert result.exit_code == 2
    assert "error:" in result.stderr


def test_another_applications_database_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()
    result = runner.invoke(make_app(), ["runs", "--db", str(path)])
    assert result.exit_code == 2
    assert "not a loopwarden database" in result.stderr
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert tables == {"notes"}
