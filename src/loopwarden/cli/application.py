"""The ``loopwarden`` Typer app: ``--version``, the crash guard, and the command modules.

Exit codes: 0 nothing found (or no ``--fail-on``), 1 findings at or above ``--fail-on``, 2 usage
or input errors, and any unexpected crash, which prints one ``error:`` line instead of a
traceback (``LOOPWARDEN_DEBUG=1`` shows it). 1 is kept for findings so that CI can tell a loop
from a broken run. ``claude-hook`` is the exception: Claude Code reads 2 from a hook as
"block the tool call", so its failures stay 1 (non-blocking). A closed stdout (``| head``)
exits 141 without a traceback.

The ``loopwarden`` console script is :func:`loopwarden.cli._entry.main`, which runs
``claude-hook`` without loading Typer; :func:`main` here runs the app itself
(``python -m loopwarden.cli``, through :func:`loopwarden.cli.main`). A command given by name
loads only its own module (:data:`COMMANDS`): ``loopwarden install …`` does not pay for the
transcript tools' imports. Help, ``--version`` and anything unknown load them all.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Annotated, Any, NoReturn

import typer
import typer.core

from .. import __version__
from ._exits import BROKEN_PIPE_EXIT_CODE, crash_message, quiet_on_broken_pipe, silence_stdout

# Exit code of a command that failed unexpectedly (a bug or an unforeseen input).
_CRASH_EXIT_CODE = 2
_CRASH_EXIT_CODES = {"claude-hook": 1}  # see the module doc

# Each module adds its commands with `register(app)`; optional dependencies load inside them.
_COMMAND_MODULES = ("scan", "calibrate", "runs", "claude_hook", "mcp_proxy", "config", "install")
COMMANDS = {"scan": "scan", "eval": "scan", "calibrate": "calibrate", "runs": "runs",
            "claude-hook": "claude_hook", "codex-hook": "claude_hook",
            "gemini-hook": "claude_hook", "mcp-proxy": "mcp_proxy", "config": "config",
            "install": "install"}
"""Each command (the first argument) and the module that registers it (checked against the
whole app by a test)."""


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"loopwarden {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True, help="Print the version and exit.",
    )] = False,
) -> None:
    """Stop AI agents from wasting money and time in tool-call loops."""


def build_app(modules: Sequence[str] = _COMMAND_MODULES) -> typer.Typer:
    """The ``loopwarden`` app with the commands of ``modules`` (all of them by default)."""
    built = typer.Typer(
        name="loopwarden",
        help="Stop AI agents from wasting money and time in tool-call loops.",
        no_args_is_help=True,
        # -h as well as --help, on every command (sub-commands inherit it from this context).
        context_settings={"help_option_names": ["-h", "--help"]},
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    built.callback()(_root)
    for name in modules:
        importlib.import_module(f"loopwarden.cli.{name}").register(built)
    return built


def app_for(args: Sequence[str]) -> typer.Typer:
    """The app to run ``loopwarden ARGS``: the named command's module alone, or all."""
    module = COMMANDS.get(args[0]) if args else None
    return build_app((module,) if module is not None else _COMMAND_MODULES)


app: typer.Typer  # (set by __getattr__ below)


def __getattr__(name: str) -> Any:
    # The whole app, built on first use (:func:`main` builds only what its command needs).
    if name == "app":
        global app
        app = build_app()
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_crash_message = crash_message


def _crashed(command: str, exc: BaseException, code: int) -> NoReturn:
    if os.environ.get("LOOPWARDEN_DEBUG"):
        traceback.print_exception(exc, file=sys.stderr)
    sys.stderr.write(_crash_message(command, exc) + "\n")
    sys.stderr.flush()
    raise typer.Exit(code)


def crash_guarded(callback: Callable[..., Any], command: str) -> Callable[..., Any]:
    """``callback`` with unexpected exceptions turned into one error line and an exit code."""
    if getattr(callback, "__loopwarden_guarded__", False):
        return callback
    code = _CRASH_EXIT_CODES.get(command, _CRASH_EXIT_CODE)

    @functools.wraps(callback)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise  # deliberate exits and usage errors (BadParameter...) keep their own codes
        except BrokenPipeError:  # the reader of stdout is gone (`| head`): not a crash
            silence_stdout()
            raise typer.Exit(BROKEN_PIPE_EXIT_CODE) from None
        except Exception as exc:
            _crashed(command, exc, code)

    guarded.__loopwarden_guarded__ = True  # type: ignore[attr-defined]
    return guarded


def _guard_commands(typer_app: typer.Typer, prefix: str = "") -> None:
    for info in typer_app.registered_commands:
        if info.callback is not None:
            name = info.name or info.callback.__name__.replace("_", "-")
            info.callback = crash_guarded(info.callback, f"{prefix}{name}")
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _guard_commands(group.typer_instance, f"{prefix}{group.name} ")


def _flags_shown_as_flags() -> None:
    """Help shows a plain flag as ``--json``, not ``--json <bool>``: Typer's help prints a type
    after every option, flags (and ``--help``) included, and has no setting to turn that off."""
    option = typer.core.TyperOption
    if getattr(option.display_type_rich, "__loopwarden_flags__", False):
        return
    typed = option.display_type_rich

    def display_type_rich(self: typer.core.TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag else typed(self, ctx)

    display_type_rich.__loopwarden_flags__ = True  # type: ignore[attr-defined]
    option.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_shown_as_flags()


def main() -> None:
    """The ``loopwarden`` entry point: a crash in any command is one error line and an exit code,
    a closed stdout exits 141."""
    # The whole app once something has used it (a program may have added commands to it),
    # else only what the command needs. Guarded at call time, added commands included.
    chosen: typer.Typer = globals().get("app") or app_for(sys.argv[1:])
    _guard_commands(chosen)
    _exit_141_on_rich_broken_pipe()
    sys.exit(quiet_on_broken_pipe(lambda: _run_app(chosen)))


def _exit_141_on_rich_broken_pipe() -> None:
    """Rich handles a closed stdout itself, with the devnull recipe and exit code 1, which here
    means "findings"; in this process (the command line, not the library) it exits 141."""
    try:
        from rich.console import Console
    except ImportError:  # pragma: no cover - rich is a core dependency
        return

    def on_broken_pipe(self: Console) -> None:
        self.quiet = True
        silence_stdout()
        raise SystemExit(BROKEN_PIPE_EXIT_CODE)

    Console.on_broken_pipe = on_broken_pipe  # type: ignore[method-assign]


def _run_app(chosen: typer.Typer) -> int:
    try:
        chosen()
    except BrokenPipeError:
        raise  # quiet_on_broken_pipe's
    except SystemExit as exc:
        # Click answers a closed stdout outside our commands (help text) with exit 1, which
        # here means "findings": give it the broken-pipe code instead.
        if exc.code == 1 and type(sys.stdout).__name__ == "PacifyFlushWrapper":
            silence_stdout()
            return BROKEN_PIPE_EXIT_CODE
        raise
    except Exception as exc:  # outside any command (argument parsing): still one line, exit 2
        sys.stderr.write(_crash_message("(startup)", exc) + "\n")
        return _CRASH_EXIT_CODE
    return 0


if __name__ == "__main__":
    main()
