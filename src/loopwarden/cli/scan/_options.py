"""What ``scan`` and ``eval`` share: the config options and how they are resolved, the
settings the output reports, and the progress bar."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ...config import PRESETS, ConfigError, LoopDetectionConfig
from .._common import fail, note, resolve_config, stderr

#: Below this many files a progress bar would only flicker.
PROGRESS_MIN_FILES = 10


def _one_of(choices: Sequence[str]) -> Callable[[str | None], str | None]:
    """A Typer callback accepting only ``choices`` (Typer 0.29 has no plain choice type)."""

    def check(value: str | None) -> str | None:
        if value is not None and value not in choices:
            raise typer.BadParameter(f"expected one of: {', '.join(choices)}")
        return value

    return check


_ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", help="OpenClaw config (JSON5) whose tools.loopDetection to use."),
]
_AgentOption = Annotated[
    str | None, typer.Option("--agent", help="Agent id whose override to apply (with --config).")
]
_PresetOption = Annotated[
    str | None,
    typer.Option("--preset", callback=_one_of(sorted(PRESETS)),
                 help=f"Detection preset, overriding the config's: {' | '.join(sorted(PRESETS))}."),
]


def _config_or_exit(config_path: Path | None, agent: str | None,
                    preset: str | None) -> LoopDetectionConfig:
    if agent is not None and config_path is None:
        fail("--agent needs --config")
    try:
        config = resolve_config(config_path, agent, preset)
    except ConfigError as exc:
        fail(str(exc))
    if config.enabled is False:
        note("the config sets enabled: false, so the rolling detectors report nothing")
    return config


def _settings(config: LoopDetectionConfig) -> dict[str, object]:
    return {
        "preset": config.preset,
        "enabled": config.enabled,
        "warningThreshold": config.warning_threshold,
        "criticalThreshold": config.critical_threshold,
        "globalCircuitBreakerThreshold": config.global_circuit_breaker_threshold,
    }


@contextmanager
def _progress(total: int, label: str) -> Iterator[Callable[[str], None]]:
    """``advance(name)``; a live bar on stderr only for many files on a terminal."""
    console = stderr()
    if total < PROGRESS_MIN_FILES or not console.is_terminal:
        yield lambda name: None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeRemainingColumn(), TextColumn("[dim]{task.fields[name]}"))
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(label, total=total, name="")
        yield lambda name: bar.update(task, advance=1, name=name[-40:])
