"""loopwarden: stop AI agents from wasting money and time in tool-call loops.

OpenClaw's tool-loop detection, faithfully, for every Python agent stack. The public surface is
small and re-exported here; see DESIGN.md §2–§5 and the README.
"""

from __future__ import annotations

import sys

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
    "CompactionLoopPersistedError": "engine.compaction",
    "CompactionVerdict": "engine.compaction",
    "PostCompactionGuard": "engine.compaction",
    "ConfigError": "config",
    "LoopDetectionConfig": "config",
    "load_config": "config",
    "Detection": "engine.detectors",
    "LoopDetector": "engine",
    "LoopTerminatedError": "base.errors",
    "LoopwardenError": "base.errors",
    "LoggingSink": "guard.events",
    "LoopEvent": "guard.events",
    "Outcome": "fingerprint",
    "args_hash": "fingerprint",
    "canonical_json": "fingerprint",
    "outcome_of": "fingerprint",
    "BatchAdmission": "guard",
    "GuardStats": "guard",
    "Intervention": "guard",
    "LoopBlockedError": "guard",
    "LoopGuard": "guard",
    "Question": "guard",
    "Verdict": "guard",
    "warning_note": "guard",
    "CallRecord": "engine.history",
    "SessionState": "engine.history",
    "ProfileRegistry": "fingerprint.profiles",
    "ToolProfile": "fingerprint.profiles",
    "MemoryStore": "guard.stores",
    "Store": "guard.stores",
    "StoreError": "guard.stores",
    "SQLiteStore": "guard.stores",
    "RedisStore": "guard.stores",
    "MISSING": "base.types",
    "ToolCall": "base.types",
    "replay": "offline.findings",
    "Finding": "offline.findings",
}

if TYPE_CHECKING:
    from .base.errors import LoopTerminatedError, LoopwardenError
    from .base.types import MISSING, ToolCall
    from .config import ConfigError, LoopDetectionConfig, load_config
    from .engine import LoopDetector
    from .engine.compaction import (
        CompactionLoopPersistedError,
        CompactionVerdict,
        PostCompactionGuard,
    )
    from .engine.detectors import Detection
    from .engine.history import CallRecord, SessionState
    from .fingerprint import Outcome, args_hash, canonical_json, outcome_of, profiles
    from .fingerprint.profiles import ProfileRegistry, ToolProfile
    from .guard import (
        BatchAdmission,
        GuardStats,
        Intervention,
        LoopBlockedError,
        LoopGuard,
        Question,
        Verdict,
        warning_note,
    )
    from .guard.events import LoggingSink, LoopEvent
    from .guard.stores import MemoryStore, RedisStore, SQLiteStore, Store, StoreError
    from .offline.findings import Finding, replay

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
    "Question",
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


# The module paths from before the floors (see the README's "Layout"), kept importing: each
# old top-level name maps to its new home, submodules included (`loopwarden.transcripts.openclaw`
# is `loopwarden.offline.transcripts.openclaw`, the same module object, so classes, isinstance
# and monkeypatching agree). Nothing is imported until an old path is: the finder below only
# compares a prefix.
_MOVED_MODULES: dict[str, str] = {
    "errors": "base.errors",
    "types": "base.types",
    "profiles": "fingerprint.profiles",
    "volatile": "fingerprint.volatile",
    "detectors": "engine.detectors",
    "history": "engine.history",
    "compaction": "engine.compaction",
    "events": "guard.events",
    "learning": "guard.learning",
    "stores": "guard.stores",
    "findings": "offline.findings",
    "scan": "offline.scan",
    "transcripts": "offline.transcripts",
    "evaluation": "offline.evaluation",
    "calibration": "offline.calibration",
    "report": "offline.report",
    "_entry": "cli._entry",  # console scripts installed before the move name it
}


class _OldPaths:
    """A meta-path finder and loader that answers an old module path with the module at its new
    home (placed first on ``sys.meta_path``, so the file is never loaded twice under two names)."""

    @staticmethod
    def find_spec(fullname: str, path: Any = None, target: Any = None) -> Any:
        """The spec of an old path's alias, or None for every other module."""
        if not fullname.startswith("loopwarden."):
            return None
        head, dot, rest = fullname[11:].partition(".")
        home = _MOVED_MODULES.get(head)
        if home is None:
            return None
        import importlib
        from importlib.machinery import ModuleSpec

        new = f"loopwarden.{home}{dot}{rest}"
        try:
            module = importlib.import_module(new)
        except ModuleNotFoundError as exc:
            if exc.name != new:
                raise
            return None  # no such module: the error names the path asked for
        return ModuleSpec(fullname, _OldPaths, loader_state=(module, module.__spec__))  # type: ignore[arg-type]

    @staticmethod
    def create_module(spec: Any) -> Any:
        """The module at its new home itself."""
        return spec.loader_state[0]

    @staticmethod
    def exec_module(module: Any) -> None:
        """Nothing to run. The import system gave the module the alias's spec: give it back its
        own (relative imports inside it read their package from it)."""
        module.__spec__ = module.__spec__.loader_state[1]


if not any(finder is _OldPaths for finder in sys.meta_path):
    sys.meta_path.insert(0, _OldPaths)


def _load_detectors() -> None:
    from .engine.detectors import rules  # noqa: F401  (their modules declare the switches)


# The config validates `detectors` against the switches the detectors declare; it sits below
# them and cannot import them, so the root, above every floor, tells it how (config.switches).
from .config.switches import load_switches_with  # noqa: E402

load_switches_with(_load_detectors)


def __getattr__(name: str) -> Any:
    import importlib

    if name == "profiles":  # a submodule: importing it makes it an attribute
        return importlib.import_module(".fingerprint.profiles", __name__)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'loopwarden' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next look-up does not come here again
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
