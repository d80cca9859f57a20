"""How a ``loopwarden`` process ends: quietly on a closed stdout, with one line on a crash.

Kept to the standard library, like :mod:`loopwarden.cli._entry` (the console script) and
:mod:`loopwarden.cli.claude_hook`, which both use it before Typer loads.

A closed stdout (``loopwarden scan . | head``) ends the command quietly with exit code 141
(128 + SIGPIPE, what a shell reports for a program stopped by a closed pipe) instead of a
traceback.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # (typing not imported: see loopwarden/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["quiet_on_broken_pipe"]

BROKEN_PIPE_EXIT_CODE = 141


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


# One write at a time: Python's buffered stdout reports a closed pipe only when a write fails
# before any byte of it went out, so one big write (a 500 KB --json document into `| head`)
# loses its tail in silence and the command would exit 0.
_CHUNK = 64 * 1024


def write_out(text: str) -> None:
    """Print ``text`` and a newline on stdout, in pieces, so that a reader that went away
    (``| head``) raises :class:`BrokenPipeError` (exit 141) instead of passing unnoticed."""
    text += "\n"
    for start in range(0, len(text), _CHUNK):
        sys.stdout.write(text[start:start + _CHUNK])
        sys.stdout.flush()


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
