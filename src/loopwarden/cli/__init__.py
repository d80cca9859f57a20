"""The ``loopwarden`` command line: one Typer app, one module per command family.

- ``application``: the app itself (``--version``, the crash guard, exit codes) and :func:`main`;
- ``scan`` (``scan``, ``eval``; a package of private parts), ``calibrate``, ``runs``,
  ``config`` (``config check``), ``claude_hook`` (``claude-hook``), ``mcp_proxy``
  (``mcp-proxy``): one module per command family, each adding its commands with
  ``register(app)``; they import none of each other;
- ``_common``: what the transcript commands share (their config, path checks, stderr lines);
- ``_exits``: how a process ends (141 on a closed stdout, one line on a crash).

This file imports nothing: ``loopwarden claude-hook`` runs :mod:`loopwarden.cli.claude_hook`
straight from the console script (:mod:`loopwarden.cli._entry`) and must not pay for Typer, Rich or
Click. :data:`app` and :func:`main` load the Typer app on first use.
"""

from __future__ import annotations

# (Not imported from typing: the resident claude-hook client imports this package, and typing
# costs it milliseconds. Type checkers read any TYPE_CHECKING as true.)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .application import app as app

__all__ = ["app", "main"]


def main() -> None:
    """Run the ``loopwarden`` app on ``sys.argv`` (``python -m loopwarden.cli``); exits."""
    from .application import main as run_app

    run_app()


def __getattr__(name: str) -> Any:
    # ``app`` is loaded on first use only: importing this package must stay free of Typer.
    if name == "app":
        from .application import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
