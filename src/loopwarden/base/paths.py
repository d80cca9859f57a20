"""Default file locations, shared by every command that reads or writes them."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DB_ENV", "default_db_path"]

DB_ENV = "LOOPWARDEN_DB"
"""The environment variable naming the SQLite file of ``claude-hook`` and ``runs``."""


def default_db_path() -> Path:
    """``$LOOPWARDEN_DB``, else ``~/.loopwarden/loopwarden.db``: the one file that
    ``loopwarden claude-hook`` writes and ``loopwarden runs`` reads, so that what the hook
    recorded is what ``runs`` lists. An empty variable counts as unset."""
    env = os.environ.get(DB_ENV)
    return Path(env) if env else Path.home() / ".loopwarden" / "loopwarden.db"
