"""loopwarden: stop AI agents from wasting money and time in tool-call loops.

OpenClaw's tool-loop detection, faithfully, for every Python agent stack. The public surface is
small and re-exported here; see DESIGN.md §2–§5 and the README.
"""

from __future__ import annotations

# (Not imported from typing: the resident claude-hook client imports this package, and typing
# costs it milliseconds. Type checkers read any TYPE_CHECKING as true.)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"
"""The package version: the only place it is written (the build reads it from here)."""

# (The NullHandler of the "loopwarden" logger is added by the modules that log: _log.py.)

# The public names load on first use (PEP 562), so that `import loopwarden` costs almost
# nothing and a process that needs only a few modules (the Claude Code hook, started twice per
# tool call) imports only those. Static checkers see the eager imports below.
_EXPORTS: dict[str, str] = {
    "CompactionLoopPersistedError": "compaction",
    "CompactionVerdict": "compaction",
    "PostCompactionGuard": "compaction",
    "ConfigError": "config",
    "LoopDetectionConfig": "config",
    "load_config": "config",
    "Detection": "detectors",
    "LoopDetector": "engine",
    "LoopTerminatedError": "errors",
    "LoopwardenError": "errors",
    "LoggingSink": "events",
    "LoopEvent": "events",
    "Outcome": "fingerprint",
    "args_hash": "fingerprint",
    "canonical_json": "fingerprint",
    "outcome_of": "fingerprint",
    "BatchAdmission": "guard",
    "GuardStats": "guard",
    "Intervention": "guard",
    "LoopBlockedError": "guard",
    "LoopGuard": "guard",
    "Verdict": "guard",
    "warning_note": "guard",
    "CallRecord": "history",
    "SessionState": "history",
    "ProfileRegistry": "profiles",
    "ToolProfile": "profiles",
    "MemoryStore": "stores",
    "Store": "stores",
    "StoreError": "stores",
    "SQLiteStore": "stores",
    "RedisStore": "stores",
    "MISSING": "types",
    "ToolCall": "types",
    "replay": "findings",
    "Finding": "findings",
}

if TYPE_CHECKING:
    from . import profiles
    from .compaction import CompactionLoopPersistedError, CompactionVerdict, PostCompactionGuard
    from .config import ConfigError, LoopDetectionConfig, load_config
    from .detectors import Detection
    from .engine import LoopDetector
    from .errors import LoopTerminatedError, LoopwardenError
    from .events import LoggingSink, LoopEvent
    from .findings import Finding, replay
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
    from .stores import MemoryStore, RedisStore, SQLiteStore, Store, StoreError
    from .types import MISSING, ToolCall

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
    import importlib

    if name == "profiles":  # a submodule: importing it makes it an attribute
        return importlib.import_module(".profiles", __name__)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'loopwarden' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next look-up does not come here again
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
