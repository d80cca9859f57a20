"""A session's tool-call history, with the indexes that keep detection off the full window.

The detectors only ever look at records of one run, and mostly at records of one
``(run, args_hash)`` key or at the newest few records of a run. ``SessionState`` therefore keeps,
beside the physical FIFO window that OpenClaw trims, per-run and per-key views that are updated
on append, trim and rebind. With them a call costs the same at ``historySize`` 30 and 1,000.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .compaction import PostCompactionGuard

__all__ = [
    "OUTCOME_TERMINAL_EXEC_FAILURE",
    "OUTCOME_VETO",
    "OUTCOME_WRITE_MUTATION",
    "CallRecord",
    "SessionState",
    "normalize_run_id",
]

OUTCOME_VETO = "tool-loop-veto"
OUTCOME_TERMINAL_EXEC_FAILURE = "terminal-exec-failure"
OUTCOME_WRITE_MUTATION = "write-mutation"

MAX_WARNING_KEYS = 256
MAX_RECOVERY_RUNS = 256

RunKey = str | None


def normalize_run_id(run_id: object) -> str | None:
    """Trimmed run id, ``None`` for absent or blank ones (OpenClaw's unscoped bucket)."""
    if run_id is None:
        return None
    text = run_id if isinstance(run_id, str) else str(run_id)
    return text.strip() or None


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True, eq=False)
class CallRecord:
    """One slot of the history: a call, its outcome once known, and what the detectors need."""

    tool_name: str
    args_hash: str
    call_id: str | None = None
    run_id: str | None = None
    timestamp: int = 0
    result_hash: str | None = None
    unknown_tool_name: str | None = None
    outcome_kind: str | None = None
    failure_identity_hash: str | None = None
    no_progress: bool = False
    mutation_target_hash: str | None = None
    error_identity_hash: str | None = None

    @property
    def pending(self) -> bool:
        return self.result_hash is None and self.outcome_kind is None

    @property
    def is_veto(self) -> bool:
        return self.outcome_kind == OUTCOME_VETO

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _RECORD_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallRecord:
        return cls(**{name: data.get(name, _RECORD_DEFAULTS[name]) for name in _RECORD_FIELDS})


_RECORD_FIELDS = tuple(CallRecord.__dataclass_fields__)
_RECORD_DEFAULTS: dict[str, Any] = {
    name: f.default for name, f in CallRecord.__dataclass_fields__.items()
}


