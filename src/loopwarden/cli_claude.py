"""``loopwarden claude-hook``: Claude Code's hook protocol on stdin/stdout.

Claude Code starts the command once per hook event, so the guard's state lives in a SQLite
file between invocations. Register it in ``settings.json`` for ``PreToolUse``, ``PostToolUse``,
``PostToolUseFailure`` and ``PreCompact``.

``--exit-behavior end`` (the default) stops Claude at the terminal stop — a second critical
loop in the same prompt's run — with ``continue: false`` and the stop message as
``stopReason``; ``error`` does the same (a command hook has no other way to end the run: exit
code 2 only blocks the one call); ``continue`` only denies the call.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

if TYPE_CHECKING:
    from .config import LoopDetectionConfig

__all__ = ["default_db_path", "register"]

# Claude Code reads exit code 2 as "block"; every loopwarden failure must stay non-blocking.
_EXIT_NON_BLOCKING_ERROR = 1
# Claude Code sessions can be resumed days later; a week keeps them and still bounds the file.
_IDLE_TTL_SECONDS = 7 * 24 * 3600
# How long one hook waits for another process's write lock. Concurrent hooks hold it for
# milliseconds; a lock held longer (a stuck process, a copy tool) must not stall every tool
# call of Claude Code: past this the hook fails open, logging the failure on stderr.
_BUSY_TIMEOUT_SECONDS = 1.0


class ExitBehaviorChoice(str, Enum):
    """``--exit-behavior``: the values of ``ClaudeCodeHook.exit_behavior``."""

    end = "end"
    error = "error"
    continue_ = "continue"


def register(app: typer.Typer) -> None:
    app.command("claude-hook")(claude_hook)


def default_db_path() -> Path:
    return Path("~/.loopwarden/claude-hook.db").expanduser()


def claude_hook(
    db: Annotated[Path | None, typer.Option(
        "--db", envvar="LOOPWARDEN_DB", show_envvar=True,
        show_default="~/.loopwarden/claude-hook.db", help="SQLite file holding the sessions' state.",
    )] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="OpenClaw config file (tools.loopDetection). Detection is on unless "
        "it sets enabled: false.",
    )] = None,
    agent: Annotated[str | None, typer.Option(
        "--agent", help="Agent id whose per-agent loopDetection override applies.",
    )] = None,
    exit_behavior: Annotated[ExitBehaviorChoice, typer.Option(
        "--exit-behavior", case_sensitive=False,
        help="At the terminal stop (a second critical loop in the same prompt): 'end' stops "
        "Claude (continue: false, the stop message as stopReason); 'error' does the same; "
        "'continue' only denies the call.",
    )] = ExitBehaviorChoice.end,
) -> None:
    """Guard Claude Code tool calls: reads one hook payload on stdin, writes the hook's
    answer on stdout (settings.json: PreToolUse, PostToolUse, PostToolUseFailure, PreCompact)."""
    from .integrations.claude_code_hook import HANDLED_EVENTS

    payload = _read_payload()
    if payload.get("hook_event_name") not in HANDLED_EVENTS:
        # Registered for an event loopwarden does not act on: answer at once, touch nothing.
        return
    output = _handle(payload, db or default_db_path(), config, agent, exit_behavior.value)
    if output:
        typer.echo(json.dumps(output))


def _handle(
    payload: dict[str, Any], db: Path, config_path: Path | None, agent: str | None,
    exit_behavior: str = "end",
) -> dict[str, Any]:
    from .config import ConfigError
    from .events import LoggingSink
    from .guard import LoopGuard
    from .integrations.claude_code_hook import (
        ClaudeCodeHook,
        HookPayloadError,
        check_exit_behavior,
    )
    from .stores.sqlite import SQLiteStore

    try:
        config = _hook_config(config_path, agent)
    except ConfigError as exc:
        _fail(f"loopwarden: {exc}")
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _fail(f"loopwarden: cannot create {db.parent}: {exc}")
    store = SQLiteStore(db, idle_ttl=_IDLE_TTL_SECONDS, timeout=_BUSY_TIMEOUT_SECONDS)
    guard = LoopGuard(config, store=store)
    # Loop events reach Claude Code in the hook's answer and the run record; logging them too
    # would only repeat them on stderr, which is kept for what went wrong.
    guard.sinks[:] = [sink for sink in guard.sinks if not isinstance(sink, LoggingSink)]
    try:
        with _problems_to_stderr():
            return ClaudeCodeHook(guard, agent_id=agent,
                                  exit_behavior=check_exit_behavior(exit_behavior)).handle(payload)
    except HookPayloadError as exc:
        _fail(f"loopwarden: {exc}")
    finally:
        store.close()


@contextmanager
def _problems_to_stderr() -> Iterator[None]:
    """The guard's and the store's own warnings (a store that failed, so the call was allowed;
    a corrupt session state that was reset) on stderr, for the length of one hook."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("loopwarden %(levelname)s %(message)s"))
    handler.setLevel(logging.WARNING)
    handler.addFilter(lambda record: record.name in ("loopwarden", "loopwarden.stores"))
    log = logging.getLogger("loopwarden")
    level = log.level
    log.addHandler(handler)
    if log.getEffectiveLevel() > logging.WARNING:
        log.setLevel(logging.WARNING)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def _hook_config(path: Path | None, agent: str | None) -> LoopDetectionConfig:
    """The config, with detection on unless the file explicitly turns it off: whoever
    registers the hook wants it to guard."""
    from .config import LoopDetectionConfig, load_config

    config = load_config(path, agent) if path is not None else LoopDetectionConfig()
    if config.enabled is None:
        config = config.with_overrides(enabled=True)
    return config


def _read_payload() -> dict[str, Any]:
    try:
        payload = json.loads(sys.stdin.read())
    except ValueError as exc:
        _fail(f"loopwarden: hook input is not JSON ({exc})")
    if not isinstance(payload, dict):
        _fail("loopwarden: hook input is not a JSON object")
    return payload


def _fail(message: str) -> NoReturn:
    typer.echo(message, err=True)
    raise typer.Exit(_EXIT_NON_BLOCKING_ERROR)
