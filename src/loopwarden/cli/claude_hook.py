"""``loopwarden claude-hook``: Claude Code's hook protocol on stdin/stdout.

Claude Code starts the command once per hook event, so the guard's state lives in a SQLite
file between invocations. Register it in ``settings.json`` for ``PreToolUse``, ``PostToolUse``,
``PostToolUseFailure`` and ``PreCompact``.

The command runs twice per tool call, so it starts fast: this module imports neither Typer nor
Rich nor Click, nor pydantic once the config is cached (see :func:`_hook_config`). The
``loopwarden`` console script dispatches ``claude-hook`` straight to :func:`run`, and the
command registered in the Typer app hands its arguments to the same :func:`run`, so both parse
them alike.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

from ..base.log import get_logger
from ..base.paths import DB_ENV, default_db_path
from ._exits import crash_message

if TYPE_CHECKING:
    import argparse

    import typer
    from _typeshed import SupportsWrite

    from ..config import LoopDetectionConfig
    from ..guard import LoopGuard
    from ..integrations.claude_code_hook import ExitBehavior

# Claude Code reads exit code 2 as "block"; every loopwarden failure must stay non-blocking,
# usage errors included (argparse's own code for them is 2).
_EXIT_NON_BLOCKING_ERROR = 1
# Claude Code sessions can be resumed days later; a week keeps them and still bounds the file.
_IDLE_TTL_SECONDS = 7 * 24 * 3600
# How long one hook waits for another process's write lock. Concurrent hooks hold it for
# milliseconds; a lock held longer (a stuck process, a copy tool) must not stall every tool
# call of Claude Code: past this the hook fails open, logging the failure on stderr.
_BUSY_TIMEOUT_SECONDS = 1.0

_STOP_SERVERS = "--stop-servers"
_HELP = ("Guard Claude Code tool calls: reads one hook payload on stdin, writes the hook's "
         "answer on stdout (settings.json: PreToolUse, PostToolUse, PostToolUseFailure, "
         f"PreCompact). `{_STOP_SERVERS}` alone stops your resident hook servers.")


class _HookExit(Exception):
    """End the hook with ``code``, after ``message`` (if any) on stderr."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# The options: flag -> (attribute, conversion, default, allowed values or None, help). Both
# parsers below are made from this table, so they cannot disagree.
_OPTIONS: dict[str, tuple[str, Callable[[str], Any], Any, tuple[Any, ...] | None, str]] = {
    "--db": ("db", Path, None, None,
             f"SQLite file holding the sessions' state [default: ${DB_ENV} or "
             "~/.loopwarden/loopwarden.db, the file `loopwarden runs` reads]."),
    "--config": ("config", Path, None, None,
                 "OpenClaw config file (tools.loopDetection). Detection is on unless it sets "
                 "enabled: false."),
    "--agent": ("agent", str, None, None,
                "Agent id whose per-agent loopDetection override applies."),
    "--preset": ("preset", str, None, ("openclaw", "early"),
                 "Detection preset (openclaw, early), on top of --config if given."),
    "--exit-behavior": ("exit_behavior", str, "end", ("end", "error", "continue", "ask"),
                        "At the terminal stop (a second critical loop in one prompt's run): "
                        "end or error stop Claude (continue: false, the stop message as "
                        "stopReason; a command hook has no other way to end the run), "
                        "continue only denies the call, ask puts the call before the user in "
                        "Claude Code's permission prompt (a session without a user, Codex and "
                        "Gemini CLI: end) [default: end]."),
    # Which host's hook dialect: `loopwarden codex-hook` and `gemini-hook` are this command
    # with --host, so all three share the store, the config cache and the resident server.
    "--host": ("host", str, "claude-code", ("claude-code", "codex", "gemini-cli"),
               "The host whose hook payloads come in: claude-code, codex (Codex CLI) or "
               "gemini-cli (Gemini CLI) [default: claude-code]."),
}


def _parse(argv: list[str]) -> dict[str, Any]:
    """The options in ``argv``. Plain ``--flag value`` / ``--flag=value`` lists (what
    settings.json holds) are read directly; anything else (``--help``, an abbreviation, a
    mistake) goes to argparse, which loads more modules than the whole hook otherwise runs."""
    quick = _quick_parse(argv)
    if quick is not None:
        return quick
    return vars(_parser().parse_args(argv))


def _quick_parse(argv: list[str]) -> dict[str, Any] | None:
    values = {dest: default for dest, _, default, _, _ in _OPTIONS.values()}
    tokens = iter(argv)
    for token in tokens:
        flag, has_value, value = token.partition("=")
        option = _OPTIONS.get(flag)
        if option is None:
            return None
        if not has_value:
            value = next(tokens, "-")
            if value.startswith("-"):  # argparse's reading: a missing value
                return None
        dest, convert, _, choices, _ = option
        converted = convert(value)
        if choices is not None and converted not in choices:
            return None
        values[dest] = converted
    return values


