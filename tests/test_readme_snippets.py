"""The snippets of README.md and of every docs/ page run as pasted, and the CLI's install hints
match the README's.

Every fenced block of README.md and of each ``docs/**/*.md`` page is parsed, each file on its own
and in order:

- ```python blocks run, each in a fresh ``python`` subprocess (a timeout, a temporary folder as
  the working directory and ``$HOME``, ``PYTHONPATH`` inherited);
- ```bash blocks run as one ``bash`` script (``set -eo pipefail``) in such a folder, with the
  bundled ``examples/`` copied in and ``loopwarden`` / ``python`` on ``PATH`` meaning this
  checkout; ```console blocks run each ``$ command`` there and compare its output (stderr
  included) with the lines printed under it (a ``...`` line stands for any lines). Lines that
  install packages (``pip install``) are not run. A block that runs a hook command
  (``claude-hook``, ``codex-hook``, ``gemini-hook``) has it answered by the resident server, as
  users get it, in a private runtime folder of its own, stopped afterwards.

HTML comments right before a block (invisible on GitHub) say what it needs:

- ``<!-- file: NAME -->``: the block is the text of file NAME, written into the folder of every
  later block (a later block with the same NAME replaces it);
- ``<!-- output -->``: the block is exactly what the python block before it prints;
- ``<!-- expect: TEXT -->``: the block's output contains TEXT;
- ``<!-- continues -->``: the block runs after the runnable block before it, in its folder;
- ``<!-- needs: WHAT -->``: ``redis`` (run against ``$LOOPWARDEN_REDIS_URL``, else a local
  server, else skipped) or ``corpus`` (the development corpus, found beside the checkout and
  given to the block as ``$CORPUS``, else skipped);
  anything else (a model's API key, the network) must come with
- ``<!-- fake: NAME -->``: the block runs with the real thing swapped for a scripted fake from
  ``FAKES`` below (a fake model that keeps looping, a stub MCP server): the snippet's own
  guard wiring is what stops it, so a broken snippet still fails;
- ``<!-- skip: REASON -->``: the block is not run (reported as skipped with REASON).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from resident_runtime import runtime_dir, stop_servers

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
# Every file whose snippets run: the README, then the site's pages.
DOCUMENTS = [README, *sorted(DOCS.rglob("*.md"))]
EXAMPLES = REPO / "examples"
TIMEOUT = 180  # seconds per block; the slowest (a scripted LangChain run) takes a few

PYTHON = {"python", "py"}
SHELL = {"bash", "sh", "shell", "console"}
# A snippet that runs a hook command (the hooks start a resident server, which these tests
# give a short private runtime folder and stop afterwards).
HOOK_COMMAND = re.compile(r"\b(?:claude|codex|gemini)-hook\b")
MARKER_KEYS = {"file", "output", "expect", "continues", "needs", "fake", "skip"}
PROVIDED_NEEDS = {"redis", "corpus"}  # the test provides these itself, when it can


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child that runs in another folder: PYTHONPATH entries
    made absolute (``PYTHONPATH=src`` must still mean this checkout's ``src``)."""
    env = dict(os.environ)
    paths = [str(Path(p).resolve()) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra)
    return env


# --- the fakes --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fake:
    """How a block that needs a real model or service runs without one."""

    replace: tuple[tuple[str, str], ...]  # (text in the snippet, what it becomes); each must occur
    prelude: str = ""  # python run before the snippet's code (python blocks)
    files: tuple[tuple[str, str], ...] = ()  # written into the block's folder
    expect: tuple[str, ...] = ()  # the output must contain each
    env: tuple[tuple[str, str], ...] = ()


LANGCHAIN_PRELUDE = '''
import itertools as _itertools
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel as _Generic
from langchain_core.messages import AIMessage as _AIMessage

class _StuckChatModel(_Generic):
    """LangChain's GenericFakeChatModel, able to take tools: it asks for the same status check
    on every turn. Only loopwarden ends the run; after 60 turns the fake gives up with an
    error, which fails the test."""

    def bind_tools(self, tools, **kwargs):
        assert "check_job" in {getattr(t, "name", None) for t in tools}
        return self

def _stuck_turns():
    for n in range(60):
        yield _AIMessage("", tool_calls=[{"name": "check_job", "args": {"job_id": "build-7"},
                                          "id": f"call-{n}"}])
    raise RuntimeError("loopwarden did not stop the run within 60 model turns")

def _fake_chat_model():
    return _StuckChatModel(messages=_stuck_turns())
'''