@dataclass(slots=True)
class SessionState:
    """History (oldest first) and warning buckets of one session.

    ``history`` is the physical window shared by all runs of the session. Mutate it only through
    :meth:`append`, :meth:`trim` and :meth:`rebind`, which keep the views consistent.
    """

    history: list[CallRecord] = field(default_factory=list)
    warning_buckets: dict[str, int] = field(default_factory=dict)
    recovery_used: dict[str, bool] = field(default_factory=dict)
    compaction: dict[str, PostCompactionGuard] = field(default_factory=dict)
    learned: dict[str, Any] = field(default_factory=dict)
    _by_run: dict[RunKey, deque[CallRecord]] = field(default_factory=dict, repr=False)
    # Lists, not deques: most keys hold one record for their whole life, and a deque allocates
    # a 64-slot block on creation.
    _by_key: dict[tuple[RunKey, str], list[CallRecord]] = field(default_factory=dict, repr=False)
    _by_call: dict[tuple[RunKey, str], CallRecord] = field(default_factory=dict, repr=False)
    # Records with an error identity per run: an error streak needs that many, so the
    # detectors' O(1) gate can rule it out.
    _errors_by_run: dict[RunKey, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.history and not self._by_run:
            self._reindex()

    # -- views -------------------------------------------------------------------------------

    def run_records(self, run_id: RunKey) -> deque[CallRecord]:
        """The run's records, oldest first (the run-scoped ``H`` of the spec)."""
        return self._by_run.get(run_id) or _EMPTY

    def key_records(self, run_id: RunKey, args_hash: str) -> Sequence[CallRecord]:
        """The run's records with this args hash (tool name included), oldest first."""
        return self._by_key.get((run_id, args_hash)) or ()

    def error_records(self, run_id: RunKey) -> int:
        """How many of the run's records carry an error identity."""
        return self._errors_by_run.get(run_id, 0)

    def find_call(self, run_id: RunKey, call_id: str | None) -> CallRecord | None:
        if not call_id:
            return None
        return self._by_call.get((run_id, call_id))

    def reversed_run(self, run_id: RunKey) -> Iterator[CallRecord]:
        return reversed(self.run_records(run_id))

    # -- mutation ----------------------------------------------------------------------------

    def append(self, record: CallRecord) -> CallRecord:
        return self.push(record, None)

    def push(self, record: CallRecord, limit: int | None) -> CallRecord:
        """Append a record, then keep the window at ``limit`` records (one in, one out)."""
        history = self.history
        history.append(record)
        run = record.run_id
        by_run = self._by_run.get(run)
        if by_run is None:
            by_run = self._by_run[run] = deque()
        by_run.append(record)
        key = (run, record.args_hash)
        by_key = self._by_key.get(key)
        if by_key is None:
            self._by_key[key] = [record]
        else:
            by_key.append(record)
        if record.call_id:
            self._by_call[(run, record.call_id)] = record
        if record.error_identity_hash is not None:
            self._errors_by_run[run] = self._errors_by_run.get(run, 0) + 1
        if limit is not None and len(history) > limit:
            if len(history) == limit + 1:
                self._forget(history.pop(0))
            else:
                self.trim(limit)
        return record

    def set_error_identity(self, record: CallRecord, identity: str | None) -> None:
        """Give a record in the window its error identity (keeps the per-run count)."""
        before = record.error_identity_hash is not None
        record.error_identity_hash = identity
        change = (identity is not None) - before
        if change:
            self._errors_by_run[record.run_id] = self._errors_by_run.get(record.run_id, 0) + change

    def trim(self, limit: int) -> None:
        """Drop the oldest records beyond ``limit`` (OpenClaw's FIFO window)."""
        excess = len(self.history) - limit
        if excess <= 0:
            return
        if excess == 1:  # the steady state: one call in, one out
            self._forget(self.history.pop(0))
            return
        dropped = self.history[:excess]
        del self.history[:excess]
        for record in dropped:
            self._forget(record)

    def rebind(self, record: CallRecord, args_hash: str) -> None:
        """Give a pending record new arguments (final, post-hook args), keeping views in order."""
        old = self._by_key.get((record.run_id, record.args_hash))
        if old is not None:
            old.remove(record)
            if not old:
                del self._by_key[(record.run_id, record.args_hash)]
        record.args_hash = args_hash
        key = (record.run_id, args_hash)
        order = {id(r): i for i, r in enumerate(self.run_records(record.run_id))}
        target = self._by_key.setdefault(key, [])
        position = len(target)
        while position > 0 and order.get(id(target[position - 1]), -1) > order[id(record)]:
            position -= 1
        target.insert(position, record)

    def remember_warning(self, key: str, bucket: int) -> bool:
        """Dedupe: True when ``bucket`` is newer than the last one warned for ``key``."""
        last = self.warning_buckets.get(key, 0)
        if bucket <= last:
            return False
        self.warning_buckets.pop(key, None)
        self.warning_buckets[key] = bucket
        while len(self.warning_buckets) > MAX_WARNING_KEYS:
            del self.warning_buckets[next(iter(self.warning_buckets))]
        return True

    def mark_recovery(self, run_id: RunKey) -> bool:
        """Record a first critical intervention for the run; False if it already had one."""
        key = run_id or ""
        if self.recovery_used.get(key):
            return False
        self.recovery_used[key] = True
        while len(self.recovery_used) > MAX_RECOVERY_RUNS:
            del self.recovery_used[next(iter(self.recovery_used))]
        return True

    def copy(self) -> SessionState:
        """An independent copy (records copied too), e.g. for projected batch admission."""
        clone = SessionState(
            history=[CallRecord.from_dict(r.to_dict()) for r in self.history],
            warning_buckets=dict(self.warning_buckets),
            recovery_used=dict(self.recovery_used),
            compaction={k: PostCompactionGuard.from_dict(g.to_dict()) for k, g in self.compaction.items()},
            learned=dict(self.learned),
        )
        return clone

    # -- persistence (stores serialise with these) -------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "history": [r.to_dict() for r in self.history],
            "warning_buckets": dict(self.warning_buckets),
            "recovery_used": dict(self.recovery_used),
            "compaction": {k: g.to_dict() for k, g in self.compaction.items()},
            "learned": dict(self.learned),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionState:
        return cls(
            history=[CallRecord.from_dict(r) for r in data.get("history", ())],
            warning_buckets=dict(data.get("warning_buckets", {})),
            recovery_used=dict(data.get("recovery_used", {})),
            compaction={
                str(k): PostCompactionGuard.from_dict(v) for k, v in data.get("compaction", {}).items()
            },
            learned=dict(data.get("learned", {})),
        )

    # -- internals ---------------------------------------------------------------------------

    def _forget(self, record: CallRecord) -> None:
        # The record leaving the window is the oldest of its run and of its key, so each view
        # gives it up from its front.
        run = record.run_id
        by_run = self._by_run[run]
        by_run.popleft() if by_run[0] is record else by_run.remove(record)
        if not by_run:
            del self._by_run[run]
        key = (run, record.args_hash)
        by_key = self._by_key[key]
        if len(by_key) == 1:
            del self._by_key[key]
        else:
            by_key.remove(record)
        call_id = record.call_id
        if call_id and self._by_call.get((run, call_id)) is record:
            del self._by_call[(run, call_id)]
        if record.error_identity_hash is not None:
            left = self._errors_by_run.get(run, 0) - 1
            if left > 0:
                self._errors_by_run[run] = left
            else:
                self._errors_by_run.pop(run, None)

    def _reindex(self) -> None:
        records = list(self.history)
        self.history.clear()
        self._by_run.clear()
        self._by_key.clear()
        self._by_call.clear()
        self._errors_by_run.clear()
        for record in records:
            self.append(record)


_EMPTY: deque[CallRecord] = deque()
