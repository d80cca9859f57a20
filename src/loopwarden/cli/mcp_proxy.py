"""``loopwarden mcp-proxy [--config F] -- CMD ARGS...``: front an MCP server with the guard."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from ..base.log import get_logger
from ..config import ConfigError, LoopDetectionConfig, load_config


def register(app: typer.Typer) -> None:
    """Add the ``mcp-proxy`` command to ``app``."""
    app.command(
        "mcp-proxy",
        # Everything from the server command on belongs to it, even words that look like our
        # options (``-- npx -y server --config x``).
        context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    )(mcp_proxy)


def mcp_proxy(
    command: Annotated[
        list[str],
        typer.Argument(metavar="CMD", help="The MCP server command and its arguments, after --."),
    ],
    config: Annotated[
        Path | None,
        typer.Option("--config", help="OpenClaw config file (JSON5) with tools.loopDetection."),
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Agent id whose config override to apply.")
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option("--preset", metavar="NAME",
                     help="Detection preset (openclaw, early), on top of --config if given."),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", help="Session id for this connection (default: a new uuid)."),
    ] = None,
    max_message_bytes: Annotated[
        str | None,
        typer.Option(
            "--max-message-bytes", metavar="SIZE", envvar="LOOPWARDEN_MCP_MAX_MESSAGE_BYTES",
            help="Longest JSON-RPC message passed either way, in bytes (64M, 256MiB, ...; "
                 "default 64M). An over-long request is answered with a JSON-RPC error.",
        ),
    ] = None,
    max_pending_calls: Annotated[
        int,
        typer.Option(
            "--max-pending-calls", metavar="N", min=1, envvar="LOOPWARDEN_MCP_MAX_PENDING_CALLS",
            help="Calls kept while they await the server's answer (default 1024). Past it the "
                 "oldest is evicted: logged, its outcome never recorded.",
        ),
    ] = 1024,
    max_pending_bytes: Annotated[
        str | None,
        typer.Option(
            "--max-pending-bytes", metavar="SIZE", envvar="LOOPWARDEN_MCP_MAX_PENDING_BYTES",
            help="Bytes of those calls kept (default 64M); past it the oldest is evicted.",
        ),
    ] = None,
    exit_behavior: Annotated[
        str,
        typer.Option(
            "--exit-behavior", metavar="WHAT",
            help="At the terminal stop: end blocks the call (the proxy cannot end the "
                 "client's run); ask puts it before the user as an MCP elicitation when the "
                 "client declared that capability (continue: the call runs, its loop count "
                 "starts over; stop: blocked), else blocks and logs why [default: end].",
        ),
    ] = "end",
    max_grants: Annotated[
        int,
        typer.Option("--max-grants", metavar="N", min=0,
                     help="With --exit-behavior ask: the \"continue\" answers one run may get; "
                          "the next stop blocks [default: 2]."),
    ] = 2,
) -> None:
    """Front the MCP server CMD: mirror its tools and guard every tool call.

    Use it in your MCP client's config in place of the server command:
    loopwarden mcp-proxy [--config openclaw.json] -- npx -y some-mcp-server

    Detection is on unless the config sets enabled: false. Warnings and blocks go to stderr
    (tool names, detectors and counts; never argument or result text).

    Exit status: the server's own when it exits first, 0 when the client closes stdin, 128+N
    after signal N (SIGTERM, SIGINT, SIGHUP: the server's process group is stopped first).
    """
    from ..guard import LoopGuard
    from ..integrations._stdio_lines import parse_size
    from ..integrations.mcp_proxy import (
        DEFAULT_MAX_MESSAGE_BYTES,
        DEFAULT_MAX_PENDING_BYTES,
        run_proxy,
    )

    if exit_behavior not in ("end", "ask"):
        typer.echo(f"error: --exit-behavior must be end or ask, not {exit_behavior!r}", err=True)
        raise typer.Exit(2)
    if command and command[0].startswith("-"):
        # An option we do not know, before the server command: never start it as the server.
        typer.echo(f"error: no such option: {command[0]} (loopwarden's options go before --, "
                   "the server command after it; see loopwarden mcp-proxy -h)", err=True)
        raise typer.Exit(2)
    try:
        effective = proxy_config(config, agent)
        if preset is not None:
            effective = effective.with_overrides(preset=preset)
        limit = DEFAULT_MAX_MESSAGE_BYTES if max_message_bytes is None \
            else parse_size(max_message_bytes)
        pending_bytes = DEFAULT_MAX_PENDING_BYTES if max_pending_bytes is None \
            else parse_size(max_pending_bytes)
    except (ConfigError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    _log_to_stderr()
    try:
        # Signals stop the server's whole process group before we exit (status 128+N).
        code = asyncio.run(run_proxy(command, LoopGuard(effective), session=session,
                                     agent_id=agent, max_message_bytes=limit,
                                     max_pending_calls=max_pending_calls,
                                     max_pending_bytes=pending_bytes, handle_signals=True,
                                     exit_behavior="ask" if exit_behavior == "ask" else "end",
                                     max_grants=max_grants))
    except OSError as exc:  # the server command could not be started
        typer.echo(f"error: cannot start {command[0]!r}: {exc}", err=True)
        raise typer.Exit(127) from None
    except KeyboardInterrupt:
        code = 130
    raise typer.Exit(code)


def proxy_config(path: Path | None, agent: str | None) -> LoopDetectionConfig:
    """The config from ``path`` (or the defaults), with detection on unless it says false:
    whoever puts the proxy in front of a server wants loops caught."""
    if path is None:
        return LoopDetectionConfig(enabled=True)
    config = load_config(path, agent_id=agent)
    if config.enabled is None:
        return config.model_copy(update={"enabled": True})
    return config


def _log_to_stderr() -> None:
    # stdout carries the protocol; the client shows the server's stderr in its logs.
    log = get_logger("loopwarden")
    if all(isinstance(h, logging.NullHandler) for h in log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("loopwarden %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.WARNING)
