"""A private runtime folder for the hooks' resident server, one per host run, at a short path.

A Unix socket's path is limited (about 100 bytes), and a runtime folder under pytest's
``tmp_path`` is too long for it: the hooks would silently answer each in its own process, not
as users get them. So the folder is made under the system's temporary folder, linked from
``ROOT/resident-run`` (where the run's other files are), and removed with the servers it
holds. The host is given the folder's own short path, not the link's: the hooks build their
socket path from the string they are given. :func:`stop_servers` says how many servers ran, so
a run can check that its hooks really used one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from pathlib import Path

__all__ = ["runtime_dir", "stop_servers"]

_LINK = "resident-run"


def runtime_dir(root: Path) -> Path:
    """A new private folder with a short path (made once per root, linked from
    ``ROOT/resident-run``): the folder itself, for ``XDG_RUNTIME_DIR``."""
    link = root / _LINK
    if not link.exists():
        link.symlink_to(tempfile.mkdtemp(prefix="lw-run-"), target_is_directory=True)
    return Path(os.readlink(link))


def stop_servers(root: Path) -> int:
    """Stop the resident hook servers of ``ROOT/resident-run`` (each lock file names its
    server's pid; only this run's servers are there), then remove the folder; returns how many
    servers there were."""
    link = root / _LINK
    locks = list(link.glob("loopwarden-*/*.lock"))
    for lock in locks:
        try:
            pid = int(lock.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    if link.is_symlink():
        shutil.rmtree(os.readlink(link), ignore_errors=True)
        link.unlink()
    return len(locks)
