"""``loopwarden runs``: did the nudges work, judged on the store's call history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from loopwarden import LoopGuard
from loopwarden.cli.runs import register
from loopwarden.guard.stores.sqlite import SQLiteStore
from store_scenarios import ENABLED


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Keeps ``runs`` a subcommand."""

    register(app)
    return app


def _call(guard: LoopGuard, run: str, number: int, tool: str, args: dict[str, Any],
          result: str) -> None:
    call_id = f"{run}-{number}"
    verdict = guard.before_tool_call(tool, args, session="s", run_id=run, call_id=call_id)
    if verdict.action != "block":
        guard.after_tool_call(tool, args, session="s", run_id=run, call_id=call_id,
                              result=result)


def _model(guard: LoopGuard, run: str, *, heeds: bool) -> None:
    """A scripted model: reads the same file until warned (the 11th call, after 10 alike),
    then reads another file (heeds) or goes on reading the same one three more times."""
    for number in range(11):
        _call(guard, run, number, "read", {"path": "a"}, "same")
    after = ([("read", {"path": "b"})] if heeds else [("read", {"path": "a"})] * 3)
    for number, (tool, args) in enumerate(after, start=11):
        _call(guard, run, number, tool, args, "same")


def test_runs_counts_a_model_that_changes_course_as_heeded(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with SQLiteStore(path) as store:
        guard = LoopGuard(ENABLED, store=store)
        _model(guard, "heeds", heeds=True)
        _model(guard, "ignores", heeds=False)

    result = CliRunner().invoke(_app(), ["runs", "--db", str(path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    outcomes = {run["run"]: [(n["stage"], n["outcome"]) for n in run["nudges"]]
                for run in data["runs"]}
    assert outcomes["heeds"] == [("warn", "heeded")]
    assert outcomes["ignores"][0] == ("warn", "ignored")
    figures = data["nudge_efficacy"]
    assert figures["by_stage"]["warn"]["heeded"] == 1
    assert figures["by_stage"]["warn"]["ignored"] >= 1
    assert figures["by_detector"]["generic_repeat"]["nudges"] >= 2

    table = CliRunner().invoke(_app(), ["runs", "--db", str(path)], env={"COLUMNS": "100"})
    assert table.exit_code == 0, table.output
    assert "Nudge efficacy" in table.output
    assert "generic_repeat" in table.output


def test_an_ask_answered_stop_has_ended_its_run(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with SQLiteStore(path) as store:
        guard = LoopGuard(ENABLED, store=store)
        verdict = None
        for number in range(40):
            verdict = guard.before_tool_call("read", {"path": "a"}, session="s", run_id="r",
                                             call_id=f"r-{number}")
            if verdict.terminate:
                break
            if verdict.action != "block":
                guard.after_tool_call("read", {"path": "a"}, session="s", run_id="r",
                                      call_id=f"r-{number}", result="same")
        assert verdict is not None and verdict.terminate
        question = guard.ask(verdict, session="s", run_id="r")
        assert question is not None
        guard.answer(question, "stop")

    data = json.loads(CliRunner().invoke(_app(), ["runs", "--db", str(path), "--json"]).stdout)
    nudges = data["runs"][0]["nudges"]
    assert ("ask", "ended") in [(n["stage"], n["outcome"]) for n in nudges]
    assert data["nudge_efficacy"]["by_stage"]["ask"]["ended"] == 1
