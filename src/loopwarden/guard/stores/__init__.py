"""State stores: :class:`MemoryStore` (default), ``SQLiteStore`` and ``RedisStore``."""

from __future__ import annotations

from typing import Any

from .base import CircuitBreaker, Store, StoreError
from .memory import MemoryStore

__all__ = ["CircuitBreaker", "MemoryStore", "RedisStore", "SQLiteStore", "Store", "StoreError"]


def __getattr__(name: str) -> Any:
    # The persistent stores load lazily so the core never imports sqlite3 or redis by accident.
    if name == "SQLiteStore":
        from .sqlite import SQLiteStore

        return SQLiteStore
    if name == "RedisStore":
        from .redis import RedisStore

        return RedisStore
    raise AttributeError(name)