def _parser() -> argparse.ArgumentParser:
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            raise _HookExit(_EXIT_NON_BLOCKING_ERROR,
                            f"{self.format_usage()}{self.prog}: error: {message}")

        def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
            raise _HookExit(status, message.rstrip("\n") if message else None)

        def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
            # argparse ignores a failed write; a closed stdout must end as everywhere else.
            if message:
                (file or sys.stderr).write(message)

    parser = Parser(prog="loopwarden claude-hook", description=_HELP)
    for flag, (dest, convert, default, choices, help_text) in _OPTIONS.items():
        parser.add_argument(flag, dest=dest, type=convert, default=default, choices=choices,
                            help=help_text)
    return parser


def register(app: typer.Typer) -> None:
    """Add ``claude-hook`` to the Typer app; its arguments, ``--help`` included, go to
    :func:`run` unparsed."""
    import typer

    def claude_hook(ctx: typer.Context) -> None:
        code = run(ctx.args)
        if code:
            raise typer.Exit(code)

    # Typer reads the annotation to pass the context; this module names `typer` only for type
    # checkers, so the string annotation would not resolve.
    claude_hook.__annotations__["ctx"] = typer.Context
    app.command(
        "claude-hook", help=_HELP, add_help_option=False,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )(claude_hook)
    for name, host, events in (("codex-hook", "codex", "PreToolUse, PostToolUse"),
                               ("gemini-hook", "gemini-cli", "BeforeTool, AfterTool, "
                                                             "PreCompress")):
        app.command(
            name, add_help_option=False,
            help=f"claude-hook --host {host}: guard {host} tool calls (hooks: {events}).",
            context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        )(_host_hook(host))


def _host_hook(host: str) -> Callable[..., None]:
    import typer

    def host_hook(ctx: typer.Context) -> None:
        code = run(["--host", host, *ctx.args])
        if code:
            raise typer.Exit(code)

    host_hook.__annotations__["ctx"] = typer.Context
    return host_hook


def run(argv: Sequence[str]) -> int:
    """``loopwarden claude-hook ARGV``: answers the payload on stdin; returns the exit code.
    ``--stop-servers`` alone stops this user's resident hook servers instead."""
    if list(argv) == [_STOP_SERVERS]:
        from ._resident_server import stop_servers

        return stop_servers()
    if argv[:1] in (["--http-serve"], ["--http-start"]):
        return _http(list(argv))
    try:
        options = _parse(list(argv))
        _answer(options["db"], options["config"], options["agent"], options["exit_behavior"],
                options["host"], options["preset"])
    except _HookExit as exc:
        if exc.message:
            sys.stderr.write(exc.message + "\n")
        return exc.code
    except BrokenPipeError:
        raise  # nobody reads the answer: the caller exits 141 (_exits.quiet_on_broken_pipe)
    except Exception as exc:  # a bug: one line on stderr, and Claude Code goes on
        if os.environ.get("LOOPWARDEN_DEBUG"):
            traceback.print_exception(exc, file=sys.stderr)
        sys.stderr.write(crash_message("claude-hook", exc) + "\n")
        return _EXIT_NON_BLOCKING_ERROR
    return 0


def serve(argv: Sequence[str]) -> int:
    """Answer hooks started with ``argv`` from this process until it is idle (the resident
    server, :mod:`loopwarden.cli._resident_server`): the imports are paid once, not per hook."""
    from ._resident_server import serve as serve_resident

    return serve_resident(argv, run)


def _http(argv: list[str]) -> int:
    """``--http-serve PORT ARGS``: answer http hooks on 127.0.0.1:PORT as ``claude-hook ARGS``
    would (:mod:`loopwarden.cli._resident_http`). ``--http-start PORT ARGS`` (the installer's
    SessionStart and UserPromptSubmit command hooks) starts that server detached unless it
    answers, and tells the user when none does."""
    if len(argv) < 2 or not argv[1].isdigit() or not 0 < int(argv[1]) < 65536:
        sys.stderr.write(f"loopwarden: {argv[0]} needs a port number, got {argv[1:2]}\n")
        return _EXIT_NON_BLOCKING_ERROR
    port, rest = int(argv[1]), argv[2:]
    if argv[0] == "--http-serve":
        from ._resident_http import serve_http

        return serve_http(rest, run, port)
    from ._resident_http import start_http

    sys.stdin.read()  # (the SessionStart or UserPromptSubmit payload: nothing in it is needed)
    problem = start_http(port, rest)
    if problem is not None:  # shown to the user; an exit code 0, so that the session goes on
        sys.stdout.write(json.dumps({"systemMessage": problem}) + "\n")
    return 0


