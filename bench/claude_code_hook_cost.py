"""The per-tool-call cost of loopwarden's hooks as Claude Code sees it, in the real binary.

Runs each installed Claude Code release (``.ci/install-hosts``) against the scripted model of
``tests/integrations/hosts/`` with a healthy script of distinct quick ``Bash`` calls, five
ways: without hooks, with the command hooks each answered in their own process
(``LOOPWARDEN_HOOK_SERVER=0``), with the command hooks and their resident server (the default),
with the tool hooks as http hooks posting to the resident http server (``install claude-code
--http PORT``), and with the same http hooks posting to a server that answers at once with
nothing (what Claude Code itself spends on calling those http hooks: the floor under the http
row, whatever the server does). The hooks are installed as a user installs them: through the
``loopwarden`` console script next to this interpreter, with the release's ``claude`` on PATH
(so the current release gets no ``PostToolBatch`` hook: two hooks per tool call, 2.1.197 three).

A call's turnaround is the time from the model request that issued it to the next request
(Claude Code's own work, the hooks, the command); the first call, which pays the start of the
hook machinery, is left out. The table prints the median per mode and release, and the added
cost against the run without hooks. Below it, the hook command's own CPU time (user + sys of
the shell and the hook process, median over repeated runs with one payload): unlike wall time,
it hardly depends on what else the machine runs.

Usage: ``python bench/claude_code_hook_cost.py [current|2.1.197|all] [CALLS] [ROUNDS]``
(default: every installed release, 21 calls, 3 rounds). Each round runs every mode once, in
turn, and a mode's median is over the calls of all its rounds. All of it takes a few minutes on
a quiet machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from itertools import pairwise
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The host drivers, and the helpers they share with the other test folders.
sys.path[:0] = [str(REPO / "tests" / "integrations" / "hosts"), str(REPO / "tests")]

from anthropic_server import ScriptedModel, serve  # noqa: E402
from claude_code import RELEASES, bash, host_env, http_server_pids  # noqa: E402

_FLOOR = "http, empty answers (floor)"
MODES = {  # name: (hooks, resident, http)
    "no hooks": (False, False, False),
    "command, own process each": (True, False, False),
    "command + resident server": (True, True, False),
    "http (install --http)": (True, True, True),
    # The same http tool hooks answered at once with nothing: Claude Code's own cost of calling
    # them, the floor under the row above.
    _FLOOR: (True, False, True),
}
_CPU_RUNS = 25
_PAYLOAD = {"hook_event_name": "PreToolUse", "session_id": "bench", "prompt_id": "bench",
            "tool_name": "Bash", "tool_use_id": "toolu_bench", "cwd": "/",
            "tool_input": {"command": "echo bench"}}


def console_script() -> str:
    """The ``loopwarden`` script installed with this interpreter (what a user's install runs)."""
    script = Path(sys.executable).with_name("loopwarden")
    if not script.exists():
        sys.exit(f"no loopwarden console script next to {sys.executable}: pip install -e .")
    return str(script)


def install(home: Path, binary: Path | None, *options: str) -> None:
    """``loopwarden install claude-code --user`` in ``home``, as a user runs it: with the
    release's ``claude`` on PATH, whose release the install fits the hooks to."""
    env = host_env(home)
    if binary is not None:
        env["PATH"] = f"{binary.parent}{os.pathsep}{env['PATH']}"
    proc = subprocess.run([console_script(), "install", "claude-code", "--user", *options],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        sys.exit(f"install failed: {proc.stderr}")


def turnarounds(binary: Path, calls: int, mode: str) -> list[float]:
    """Seconds per tool call of one run with ``calls`` distinct quick calls in ``mode``."""
    hooks, resident, http = MODES[mode]
    port = _free_port() if http else None
    with tempfile.TemporaryDirectory() as scratch:
        home, work = Path(scratch) / "home", Path(scratch) / "work"
        home.mkdir()
        work.mkdir()
        if hooks:
            install(home, binary, *(("--http", str(port)) if port else ()))
        floor = _empty_http_server(port, home) if mode == _FLOOR else None
        env = host_env(home)
        env["LOOPWARDEN_HOOK_SERVER"] = "1" if resident else "0"
        model: ScriptedModel
        try:
            with serve(lambda n: bash(work, f"echo step {n}") if n <= calls else None) as (
                    url, model):
                subprocess.run([str(binary), "-p", "Do the task.", "--output-format",
                                "stream-json", "--verbose", "--dangerously-skip-permissions"],
                               env={**env, "ANTHROPIC_BASE_URL": url}, cwd=work,
                               capture_output=True, timeout=900, stdin=subprocess.DEVNULL,
                               check=False)
        finally:
            if floor is not None:
                floor.close()
            _stop(env, port)
    times = [turn.at for turn in model.turns]
    return [later - earlier for earlier, later in pairwise(times[1:])]


def _empty_http_server(port: int | None, home: Path) -> socket.socket:
    """Answer every request on ``port`` at once with an empty ``200``, as if every hook let its
    call go unremarked, and keep only the tool hooks in ``home``'s settings (no start hooks:
    nothing starts loopwarden's server). Closing the returned socket ends it."""
    settings_path = home / ".claude" / "settings.json"
    settings = json.loads(settings_path.read_text(encoding="utf-8"))
    settings["hooks"] = {event: groups for event, groups in settings["hooks"].items()
                         if all(hook.get("type") == "http" for group in groups
                                for hook in group["hooks"])}
    settings_path.write_text(json.dumps(settings), encoding="utf-8")
    listener = socket.create_server(("127.0.0.1", port or 0))

    def answer_all() -> None:
        with contextlib.suppress(OSError):  # closed: the run is over
            while True:
                conn, _ = listener.accept()
                with conn:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        data += conn.recv(65536)
                    head, _, body = data.partition(b"\r\n\r\n")
                    size = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                                if line.lower().startswith(b"content-length:"))
                    while len(body) < size:
                        body += conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"
                                 b"Connection: close\r\n\r\n")

    threading.Thread(target=answer_all, daemon=True).start()
    return listener


