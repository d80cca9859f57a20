"""Reliability of config loading: merge before repair (spec §a.2-§a.4), duplicate keys and agent
ids, the JSON fast path, and config paths that are not regular files.

Cases that hung or exhausted memory before the fix run in a child process with a timeout and an
address-space limit, so a regression fails the test instead of taking the suite down.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import loopwarden.config as config_module
from loopwarden.cli.config import config_app
from loopwarden.config import ConfigError, config_from_mapping, load_config

CHILD_TIMEOUT = 60  # seconds; generous, only there so that a hang fails instead of blocking
CHILD_MEMORY = 1 << 30  # bytes of address space for a child: reading /dev/zero must not eat RAM

CLI = "from loopwarden.cli import main; main()"


def write(tmp_path: Path, text: str, name: str = "openclaw.json") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def write_json(tmp_path: Path, data: object, name: str = "openclaw.json") -> Path:
    return write(tmp_path, json.dumps(data), name)


def document(
    global_ld: dict[str, Any] | None, agents: dict[str, dict[str, Any]], shape: str = "list"
) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if global_ld is not None:
        data["tools"] = {"loopDetection": global_ld}
    if shape == "list":
        data["agents"] = {
            "list": [{"id": a, "tools": {"loopDetection": ld}} for a, ld in agents.items()]
        }
    else:
        data["agents"] = {
            "entries": {a: {"tools": {"loopDetection": ld}} for a, ld in agents.items()}
        }
    return data


def thresholds(cfg: config_module.LoopDetectionConfig) -> tuple[int, int, int]:
    return (cfg.warning_threshold, cfg.critical_threshold, cfg.global_circuit_breaker_threshold)


def repair_messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "loopwarden" and r.levelno == logging.WARNING
    ]


def raises_config_error(fn: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        fn()
    return info.value


def _limit_memory() -> None:  # pragma: no cover - runs in the child
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))


def run_child(args: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    """Run ``args`` with a timeout and a memory limit; a hang is a test failure."""
    try:
        return subprocess.run(
            args,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args[3:] or args} did not finish within {CHILD_TIMEOUT}s (hang)")


def load_in_child(path: Path | str) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(
        """
        import sys
        from loopwarden.config import ConfigError, load_config
        try:
            load_config(sys.argv[1])
        except ConfigError as exc:
            print(f"ConfigError: {exc}")
            print(f"file={exc.file}")
            sys.exit(3)
        print("loaded")
        """
    )
    return run_child([sys.executable, "-c", script, str(path)])


# --- item 19: merge the blocks as written, then repair (spec §a.2-§a.4) ----------------------


@pytest.mark.parametrize("shape", ["list", "entries"])
def test_agent_critical_below_global_critical_is_kept(
    tmp_path: Path, shape: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="loopwarden")
    data = document(
        {"warningThreshold": 3, "criticalThreshold": 5}, {"coder": {"criticalThreshold": 4}}, shape
    )
    cfg = load_config(write_json(tmp_path, data), agent_id="coder")
    assert thresholds(cfg) == (3, 4, 30)  # was (3, 11, 30): 4 repaired against the default 10
    assert repair_messages(caplog) == []


def test_agent_breaker_is_merged_as_written(tmp_path: Path) -> None:
    data = document(
        {"warningThreshold": 3, "criticalThreshold": 5},
        {"coder": {"globalCircuitBreakerThreshold": 8}},
    )
    cfg = load_config(write_json(tmp_path, data), agent_id="coder")
    assert thresholds(cfg) == (3, 5, 8)  # was (3, 5, 21): 8 repaired against the default 20


def test_global_block_is_not_repaired_before_the_agents_preset_applies(tmp_path: Path) -> None:
    # The global critical 8 is below the openclaw default warning 10 but above early's 6.
    data = document({"criticalThreshold": 8}, {"coder": {"preset": "early"}})
    path = write_json(tmp_path, data)
    assert thresholds(load_config(path, agent_id="coder")) == (6, 8, 20)
    # Without the agent's preset the merged result itself is out of order and is repaired.
    assert thresholds(load_config(path)) == (10, 11, 30)


def test_merged_result_is_repaired_once_against_the_merged_values(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="loopwarden")
    data = document(
        {"warningThreshold": 8, "globalCircuitBreakerThreshold": 9},
        {"coder": {"criticalThreshold": 4}},
    )
    path = write_json(tmp_path, data)
    assert thresholds(load_config(path, agent_id="coder")) == (8, 9, 10)
    [message] = repair_messages(caplog)
    assert "criticalThreshold 4 -> 9" in message
    assert "globalCircuitBreakerThreshold 9 -> 10" in message
    assert "coder" in message and str(path) in message


def test_in_block_order_rule_still_applies_to_each_block(tmp_path: Path) -> None:
    data = document(
        {"warningThreshold": 3}, {"coder": {"criticalThreshold": 9, "globalCircuitBreakerThreshold": 9}}
    )
    path = write_json(tmp_path, data)
    err = raises_config_error(lambda: load_config(path, agent_id="coder"))
    assert err.path == "agents.list[0].tools.loopDetection.globalCircuitBreakerThreshold"
    assert err.reason == (
        "tools.loopDetection.criticalThreshold must be lower than globalCircuitBreakerThreshold."
    )
    assert err.value == 9


def test_origins_name_the_scope_of_each_key(tmp_path: Path) -> None:
    data = document(
        {"warningThreshold": 3, "criticalThreshold": 5, "detectors": {"pingPong": False}},
        {"coder": {"criticalThreshold": 4, "detectors": {"genericRepeat": False}}},
        "entries",
    )
    loaded = config_module.load_config_with_origins(write_json(tmp_path, data), "coder")
    assert thresholds(loaded.config) == (3, 4, 30)
    assert dict(loaded.origins) == {
        "warningThreshold": "global",
        "criticalThreshold": "agent",
        "detectors.pingPong": "global",
        "detectors.genericRepeat": "agent",
    }
    assert loaded.global_block == "tools.loopDetection"
    assert loaded.agent_block == "agents.entries.coder.tools.loopDetection"
    assert loaded.config == load_config(write_json(tmp_path, data), "coder")


def check(runner: CliRunner, path: Path, *args: str) -> dict[str, Any]:
    result = runner.invoke(config_app, ["check", str(path), *args, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_config_check_shows_the_merged_value_and_its_origin(tmp_path: Path) -> None:
    path = write_json(
        tmp_path,
        document({"warningThreshold": 3, "criticalThreshold": 5}, {"coder": {"criticalThreshold": 4}}),
    )
    runner = CliRunner()
    data = check(runner, path, "--agent", "coder")
    assert data["config"]["criticalThreshold"] == 4
    origins = data["origins"]
    assert origins["warningThreshold"] == "global"
    assert origins["criticalThreshold"] == "agent"
    assert origins["globalCircuitBreakerThreshold"] == "preset openclaw"
    assert origins["enabled"] == "default"
    assert origins["detectors.pingPong"] == "default"
    assert data["agentBlock"] == "agents.list[0].tools.loopDetection"
    assert data["repairs"] == []

    result = runner.invoke(config_app, ["check", str(path), "--agent", "coder"])
    assert result.exit_code == 0, result.output
    rows = {
        line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:4]]
        for line in result.stdout.splitlines()
        if line.count("│") >= 4
    }
    assert rows["criticalThreshold"] == ["4", "config (agent block)"]
    assert rows["warningThreshold"] == ["3", "config (global block)"]
    assert rows["historySize"] == ["30", "preset openclaw"]


def test_config_check_marks_repaired_values(tmp_path: Path) -> None:
    path = write_json(
        tmp_path, document({"warningThreshold": 8}, {"coder": {"criticalThreshold": 4}})
    )
    data = check(CliRunner(), path, "--agent", "coder")
    assert data["config"]["criticalThreshold"] == 9
    assert data["origins"]["criticalThreshold"] == "repaired"
    [repair] = data["repairs"]
    assert "criticalThreshold 4 -> 9" in repair


@pytest.mark.parametrize(
    "agents",
    [{"coder": {"historySize": 7}}, {}],
    ids=["other-agent-only", "no-agents"],
)
def test_config_check_for_an_agent_without_override_says_so(
    tmp_path: Path, agents: dict[str, dict[str, Any]]
) -> None:
    data = document({"warningThreshold": 3, "criticalThreshold": 5}, agents)
    data["agents"]["list"].append({"id": "writer"})  # an agent with no loopDetection block
    path = write_json(tmp_path, data)
    runner = CliRunner()
    for agent in ("nobody", "writer"):
        out = check(runner, path, "--agent", agent)
        assert (out["config"]["warningThreshold"], out["config"]["criticalThreshold"]) == (3, 5)
        assert out["config"]["historySize"] == 30
        assert out["agentBlock"] is None
        assert any(f"agent {agent!r} has no tools.loopDetection override" in n for n in out["notes"])
        table = runner.invoke(config_app, ["check", str(path), "--agent", agent])
        assert table.exit_code == 0
        assert f"note: agent {agent!r} has no tools.loopDetection override" in table.stdout
    # Only the note every file without `enabled` gets (issue 22: nothing guards nothing in silence).
    assert [n for n in check(runner, path)["notes"] if "enabled is unset" not in n] == []


# --- item 19: duplicate keys and agent ids ------------------------------------------------


@pytest.mark.parametrize(
    ("text", "path", "value"),
    [
        ('{"a": 1, "a": 2}', "a", 2),
        (
            '{"tools": {"loopDetection": {"warningThreshold": 3, "warningThreshold": 5}}}',
            "tools.loopDetection.warningThreshold",
            5,
        ),
        (
            '{"tools": {"loopDetection": {}, "loopDetection": {"enabled": true}}}',
            "tools.loopDetection",
            {"enabled": True},
        ),
        ('{"agents": {"list": [{"id": "a", "x": 1, "x": 1}]}}', "agents.list[0].x", 1),
        (
            '{"agents": {"entries": {"team.coder": {}, "team.coder": {"tools": {}}}}}',
            'agents.entries["team.coder"]',
            {"tools": {}},
        ),
        # JSON5 (not plain JSON): the fallback parser detects them too.
        (
            "// comment\n{tools: {loopDetection: {detectors: {pingPong: true, 'pingPong': false}}}}",
            "tools.loopDetection.detectors.pingPong",
            False,
        ),
        ("{gateway: {port: 1, port: 2,},}", "gateway.port", 2),
    ],
)
def test_duplicate_keys_at_any_level_are_errors(
    tmp_path: Path, text: str, path: str, value: object
) -> None:
    file = write(tmp_path, text)
    err = raises_config_error(lambda: load_config(file))
    assert err.file == str(file)
    assert err.path == path
    assert err.value == value
    assert str(err).startswith(f"{file}: {path}: duplicate key")


def test_duplicate_key_error_shows_both_values(tmp_path: Path) -> None:
    file = write(tmp_path, '{"tools": {"loopDetection": {"historySize": 4, "historySize": 9}}}')
    err = raises_config_error(lambda: load_config(file))
    assert str(err) == (
        f"{file}: tools.loopDetection.historySize: duplicate key: given more than once, "
        "first as 4 (got 9)"
    )


@pytest.mark.parametrize("with_blocks", [True, False])
def test_duplicate_agent_ids_in_the_list_are_errors(tmp_path: Path, with_blocks: bool) -> None:
    entry: dict[str, Any] = {"tools": {"loopDetection": {"historySize": 7}}} if with_blocks else {}
    data = {"agents": {"list": [{"id": "a"}, {"id": "x", **entry}, {"id": "x", **entry}]}}
    file = write_json(tmp_path, data)
    err = raises_config_error(lambda: load_config(file, agent_id="x"))
    assert err.file == str(file)
    assert err.path == "agents.list[2].id"
    assert err.value == "x"
    assert "duplicate agent id: already defined at agents.list[1]" in str(err)


def test_agent_id_in_both_shapes_is_an_error(tmp_path: Path) -> None:
    data = {
        "agents": {
            "entries": {"x": {"tools": {"loopDetection": {"historySize": 5}}}},
            "list": [{"id": "x", "tools": {"loopDetection": {"historySize": 6}}}],
        }
    }
    file = write_json(tmp_path, data)
    err = raises_config_error(lambda: load_config(file, agent_id="x"))
    assert err.path == "agents.list[0].id"
    assert "already defined at agents.entries.x" in str(err)


def test_duplicates_are_also_refused_by_config_from_mapping() -> None:
    data = {"agents": {"list": [{"id": "x"}, {"id": "x"}]}}
    err = raises_config_error(lambda: config_from_mapping(data, source="mem.json"))
    assert str(err).startswith("mem.json: agents.list[1].id: duplicate agent id")


def test_config_check_reports_a_duplicate_key(tmp_path: Path) -> None:
    file = write(tmp_path, '{"tools": {"loopDetection": {"enabled": true, "enabled": false}}}')
    result = CliRunner().invoke(config_app, ["check", str(file)])
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"error: {file}: tools.loopDetection.enabled: duplicate key"
    )


# --- item 19: plain JSON goes through the fast parser -----------------------------------------


def test_plain_json_does_not_need_json5(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # json5 is pure Python (36 s for 5 MB); a plain JSON file must never reach it.
    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("json5 used for a plain JSON file")

    data = document(
        {"warningThreshold": 3, "criticalThreshold": 5, "detectors": {"pingPong": False}},
        {f"agent{i}": {"historySize": 5 + i % 7} for i in range(2000)},
    )
    file = write(tmp_path, json.dumps(data, indent=2))
    import json5

    monkeypatch.setattr(json5, "loads", refuse)
    cfg = load_config(file, agent_id="agent1999")
    assert (cfg.warning_threshold, cfg.history_size, cfg.detectors.ping_pong) == (3, 5 + 1999 % 7, False)


@pytest.mark.parametrize(
    "text",
    [
        '{"tools": {"loopDetection": {"historySize": 1e1}}, "x": "\\u00e9\\n"}',
        '{"tools": {"loopDetection": {"enabled": null}}, "big": 123456789012345678901234567890}',
        '{"nested": [[[{"a": [1, 2.5, -0, true, false, null]}]]], "tools": {}}',
    ],
)
def test_the_fast_path_reads_what_json5_reads(text: str, tmp_path: Path) -> None:
    import json5

    assert load_config(write(tmp_path, text)) == config_from_mapping(json5.loads(text))


def test_json5_errors_still_name_file_line_and_column(tmp_path: Path) -> None:
    # Invalid as JSON and as JSON5: the JSON5 parser's position is reported.
    file = write(tmp_path, '{\n  "tools": {\n    "loopDetection": {"enabled": tru}\n  }\n}\n')
    err = raises_config_error(lambda: load_config(file))
    assert err.file == str(file)
    assert err.line == 3
    assert str(err).startswith(f"{file}: line 3, column ")
    assert "invalid JSON5" in str(err)


def test_crlf_file_positions_count_lines(tmp_path: Path) -> None:
    file = tmp_path / "openclaw.json"
    file.write_bytes(b"{\r\n  tools: {\r\n    loopDetection: {enabled: tru}\r\n  }\r\n}\r\n")
    err = raises_config_error(lambda: load_config(file))
    assert err.line == 3


@pytest.mark.integration
def test_deeply_nested_json_is_a_config_error() -> None:
    script = textwrap.dedent(
        """
        import sys, tempfile
        from loopwarden.config import ConfigError, load_config
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write("[" * 200000 + "]" * 200000)
        try:
            load_config(f.name)
        except ConfigError as exc:
            print("ConfigError", exc.file == f.name)
        """
    )
    done = run_child([sys.executable, "-c", script])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ConfigError True"


# --- item 5: only regular files are read --------------------------------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "openclaw.fifo"
    os.mkfifo(path)
    return path


@pytest.mark.integration
def test_named_pipe_is_refused_without_hanging(fifo: Path) -> None:
    done = load_in_child(fifo)
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines() == [
        f"ConfigError: {fifo}: is a named pipe, not a config file (only regular files are read)",
        f"file={fifo}",
    ]


@pytest.mark.integration
def test_dev_zero_is_refused_without_reading_it() -> None:
    done = load_in_child("/dev/zero")
    assert done.returncode == 3, done.stderr
    assert "MemoryError" not in done.stderr
    assert done.stdout.startswith("ConfigError: /dev/zero: is a character device, not a config")


@pytest.mark.integration
def test_symlink_to_a_pipe_is_refused_and_to_a_file_followed(tmp_path: Path, fifo: Path) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(fifo)
    done = load_in_child(link)
    assert done.returncode == 3, done.stderr
    assert "is a named pipe" in done.stdout
    real = write_json(tmp_path, {"tools": {"loopDetection": {"historySize": 4}}}, "real.json")
    good = tmp_path / "good.json"
    good.symlink_to(real)
    assert load_config(good).history_size == 4


def test_oversized_file_is_refused_by_size(tmp_path: Path) -> None:
    big = tmp_path / "huge.json"
    with big.open("wb") as handle:  # sparse: costs no disk
        handle.truncate(config_module.MAX_CONFIG_BYTES + 1)
    err = raises_config_error(lambda: load_config(big))
    assert err.file == str(big)
    assert str(err) == f"{big}: config file is larger than 16 MiB; refusing to read it"


def test_file_at_the_size_limit_is_read(tmp_path: Path) -> None:
    body = '{"tools": {"loopDetection": {"historySize": 4}}}'
    padded = body + " " * (config_module.MAX_CONFIG_BYTES - len(body))
    file = write(tmp_path, padded)
    assert file.stat().st_size == config_module.MAX_CONFIG_BYTES
    assert load_config(file).history_size == 4


# Each command that takes a config path, with the exit code it uses for a config error.
COMMANDS: list[tuple[str, list[str], str, int]] = [
    ("config check", ["config", "check", "{path}"], "", 2),
    ("scan", ["scan", "--config", "{path}", "{tmp}"], "", 2),
    ("calibrate", ["calibrate", "--config", "{path}", "{tmp}"], "", 2),
    ("mcp-proxy", ["mcp-proxy", "--config", "{path}", "--", sys.executable, "-c", "pass"], "", 2),
    (
        "claude-hook",
        ["claude-hook", "--db", "{tmp}/hook.db", "--config", "{path}"],
        json.dumps(
            {
                "hook_event_name": "PreToolUse",
                "session_id": "s1",
                "tool_name": "Bash",
                "tool_input": {"command": "ls"},
                "tool_use_id": "t1",
            }
        ),
        1,  # Claude Code reads 2 as "block the call"; config errors are non-blocking
    ),
]


@pytest.mark.integration
@pytest.mark.parametrize(("name", "argv", "stdin", "code"), COMMANDS, ids=[c[0] for c in COMMANDS])
@pytest.mark.parametrize("target", ["fifo", "/dev/zero"])
def test_cli_commands_refuse_a_non_regular_config(
    tmp_path: Path, fifo: Path, name: str, argv: list[str], stdin: str, code: int, target: str
) -> None:
    path = str(fifo) if target == "fifo" else target
    args = [a.format(path=path, tmp=tmp_path) for a in argv]
    done = run_child([sys.executable, "-c", CLI, *args], stdin=stdin)
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    kind = "a named pipe" if target == "fifo" else "a character device"
    # Some commands print through rich, which wraps long lines.
    assert f"{path}: is {kind}, not a config file" in " ".join(done.stderr.split())
