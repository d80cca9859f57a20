"""Runs of the real Codex CLI and Gemini CLI binaries against the scripted model, as a user
would set them up: a fresh HOME, ``loopwarden install codex|gemini-cli --user``, the host
pointed at a model server on 127.0.0.1, the tool calls real shell commands (each appends a
line to an executions log, so what really ran is counted, whatever the host says).

Shared by the host tests and ``bench/bench_codex_gemini.py``. The binaries come from
``.ci/install-hosts-cg`` (``.hosts/bin``) or ``LOOPWARDEN_CODEX_BIN`` /
``LOOPWARDEN_GEMINI_BIN``; :func:`binary` says why one is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codex_gemini_script import WARNING_MARK, Action, Script, Transcript
from gemini_server import GeminiServer
from openai_responses_server import ResponsesServer

from resident_runtime import runtime_dir, stop_servers

REPO = Path(__file__).resolve().parents[3]
ECHO_SERVER = REPO / "tests" / "integrations" / "mcp_echo_server.py"
# check_job only, logging each real run to $CALLS_LOG: what the MCP server executed, counted there.
COUNTER_SERVER = Path(__file__).with_name("mcp_counter_server.py")
LIMIT = 30  # the insistent model asks this many times, then answers in text
STOP_MARK = "loopwarden stopped this run"


def binary(host: str) -> tuple[str | None, str]:
    """(path of the host's binary or None, the reason it is missing)."""
    env = {"codex": "LOOPWARDEN_CODEX_BIN", "gemini": "LOOPWARDEN_GEMINI_BIN"}[host]
    candidate = os.environ.get(env) or str(REPO / ".hosts" / "bin" / host)
    if Path(candidate).is_file():
        return candidate, ""
    return None, (f"{host} not installed: run `bash .ci/install-hosts-cg` (or set {env}); "
                  "npm reaches the registry")


def loopwarden_bin() -> str:
    """The ``loopwarden`` script of this interpreter's environment."""
    found = Path(sys.executable).with_name("loopwarden")
    return str(found) if found.is_file() else shutil.which("loopwarden") or "loopwarden"


# -- the shapes: what the insistent (or healthy) model asks for, call by call -----------------

Shape = Callable[[Path], Callable[[int], Action | None]]


def _commands(*texts: str) -> Shape:
    def shape(log: Path) -> Callable[[int], Action | None]:
        return lambda n: Action(command=f"echo run >> {log}; "
                                        + texts[n % len(texts)].format(n=n, log=log))
    return shape


def _mcp(log: Path) -> Callable[[int], Action | None]:
    return lambda n: Action(tool="check_job", args={"job_id": "42"})


def _two_tool_cycle(log: Path) -> Callable[[int], Action | None]:
    """A, read a file, B: a cycle over two tools (a cycle of one tool is a repeat of each
    call, which the repeat detectors count), with Gemini's file tool."""
    notes = log.parent / "work" / "notes.txt"  # in the workspace: Gemini reads only there
    notes.write_text("nothing new\n")
    steps = [Action(command=f"echo run >> {log}; echo A"),
             Action(tool="read_file", args={"file_path": str(notes)}),
             Action(command=f"echo run >> {log}; echo B")]
    return lambda n: steps[n % 3]


SHAPES: dict[str, Shape] = {
    "identical": _commands("echo hi"),
    "a-b": _commands("echo A", "echo B"),
    "a-b-c": _two_tool_cycle,
    # A new argument each time, the same failure (needs the failure's identity, not its text).
    "fresh-failure": _commands("ls /nonexistent/item-{n}"),
    # The same command, a new answer each time: progress, never to be stopped.
    "healthy": _commands("wc -l < {log}"),
    "mcp": _mcp,
}
LOOPS = ("identical", "a-b", "a-b-c", "fresh-failure", "mcp")


def _codex_two_tool_cycle(log: Path) -> Callable[[int], Action | None]:
    """A, the same patch of a file, B: Codex's cycle over two tools. Its ``apply_patch`` (a
    freeform tool, offered to models of the gpt-5.5 family: :data:`CODEX_MODELS`) is the
    second tool a hook sees; the patch rewrites a line as it was, so nothing changes."""
    notes = log.parent / "work" / "notes.txt"
    notes.write_text("nothing new\n")
    patch = ("*** Begin Patch\n*** Update File: notes.txt\n@@\n-nothing new\n+nothing new\n"
             "*** End Patch\n")
    steps = [Action(command=f"echo run >> {log}; echo A"),
             Action(tool="apply_patch", args={"input": patch}),
             Action(command=f"echo run >> {log}; echo B")]
    return lambda n: steps[n % 3]


CODEX_SHAPES: dict[str, Shape] = {**SHAPES, "a-b-c": _codex_two_tool_cycle}
# The model name Codex is told, by shape: it picks the tools it offers by the name's family
# (apply_patch only for gpt-5.5's); "scripted" gets the shell and no file tool. gpt-5.5 is also
# how a user's Codex meets MCP tools: deferred behind `tool_search` (a model without Codex's
# metadata, like "scripted", is handed them in `tools` directly).
CODEX_MODELS = {"a-b-c": "gpt-5.5", "mcp": "gpt-5.5"}


@dataclass
class RunRecord:
    """What one run did, as the model and the executions log saw it."""

    host: str
    shape: str
    executions: int
    shell_runs: int                   # calls that really ran, by the tool's own log (the
                                      # shell's; in Codex's "mcp" run, the MCP server's)
    calls: int                        # calls the model asked for
    first_warning: int | None         # the call whose result carried the warning
    first_denial: int | None          # the first call denied (blocked before it ran)
    stop: int | None                  # the call that got the terminal stop
    denied_after_stop: int            # later calls, all denied in Codex
    ran_after_stop: int               # later calls that ran (must be 0)
    ended_by_host: bool               # the host ended the run before the model gave up
    seconds: float
    turnaround_ms: float | None       # median per tool call, as the host runs it
    returncode: int
    results: list[str] = field(default_factory=list, repr=False)
    output: str = field(default="", repr=False)

    def row(self) -> str:
        """One line of a printed table."""
        return (f"{self.host:7} {self.shape:14} exec={self.executions:3} "
                f"shell={self.shell_runs:3} calls={self.calls:3} "
                f"warn@{self.first_warning} deny@{self.first_denial} stop@{self.stop} "
                f"after-stop denied={self.denied_after_stop} ran={self.ran_after_stop} "
                f"ended={self.ended_by_host} {self.seconds:.1f}s")


def _denied(text: str) -> bool:
    return ("CRITICAL" in text or STOP_MARK in text or "blocked by PreToolUse hook" in text
            or "Tool execution blocked" in text or "stopped by hook" in text)


def _record(host: str, shape: str, transcript: Transcript, log: Path, limit: int,
            seconds: float, proc: subprocess.CompletedProcess[str]) -> RunRecord:
    results = transcript.results
    # A call the model got a real result for ran (the MCP server and the file tool keep no
    # log); the shell's own log must agree that no denied command ran.
    executions = sum(1 for text in results if not _denied(text))
    shell_runs = len(log.read_text().splitlines()) if log.exists() else 0
    first_denial = transcript.first(_denied)
    stop = transcript.first(lambda t: STOP_MARK in t or "recovery failed" in t)
    if stop is None and "Agent execution stopped by hook" in proc.stdout:
        stop = transcript.calls_made  # the host ended the run on it: the model never saw it
    after = results[stop:] if stop is not None else []
    return RunRecord(
        host=host, shape=shape, executions=executions, shell_runs=shell_runs, calls=transcript.calls_made,
        first_warning=transcript.first(lambda t: WARNING_MARK in t), first_denial=first_denial,
        stop=stop, denied_after_stop=sum(1 for t in after if _denied(t)),
        ran_after_stop=sum(1 for t in after if not _denied(t)),
        ended_by_host=transcript.calls_made < limit, seconds=seconds,
        turnaround_ms=transcript.turnaround_ms(),
        returncode=proc.returncode, results=list(results), output=proc.stdout + proc.stderr)


def _base_env(home: Path, resident: bool) -> dict[str, str]:
    """The host's environment: a fresh HOME, and the hooks' resident server (as users get it)
    in a private runtime folder beside it (a short path: :mod:`resident_runtime`), or none."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
            "LANG": "C.UTF-8", "XDG_RUNTIME_DIR": str(runtime_dir(home.parent)),
            "LOOPWARDEN_HOOK_SERVER": "1" if resident else "0"}


def _check_resident(expected: bool, servers: int) -> None:
    """The hooks answered through their resident server, as users get them (a socket path that
    is too long would have them answer each in its own process)."""
    if expected:
        assert servers >= 1, "no resident hook server ran"


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=900)


def _install(host_command: str, env: dict[str, str], cwd: Path) -> None:
    subprocess.run([loopwarden_bin(), "install", host_command, "--user"], env=env, cwd=cwd,
                   check=True, capture_output=True, text=True, timeout=120)


def _mcp_server_argv(server: Path = ECHO_SERVER) -> list[str]:
    return [loopwarden_bin(), "mcp-proxy", "--", sys.executable, str(server)]


# -- Codex CLI ----------------------------------------------------------------------------


def run_codex(shape: str, root: Path, *, hooks: bool = True, resident: bool = True,
              limit: int = LIMIT) -> RunRecord:
    """One ``codex exec`` run of ``shape`` in a fresh HOME under ``root``."""
    codex, why = binary("codex")
    assert codex is not None, why
    home, work, log = root / "home", root / "work", root / "executions.log"
    codex_home = home / ".codex"
    for folder in (codex_home, work):
        folder.mkdir(parents=True, exist_ok=True)
    script = Script(CODEX_SHAPES[shape](log), limit=limit)
    env = {**_base_env(home, resident), "CODEX_HOME": str(codex_home), "SCRIPTED_KEY": "dummy"}
    with ResponsesServer(script) as server:
        config = [
            f'model = "{CODEX_MODELS.get(shape, "scripted")}"', 'model_provider = "scripted"', 'approval_policy = "never"',
            'sandbox_mode = "danger-full-access"', "", "[model_providers.scripted]",
            'name = "scripted"', f'base_url = "{server.url}"', 'env_key = "SCRIPTED_KEY"',
            'wire_api = "responses"', "",
        ]
        if shape == "mcp":
            # The counter server behind the proxy, logging each run to the executions log.
            # `required`: Codex waits for the server before the first turn (an optional one
            # still starting is left out of the turn's tools: "omitting pending optional MCP
            # server" in its log, and the model's tool_search finds nothing).
            argv = _mcp_server_argv(COUNTER_SERVER)
            config += ["[mcp_servers.jobs]", f"command = {json.dumps(argv[0])}",
                       f"args = {json.dumps(argv[1:])}", "startup_timeout_sec = 60",
                       "required = true", f"env = {{ CALLS_LOG = {json.dumps(str(log))} }}", ""]
        (codex_home / "config.toml").write_text("\n".join(config))
        if hooks:
            _install("codex", env, work)
        started = time.monotonic()
        try:
            proc = _run(
            [codex, "exec", "--skip-git-repo-check", "--json", "-C", str(work),
             *(["--dangerously-bypass-hook-trust"] if hooks else []), "do the task"],
            env, work)
        finally:
            servers = stop_servers(root)
        seconds = time.monotonic() - started
    _check_resident(hooks and resident, servers)
    return _record("codex", shape, server.transcript, log, limit, seconds, proc)


# -- Gemini CLI ---------------------------------------------------------------------------


def run_gemini(shape: str, root: Path, *, hooks: bool = True, own_guard: bool = False,
               resident: bool = True, limit: int = LIMIT) -> RunRecord:
    """One ``gemini -p`` run of ``shape`` in a fresh HOME under ``root``; ``own_guard`` keeps
    Gemini CLI's own loop detection on (off by default, so loopwarden is what is measured)."""
    gemini, why = binary("gemini")
    assert gemini is not None, why
    home, work, log = root / "home", root / "work", root / "executions.log"
    for folder in (home / ".gemini", work):
        folder.mkdir(parents=True, exist_ok=True)
    script = Script(SHAPES[shape](log), limit=limit)
    settings: dict[str, Any] = {
        "security": {"auth": {"selectedType": "gemini-api-key"},
                     "folderTrust": {"enabled": False}},
        "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "model": {"disableLoopDetection": not own_guard},
    }
    if shape == "mcp":
        argv = _mcp_server_argv()
        settings["mcpServers"] = {"echo": {"command": argv[0], "args": argv[1:],
                                           "trust": True, "timeout": 60000}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings, indent=2))
    with GeminiServer(script) as server:
        env = {**_base_env(home, resident), "GEMINI_API_KEY": "dummy",
               "GOOGLE_GEMINI_BASE_URL": server.url}
        if hooks:
            _install("gemini-cli", env, work)
        started = time.monotonic()
        try:
            proc = _run([gemini, "-p", "do the task", "--yolo", "-m", "gemini-2.5-flash",
                         "--output-format", "stream-json"], env, work)
        finally:
            servers = stop_servers(root)
        seconds = time.monotonic() - started
    _check_resident(hooks and resident, servers)
    return _record("gemini", shape, server.transcript, log, limit, seconds, proc)
