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

from .config import PRESETS, ConfigError, LoopDetectionConfig, load_config

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
            config = load_config(path, agent_id=agent)
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(_as_json(config, path, agent, repairs.messages), indent=2))
        return
    _print_table(config, path, agent, repairs)


def _as_json(
    config: LoopDetectionConfig, path: Path, agent: str | None, repairs: list[str]
) -> dict[str, Any]:
    return {
        "path": str(path),
        "agent": agent,
        "config": config.model_dump(by_alias=True, mode="json"),
        "derived": {key: getattr(config, attr) for key, attr in _DERIVED},
        "repairs": repairs,
    }


def _rows(config: LoopDetectionConfig, repaired: set[str]) -> Iterator[tuple[str, object, str]]:
    """(camelCase key, effective value, where the value came from) for every setting."""
    for name, field in type(config).model_fields.items():
        key = field.alias or name
        value = getattr(config, name)
        if isinstance(value, BaseModel):  # detectors / postCompactionGuard
            for sub_name, sub_field in type(value).model_fields.items():
                origin = "config" if sub_name in value.model_fields_set else "default"
                yield f"{key}.{sub_field.alias or sub_name}", getattr(value, sub_name), origin
            continue
        if name in repaired:
            origin = "repaired"
        elif name in config.model_fields_set:
            origin = "config"
        elif name in PRESETS[config.preset]:
            origin = f"preset {config.preset}"
        else:
            origin = "default"
        yield key, value, origin


def _print_table(
    config: LoopDetectionConfig, path: Path, agent: str | None, repairs: _RepairCollector
) -> None:
    console = Console()
    title = f"Effective loop detection config: {path}" + (f" (agent {agent})" if agent else "")
    table = Table(title=Text(title), title_justify="left")
    table.add_column("key")
    table.add_column("value")
    table.add_column("from")
    for key, value, origin in _rows(config, repairs.repaired):
        table.add_row(Text(key), Text(_show(value)), Text(origin))
    for key, attr in _DERIVED:
        table.add_row(Text(key), Text(_show(getattr(config, attr))), Text("derived"))
    console.print(table)
    for message in repairs.messages:
        console.print(Text(f"note: {message}"))


def _show(value: object) -> str:
    return "unset" if value is None else json.dumps(value)
