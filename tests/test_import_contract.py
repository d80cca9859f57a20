"""The import contract (``[tool.importlinter]`` in pyproject.toml, DESIGN.md §1) holds, and
breaks when a forbidden import is added.

The contract is checked by import-linter, as ``lint-imports`` in .ci/run does. Each bad edge
below (one per kind of rule) is planted in a copy of the package (the tree under test is never
touched) and the contract it breaks must say so, naming the planted module; the untouched tree
keeps every contract.

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

pytestmark = pytest.mark.integration

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


# One planted edge per kind of rule: (module the import is planted in, the line, the contract
# it breaks). Together in one copy, checked by one run: each contract must name its edge.
BAD_EDGES = [
    # an upward import between the floors
    ("loopwarden.engine", "import loopwarden.guard", "layers"),
    # independent siblings of a layer (doors of one kind) importing each other
    ("loopwarden.integrations.langchain", "from . import openai_agents", "integrations"),
    # a forbidden internal module: a door reaching past the guard into the engine
    ("loopwarden.integrations.otel", "from ..engine import LoopDetector", "doors-through-guard"),
    # a forbidden external package: the core importing an optional extra
    ("loopwarden.guard", "import redis", "core-extras"),
]


def contract_name(contract: str) -> str:
    match = re.search(r'^name = "(.*)"', contract_blocks()[contract], re.M)
    assert match, contract
    return match.group(1)


def test_each_kind_of_forbidden_import_breaks_its_contract(tree: Path) -> None:
    holders = [plant(tree, module, line) for module, line, _ in BAD_EDGES]
    code, output = lint_imports(tree / "src", tree / "pyproject.toml")
    assert code == 1, output
    broken = {contract for _, _, contract in BAD_EDGES}
    assert f"{len(broken)} broken" in output, output
    for contract in broken:
        assert f"{contract_name(contract)} BROKEN" in output, (contract, output)
    for holder in holders:
        assert holder in output, (holder, output)


def test_a_new_module_at_the_root_must_be_placed_in_a_layer(tree: Path) -> None:
    # e.g. a command module written as loopwarden/cli_install.py instead of loopwarden/cli/
    (tree / "src" / "loopwarden" / "cli_install.py").write_text('"""A new command."""\n')
    code, output = lint_imports(tree / "src", tree / "pyproject.toml", "layers")
    assert code == 1, output
    assert "loopwarden.cli_install" in output and "not listed as layers" in output, output


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
