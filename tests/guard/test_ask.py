"""``exit_behavior="ask"`` on the guard floor: the question at the terminal stop, a human's
"continue" (a fresh loop budget, the asked call admitted) and "stop" (the run ends), the bound
on grants, the events, and a store shared by two guards seeing the same grant."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from loopwarden import LoopEvent, LoopGuard, Question, SessionState, SQLiteStore
from loopwarden.config import ConfigError
from loopwarden.guard import EndOfRun, Verdict


def _insistent(guard: LoopGuard, human: list[str], *, session: str = "s",
               run_id: str | None = "r1", calls: int = 200,
               max_grants: int = 2) -> tuple[int, list[Question]]:
    """A model that repeats one call with one result for ever, in a plain loop with a door that
    asks a scripted human at each terminal stop. Returns the executions and the questions."""
    end_of_run = EndOfRun("ask", max_grants=max_grants)
    executed = 0
    questions: list[Question] = []
    answers = iter(human)
    for n in range(calls):
        args = {"cmd": "status"}
        verdict = guard.before_tool_call("exec", args, session=session, run_id=run_id,
                                         call_id=f"c{n}")
        action = end_of_run.action(verdict.terminate)
        if action == "ask":
            question = guard.ask(verdict, session=session, run_id=run_id,
                                 max_grants=end_of_run.max_grants, channel="test prompt")
            if question is None:
                break  # grants used up: the run ends as with "end"
            questions.append(question)
            verdict = guard.answer(question, next(answers), args=args, answered_by="tester")  # type: ignore[arg-type]
            if verdict.terminate:
                break
        elif action == "end":
            break
        if verdict.action == "block":
            continue
        executed += 1
        guard.after_tool_call("exec", args, session=session, run_id=run_id, call_id=f"c{n}",
                              result="job pending")
    return executed, questions


def test_continue_gives_a_fresh_budget_and_the_next_stop_asks_again() -> None:
    events: list[LoopEvent] = []
    guard = LoopGuard(sinks=[events.append])
    executed, questions = _insistent(guard, ["continue", "continue"])
    # Each budget runs 20 calls before its terminal stop; each "continue" runs the asked call
    # and starts the count over; after the second grant the third stop ends the run.
    assert len(questions) == 2
    assert [q.grants_used for q in questions] == [0, 1]
    assert questions[0].grants_left == 1 and questions[1].grants_left == 0
    assert 55 <= executed <= 65
    first = questions[0]
    assert first.tool_name == "exec" and first.detector == "generic_repeat"
    assert "`exec`" in first.text and str(first.count) in first.text
    assert "Continue" in first.text and "stop the run" in first.text
    assert "last time" in questions[1].text
    actions = [e.action for e in events if e.action in ("ask", "continue", "stop")]
    assert actions == ["ask", "continue", "ask", "continue"]
    answers = [e for e in events if e.action == "continue"]
    assert [e.grants for e in answers] == [1, 2]
    assert {e.answered_by for e in answers} == {"tester"}
    assert [e.answered_by for e in events if e.action == "ask"] == ["test prompt"] * 2


def test_the_warning_ladder_starts_over_after_a_grant() -> None:
    events: list[LoopEvent] = []
    guard = LoopGuard(sinks=[events.append])
    _insistent(guard, ["continue", "stop"])
    ladder = [e.action for e in events if e.action != "continue"]
    first_ask = ladder.index("ask")
    # After the grant the model is warned and blocked again before the next question.
    after = ladder[first_ask + 1:]
    assert "warn" in after and "block" in after and after[-1] == "stop"


def test_stop_ends_the_run() -> None:
    events: list[LoopEvent] = []
    guard = LoopGuard(sinks=[events.append])
    executed, questions = _insistent(guard, ["stop"])
    assert len(questions) == 1 and executed <= 21
    stop = [e for e in events if e.action == "stop"]
    assert len(stop) == 1 and stop[0].terminal and stop[0].answered_by == "tester"


def test_an_always_continue_human_is_still_bounded() -> None:
    guard = LoopGuard()
    executed, questions = _insistent(guard, ["continue"] * 100, max_grants=3, calls=10_000)
    assert len(questions) == 3
    assert executed < 100


def test_no_grants_means_the_first_stop_ends_the_run() -> None:
    guard = LoopGuard()
    executed, questions = _insistent(guard, [], max_grants=0)
    assert questions == [] and executed <= 21


def test_a_grant_is_per_run() -> None:
    guard = LoopGuard()
    _, first = _insistent(guard, ["continue", "continue"], run_id="r1")
    assert [q.grants_used for q in first] == [0, 1]
    _, second = _insistent(guard, ["continue"] * 2, run_id="r2")
    assert [q.grants_used for q in second] == [0, 1]


def test_a_shared_store_sees_the_same_grant(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    one = LoopGuard(store=SQLiteStore(path))
    two = LoopGuard(store=SQLiteStore(path))
    verdict = _terminal(one)
    question = one.ask(verdict, session="s", run_id="r1")
    assert question is not None
    one.answer(question, "continue", args={"cmd": "status"})
    # The other worker, at the run's next stop, counts the grant its neighbour gave.
    again = two.ask(verdict, session="s", run_id="r1")
    assert again is not None and again.grants_used == 1
    two.answer(again, "continue")
    assert one.ask(verdict, session="s", run_id="r1") is None


def _terminal(guard: LoopGuard) -> Verdict:
    for n in range(40):
        verdict = guard.before_tool_call("exec", {"cmd": "status"}, session="s", run_id="r1",
                                         call_id=f"c{n}")
        if verdict.terminate:
            return verdict
        if verdict.action != "block":
            guard.after_tool_call("exec", {"cmd": "status"}, session="s", run_id="r1",
                                  call_id=f"c{n}", result="pending")
    raise AssertionError("no terminal stop")


def test_continue_admits_the_asked_call_and_restarts_the_counts() -> None:
    guard = LoopGuard()
    verdict = _terminal(guard)
    question = guard.ask(verdict, session="s", run_id="r1")
    assert question is not None
    allowed = guard.answer(question, "continue", args={"cmd": "status"})
    assert allowed.action == "allow" and not allowed.terminate
    history = [r for r in guard.history("s") if r.run_id == "r1"]
    assert len(history) == 1 and history[0].pending and history[0].call_id == verdict.call_id


def test_stop_answers_with_the_terminal_verdict() -> None:
    guard = LoopGuard()
    question = guard.ask(_terminal(guard), session="s", run_id="r1")
    assert question is not None
    stopped = guard.answer(question, "stop")
    assert stopped.action == "block" and stopped.terminate and stopped.message


def test_a_wrong_answer_is_a_clear_error() -> None:
    guard = LoopGuard()
    question = guard.ask(_terminal(guard), session="s", run_id="r1")
    assert question is not None
    with pytest.raises(ValueError, match="'continue', 'stop'"):
        guard.answer(question, "maybe")  # type: ignore[arg-type]


def test_ask_is_only_for_terminal_verdicts() -> None:
    guard = LoopGuard()
    assert guard.ask(Verdict("block", None, "exec"), session="s") is None


@pytest.mark.asyncio
async def test_the_async_forms_ask_and_answer_alike() -> None:
    guard = LoopGuard()
    verdict = _terminal(guard)
    question = await guard.aask(verdict, session="s", run_id="r1")
    assert question is not None
    allowed = await guard.aanswer(question, "continue", args={"cmd": "status"})
    assert allowed.action == "allow"
    question = await guard.aask(verdict, session="s", run_id="r1")
    assert question is not None and question.grants_used == 1


def test_without_a_human_ask_ends_the_run_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    end_of_run = EndOfRun("ask")
    with caplog.at_level(logging.WARNING, logger="loopwarden"):
        assert end_of_run.action(True, can_ask=False) == "end"
        assert end_of_run.action(True, can_ask=False) == "end"
    assert end_of_run.action(True) == "ask" and end_of_run.action(False) is None
    assert end_of_run.ends_runs
    lines = [r.getMessage() for r in caplog.records if "no human" in r.getMessage()]
    assert len(lines) == 1 and '"end"' in lines[0]


@pytest.mark.parametrize("value", [-1, 1.5, "2", True])
def test_a_bad_max_grants_is_a_config_error(value: Any) -> None:
    with pytest.raises(ConfigError, match="max_grants"):
        EndOfRun("ask", max_grants=value)


def test_grants_round_trip_and_old_states_are_unchanged() -> None:
    state = SessionState()
    assert "grants" not in state.to_dict()
    state.grants["r1"] = 2
    assert SessionState.from_dict(state.to_dict()).grants == {"r1": 2}
    assert state.copy().grants == {"r1": 2}
    with pytest.raises(ValueError):
        SessionState.from_dict({"grants": {"r1": "two"}})


def test_question_is_plain_data() -> None:
    guard = LoopGuard()
    question = guard.ask(_terminal(guard), session="s", run_id="r1")
    assert question is not None
    data = question.to_dict()
    import json

    assert json.loads(json.dumps(data))["tool_name"] == "exec"


def test_runs_lists_the_questions_and_answers(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from loopwarden.cli import app

    path = tmp_path / "state.sqlite"
    _insistent(LoopGuard(store=SQLiteStore(path)), ["continue", "stop"])
    done = CliRunner().invoke(app, ["runs", "--db", str(path), "--json"])
    assert done.exit_code == 0, done.output
    import json

    run = json.loads(done.output)["runs"][0]
    assert (run["asks"], run["grants"]) == (2, 1)
    actions = [e["action"] for e in run["loop_events"]]
    assert actions.count("ask") == 2 and actions[-1] == "stop"
    answers = [e for e in run["loop_events"] if e["action"] in ("continue", "stop")
               and e["answered_by"]]
    assert [(e["action"], e["answered_by"], e["grants"]) for e in answers] == [
        ("continue", "tester", 1), ("stop", "tester", 1)]
    table = CliRunner().invoke(app, ["runs", "--db", str(path)], env={"COLUMNS": "100"})
    assert " ask " in table.output and "2/1" in table.output and "yes" in table.output
