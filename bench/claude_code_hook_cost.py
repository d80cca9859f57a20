"""The per-tool-call cost of loopwarden's hooks as Claude Code sees it, in the real binary.

Runs the installed Claude Code (``.ci/install-hosts``) against the scripted model of
``tests/integrations/hosts/`` with a healthy script of distinct quick ``Bash`` calls, three
ways: without hooks, with the hooks each answered in their own process
(``LOOPWARDEN_HOOK_SERVER=0``), and with the resident server (the default). A call's
turnaround is the time from the model request that issued it to the next request (Claude Code's
own work, the hooks, the command); the table prints the median and the added cost against the
run without hooks. Usage: ``python bench/claude_code_hook_cost.py [current|2.1.197] [CALLS]``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from itertools import pairwise
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integrations" / "hosts"))

from anthropic_server import ScriptedModel, serve  # noqa: E402
from claude_code import RELEASES, bash, host_env, install_hooks, loopwarden_argv  # noqa: E402


def turnarounds(binary: Path, calls: int, *, hooks: bool, resident: bool) -> list[float]:
    """Seconds per tool call of one run with ``calls`` distinct quick calls."""
    with tempfile.TemporaryDirectory() as scratch:
        home, work = Path(scratch) / "home", Path(scratch) / "work"
        home.mkdir()
        work.mkdir()
        if hooks:
            install_hooks(home)
        env = host_env(home)
        env["LOOPWARDEN_HOOK_SERVER"] = "1" if resident else "0"
        model: ScriptedModel
        with serve(lambda n: bash(work, f"echo step {n}") if n <= calls else None) as (url,
                                                                                       model):
            subprocess.run([str(binary), "-p", "Do the task.", "--output-format", "stream-json",
                            "--verbose", "--dangerously-skip-permissions"],
                           env={**env, "ANTHROPIC_BASE_URL": url}, cwd=work,
                           capture_output=True, timeout=900, stdin=subprocess.DEVNULL,
                           check=False)
        if resident:  # stop the servers this run started (its own runtime folder)
            subprocess.run([*loopwarden_argv(), "claude-hook", "--stop-servers"], env=env,
                           capture_output=True, timeout=60, check=False)
    times = [turn.at for turn in model.turns]
    # The first call pays the start of the hook machinery (and the resident server): skipped.
    return [later - earlier for earlier, later in pairwise(times[1:])]


def main() -> None:
    """Print the table for the release and number of calls given."""
    release = sys.argv[1] if len(sys.argv) > 1 else "current"
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 21
    binary = RELEASES[release]
    if not binary.exists():
        sys.exit(f"Claude Code {release} is not installed: run .ci/install-hosts")
    rows = [("no hooks", False, False), ("hooks, own process each", True, False),
            ("hooks, resident server", True, True)]
    baseline = None
    print(f"Claude Code {release}: turnaround per tool call, {calls} calls, median (ms)")
    print(f"{'':28} {'median':>8} {'added':>8}")
    for name, hooks, resident in rows:
        median = statistics.median(turnarounds(binary, calls, hooks=hooks, resident=resident))
        baseline = median if baseline is None else baseline
        print(f"{name:28} {median * 1000:8.1f} {(median - baseline) * 1000:+8.1f}")


if __name__ == "__main__":
    main()
