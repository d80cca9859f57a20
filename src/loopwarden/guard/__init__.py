"""The guard layer: :class:`LoopGuard`, the policy every door uses (warn, dampen, block) over a
pluggable store, and the verdicts it answers with.

``from loopwarden.guard import X`` keeps working for every name the single ``guard.py``
module had; the parts live in:

- ``verdicts``: the answers (:class:`Verdict`, :class:`BatchAdmission`, ...) and their texts;
- ``loopguard``: :class:`LoopGuard`;
- ``decorators``: ``@guard.tool`` / ``guard.wrap``.
"""

from __future__ import annotations

from ..types import MISSING, ToolCall
from .decorators import IdSource
from .loopguard import DISABLE_ENV, LoopGuard
from .verdicts import (
    EXIT_BEHAVIORS,
    RECOVERY_SIBLING_TEXT,
    RECOVERY_TEXT,
    STOP_MESSAGE,
    STORE_DOWN_MESSAGE,
    TERMINAL_SIBLING_TEXT,
    TERMINAL_TEXT,
    Action,
    BatchAdmission,
    ExitBehavior,
    GuardStats,
    Intervention,
    LoopBlockedError,
    Verdict,
    append_note,
    check_exit_behavior,
    continuing,
    terminated_error,
    warning_note,
)

__all__ = [
    "DISABLE_ENV",
    "EXIT_BEHAVIORS",
    "MISSING",
    "RECOVERY_SIBLING_TEXT",
    "RECOVERY_TEXT",
    "STOP_MESSAGE",
    "STORE_DOWN_MESSAGE",
    "TERMINAL_SIBLING_TEXT",
    "TERMINAL_TEXT",
    "Action",
    "BatchAdmission",
    "ExitBehavior",
    "GuardStats",
    "IdSource",
    "Intervention",
    "LoopBlockedError",
    "LoopGuard",
    "ToolCall",
    "Verdict",
    "append_note",
    "check_exit_behavior",
    "continuing",
    "terminated_error",
    "warning_note",
]