def installed_command() -> str:
    """The hook command ``install claude-code`` writes on this machine."""
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        home.mkdir()
        install(home, None)
        settings = json.loads((home / ".claude" / "settings.json").read_text())
        return str(settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"])


def hook_cpu_ms(resident: bool) -> float:
    """Median CPU milliseconds (user + sys, shell included) of one run of the installed hook
    command on a ``PreToolUse`` payload: answered by a warm resident server, or on its own."""
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        home.mkdir()
        command = installed_command()
        env = host_env(home)
        env["LOOPWARDEN_HOOK_SERVER"] = "1" if resident else "0"
        samples = []
        try:
            for n in range(_CPU_RUNS + 2):
                payload = json.dumps({**_PAYLOAD, "tool_input": {"command": f"echo {n}"},
                                      "tool_use_id": f"toolu_{n}"}).encode()
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                subprocess.run(["/bin/sh", "-c", command], input=payload, env=env, cwd=home,
                               capture_output=True, timeout=60, check=False)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                samples.append(after.ru_utime - before.ru_utime + after.ru_stime
                               - before.ru_stime)
                if n == 0 and resident:
                    time.sleep(1.0)  # the first hook left a server behind: let it start
        finally:
            _stop(env, None)
    return statistics.median(samples[2:]) * 1000


def _stop(env: dict[str, str], port: int | None) -> None:
    """Stop the servers a run started: the resident ones of its runtime folder, the http one."""
    subprocess.run([console_script(), "claude-hook", "--stop-servers"], env=env,
                   capture_output=True, timeout=60, check=False)
    if port is not None:
        for pid in http_server_pids(port):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> None:
    """Print the table for the releases and number of calls given."""
    wanted = sys.argv[1] if len(sys.argv) > 1 else "all"
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 21
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    releases = [r for r in RELEASES if wanted in ("all", r) and RELEASES[r].exists()]
    if not releases:
        sys.exit(f"Claude Code {wanted} is not installed: run .ci/install-hosts")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    started = time.monotonic()
    print(f"Turnaround per tool call in Claude Code, median of {rounds} x {calls - 2} calls, ms "
          f"(added: against no hooks); load average {load} at the start")
    # Rounds of every mode in turn, pooled: a burst of load elsewhere then touches each mode
    # alike instead of one mode's only run (single runs moved by tens of milliseconds).
    pooled: dict[tuple[str, str], list[float]] = {(m, r): [] for r in releases for m in MODES}
    for _ in range(rounds):
        for r in releases:
            for mode in MODES:
                pooled[mode, r] += turnarounds(RELEASES[r], calls, mode)
    medians = {key: statistics.median(times) * 1000 for key, times in pooled.items()}
    print(f"{'':28}" + "".join(f"{r:>20}" for r in releases))
    for mode in MODES:
        cells = []
        for r in releases:
            value, base = medians[mode, r], medians["no hooks", r]
            cells.append(f"{value:9.1f}" + (f" ({value - base:+6.1f})" if mode != "no hooks"
                                            else " " * 9))
        print(f"{mode:28}" + "".join(f"{c:>20}" for c in cells))
    print(f"\nCPU ms per hook command (sh + hook process, median of {_CPU_RUNS}): "
          f"resident {hook_cpu_ms(True):.1f}, own process {hook_cpu_ms(False):.1f}\n"
          f"hook command: {installed_command()}")
    print(f"(took {time.monotonic() - started:.0f} s; load average now "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()) + ")")


if __name__ == "__main__":
    main()