OPENAI_AGENTS_PRELUDE = '''
from agents.testing import ScriptedModel as _ScriptedModel, function_call as _function_call

def _fake_agents_model():
    """The SDK's own ScriptedModel, asking for the same status check 60 times; a run that
    outlives the script fails (the model has no step left)."""
    return _ScriptedModel([[_function_call("check_job", {"job_id": "build-7"}, call_id=f"call-{n}")]
                           for n in range(60)])
'''

CLAUDE_PRELUDE = f'''
import sys as _sys
_sys.path.insert(0, {str(EXAMPLES)!r})
# The example's stand-in for the Claude Code CLI: it speaks the SDK's control protocol (hook
# requests and their answers) and polls one job 25 times in one prompt.
from claude_agent_sdk_example import FakeClaudeCode as _FakeClaudeCode
'''

MCP_CLIENT = '''\
"""A scripted MCP client for the README's mcp-proxy line: initialize, list the tools, then 21
identical tool calls at once; stdin stays open until the answer to the last call is out (the
proxy shuts its server down when the client closes stdin), which the client reads back from
the copy that tee keeps of the proxy's output, for at most 120 s."""
import json
import time
from pathlib import Path

LAST = 120

def send(message):
    print(json.dumps({"jsonrpc": "2.0", **message}), flush=True)

def answered(path=Path("mcp_out.jsonl")):
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return any(line.startswith("{") and json.loads(line).get("id") == LAST
               for line in text.splitlines(keepends=True) if line.endswith("\\n"))

send({"id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
      "capabilities": {}, "clientInfo": {"name": "readme-test", "version": "0"}}})
send({"method": "notifications/initialized"})
send({"id": 2, "method": "tools/list"})
for n in range(21):
    send({"id": LAST - 20 + n, "method": "tools/call",
          "params": {"name": "check_job", "arguments": {"job_id": "build-42"}}})
deadline = time.monotonic() + 120
while not answered() and time.monotonic() < deadline:
    time.sleep(0.05)
'''

FAKES: dict[str, Fake] = {
    # LangChain: the model string becomes a scripted chat model that never stops calling.
    "langchain": Fake(
        replace=(('"openai:gpt-5"', "_fake_chat_model()"),),
        prelude=LANGCHAIN_PRELUDE,
        expect=("loopwarden stopped this run", "generic_repeat 21 check_job")),
    # OpenAI Agents SDK: the model name becomes the SDK's ScriptedModel.
    "openai-agents": Fake(
        replace=(('model="gpt-5"', "model=_fake_agents_model()"),),
        prelude=OPENAI_AGENTS_PRELUDE,
        env=(("OPENAI_AGENTS_DISABLE_TRACING", "1"),),
        expect=("loopwarden stopped this run", "generic_repeat True")),
    # Claude Agent SDK: query() talks to a scripted Claude Code instead of starting the CLI.
    "claude-code": Fake(
        replace=(("options=options):", "options=options, transport=_FakeClaudeCode()):"),),
        prelude=CLAUDE_PRELUDE,
        expect=("call 11: WARNED", "call 21: DENIED", "ResultMessage(")),
    # mcp-proxy: the example's stub server instead of npx (network), driven by a scripted client.
    "mcp-server": Fake(
        replace=(("LOOPWARDEN_MCP_MAX_MESSAGE_BYTES=16M loopwarden mcp-proxy -- "
                  "npx -y @modelcontextprotocol/server-github",
                  "python mcp_client.py | LOOPWARDEN_MCP_MAX_MESSAGE_BYTES=16M loopwarden "
                  "mcp-proxy -- python examples/mcp_proxy_example.py --serve | tee mcp_out.jsonl"),),
        files=(("mcp_client.py", MCP_CLIENT),),
        expect=('"name":"check_job"', "CRITICAL: Called check_job")),
}


# --- parsing README.md and docs/ ---------------------------------------------------------------

FENCE = re.compile(r"^(?P<indent> *)(?P<ticks>`{3,})(?P<info>[^`]*)$")
MARKER = re.compile(r"^\s*<!--\s*(?P<key>[a-z-]+)\s*(?::\s*(?P<value>.*?))?\s*-->\s*$")


@dataclass
class Block:
    source: str  # the file, relative to the repository: README.md, docs/scan.md
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    markers: dict[str, list[str]] = field(default_factory=dict)
    output: str | None = None  # the <!-- output --> block that follows (python blocks)
    files: dict[str, str] = field(default_factory=dict)  # <!-- file: --> blocks before it
    after: Block | None = None  # <!-- continues -->: the block to run first

    @property
    def id(self) -> str:
        return f"{self.source}:{self.line}:{self.lang or 'text'}"

    def has(self, key: str) -> bool:
        return key in self.markers

    def first(self, key: str) -> str:
        return self.markers[key][0]


