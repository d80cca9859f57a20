"""The ``loopwarden`` console script.

Kept to the standard library: ``loopwarden claude-hook`` runs twice per Claude Code tool call,
so it is dispatched from here before Typer, Rich or Click load (they cost more than the hook
itself). Every other command goes to the Typer app in :mod:`loopwarden.cli`.

A closed stdout (``loopwarden scan . | head``) ends the command quietly with exit code 141
(:mod:`loopwarden.cli._exits`) instead of a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .cli._exits import quiet_on_broken_pipe

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``loopwarden ARGS`` (``argv`` defaults to ``sys.argv[1:]``); returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    return quiet_on_broken_pipe(lambda: _dispatch(args))


def _dispatch(args: list[str]) -> int:
    if args[:1] == ["claude-hook"]:
        from .cli.claude_hook import run

        return run(args[1:])
    from .cli import main as cli_main

    # The app reads sys.argv itself; make it hold the arguments given here.
    sys.argv[1:] = args
    cli_main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
