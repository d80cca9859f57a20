"""The ``loopwarden`` app is built per command: a command given by name loads its own module
only, and the table that says which module that is matches the whole app."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer.main

from loopwarden.cli.application import COMMANDS, app_for, build_app


def _names(app: typer.Typer) -> set[str]:
    return set(typer.main.get_group(app).commands)


def test_the_command_table_names_every_command_of_the_whole_app() -> None:
    assert _names(build_app()) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_comes_from_the_module_the_table_names(command: str) -> None:
    assert command in _names(app_for([command, "--help"]))


def test_help_a_root_option_or_an_unknown_command_gets_the_whole_app() -> None:
    whole = _names(build_app())
    for args in ([], ["--help"], ["--version"], ["scna"]):
        assert _names(app_for(args)) == whole


_IMPORTS = """
import sys
from loopwarden.cli.application import main
sys.argv = ["loopwarden", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(sorted(m for m in ("loopwarden.offline", "loopwarden.config.model", "loopwarden.guard")
             if m in sys.modules), file=sys.stderr)
"""


@pytest.mark.integration
def test_install_loads_neither_the_transcript_tools_nor_the_guard() -> None:
    done = subprocess.run([sys.executable, "-c", _IMPORTS, "install", "--help"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert "install" in done.stdout and "claude-code" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr
