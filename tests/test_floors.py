"""The package is folders that are floors: few entries at its root, the old module paths still
importing as the same modules at their new homes, every public name of the design importable,
and no import cycle, not even one made only for type annotations."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "loopwarden"

# Every public name and module path DESIGN.md names (``loopwarden.X`` or ``module.name``).
DESIGN_PATHS = [
    "loopwarden.ConfigError", "loopwarden.LoopDetectionConfig", "loopwarden.load_config",
    "loopwarden.LoopDetector", "loopwarden.SessionState", "loopwarden.CallRecord",
    "loopwarden.ToolCall", "loopwarden.MISSING", "loopwarden.Detection",
    "loopwarden.args_hash", "loopwarden.ToolProfile", "loopwarden.profiles",
    "loopwarden.PostCompactionGuard", "loopwarden.CompactionLoopPersistedError",
    "loopwarden.LoopGuard", "loopwarden.LoopEvent", "loopwarden.LoopBlockedError",
    "loopwarden.LoopwardenError", "loopwarden.replay", "loopwarden.transcripts",
    "loopwarden.integrations.langchain.LoopGuardMiddleware",
    "loopwarden.integrations.openai_agents", "loopwarden.integrations.claude_agent_sdk.hooks",
]

# The module paths from before the floors and their homes now.
OLD_PATHS = {
    "loopwarden.errors": "loopwarden.base.errors",
    "loopwarden.types": "loopwarden.base.types",
    "loopwarden.profiles": "loopwarden.fingerprint.profiles",
    "loopwarden.profiles.shell": "loopwarden.fingerprint.profiles.shell",
    "loopwarden.volatile": "loopwarden.fingerprint.volatile",
    "loopwarden.detectors": "loopwarden.engine.detectors",
    "loopwarden.history": "loopwarden.engine.history",
    "loopwarden.compaction": "loopwarden.engine.compaction",
    "loopwarden.events": "loopwarden.guard.events",
    "loopwarden.learning": "loopwarden.guard.learning",
    "loopwarden.stores": "loopwarden.guard.stores",
    "loopwarden.stores.sqlite": "loopwarden.guard.stores.sqlite",
    "loopwarden.findings": "loopwarden.offline.findings",
    "loopwarden.scan": "loopwarden.offline.scan",
    "loopwarden.transcripts": "loopwarden.offline.transcripts",
    "loopwarden.transcripts.openclaw": "loopwarden.offline.transcripts.openclaw",
    "loopwarden.evaluation": "loopwarden.offline.evaluation",
    "loopwarden.calibration": "loopwarden.offline.calibration",
    "loopwarden.report": "loopwarden.offline.report",
    "loopwarden.report.table": "loopwarden.offline.report.table",
}


def resolve(path: str) -> object:
    """The module ``path`` names, or the attribute its last part names on the module before."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError as exc:
        if exc.name != path:
            raise
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


# A door's path imports its real framework (seconds of CPU for LangChain and the Agents SDK):
# those run in the integration tier, with the doors' own tests.
@pytest.mark.parametrize("path", [
    pytest.param(path, marks=pytest.mark.integration) if ".integrations." in path else path
    for path in DESIGN_PATHS])
def test_every_public_path_of_the_design_imports(path: str) -> None:
    if ".integrations." in path:
        pytest.importorskip(
            {"langchain": "langchain", "openai_agents": "agents",
             "claude_agent_sdk": "claude_agent_sdk"}[path.split(".")[2]])
    assert resolve(path) is not None


@pytest.mark.parametrize(("old", "new"), OLD_PATHS.items())
def test_an_old_module_path_is_the_module_at_its_new_home(old: str, new: str) -> None:
    module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == new and module.__spec__ is not None
    assert module.__spec__.name == new  # relative imports inside it still resolve


def test_an_old_path_to_nothing_is_still_module_not_found() -> None:
    with pytest.raises(ModuleNotFoundError) as caught:
        importlib.import_module("loopwarden.transcripts.no_such_reader")
    assert caught.value.name == "loopwarden.transcripts.no_such_reader"


@pytest.mark.integration  # a child process: only it starts with nothing imported
def test_the_old_paths_cost_nothing_until_used() -> None:
    code = ("import sys, loopwarden; "
            "print(sorted(m for m in sys.modules if m.startswith('loopwarden')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    # (config.switches: the root hands it the detectors' loader, see loopwarden/__init__.py.)
    assert done.stdout.strip() == (
        "['loopwarden', 'loopwarden.config', 'loopwarden.config.switches']")


def test_the_root_holds_at_most_ten_modules_and_packages() -> None:
    # __init__.py, __main__.py and one package per floor (py.typed is a marker file, not code).
    entries = sorted(p.name for p in SRC.iterdir()
                     if p.name != "__pycache__" and (p.suffix == ".py" or p.is_dir()))
    assert len(entries) <= 10, entries
    floors = {"base", "config", "fingerprint", "engine", "guard", "offline", "integrations",
              "cli"}
    assert set(entries) == {"__init__.py", "__main__.py", *floors}


# Cycles other work removes: one thin path from door to verdict (the decorator door). Each entry must still exist (so the list
# only shrinks); any other cycle fails.
KNOWN_CYCLES: list[set[str]] = []


def import_cycles() -> list[set[str]]:
    """The groups of modules that import each other, directly or not, counting imports made
    only for type annotations (Tarjan's strongly connected components over grimp's graph)."""
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (dev extra)")
    graph = grimp.build_graph("loopwarden", exclude_type_checking_imports=False, cache_dir=None)
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & graph.modules)
             for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in edges[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(group)

    for module in modules:
        if module not in index:
            visit(module)
    return groups


def test_no_import_cycle_type_only_ones_included() -> None:
    cycles = import_cycles()
    assert [c for c in cycles if c not in KNOWN_CYCLES] == []
    assert [c for c in KNOWN_CYCLES if c not in cycles] == [], "a known cycle is gone: drop it"


# The detectors' own budget (issue #20: at most 12 names in their package) is theirs to keep.
DETECTORS_ALL_BUDGET = 12


def all_names() -> dict[str, int]:
    """How many names each module's ``__all__`` lists, by path inside the package."""
    counts = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id == "__all__"):
                assert isinstance(node.value, (ast.List, ast.Tuple)), path
                counts[str(path.relative_to(SRC))] = len(node.value.elts)
    return counts


def test_the_all_lists_hold_at_most_250_names() -> None:
    counts = all_names()
    detectors = sum(n for path, n in counts.items() if path.startswith("engine/detectors/"))
    others = sum(counts.values()) - detectors
    assert others + DETECTORS_ALL_BUDGET <= 250, (others, counts)


# A private name a test still imports, and the work that removes it.
# (both inside engine/detectors/, which the detector-is-one-module work rewrites)
KNOWN_PRIVATE_IMPORTS = {"_cycle_possible", "_pacing_in_tail"}


def is_module(name: str) -> bool:
    """Whether ``name`` is a module (a test may import a private module to test it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # its parent is a module, not a package
        return False


def test_no_test_imports_a_private_name() -> None:
    tests = Path(__file__).resolve().parent
    found = set()
    for path in tests.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("loopwarden"):
                for alias in node.names:
                    name = alias.name
                    if name.startswith("_") and not name.startswith("__") and \
                            not is_module(f"{node.module}.{name}"):
                        found.add((str(path.relative_to(tests)), name))
    assert {name for _, name in found} <= KNOWN_PRIVATE_IMPORTS, found
