"""``loopwarden config check``: validate an OpenClaw config and show the effective settings."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..base.log import get_logger
from ..config import (
    PRESETS,
    ConfigError,
    LoadedConfig,
    LoopDetectionConfig,
    key_segment,  # key paths spelled as config errors spell them
    load_config_with_origins,
)
from ..config.openclaw_file import load_config_text
from ._common import STDIN, read_stdin
from ._exits import write_out

config_app = typer.Typer(
    help="Inspect loop detection configuration.",
    no_args_is_help=True,
    add_completion=False,
)

_DERIVED = (
    ("rollingEnabled", "rolling_enabled"),
    ("compactionGuardEnabled", "compaction_guard_enabled"),
    ("errorRepeatEnabled", "error_repeat_enabled"),
    ("postOutcomeWarnings", "post_outcome_warnings"),
    ("maskVolatile", "mask_volatile"),
)


@config_app.callback()
def _group() -> None:
    """Inspect loop detection configuration."""
    # A callback keeps ``check`` a named subcommand even though it is the only one.


class _RepairCollector(logging.Handler):
    """Collects the threshold repairs that config loading logs, to show them to the user."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []
        self.repaired: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        self.repaired.update(getattr(record, "loopwarden_repaired", ()))


@contextmanager
def _collect_repairs() -> Iterator[_RepairCollector]:
    collector = _RepairCollector()
    log = get_logger("loopwarden")
    log.addHandler(collector)
    try:
        yield collector
    finally:
        log.removeHandler(collector)


def register(app: typer.Typer) -> None:
    """Add ``config check`` to ``app``."""
    app.add_typer(config_app, name="config", help="Check OpenClaw loop-detection configs.")


@config_app.command("check")
def check(
    path: Annotated[Path, typer.Argument(help="OpenClaw config file (JSON5); - reads it from stdin.")],
    agent: Annotated[
        str | None, typer.Option("--agent", help="Agent id whose override to apply.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (camelCase keys).")] = False,
) -> None:
    """Validate PATH and print the effective loop detection config."""
    with _collect_repairs() as repairs:
        try:
            loaded = (load_config_text(read_stdin(), "<stdin>", agent_id=agent)
                      if str(path) == STDIN else load_config_with_origins(path, agent_id=agent))
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None  # an input error, distinct from findings (1)
    if str(path) == STDIN:
        path = Path("<stdin>")
    notes = [*repairs.messages]
    if agent is not None and loaded.agent_block is None:
        # Not an error: OpenClaw itself applies the global block to such an agent.
        notes.insert(
            0,
            f"agent {agent!r} has no tools.loopDetection override in this config; "
            "showing the global values",
        )
    notes += _ignored_by_exemption(loaded)
    notes += _silent_settings(loaded)
    rows = list(_rows(loaded, repairs.repaired))
    if as_json:
        write_out(json.dumps(_as_json(loaded, path, agent, rows, repairs.messages, notes),
                              indent=2))
        return
    _print_table(loaded, path, agent, rows, notes)


def _silent_settings(loaded: LoadedConfig) -> list[str]:
    """What the file leaves to defaults that a reader may not expect (nothing guards nothing
    in silence)."""
    notes = []
    if loaded.global_block is None and loaded.agent_block is None:
        notes.append("this file has no tools.loopDetection block: nothing was read from it, "
                     "every value is a default")
    if loaded.config.enabled is None:
        notes.append("enabled is unset: LoopGuard(load_config(...)) in Python runs with the "
                     "rolling detectors OFF; the CLI doors (claude-hook, mcp-proxy) turn them "
                     "on. Set tools.loopDetection.enabled = true to detect loops everywhere")
    return notes


# (camelCase key path, effective value, origin): origin is "default", "preset <name>",
# "global", "agent", "repaired" (a value raised by the order repair), and for a perTool
# threshold the entry left out, "inherited" (the top-level value) or "fitted" (moved to stay
# in order around the entry's own thresholds).
_Row = tuple[str, object, str]

_ORIGIN_LABELS = {
    "global": "config (global block)",
    "agent": "config (agent block)",
    "inherited": "top-level value",
    "fitted": "top-level value, moved to stay in order",
}

_TOOL_KEYS = ("warningThreshold", "criticalThreshold", "globalCircuitBreakerThreshold")


def _as_json(
    loaded: LoadedConfig,
    path: Path,
    agent: str | None,
    rows: list[_Row],
    repairs: list[str],
    notes: list[str],
) -> dict[str, Any]:
    config = loaded.config
    return {
        "path": str(path),
        "agent": agent,
        "config": _config_json(config),
        "origins": {key: origin for key, _, origin in rows},
        "globalBlock": loaded.global_block,
        "agentBlock": loaded.agent_block,
        "derived": {key: getattr(config, attr) for key, attr in _DERIVED},
        "effectivePerTool": {
            pattern: _effective_entry(config, pattern) for pattern in config.per_tool
        },
        "repairs": repairs,
        "notes": notes,
    }


