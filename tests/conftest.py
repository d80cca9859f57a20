"""Shared fixtures and the two test tiers.

A test is ``integration`` when it spawns a process, a server, a browser or a host binary, or
drives a real agent framework; every test of a folder in ``INTEGRATION_FOLDERS`` is, the others
are marked in their module. Tests marked ``redis`` or ``chromium`` need a server or a browser,
so they are integration too, as are the users of the redis fixtures. ``slow`` marks
hypothesis-heavy and deep-value stress tests. The
fast tier, ``python -m pytest -q -m "not integration and not slow"``, is everything else, and a
test in it that starts a process fails: the tier stays fast because the rule is checked.
"""

from __future__ import annotations

import _posixsubprocess
import importlib.util
import itertools
import os
import re
import subprocess
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import typer
import typer.testing

# The hooks these tests start answer in their own process: a resident server left behind by
# each would outlive its test (tests/cli/test_claude_hook_resident.py switches it on, in a
# private runtime directory, and stops what it started).
os.environ.setdefault("LOOPWARDEN_HOOK_SERVER", "0")

# A bytecode cache, whatever the environment says: pytest rewrites the asserts of every test
# module it imports (about 9 s of CPU per collecting process without a cache, and every xdist
# worker collects), and the tests start thousands of interpreters that import loopwarden (a hook
# process costs about twice the CPU when it compiles the package from source). Some sandboxes
# set PYTHONDONTWRITEBYTECODE; the caches are git-ignored.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# Typer's CliRunner builds the app's Click command again on every invoke (about 10 ms per
# command: each callback's signature and annotations are read anew), and the tests invoke the
# same apps thousands of times. The built command is kept per app object; a test that changes
# an app after invoking it builds a new app instead.
_built_commands: weakref.WeakKeyDictionary[typer.Typer, click.Command] = (
    weakref.WeakKeyDictionary())
_build_command = typer.testing._get_command


def _built_command(app: typer.Typer) -> click.Command:
    built = _built_commands.get(app)
    if built is None:
        built = _built_commands[app] = _build_command(app)
    return built


typer.testing._get_command = _built_command  # type: ignore[assignment]

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
CORPUS = REPO.parent / "shared" / "corpus"

# Folders whose every test is integration (real frameworks, MCP servers, host binaries).
INTEGRATION_FOLDERS = (TESTS / "integrations",)
# Markers and fixtures that mean a server or a browser is started or reached.
INTEGRATION_MARKERS = ("redis", "chromium")
INTEGRATION_FIXTURES = ("redis_url", "redis_prefix", "own_redis")


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is not present")
    return CORPUS


def _in_integration_folder(path: Path) -> bool:
    return any(path == folder or folder in path.parents for folder in INTEGRATION_FOLDERS)


# Under xdist each test file goes to one worker (`--dist loadfile`, pyproject.toml), in the
# order collected here. The files of integration and slow tests come first, the longest of them
# (paths under tests/, from `--durations` of the whole suite) leading, so that no long file is
# left for one worker at the end while the other idles; the unit-test files, about a second
# each, come last and even out the finish. A module keeps its tests together.
LONGEST_FIRST = (
    "integrations/hosts/test_claude_code_",  # the real Claude Code, ~30 tool calls a run
    "fingerprint/test_fingerprint_hostile_values.py",
    "integrations/hosts/",                   # the real Codex CLI and Gemini CLI
    "test_readme_snippets.py",
    "cli/test_cli_hostile_inputs.py",
    "offline/test_report_triage.py",
    "integrations/test_mcp_proxy_hostile_traffic.py",
    "fingerprint/test_fingerprint_properties.py",
    "cli/test_claude_hook_server_failures.py",
    "cli/test_install_claude_code.py",
    "offline/test_calibration.py",
    "integrations/test_stopping_power.py",
)


def _duration_rank(item: pytest.Item, long_files: set[Path]) -> tuple[bool, int]:
    path = item.path.relative_to(TESTS).as_posix() if TESTS in item.path.parents else ""
    known = next((rank for rank, prefix in enumerate(LONGEST_FIRST) if path.startswith(prefix)),
                 len(LONGEST_FIRST))
    return item.path not in long_files, known


# What every test folder imports: without them collection fails once per module, a hundred
# tracebacks that hide the one cause (an interpreter the project is not installed in).
REQUIRED_MODULES = ("loopwarden", "pydantic", "typer", "rich", "hypothesis")


def pytest_configure(config: pytest.Config) -> None:
    """Stop with one clear line when this interpreter lacks the project or its dev tools."""
    missing = [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        pytest.exit(f"{sys.executable} lacks {', '.join(missing)}: install the project and its "
                    "dev tools first: the README's test command does, or python -m pip install "
                    "-e \".[dev]\"", returncode=pytest.ExitCode.USAGE_ERROR)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of the integration folders, and those needing a server or a browser;
    put the files of integration and slow tests first, the longest leading
    (:data:`LONGEST_FIRST`)."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if (_in_integration_folder(item.path)
                or any(item.get_closest_marker(name) for name in INTEGRATION_MARKERS)
                or any(name in fixtures for name in INTEGRATION_FIXTURES)):
            item.add_marker(pytest.mark.integration)
    long_files = {item.path for item in items
                  if item.get_closest_marker("integration") or item.get_closest_marker("slow")}
    items.sort(key=lambda item: _duration_rank(item, long_files))


def _selects_integration_tests(markexpr: str) -> bool:
    """Whether ``-m markexpr`` can select a test marked ``integration``, whatever its other
    markers. Unsure (an expression pytest's parser rejects) counts as yes."""
    try:
        from _pytest.mark.expression import Expression

        expression = Expression.compile(markexpr)
    except Exception:  # pytest reports a bad expression itself
        return True
    names = sorted(set(re.findall(r"[A-Za-z_][\w-]*", markexpr))
                   - {"and", "or", "not", "integration"})
    if len(names) > 8:
        return True
    for values in itertools.product((False, True), repeat=len(names)):
        marked = frozenset({"integration", *itertools.compress(names, values)})
        if expression.evaluate(marked.__contains__):
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Skip importing an integration folder (real frameworks cost seconds to import) when the
    ``-m`` expression leaves all of its tests out."""
    markexpr = config.getoption("markexpr", "") or ""
    if markexpr and collection_path in INTEGRATION_FOLDERS and not _selects_integration_tests(
            markexpr):
        return True
    return None


# Processes started by the test that is running: subprocess and asyncio's subprocesses go
# through Popen, multiprocessing through os.fork or (spawn, forkserver) _posixsubprocess.
_spawned = [0]
_popen_init = subprocess.Popen.__init__
_fork = os.fork
_fork_exec = _posixsubprocess.fork_exec


def _counting_popen_init(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
    _spawned[0] += 1
    _popen_init(self, *args, **kwargs)


def _counting_fork() -> int:
    _spawned[0] += 1
    return _fork()


def _counting_fork_exec(*args: Any) -> int:
    _spawned[0] += 1
    return _fork_exec(*args)  # type: ignore[no-any-return]


subprocess.Popen.__init__ = _counting_popen_init  # type: ignore[method-assign]
os.fork = _counting_fork
_posixsubprocess.fork_exec = _counting_fork_exec


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test not marked integration that starts a process fails, naming the rule."""
    before = _spawned[0]
    yield
    if _spawned[0] != before and not request.node.get_closest_marker("integration"):
        pytest.fail("this test started a process: mark it @pytest.mark.integration "
                    "(tests/conftest.py)", pytrace=False)