def _answer(db: Path | None, config: Path | None, agent: str | None,
            exit_behavior: str, host: str = "claude-code", preset: str | None = None) -> None:
    from ..integrations import claude_code_hook, codex_hook, gemini_cli_hook

    door = {"codex": codex_hook, "gemini-cli": gemini_cli_hook}.get(host, claude_code_hook)
    payload = _read_payload()
    event = payload.get("hook_event_name")
    if (door is claude_code_hook and event == claude_code_hook.BATCH_EVENT
            and exit_behavior != "ask"):
        # The payload alone decides: no config, no database. (Under "ask" the batch settles
        # the questions asked about its calls, which the database holds.)
        output = _batch_stop(payload, exit_behavior)
    elif door is claude_code_hook and event == claude_code_hook.BATCH_EVENT:
        output = _handle(payload, db or default_db_path(), config, agent, exit_behavior, host,
                         preset)
    elif event not in door.HANDLED_EVENTS:
        # Registered for an event loopwarden does not act on: answer at once, touch nothing.
        return
    else:
        output = _handle(payload, db or default_db_path(), config, agent, exit_behavior, host,
                         preset)
    if output:
        sys.stdout.write(json.dumps(output) + "\n")
        sys.stdout.flush()


def _batch_stop(payload: dict[str, Any], exit_behavior: str) -> dict[str, Any]:
    from ..integrations.claude_code_hook import batch_stop_output, check_exit_behavior

    return batch_stop_output(payload, exit_behavior=check_exit_behavior(exit_behavior))


def _handle(
    payload: dict[str, Any], db: Path, config_path: Path | None, agent: str | None,
    exit_behavior: str = "end", host: str = "claude-code", preset: str | None = None,
) -> dict[str, Any]:
    from ..base.errors import LoopwardenError
    from ..guard import LoopGuard
    from ..guard.events import LoggingSink
    from ..guard.stores.sqlite import SQLiteStore
    from ..integrations.claude_code_hook import HookPayloadError, check_exit_behavior

    try:
        db.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _fail(f"loopwarden: cannot create {db.parent}: {exc}")
    try:
        config = _hook_config(config_path, agent, db, preset)
    except LoopwardenError as exc:  # a ConfigError, named by its base: config.py loads pydantic
        _fail(f"loopwarden: {exc}")
    store = SQLiteStore(db, idle_ttl=_IDLE_TTL_SECONDS, timeout=_BUSY_TIMEOUT_SECONDS)
    guard = LoopGuard(config, store=store)
    # Loop events reach Claude Code in the hook's answer and the run record; logging them too
    # would only repeat them on stderr, which is kept for what went wrong.
    guard.sinks[:] = [sink for sink in guard.sinks if not isinstance(sink, LoggingSink)]
    try:
        with _problems_to_stderr():
            answer: dict[str, Any] = _door(host, guard, agent,
                                           check_exit_behavior(exit_behavior)).handle(payload)
            return answer
    except HookPayloadError as exc:
        _fail(f"loopwarden: {exc}")
    finally:
        store.close()


def _door(host: str, guard: LoopGuard, agent: str | None, exit_behavior: ExitBehavior) -> Any:
    """The translation for ``host``'s hooks (each has ``handle(payload) -> answer``)."""
    if host == "codex":
        from ..integrations.codex_hook import CodexHook

        return CodexHook(guard, agent_id=agent, exit_behavior=exit_behavior)
    if host == "gemini-cli":
        from ..integrations.gemini_cli_hook import GeminiCliHook

        return GeminiCliHook(guard, agent_id=agent, exit_behavior=exit_behavior)
    from ..integrations.claude_code_hook import ClaudeCodeHook, attended

    return ClaudeCodeHook(guard, agent_id=agent, exit_behavior=exit_behavior,
                          can_ask=exit_behavior == "ask" and attended(os.environ))


