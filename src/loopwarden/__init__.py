"""loopwarden: stop AI agents from wasting money and time in tool-call loops.

OpenClaw's tool-loop detection, faithfully, for every Python agent stack. The public surface is
small and re-exported here; see DESIGN.md §2–§5 and the README.
"""

from __future__ import annotations

import logging
from typing import Any

from . import profiles
from .compaction import CompactionLoopPersistedError, CompactionVerdict, PostCompactionGuard
from .config import ConfigError, LoopDetectionConfig, load_config
from .detectors import Detection
from .engine import LoopDetector
from .errors import LoopTerminatedError, LoopwardenError
from .events import LoggingSink, LoopEvent
from .fingerprint import Outcome, args_hash, canonical_json, outcome_of
from .guard import (
    BatchAdmission,
    GuardStats,
    Intervention,
    LoopBlockedError,
    LoopGuard,
    Verdict,
    warning_note,
)
from .history import CallRecord, SessionState
from .profiles import ProfileRegistry, ToolProfile
from .stores import MemoryStore, Store, StoreError
from .types import MISSING, ToolCall

__version__ = "0.1.0"

# A library logs; the application decides where it goes (no "last resort" stderr output).
logging.getLogger("loopwarden").addHandler(logging.NullHandler())

__all__ = [
    "MISSING",
    "BatchAdmission",
    "CallRecord",
    "CompactionLoopPersistedError",
    "CompactionVerdict",
    "ConfigError",
    "Detection",
    "Finding",
    "GuardStats",
    "Intervention",
    "LoggingSink",
    "LoopBlockedError",
    "LoopDetectionConfig",
    "LoopDetector",
    "LoopEvent",
    "LoopGuard",
    "LoopTerminatedError",
    "LoopwardenError",
    "MemoryStore",
    "Outcome",
    "PostCompactionGuard",
    "ProfileRegistry",
    "RedisStore",
    "SQLiteStore",
    "SessionState",
    "Store",
    "StoreError",
    "ToolCall",
    "ToolProfile",
    "Verdict",
    "__version__",
    "args_hash",
    "canonical_json",
    "load_config",
    "outcome_of",
    "profiles",
    "replay",
    "warning_note",
]


def __getattr__(name: str) -> Any:
    # Doors and optional stores load on first use, so `import loopwarden` stays core-only.
    if name in ("SQLiteStore", "RedisStore"):
        from . import stores

        return getattr(stores, name)
    if name in ("replay", "Finding"):
        from . import findings

        return getattr(findings, name)
    raise AttributeError(f"module 'loopwarden' has no attribute {name!r}")
