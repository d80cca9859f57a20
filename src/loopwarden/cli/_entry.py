"""The ``loopwarden`` console script.

Kept to the standard library: ``loopwarden claude-hook`` runs twice per Claude Code tool call,
so it is dispatched from here before Typer, Rich or Click load (they cost more than the hook
itself). Every other command goes to the Typer app in :mod:`loopwarden.cli`.

A closed stdout (``loopwarden scan . | head``) ends the command quietly with exit code 141
(:mod:`loopwarden.cli._exits`) instead of a traceback.
"""

from __future__ import annotations

import sys

from ._exits import quiet_on_broken_pipe

TYPE_CHECKING = False  # (typing not imported: see loopwarden/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]

# The hook commands of the other coding-agent hosts: `claude-hook --host HOST`.
_HOST_HOOKS = {"codex-hook": "codex", "gemini-hook": "gemini-cli"}


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``loopwarden ARGS`` (``argv`` defaults to ``sys.argv[1:]``); returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    return quiet_on_broken_pipe(lambda: _dispatch(args))


def _dispatch(args: list[str]) -> int:
    if args[:1] == ["claude-hook"]:
        return _claude_hook(args[1:])
    host = _HOST_HOOKS.get(args[0]) if args else None
    if host is not None:  # the same hook, in another host's dialect
        return _claude_hook(["--host", host, *args[1:]])
    _load_site()
    from . import main as cli_main

    # The app reads sys.argv itself; make it hold the arguments given here.
    sys.argv[1:] = args
    cli_main()
    return 0


def _claude_hook(argv: list[str]) -> int:
    """Answer one Claude Code hook: through the resident server when one runs for hooks started
    like this one, else here, leaving a server behind for the next hook."""
    from . import _resident

    # (Not the http server's start: it must run in the hook's own process, a child of the
    # Claude Code session it registers, and leave no Unix socket server behind.)
    served = _resident.enabled() and not {"-h", "--help", "--stop-servers", "--http-start",
                                          "--http-serve"} & set(argv)
    if served:
        try:
            payload = sys.stdin.buffer.read()
        except (AttributeError, OSError, ValueError):  # no stdin to read: run() says so
            served = False
        else:
            code = _resident.answer_resident(argv, payload)
            if code is not None:
                return code
            import io

            sys.stdin = io.TextIOWrapper(io.BytesIO(payload), encoding="utf-8")
    _load_site()
    from .claude_hook import run

    code = run(argv)
    if served:
        _resident.start_server(argv)
    return code


def _load_site() -> None:
    """Add site-packages after all when started without them (``python -S``, the installed hook
    command :mod:`loopwarden.cli._hook`): what is answered here needs the dependencies."""
    if sys.flags.no_site and "site" not in sys.modules:
        import site

        site.main()


if __name__ == "__main__":
    raise SystemExit(main())