class ReadmeError(AssertionError):
    pass


def parse_readme(text: str, source: str = "README.md") -> list[Block]:
    """Every fenced block of one file, with the markers right before it; raises on a stray
    marker. ``file:`` and ``continues`` markers reach only the later blocks of the same file."""
    lines = text.splitlines()
    blocks: list[Block] = []
    pending: dict[str, list[str]] = {}
    pending_at = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = MARKER.match(line)
        if marker and marker["key"] in MARKER_KEYS:
            pending.setdefault(marker["key"], []).append(marker["value"] or "")
            pending_at = pending_at or i + 1
            i += 1
            continue
        fence = FENCE.match(line)
        if fence:
            indent, ticks = len(fence["indent"]), fence["ticks"]
            body: list[str] = []
            i += 1
            while i < len(lines) and not (lines[i].strip() == ticks
                                          and len(lines[i]) - len(lines[i].lstrip()) <= indent):
                body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
                i += 1
            if i == len(lines):
                raise ReadmeError(f"{source}:{len(blocks) and blocks[-1].line}: unclosed fence")
            blocks.append(Block(source=source, line=i - len(body), lang=fence["info"].strip().lower(),
                                code="\n".join(body) + "\n", markers=pending))
            pending, pending_at = {}, 0
            i += 1
            continue
        if line.strip() and pending:
            raise ReadmeError(f"{source}:{pending_at}: marker {sorted(pending)} is not "
                              "followed by a fenced block")
        i += 1
    if pending:
        raise ReadmeError(f"{source}:{pending_at}: marker {sorted(pending)} at the end")
    _link(blocks)
    return blocks


def _link(blocks: list[Block]) -> None:
    files: dict[str, str] = {}
    last_python: Block | None = None
    last_runnable: Block | None = None
    for block in blocks:
        block.files = dict(files)
        if block.has("file"):
            files[block.first("file")] = block.code
        if block.has("output"):
            if last_python is None or last_python.output is not None:
                raise ReadmeError(f"{block.id}: <!-- output --> without a python block before it")
            last_python.output = block.code
        if block.has("continues"):
            if last_runnable is None:
                raise ReadmeError(f"{block.id}: <!-- continues --> without a block before it")
            block.after = last_runnable
        for need in block.markers.get("needs", []):
            if need not in PROVIDED_NEEDS and not block.has("fake") and not block.has("skip"):
                raise ReadmeError(f"{block.id}: needs {need!r}: name a fake (<!-- fake: NAME -->) "
                                  "the test can run it with, or say why it is skipped")
        for name in block.markers.get("fake", []):
            fake = FAKES.get(name)
            if fake is None:
                raise ReadmeError(f"{block.id}: unknown fake {name!r} (known: {sorted(FAKES)})")
            for old, _ in fake.replace:
                if old not in block.code:
                    raise ReadmeError(f"{block.id}: fake {name!r} swaps {old!r}, which the block "
                                      "no longer contains")
        if block.lang in PYTHON:
            last_python = block
        if block.lang in PYTHON | SHELL:
            last_runnable = block


