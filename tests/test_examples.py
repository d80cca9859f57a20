"""The runnable examples and the `python -m loopwarden` demo keep working (no LLM, no network)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


# What the docstring of each example whose door can end a run promises, in the lines it prints:
# warned at call 11, blocked at 21, stopped at 22 with nothing after it.
STOPPING = ["claude_agent_sdk_example.py", "langchain_example.py", "openai_agents_example.py"]


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example_runs_and_stops_the_loop(script: str) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True,
                          text=True, timeout=120, cwd=EXAMPLES.parent)
    assert done.returncode == 0, done.stderr
    assert "20 times" in done.stdout  # every example's tool runs 20 times, then is blocked
    if script in STOPPING:  # (checked on the same run: an example costs seconds to start)
        doc = " ".join((EXAMPLES / script).read_text().split('"""')[1].split())
        assert re.search(r"11th call.*21st.*ends? the run at the 22nd", doc), doc
        steps = re.findall(r"^call +(\d+): (\w+)", done.stdout, re.M)
        blocked = "DENIED" if "claude" in script else "BLOCKED"
        assert steps == [("11", "WARNED"), ("21", blocked), ("22", "STOPPED")], done.stdout
        assert "ran 20 times in 22 calls" in done.stdout
        assert "loopwarden stopped this run" in done.stdout


def test_the_stopping_examples_exist() -> None:
    assert set(STOPPING) <= {p.name for p in EXAMPLES.glob("*.py")}  # (a rename skips none)
