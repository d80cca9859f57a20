"""The ``loopwarden`` command line: one Typer app, each command family in its own module."""

from __future__ import annotations

import importlib

import typer

from .cli_config import config_app

app = typer.Typer(
    name="loopwarden",
    help="Stop AI agents from wasting money and time in tool-call loops.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(config_app, name="config", help="Check OpenClaw loop-detection configs.")

# Each module adds its commands with `register(app)`; optional dependencies load inside them.
_COMMAND_MODULES = ("cli_scan", "cli_calibrate", "cli_runs", "cli_claude", "cli_mcp")
for _name in _COMMAND_MODULES:
    try:
        _module = importlib.import_module(f"loopwarden.{_name}")
    except ModuleNotFoundError as exc:  # pragma: no cover - only while a module is being written
        if exc.name != f"loopwarden.{_name}":
            raise
        continue
    _module.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
