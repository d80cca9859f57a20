"""What the tests of the resident http hook server share: a free loopback port, the hook's
environment in a private HOME, the servers running for a port (found by command line), and a
hook payload posted as Claude Code posts it."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from loopwarden.integrations.claude_code_settings import http_url

__all__ = ["free_port", "hook_env", "http_server_pids", "post_hook"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def hook_env(home: Path, runtime: Path, **extra: str) -> dict[str, str]:
    """This environment without loopwarden's or XDG settings, in HOME ``home`` with the runtime
    folder ``runtime`` (made private); each command hook answers in its own process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOPWARDEN_", "XDG_"))}
    runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
    env.update(HOME=str(home), LOOPWARDEN_HOOK_SERVER="0", XDG_RUNTIME_DIR=str(runtime))
    env.update(extra)
    return env


def http_server_pids(port: int) -> list[int]:
    """The http hook servers serving ``port`` (started by the SessionStart hook), by pid."""
    wanted = f"\0--http-serve\0{port}\0".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if wanted in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
    return pids


def post_hook(port: int, payload: dict[str, Any]) -> tuple[int, bytes]:
    """POST ``payload`` to the http hook server on ``port``: the status and the body."""
    request = urllib.request.Request(http_url(port), data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
