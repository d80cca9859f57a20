"""A child process that dies with its parent, where the kernel can arrange it (Linux).

The MCP proxy stops its server on every way out it sees (end of input, signals). A proxy
killed outright (SIGKILL, the OOM killer) sees none, and a server that ignores end of input
would run on, orphaned. Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``) has the
kernel send the server SIGKILL when the proxy dies. Elsewhere :func:`die_with_parent` asks for
nothing and the proxy's own stop is all there is.

The signal reaches the server process only, not what it started; those see their stdin close.
It comes when the *thread* that started the server ends: the proxy starts it from the thread
that runs its event loop, which lives as long as the proxy does.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> dict[str, Any]:
    """Keyword arguments for :class:`subprocess.Popen` (and asyncio's subprocess functions)
    that have the child killed when this process dies: a ``preexec_fn`` on Linux, nothing
    elsewhere or when the C library's ``prctl`` cannot be found."""
    prctl = _prctl()
    if prctl is None:
        return {}
    parent = os.getpid()
    kill = int(signal.SIGKILL)

    def arm() -> None:
        # Runs in the child between fork and exec. Only calls resolved beforehand: a ctypes
        # call and two system calls, nothing that imports or takes a lock.
        prctl(_PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return {"preexec_fn": arm}


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl
