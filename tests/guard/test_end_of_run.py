"""The end-of-run policy is one class on the guard floor: the doors ask it what a terminal
verdict does instead of comparing ``exit_behavior`` themselves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import loopwarden
from loopwarden.config import ConfigError
from loopwarden.guard import EndOfRun, Verdict

DOORS = Path(loopwarden.__file__).parent / "integrations"


@pytest.mark.parametrize(("behavior", "action"),
                         [("end", "end"), ("error", "raise"), ("continue", "recover")])
def test_each_exit_behavior_is_one_action_at_the_terminal_stop(behavior: str,
                                                              action: str) -> None:
    policy = EndOfRun(behavior)
    assert policy.action(False) is None
    assert policy.action(True) == action
    assert policy.ends_runs is (action == "end")


def test_the_model_gets_the_recovery_texts_only_when_the_run_goes_on() -> None:
    terminal = Verdict("block", None, "poll", "c1", terminate=True)
    assert EndOfRun("continue").answer(terminal).terminate is False
    assert EndOfRun("end").answer(terminal) is terminal
    ordinary = Verdict("block", None, "poll", "c1")
    assert EndOfRun("continue").answer(ordinary) is ordinary


def test_a_bad_exit_behavior_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        EndOfRun("sometimes")


@pytest.mark.parametrize("door", ["langchain.py", "openai_agents.py"])
def test_the_doors_do_not_re_implement_the_end_of_run(door: str) -> None:
    source = (DOORS / door).read_text(encoding="utf-8")
    assert not re.search(r"exit_behavior\s*[!=]=", source)
    assert "EndOfRun(" in source
