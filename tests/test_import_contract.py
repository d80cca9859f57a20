"""The import contract (``[tool.importlinter]`` in pyproject.toml, DESIGN.md §1) holds, and
breaks when a forbidden import is added.

The contract is checked by import-linter, as ``lint-imports`` in .ci/run does. Each bad edge
below is planted in a copy of the package (the tree under test is never touched) and the
contract it breaks must say so, naming the planted module; the same contract holds on the
untouched copy. Edges are planted by module prefix, so the checks hold whether
``loopwarden.guard`` or ``loopwarden.fingerprint`` is a module or a package.

The last test needs no import-linter: it imports the core in a child process and checks that no
optional extra was loaded, with the list the contract forbids.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
PLANTED = "_planted_by_test"


def contract_blocks() -> dict[str, str]:
    """``id -> text`` of each ``[[tool.importlinter.contracts]]`` table (a regex, not
    tomllib: the tests run on Python 3.10 too)."""
    text = PYPROJECT.read_text(encoding="utf-8")
    blocks = text.split("[[tool.importlinter.contracts]]")[1:]
    found = {}
    for block in blocks:
        block = block.split("\n[", 1)[0]
        match = re.search(r'^id = "([\w-]+)"', block, re.M)
        assert match, block
        found[match.group(1)] = block
    return found


def string_list(block: str, key: str) -> list[str]:
    match = re.search(rf"^{key} = \[(.*?)\]", block, re.M | re.S)
    assert match, (key, block)
    return re.findall(r'"([^"]+)"', re.sub(r"#[^\n]*", "", match.group(1)))


def lint_imports(src: Path, config: Path, contract: str | None = None) -> tuple[int, str]:
    """(exit code, output) of ``lint-imports`` over the ``loopwarden`` found in ``src``."""
    argv = ["lint-imports", "--config", str(config), "--no-cache"]
    if contract:
        argv += ["--contract", contract]
    child = ("import sys\nfrom importlinter.cli import lint_imports_command\n"
             f"sys.argv = {argv!r}\nlint_imports_command()\n")
    # The tree under test first; import-linter itself is found wherever it is installed.
    path = os.pathsep.join([str(src), *sys.path])
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                          timeout=300, check=False, cwd=config.parent,
                          env={**os.environ, "PYTHONPATH": path, "COLUMNS": "200"})
    return done.returncode, done.stdout + done.stderr


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """A copy of the package and of pyproject.toml, to plant imports in."""
    pytest.importorskip("importlinter", reason="import-linter is in the dev extra (Python 3.11+)")
    shutil.copytree(ROOT / "src" / "loopwarden", tmp_path / "src" / "loopwarden",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(PYPROJECT, tmp_path / "pyproject.toml")
    return tmp_path


def plant(tree: Path, module: str, line: str) -> str:
    """Add ``line`` to ``module`` in the copy: as a new child module if it is a package, at its
    end if it is a module. Returns the name of the module that now holds the line."""
    path = tree / "src" / Path(*module.split("."))
    if path.is_dir():
        (path / f"{PLANTED}.py").write_text(f"{line}\n", encoding="utf-8")
        return f"{module}.{PLANTED}"
    file = path.with_suffix(".py")
    assert file.is_file(), file
    file.write_text(file.read_text(encoding="utf-8") + f"\n{line}  # {PLANTED}\n",
                    encoding="utf-8")
    return module


def test_the_package_keeps_its_import_contract() -> None:
    pytest.importorskip("importlinter", reason="import-linter is in the dev extra (Python 3.11+)")
    code, output = lint_imports(ROOT / "src", PYPROJECT)
    assert code == 0, output
    assert "0 broken" in output, output
    assert f"{len(contract_blocks())} kept" in output, output


# (module the import is planted in, the line, the contract it breaks)
BAD_EDGES = [
    # the three door-to-door imports issue #12 named
    ("loopwarden.integrations.mcp_proxy", "from ..offline.transcripts import content_text",
     "live-doors"),
    ("loopwarden.offline.evaluation", "from .report import table", "offline"),
    ("loopwarden.cli.calibrate", "from .scan import register", "cli-commands"),
    # a door reaching past the guard into the engine
    ("loopwarden.integrations.otel", "from ..engine import LoopDetector", "doors-through-guard"),
    # upward imports between the floors
    ("loopwarden.engine", "import loopwarden.guard", "layers"),
    ("loopwarden.fingerprint", "import loopwarden.engine", "layers"),
    ("loopwarden.config", "import loopwarden.fingerprint", "layers"),
    ("loopwarden.guard", "import loopwarden.offline.report.table", "layers"),
    ("loopwarden.offline.transcripts.openclaw", "import loopwarden.cli", "layers"),
    # doors of one kind importing each other
    ("loopwarden.offline.report", "import loopwarden.integrations.otel", "layers"),
    ("loopwarden.integrations.langchain", "from . import openai_agents", "integrations"),
    ("loopwarden.offline.transcripts.openclaw", "from . import claude_code", "transcripts"),
    # the core importing an optional extra, directly or through a module it imports
    ("loopwarden.guard", "import redis", "core-extras"),
    ("loopwarden.fingerprint", "import rich", "core-extras"),
    ("loopwarden.engine.history", "import typer", "core-extras"),
    ("loopwarden.guard.stores.memory", "import matplotlib", "core-extras"),
    ("loopwarden.config", "import langchain_core", "core-extras"),
]


@pytest.mark.parametrize(("module", "line", "contract"), BAD_EDGES,
                         ids=[f"{m}:{line}" for m, line, _ in BAD_EDGES])
def test_a_forbidden_import_breaks_the_contract(tree: Path, module: str, line: str,
                                                contract: str) -> None:
    assert contract in contract_blocks()
    code, output = lint_imports(tree / "src", tree / "pyproject.toml", contract)
    assert code == 0, output  # the untouched copy keeps it
    holder = plant(tree, module, line)
    code, output = lint_imports(tree / "src", tree / "pyproject.toml", contract)
    assert code == 1, output
    assert "BROKEN" in output and holder in output, output


def test_a_new_module_at_the_root_must_be_placed_in_a_layer(tree: Path) -> None:
    # e.g. a command module written as loopwarden/cli_install.py instead of loopwarden/cli/
    (tree / "src" / "loopwarden" / "cli_install.py").write_text('"""A new command."""\n')
    code, output = lint_imports(tree / "src", tree / "pyproject.toml", "layers")
    assert code == 1, output
    assert "loopwarden.cli_install" in output and "not listed as layers" in output, output


@pytest.mark.parametrize("name", ["guard", "fingerprint"])
def test_the_contract_reads_a_module_turned_package_alike(tree: Path, name: str) -> None:
    """``guard.py`` -> ``guard/__init__.py`` (its relative imports one level deeper) keeps
    the contract, and a forbidden import in a new submodule of it breaks it."""
    package = tree / "src" / "loopwarden" / name
    module = package.with_suffix(".py")
    if module.is_file():  # not yet a package in this tree
        package.mkdir()
        text = module.read_text(encoding="utf-8")
        text = re.sub(r"^(\s*)from \.(?=[\w ])", r"\1from ..", text, flags=re.M)
        (package / "__init__.py").write_text(text, encoding="utf-8")
        module.unlink()
    for contract in ("layers", "core-extras"):
        code, output = lint_imports(tree / "src", tree / "pyproject.toml", contract)
        assert code == 0, output
    plant(tree, f"loopwarden.{name}", "import loopwarden.cli")
    code, output = lint_imports(tree / "src", tree / "pyproject.toml", "layers")
    assert code == 1 and f"loopwarden.{name}.{PLANTED}" in output, output


CHILD = """
import json, sys
from importlib import import_module
for name in sys.argv[1:]:
    import_module(name)
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def test_importing_the_core_loads_no_optional_extra() -> None:
    block = contract_blocks()["core-extras"]
    core = string_list(block, "source_modules")
    extras = set(string_list(block, "forbidden_modules"))
    assert {"typer", "rich", "redis", "matplotlib"} <= extras
    done = subprocess.run([sys.executable, "-c", CHILD, "loopwarden", *core],
                          capture_output=True, text=True, timeout=120, check=True)
    loaded = set(json.loads(done.stdout))
    assert "pydantic" in loaded  # the core's own dependency is there: the check sees imports
    assert not loaded & extras, loaded & extras
