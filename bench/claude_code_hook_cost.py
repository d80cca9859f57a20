"""The per-tool-call cost of loopwarden's hooks as Claude Code sees it, in the real binary.

Runs the installed Claude Code (``.ci/install-hosts``) against the scripted model of
``tests/integrations/hosts/`` with a healthy script of distinct quick ``Bash`` calls, four
ways: without hooks, with the hooks each answered in their own process
(``LOOPWARDEN_HOOK_SERVER=0``), with the resident server (the default), and with the tool hooks
as http hooks posting to the resident http server (``install claude-code --http PORT``). A call's
turnaround is the time from the model request that issued it to the next request (Claude Code's
own work, the hooks, the command); the table prints the median and the added cost against the
run without hooks. Usage: ``python bench/claude_code_hook_cost.py [current|2.1.197] [CALLS]``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
from itertools import pairwise
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integrations" / "hosts"))

from anthropic_server import ScriptedModel, serve  # noqa: E402
from claude_code import (  # noqa: E402
    RELEASES,
    bash,
    host_env,
    http_server_pids,
    install_hooks,
    loopwarden_argv,
)


def turnarounds(binary: Path, calls: int, *, hooks: bool, resident: bool,
                http: bool = False) -> list[float]:
    """Seconds per tool call of one run with ``calls`` distinct quick calls (``http``: the tool
    hooks as http hooks, ``install claude-code --http PORT``)."""
    port = _free_port() if http else None
    with tempfile.TemporaryDirectory() as scratch:
        home, work = Path(scratch) / "home", Path(scratch) / "work"
        home.mkdir()
        work.mkdir()
        if hooks:
            install_hooks(home, *(("--http", str(port)) if port else ()))
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
        if port is not None:  # stop the http server the SessionStart hook started
            for pid in http_server_pids(port):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
    times = [turn.at for turn in model.turns]
    # The first call pays the start of the hook machinery (and the resident server): skipped.
    return [later - earlier for earlier, later in pairwise(times[1:])]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> None:
    """Print the table for the release and number of calls given."""
    release = sys.argv[1] if len(sys.argv) > 1 else "current"
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 21
    binary = RELEASES[release]
    if not binary.exists():
        sys.exit(f"Claude Code {release} is not installed: run .ci/install-hosts")
    rows = [("no hooks", False, False, False), ("hooks, own process each", True, False, False),
            ("hooks, resident server", True, True, False),
            ("http hooks (install --http)", True, True, True)]
    baseline = None
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"Claude Code {release}: turnaround per tool call, {calls} calls, median (ms); "
          f"load average {load} at the start")
    print(f"{'':28} {'median':>8} {'added':>8}")
    for name, hooks, resident, http in rows:
        median = statistics.median(turnarounds(binary, calls, hooks=hooks, resident=resident,
                                               http=http))
        baseline = median if baseline is None else baseline
        print(f"{name:28} {median * 1000:8.1f} {(median - baseline) * 1000:+8.1f}")


if __name__ == "__main__":
    main()
