"""The guard layer: :class:`LoopGuard`, the policy every door uses (warn, dampen, block) over a
pluggable store, and the verdicts it answers with.

``from loopwarden.guard import X`` keeps working for every name the single ``guard.py``
module had; the parts live in:

- ``loopguard``: :class:`LoopGuard`, the public hooks (each builds one transaction and hands
  it to a driver);
- ``core``: ``GuardCore``, the guard's state;
- ``policy``: ``LoopPolicy``, the rules (when to warn, veto, in-flight counting, recovery and
  the terminal stop), the guard's ``Call``, and what happens when the store fails
  (:class:`FailOpen`, :class:`FailClosed`);
- ``transactions``, ``batch``: the transactions (``Admit``, ``Settle``, ``Observe``,
  ``AdmitBatch``, ``ArmCompaction``, ``ReadHistory``), each with ``apply(state)`` and a
  fallback, and the sync and the async driver that run any transaction against any store;
- ``verdicts``: the answers (:class:`Verdict`, :class:`BatchAdmission`, ...) and their texts;
- ``decorators``: ``@guard.tool`` / ``guard.wrap``;
- ``asking``: ``exit_behavior="ask"``'s :class:`Question` and its ask / answer transactions.

The doors import from here alone; the engine's ``Detection`` and ``CompactionLoopPersistedError``
are re-exported for them.
"""

from __future__ import annotations

from ..base.errors import LoopBlockedError
from ..base.types import ToolCall
from ..engine.compaction import CompactionLoopPersistedError
from ..engine.detectors import Detection
from .asking import Question
from .loopguard import LoopGuard
from .verdicts import (
    RECOVERY_TEXT,
    STOP_MESSAGE,
    TERMINAL_SIBLING_TEXT,
    TERMINAL_TEXT,
    BatchAdmission,
    EndOfRun,
    ExitBehavior,
    GuardStats,
    Intervention,
    Verdict,
    append_note,
    check_exit_behavior,
    continuing,
    terminated_error,
    warning_note,
)

__all__ = [
    "RECOVERY_TEXT",
    "STOP_MESSAGE",
    "TERMINAL_SIBLING_TEXT",
    "TERMINAL_TEXT",
    "BatchAdmission",
    "CompactionLoopPersistedError",
    "Detection",
    "EndOfRun",
    "ExitBehavior",
    "GuardStats",
    "Intervention",
    "LoopBlockedError",
    "LoopGuard",
    "Question",
    "ToolCall",
    "Verdict",
    "append_note",
    "check_exit_behavior",
    "continuing",
    "terminated_error",
    "warning_note",
]
