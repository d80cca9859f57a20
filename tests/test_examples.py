"""The runnable examples and the `python -m loopwarden` demo keep working (no LLM, no network)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example_runs_and_stops_the_loop(script: str) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True,
                          text=True, timeout=120, cwd=EXAMPLES.parent)
    assert done.returncode == 0, done.stderr
    assert "20 times" in done.stdout  # every example's tool runs 20 times, then is blocked


def test_demo_warns_then_blocks() -> None:
    done = subprocess.run([sys.executable, "-m", "loopwarden"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[10].startswith("call 11: warned") and "[System note: Tool-loop warning" in lines[10]
    assert lines[20].startswith("call 21: BLOCKED  CRITICAL")
    assert "The tool ran 20 times" in done.stdout