def _relative(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


BLOCKS = [block for document in DOCUMENTS
          for block in parse_readme(document.read_text(encoding="utf-8"), _relative(document))]
RUNNABLE = [b for b in BLOCKS if b.lang in PYTHON | SHELL]


def shell_commands(block: Block) -> list[tuple[str, str | None]]:
    """(command, expected output or None) pairs; ``pip install`` lines left out."""
    lines = block.code.splitlines()
    pairs: list[tuple[str, str | None]] = []
    if block.lang == "console":
        for line in lines:
            if line.startswith("$ "):
                pairs.append((line[2:], ""))
            elif pairs:
                pairs[-1] = (pairs[-1][0], f"{pairs[-1][1]}{line}\n")
            elif line.strip():
                raise ReadmeError(f"{block.id}: console output before the first '$ ' line")
        return [(c, out) for c, out in pairs if "pip install" not in c]
    # A bash block is one script (loops span lines); it stops at the first failing command.
    script = [line for line in lines if "pip install" not in line]
    if not any(line.strip() and not line.lstrip().startswith("#") for line in script):
        return []
    return [("set -eo pipefail\n" + "\n".join(script), None)]


def skip_reason(block: Block) -> str | None:
    if block.has("skip"):
        return block.first("skip")
    if block.lang in SHELL and not shell_commands(block):
        return "only installs packages (pip install)"
    return None


# --- running ----------------------------------------------------------------------------------

def _corpus() -> Path | None:
    """The development corpus (not part of a clone): ``shared/corpus`` beside the checkout."""
    for parent in REPO.parents:
        if (parent / "shared" / "corpus").is_dir():
            return parent / "shared" / "corpus"
    return None


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """``$LOOPWARDEN_REDIS_URL``, else a local server, else one started here (as the store tests)."""
    from redis_server import DEFAULT_URL, REDIS_SERVER, RedisServer, redis_reachable

    env = os.environ.get("LOOPWARDEN_REDIS_URL")
    if env:
        if not redis_reachable(env):
            pytest.fail(f"LOOPWARDEN_REDIS_URL={env} is set but not reachable")
        yield env
    elif redis_reachable(DEFAULT_URL):
        yield DEFAULT_URL
    elif REDIS_SERVER is None:
        pytest.skip("no Redis reachable and redis-server is not installed")
    else:
        server = RedisServer()
        server.start()
        try:
            yield server.url
        finally:
            server.stop()


def _workspace(root: Path, block: Block) -> tuple[Path, dict[str, str]]:
    """A folder like a fresh clone's top folder for ``block``, and the environment to run in."""
    work, home, bin_dir = root / "work", root / "home", root / "bin"
    runtime = root / "run"  # (`claude-hook --stop-servers` must stop no server of the user's)
    for folder in (work, home, bin_dir, runtime):
        folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(EXAMPLES, work / "examples", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    # `loopwarden` is the console script's entry point, `python` this interpreter: both run
    # this checkout's code (PYTHONPATH), whatever is installed.
    shims = {"loopwarden": f'exec "{sys.executable}" -c "import sys; '
                           f'from loopwarden.cli._entry import main; sys.exit(main())" "$@"',
             "python": f'exec "{sys.executable}" "$@"'}
    for name, body in shims.items():
        shim = bin_dir / name
        shim.write_text(f"#!/bin/sh\n{body}\n")
        shim.chmod(0o755)
    for name, text in block.files.items():
        (work / name).write_text(text)
    corpus = _corpus()
    env = child_env(HOME=str(home), PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                    COLUMNS="80", NO_COLOR="1", XDG_RUNTIME_DIR=str(runtime))
    if corpus is not None:
        env["CORPUS"] = str(corpus)  # the docs' commands name it $CORPUS
    for name in ("LOOPWARDEN_DB", "LOOPWARDEN_DISABLED", "LOOPWARDEN_MCP_MAX_MESSAGE_BYTES",
                 "LOOPWARDEN_DEBUG", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "FORCE_COLOR"):
        env.pop(name, None)  # a real key must not be needed, nor used by accident
    return work, env


def _fake(block: Block) -> Fake | None:
    return FAKES[block.first("fake")] if block.has("fake") else None


def _with_fake(block: Block, code: str) -> str:
    fake = _fake(block)
    if fake is None:
        return code
    for old, new in fake.replace:
        code = code.replace(old, new)
    return code


def _run_block(block: Block, work: Path, env: dict[str, str]) -> str:
    """Run ``block`` in ``work``; returns its output, fails the test on any error."""
    fake = _fake(block)
    if fake is not None:
        env = {**env, **dict(fake.env)}
        for name, text in fake.files:
            (work / name).write_text(text)
    if block.lang in PYTHON:
        script = work / f"snippet_{block.line}.py"
        script.write_text((fake.prelude if fake else "") + _with_fake(block, block.code))
        done = subprocess.run([sys.executable, script.name], cwd=work, env=env,
                              capture_output=True, text=True, timeout=TIMEOUT)
        assert done.returncode == 0, (f"{block.id} failed (exit {done.returncode}):\n"
                                      f"{done.stdout}\n{done.stderr}")
        if block.output is not None:
            assert _lines(done.stdout) == _lines(block.output), (
                f"{block.id} printed:\n{done.stdout}\nREADME shows:\n{block.output}")
        return done.stdout
    printed = ""
    for command, expected in shell_commands(block):
        command = _with_fake(block, command)
        done = subprocess.run(["bash", "-c", command], cwd=work, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=TIMEOUT)
        assert done.returncode == 0, f"{block.id}: `{command}` exited {done.returncode}:\n{done.stdout}"
        if expected is not None:
            assert matches(done.stdout, expected), (
                f"{block.id}: `{command}` printed:\n{done.stdout}\nREADME shows:\n{expected}")
        printed += done.stdout
    return printed


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def matches(actual: str, shown: str) -> bool:
    """``actual`` is what the README shows, line by line (trailing spaces aside); a ``...``
    line in ``shown`` stands for any number of lines."""
    pattern = []
    for line in _lines(shown):
        pattern.append(r"(?:.*\n)*?" if line == "..." else re.escape(line) + r"\n")
    return re.fullmatch("".join(pattern), "".join(f"{line}\n" for line in _lines(actual))) is not None


def _params() -> list[object]:
    params: list[object] = []
    for block in RUNNABLE:
        reason = skip_reason(block)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        params.append(pytest.param(block, id=block.id, marks=marks))
    return params


@pytest.mark.parametrize("block", _params())
def test_readme_snippet_runs(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    needs = set(block.markers.get("needs", []))
    for earlier in _chain(block):
        needs |= set(earlier.markers.get("needs", []))
    if "corpus" in needs and _corpus() is None:
        pytest.skip("needs the shared corpus (../shared/corpus), which is not present")
    work, env = _workspace(tmp_path, block)
    if "redis" in needs:
        env["LOOPWARDEN_REDIS_URL"] = request.getfixturevalue("redis_url")
    steps = [*_chain(block), block]
    resident = any(HOOK_COMMAND.search(step.code) for step in steps)
    if resident:  # the hooks answer as users get them: through their resident server
        env["LOOPWARDEN_HOOK_SERVER"] = "1"
        env["XDG_RUNTIME_DIR"] = str(runtime_dir(tmp_path))
    output = ""
    try:
        for step in steps:
            output = _run_block(step, work, env)
    finally:
        if resident:
            stop_servers(tmp_path)
    wanted = [*block.markers.get("expect", []), *(f.expect if (f := _fake(block)) else ())]
    for text in wanted:
        assert text in output, f"{block.id}: output lacks {text!r}:\n{output}"


def _chain(block: Block) -> list[Block]:
    chain: list[Block] = []
    while block.after is not None:
        block = block.after
        chain.insert(0, block)
    return chain


# --- the harness itself -----------------------------------------------------------------------

@pytest.mark.parametrize("document", DOCUMENTS, ids=_relative)
def test_every_fence_is_parsed(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    fences = [line for line in text.splitlines() if FENCE.match(line)]
    assert len(fences) == 2 * len([b for b in BLOCKS if b.source == _relative(document)])


def test_every_code_block_is_accounted_for() -> None:
    assert README in DOCUMENTS and len(DOCUMENTS) > 10, "README.md and the docs/ pages are read"
    kinds = {b.lang for b in BLOCKS} - PYTHON - SHELL
    assert kinds <= {"", "json", "json5", "text"}, kinds  # data blocks: nothing to run
    python = [b for b in RUNNABLE if b.lang in PYTHON]
    assert len(python) >= 15 and all(skip_reason(b) is None for b in python), (
        "every python snippet runs")


def test_matches_reads_ellipses_as_any_lines() -> None:
    assert matches("a\nb\nc\n", "a\n...\nc\n")
    assert matches("a\nb  \n", "a\nb\n")
    assert matches("a\nb\nc\n", "a\n...\n")
    assert not matches("a\nb\nc\n", "a\nc\n")
    assert not matches("a\nb\n", "a\nb\nc\n")


def test_a_broken_snippet_fails(tmp_path: Path) -> None:
    broken = parse_readme("```python\nfrom loopwarden import LoopGuard\nawait LoopGuard()\n```\n")
    work, env = _workspace(tmp_path, broken[0])
    with pytest.raises(AssertionError, match="failed"):
        _run_block(broken[0], work, env)


def test_html_hint_gives_the_install_line_that_works_from_a_clone(tmp_path: Path) -> None:
    # `sys.modules[name] = None` makes importlib.util.find_spec(name) answer None: matplotlib
    # looks absent to the command without uninstalling it.
    code = ("import sys; sys.modules['matplotlib'] = None; "
            "from loopwarden.cli._entry import main; sys.exit(main())")
    done = subprocess.run(
        [sys.executable, "-c", code, "scan", "--html", str(tmp_path / "r.html"),
         str(EXAMPLES / "transcripts")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=child_env())
    assert done.returncode == 2, done.stderr
    hint = " ".join(done.stderr.split())
    assert "--html needs matplotlib" in hint
    assert "pip install '.[report]' in a clone" in hint
    assert not (tmp_path / "r.html").exists()
