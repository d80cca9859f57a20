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

from .config import (
    PRESETS,
    ConfigError,
    LoadedConfig,
    load_config_with_origins,
)

__all__ = ["config_app"]

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
    log = logging.getLogger("loopwarden")
    log.addHandler(collector)
    try:
        yield collector
    finally:
        log.removeHandler(collector)


@config_app.command("check")
def check(
    path: Annotated[Path, typer.Argument(help="OpenClaw config file (JSON5).")],
    agent: Annotated[
        str | None, typer.Option("--agent", help="Agent id whose override to apply.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (camelCase keys).")] = False,
) -> None:
    """Validate PATH and print the effective loop detection config."""
    with _collect_repairs() as repairs:
        try:
            loaded = load_config_with_origins(path, agent_id=agent)
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None  # an input error, distinct from findings (1)
    notes = [*repairs.messages]
    if agent is not None and loaded.agent_block is None:
        # Not an error: OpenClaw itself applies the global block to such an agent.
        notes.insert(
            0,
            f"agent {agent!r} has no tools.loopDetection override in this config; "
            "showing the global values",
        )
    rows = list(_rows(loaded, repairs.repaired))
    if as_json:
        typer.echo(json.dumps(_as_json(loaded, path, agent, rows, repairs.messages, notes),
                              indent=2))
        return
    _print_table(loaded, path, agent, rows, notes)


# (camelCase key path, effective value, origin): origin is "default", "preset <name>",
# "global", "agent", or "repaired" (a value raised by the order repair).
_Row = tuple[str, object, str]

_ORIGIN_LABELS = {"global": "config (global block)", "agent": "config (agent block)"}


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
        "config": config.model_dump(by_alias=True, mode="json"),
        "origins": {key: origin for key, _, origin in rows},
        "globalBlock": loaded.global_block,
        "agentBlock": loaded.agent_block,
        "derived": {key: getattr(config, attr) for key, attr in _DERIVED},
        "repairs": repairs,
        "notes": notes,
    }


def _rows(loaded: LoadedConfig, repaired: set[str]) -> Iterator[_Row]:
    """(camelCase key, effective value, where the value came from) for every setting."""
    config, origins = loaded.config, loaded.origins
    for name, field in type(config).model_fields.items():
        key = field.alias or name
        value = getattr(config, name)
        if isinstance(value, BaseModel):  # detectors / postCompactionGuard
            for sub_name, sub_field in type(value).model_fields.items():
                sub_key = f"{key}.{sub_field.alias or sub_name}"
                yield sub_key, getattr(value, sub_name), origins.get(sub_key, "default")
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
    table.add_column("key")
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