def _config_json(config: LoopDetectionConfig) -> dict[str, Any]:
    """The config as a loopDetection block would hold it: perTool entries with the keys they
    set (a null threshold would not validate), and no perTool key when there is none."""
    data = config.model_dump(by_alias=True, mode="json", exclude={"per_tool"})
    if config.per_tool:
        data["perTool"] = {
            pattern: entry.model_dump(by_alias=True, mode="json", exclude_none=True)
            for pattern, entry in config.per_tool.items()
        }
    return data


def _effective_entry(config: LoopDetectionConfig, pattern: str) -> dict[str, Any]:
    thresholds = config.tool_thresholds(pattern)  # the pattern itself names its own entry
    if thresholds is None:
        return {"exempt": True}
    return {"exempt": False, **dict(zip(_TOOL_KEYS, thresholds, strict=True))}


def _ignored_by_exemption(loaded: LoadedConfig) -> list[str]:
    """Thresholds merged into an exempt entry from the other scope have no effect: say so."""
    notes = []
    for pattern, entry in loaded.config.per_tool.items():
        prefix = "perTool" + key_segment(pattern)
        ignored = [key for key in _TOOL_KEYS if f"{prefix}.{key}" in loaded.origins]
        if entry.exempt and ignored:
            notes.append(f"{prefix} is exempt, so its {', '.join(ignored)} has no effect "
                         "(an exempt tool gets no verdicts; exempt: false makes it apply)")
    return notes


def _tool_rows(loaded: LoadedConfig, repaired: set[str]) -> Iterator[_Row]:
    """Rows for each perTool entry: exempt, and a non-exempt tool's effective thresholds."""
    config, origins = loaded.config, loaded.origins
    top = (config.warning_threshold, config.critical_threshold,
           config.global_circuit_breaker_threshold)
    for pattern, entry in config.per_tool.items():
        prefix = "perTool" + key_segment(pattern)
        yield f"{prefix}.exempt", entry.exempt, origins.get(f"{prefix}.exempt", "default")
        thresholds = config.tool_thresholds(pattern)
        if thresholds is None:
            continue
        for key, value, inherited in zip(_TOOL_KEYS, thresholds, top, strict=True):
            path = f"{prefix}.{key}"
            if path in repaired:
                origin = "repaired"
            elif path in origins:
                origin = origins[path]
            else:
                origin = "inherited" if value == inherited else "fitted"
            yield path, value, origin


def _rows(loaded: LoadedConfig, repaired: set[str]) -> Iterator[_Row]:
    """(camelCase key, effective value, where the value came from) for every setting."""
    config, origins = loaded.config, loaded.origins
    for name, field in type(config).model_fields.items():
        key = field.alias or name
        value = getattr(config, name)
        if name == "per_tool":
            yield from _tool_rows(loaded, repaired)
            continue
        if isinstance(value, BaseModel):  # detectors / postCompactionGuard
            for sub_alias, sub_value in value.model_dump(by_alias=True).items():
                sub_key = f"{key}.{sub_alias}"
                yield sub_key, sub_value, origins.get(sub_key, "default")
            continue
        if name in repaired:
            origin = "repaired"
        elif key in origins:
            origin = origins[key]
        elif name in PRESETS[config.preset]:
            origin = f"preset {config.preset}"
        else:
            origin = "default"
        yield key, value, origin


def _print_table(
    loaded: LoadedConfig, path: Path, agent: str | None, rows: list[_Row], notes: list[str]
) -> None:
    console = Console()
    config = loaded.config
    title = f"Effective loop detection config: {path}" + (f" (agent {agent})" if agent else "")
    blocks = [
        f"{scope} block: {where}"
        for scope, where in (("global", loaded.global_block), ("agent", loaded.agent_block))
        if where is not None
    ]
    table = Table(
        title=Text(title),
        title_justify="left",
        caption=Text("\n".join(blocks)) if blocks else None,
        caption_justify="left",
    )
    table.add_column("key", overflow="fold")  # long perTool key paths wrap, not cut
    table.add_column("value")
    table.add_column("from")
    for key, value, origin in rows:
        table.add_row(Text(key), Text(_show(value)), Text(_ORIGIN_LABELS.get(origin, origin)))
    for key, attr in _DERIVED:
        table.add_row(Text(key), Text(_show(getattr(config, attr))), Text("derived"))
    console.print(table)
    for message in notes:
        console.print(Text(f"note: {message}"))


def _show(value: object) -> str:
    return "unset" if value is None else json.dumps(value)
