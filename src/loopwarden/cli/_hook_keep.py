"""What a resident hook server keeps between hooks: the open SQLite store per database path,
and the validated config per config key.

A hook in its own process opens the store, answers, and closes it. A resident server
(:mod:`loopwarden.cli._resident_server`, :mod:`loopwarden.cli._resident_http`) answers hook
after hook in one process, where opening the database (connection, schema check) and closing it
(Python before 3.12 checkpoints the WAL on close) cost more than the guard itself. Inside
:func:`keeping` the store stays open instead, which changes nothing a hook can see:

- every store operation is its own transaction (``BEGIN IMMEDIATE`` for a session's state), so
  each hook reads what other processes wrote, as a fresh connection would;
- before each hook the store forgets past failures (:meth:`SQLiteStore.reset_health`), so a
  failing store fails open with the same message it gives in a hook's own process;
- a database file deleted or replaced (another inode at the path) is noticed before the hook:
  the old connection is closed and the path opened anew, as a new process would.

The config is keyed by what :func:`loopwarden.cli.claude_hook._config_key` puts in the key (the
config file's bytes, the agent, the preset, loopwarden's config code), so an edited config is
validated again on the next hook.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..guard.stores.sqlite import SQLiteStore

# Distinct databases / configs one server keeps (one setup serves one of each, as a rule).
_MAX_KEPT = 8


@dataclass
class _Kept:
    # database path -> (its store, the (device, inode) of the file it opened)
    stores: dict[Path, tuple[SQLiteStore, tuple[int, int] | None]] = field(default_factory=dict)
    configs: dict[tuple[str, Path], Any] = field(default_factory=dict)


_kept: _Kept | None = None


@contextlib.contextmanager
def keeping() -> Iterator[None]:
    """Keep stores and configs across the hooks answered inside (a resident server's life);
    the stores are closed on the way out."""
    global _kept
    previous, _kept = _kept, _Kept()
    try:
        yield
    finally:
        kept, _kept = _kept, previous
        for store, _ in kept.stores.values():
            with contextlib.suppress(Exception):
                store.close()


def open_store(db: Path, idle_ttl: float, timeout: float) -> SQLiteStore:
    """The store of ``db`` for one hook: the kept one if its file is still the one at ``db``,
    otherwise a new one (kept, inside :func:`keeping`). Give it back with :func:`release`."""
    from ..guard.stores.sqlite import SQLiteStore

    if _kept is None:
        return SQLiteStore(db, idle_ttl=idle_ttl, timeout=timeout)
    identity = _identity(db)
    entry = _kept.stores.pop(db, None)
    if entry is not None:
        store, opened = entry
        if opened is not None and opened == identity:
            store.reset_health()
            _kept.stores[db] = entry
            return store
        store.close()  # deleted or replaced: that connection reads a file no one else does
    store = SQLiteStore(db, idle_ttl=idle_ttl, timeout=timeout)
    _kept.stores[db] = (store, identity)
    while len(_kept.stores) > _MAX_KEPT:
        oldest = next(iter(_kept.stores))
        _kept.stores.pop(oldest)[0].close()
    return store


def release(db: Path, store: SQLiteStore) -> None:
    """After the hook: close the store, unless it is kept (then note which file it opened, when
    the hook created it)."""
    entry = None if _kept is None else _kept.stores.get(db)
    if _kept is None or entry is None or entry[0] is not store:
        store.close()
        return
    if entry[1] is None:
        _kept.stores[db] = (store, _identity(db))


def kept_config(key: str, cache: Path) -> Any:
    """The config validated earlier for ``key`` in this server, or None."""
    return None if _kept is None else _kept.configs.get((key, cache))


def keep_config(key: str, cache: Path, config: Any) -> None:
    """Remember ``config`` for ``key`` (inside :func:`keeping`; otherwise nothing)."""
    if _kept is None:
        return
    _kept.configs[(key, cache)] = config
    while len(_kept.configs) > _MAX_KEPT:
        del _kept.configs[next(iter(_kept.configs))]


def _identity(db: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(db)
    except OSError:
        return None
    return info.st_dev, info.st_ino
