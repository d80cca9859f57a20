"""The scripts in ``bench/`` import as they do when run: ``python bench/NAME.py`` puts ``bench/``
first on the path, and the host benches reach into ``tests/`` for the drivers. A helper moved
between test folders broke ``claude_code_hook_cost.py`` once without any test noticing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(path.stem for path in BENCH.glob("*.py"))


@pytest.mark.integration
def test_every_bench_script_imports_from_its_own_folder() -> None:
    assert "claude_code_hook_cost" in SCRIPTS
    # One process for all, each script on the path it would start with: what one script put
    # on sys.path, or imported from bench/ and tests/, must not help the next.
    code = """import importlib, sys
start = list(sys.path)
for name in sys.argv[1:]:
    sys.path[:] = start
    for module in [m for m, v in sys.modules.items() if "/tests/" in str(getattr(v, "__file__", ""))
                   or "/bench/" in str(getattr(v, "__file__", ""))]:
        del sys.modules[module]
    importlib.import_module(name)
"""
    proc = subprocess.run([sys.executable, "-c", code, *SCRIPTS], cwd=BENCH,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
