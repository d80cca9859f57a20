"""The ``loopwarden`` console script and what every command-line entry shares.

Kept to the standard library: ``loopwarden claude-hook`` runs twice per Claude Code tool call,
so it is dispatched from here before Typer, Rich or Click load (they cost more than the hook
itself). Every other command goes to the Typer app in :mod:`loopwarden.cli`.

A closed stdout (``loopwarden scan . | head``) ends the command quietly with exit code 141
(128 + SIGPIPE, what a shell reports for a program stopped by a closed pipe) instead of a
traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

__all__ = ["BROKEN_PIPE_EXIT_CODE", "crash_message", "main", "quiet_on_broken_pipe"]

BROKEN_PIPE_EXIT_CODE = 141


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``loopwarden ARGS`` (``argv`` defaults to ``sys.argv[1:]``); returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    return quiet_on_broken_pipe(lambda: _dispatch(args))


def _dispatch(args: list[str]) -> int:
    if args[:1] == ["claude-hook"]:
        from .cli_claude import run

        return run(args[1:])
    from .cli import main as cli_main

    # The app reads sys.argv itself; make it hold the arguments given here.
    sys.argv[1:] = args
    cli_main()
    return 0


def quiet_on_broken_pipe(run: Callable[[], int | None]) -> int:
    """``run()``'s exit code, or :data:`BROKEN_PIPE_EXIT_CODE` without a traceback when stdout
    was closed under it. SystemExit passes through (after the final flush)."""
    try:
        try:
            return run() or 0
        finally:
            # Output still buffered would otherwise fail at interpreter exit, with an
            # "Exception ignored" message on stderr.
            sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        return BROKEN_PIPE_EXIT_CODE


def silence_stdout() -> None:
    """Point stdout at /dev/null: the reader is gone, and Python's own flush at exit must not
    fail on the closed pipe (the recipe of the ``signal`` module's documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError):  # stdout is no file (captured in a test): nothing to flush
        pass


def crash_message(command: str, exc: BaseException) -> str:
    """The one line an unexpected failure of ``loopwarden COMMAND`` prints on stderr."""
    detail = " ".join(str(exc).split()) or "(no message)"
    text = f"error: loopwarden {command} failed unexpectedly: {type(exc).__name__}: {detail}"
    # The message may quote undecodable file names; stderr must not fail on them too.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