@contextmanager
def _problems_to_stderr() -> Iterator[None]:
    """The guard's and the store's own warnings (a store that failed, so the call was allowed;
    a corrupt session state that was reset) on stderr, for the length of one hook."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("loopwarden %(levelname)s %(message)s"))
    handler.setLevel(logging.WARNING)
    handler.addFilter(lambda record: record.name in ("loopwarden", "loopwarden.stores"))
    log = get_logger("loopwarden")
    level = log.level
    log.addHandler(handler)
    if log.getEffectiveLevel() > logging.WARNING:
        log.setLevel(logging.WARNING)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def _hook_config(path: Path | None, agent: str | None, db: Path,
                 preset: str | None = None) -> LoopDetectionConfig:
    """The config, with detection on unless the file explicitly turns it off: whoever
    registers the hook wants it to guard.

    Validated once, then served from a cache file beside the database: validation needs
    pydantic, which takes longer to import than the rest of the hook takes to run. An entry is
    keyed by the config file's bytes, the agent, and loopwarden's version and config code, so
    an edited config (or an upgrade) is validated again on the next call; an unreadable or
    damaged cache is only slower. The guard gets a plain snapshot of the values either way.
    """
    from ._config_snapshot import snapshot_from_dict, snapshot_of

    cache = db.with_name(db.name + _CONFIG_CACHE_SUFFIX)
    key = _config_key(path, agent, preset)
    entries = _read_cache(cache) if key is not None else {}
    snapshot = snapshot_from_dict(entries.get(key)) if key is not None else None
    if snapshot is None:
        config = _validated_config(path, agent, preset)
        data = snapshot_of(config)
        if data is None:  # perTool entries: the config's own methods apply them
            return config
        if key is not None:
            _cache_snapshot(cache, entries, key, data)
        snapshot = snapshot_from_dict(data)
        assert snapshot is not None  # what snapshot_of gives, snapshot_from_dict takes
    # The guard only reads the config's attributes, which the snapshot has (all of them).
    return cast("LoopDetectionConfig", snapshot)


def _validated_config(path: Path | None, agent: str | None,
                      preset: str | None = None) -> LoopDetectionConfig:
    from ..config import LoopDetectionConfig, load_config

    config = load_config(path, agent) if path is not None else LoopDetectionConfig()
    if config.enabled is None:
        config = config.with_overrides(enabled=True)
    if preset is not None:
        config = config.with_overrides(preset=preset)
    return config


_CONFIG_CACHE_SUFFIX = ".hook-config.json"
_CONFIG_CACHE_ENTRIES = 16  # distinct (config, agent) pairs sharing one database
_CONFIG_CACHE_MAX_BYTES = 1 << 20
# Larger config files are not cached; config.py refuses those above its own limit (16 MiB).
_MAX_CACHED_CONFIG_BYTES = 16 * 1024 * 1024


def _config_key(path: Path | None, agent: str | None,
                preset: str | None = None) -> str | None:
    """What the validated config depends on, or None when that cannot be told cheaply (the
    file is not a readable regular file: validation then reports why)."""
    from .. import __version__

    try:
        # Every module of the config package (loopwarden/config/, beside this cli/ package):
        # what validation means is written there.
        package = Path(__file__).parents[1] / "config"
        code = sorted((entry.name, entry.stat().st_size, entry.stat().st_mtime_ns)
                      for entry in os.scandir(package) if entry.name.endswith(".py"))
        digest = None if path is None else _file_digest(path)
    except OSError:
        return None
    if not code or (path is not None and digest is None):
        return None
    return json.dumps([__version__, code, digest, agent, preset])


def _file_digest(path: Path) -> str | None:
    import hashlib
    import stat

    # O_NONBLOCK and the fstat: a path swapped for a named pipe must not block the hook.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        data = handle.read(_MAX_CACHED_CONFIG_BYTES + 1)
    if len(data) > _MAX_CACHED_CONFIG_BYTES:
        return None
    return hashlib.sha256(data).hexdigest()


def _read_cache(cache: Path) -> dict[str, Any]:
    try:
        with cache.open("rb") as handle:
            entries = json.loads(handle.read(_CONFIG_CACHE_MAX_BYTES))
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


def _cache_snapshot(cache: Path, entries: dict[str, Any], key: str, data: Any) -> None:
    """Add the entry, replacing the file at once (concurrent hooks read a whole file or the
    one before); a failure only means validating again next time."""
    entries.pop(key, None)
    entries[key] = data
    kept = dict(list(entries.items())[-_CONFIG_CACHE_ENTRIES:])
    temporary = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("x", encoding="utf-8") as handle:
            json.dump(kept, handle)
        os.replace(temporary, cache)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()


def _read_payload() -> dict[str, Any]:
    try:
        payload = json.loads(_read_stdin())
    except ValueError as exc:
        _fail(f"loopwarden: hook input is not JSON ({exc})")
    if not isinstance(payload, dict):
        _fail("loopwarden: hook input is not a JSON object")
    return payload


def _read_stdin() -> str:
    """The hook input, read as UTF-8 whatever the locale, a byte that is not UTF-8 kept as a
    lone surrogate (and guarded like any other text): the same text in the hook's own process
    and in the resident server."""
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:  # a text stream without bytes beneath (a caller's StringIO)
        return sys.stdin.read()
    data: bytes = buffer.read()
    return data.decode("utf-8", "surrogateescape")


def _fail(message: str) -> NoReturn:
    raise _HookExit(_EXIT_NON_BLOCKING_ERROR, message)
