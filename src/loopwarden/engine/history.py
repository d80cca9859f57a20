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

from ..base.text import text_id
from ..fingerprint.outcomes import (
    OUTCOME_TERMINAL_EXEC_FAILURE,
    OUTCOME_VETO,
    OUTCOME_WRITE_MUTATION,
)
from .compaction import PostCompactionGuard

__all__ = [
    "OUTCOME_TERMINAL_EXEC_FAILURE",
    "OUTCOME_VETO",
    "OUTCOME_WRITE_MUTATION",
    "CallRecord",
    "RunView",
    "SessionState",
    "normalize_run_id",
    "warning_bucket",
    "warning_key",
]


MAX_WARNING_KEYS = 256
MAX_RECOVERY_RUNS = 256
MAX_COMPACTION_RUNS = 256
# How far back an outcome without a call id looks for the call it was admitted as (wider than
# any parallel batch of one tool); see SessionState.admitted_record.
ADMITTED_LOOKBACK = 32

RunKey = str | None


def normalize_run_id(run_id: object) -> str | None:
    """Trimmed run id, ``None`` for absent or blank ones (OpenClaw's unscoped bucket). Total: a
    run id that is no ``str`` goes through :func:`~loopwarden.base.text.text_id`."""
    if run_id is None:
        return None
    text = run_id if type(run_id) is str else text_id(run_id)
    return text.strip() or None


def now_ms() -> int:
    """The current time in epoch milliseconds (the records' and events' timestamps)."""
    return time.time_ns() // 1_000_000


def warning_key(detector: str, key: str | None, tool: str, run: str | None) -> str:
    """The key a warning is deduplicated by (spec §f.2): the detection's own warning key, else
    detector and tool; prefixed with the run."""
    key = key or f"{detector}:{tool}"
    return f"{run}:{key}" if run else key


def warning_bucket(count: int, warning_threshold: int) -> int:
    """The bucket of a warning's count: buckets of ``warningThreshold`` calls (not OpenClaw's
    fixed 10, which swallows warnings below 10); a detector with its own lower threshold (error
    repeat, a post-outcome critical) still gets the first bucket."""
    return max(1, count // warning_threshold)


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
    # ``early`` preset: the call changed state (cleared when it failed), only waited, and how
    # long it waited (ms), as its tool profile says.
    mutating: bool = False
    pacing: bool = False
    wait_ms: int = 0
    # ``failure_repeat``: which failure this was, the call's own argument values masked.
    echo_failure_hash: str | None = None
    # Equivalent forms: the hash of the arguments without default-looking keys, if different.
    core_hash: str | None = None

    @property
    def pending(self) -> bool:
        """Whether the call's outcome has not come yet (no result hash, no outcome kind)."""
        return self.result_hash is None and self.outcome_kind is None

    @property
    def is_veto(self) -> bool:
        """Whether this is a blocked call (a loop veto, which never ran)."""
        return self.outcome_kind == OUTCOME_VETO

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data, one key per field (read back by :meth:`from_dict`)."""
        return {name: getattr(self, name) for name in _RECORD_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallRecord:
        """A record from :meth:`to_dict`'s form; raises ``ValueError`` when it has no tool name
        or args hash (a stored state that would fail every later call instead). Ids that cannot
        be dict keys fail when the state indexes them; other fields are only compared."""
        values = {name: data.get(name, _RECORD_DEFAULTS[name]) for name in _RECORD_FIELDS}
        # Two checks, not one per field: states are decoded on every persistent-store call.
        if type(values["tool_name"]) is not str or type(values["args_hash"]) is not str:
            raise ValueError(f"not a call record: {data!r:.200}")
        return cls(**values)


_RECORD_FIELDS = tuple(CallRecord.__dataclass_fields__)
_RECORD_DEFAULTS: dict[str, Any] = {
    name: f.default for name, f in CallRecord.__dataclass_fields__.items()
}


@dataclass(slots=True)
class SessionState:
    """History (oldest first) and warning buckets of one session.

    ``history`` is the physical window shared by all runs of the session. Mutate it only through
    :meth:`append`, :meth:`push`, :meth:`trim` and :meth:`rebind`, which keep the views consistent.
    """

    history: list[CallRecord] = field(default_factory=list)
    warning_buckets: dict[str, int] = field(default_factory=dict)
    recovery_used: dict[str, bool] = field(default_factory=dict)
    compaction: dict[str, PostCompactionGuard] = field(default_factory=dict)
    learned: dict[str, Any] = field(default_factory=dict)
    #: How many "continue" answers a human gave each run (``exit_behavior="ask"``), by run key.
    grants: dict[str, int] = field(default_factory=dict)
    _runs: dict[RunKey, RunView] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.history and not self._runs:
            self._reindex()

    # -- views -------------------------------------------------------------------------------

    def run_view(self, run_id: RunKey) -> RunView | None:
        """The run's views in one object (None when the window holds none of its records);
        read-only for callers."""
        return self._runs.get(run_id)

    def run_records(self, run_id: RunKey) -> deque[CallRecord]:
        """The run's records, oldest first (the run-scoped ``H`` of the spec)."""
        view = self._runs.get(run_id)
        return _EMPTY if view is None else view.records

    def key_records(self, run_id: RunKey, args_hash: str) -> Sequence[CallRecord]:
        """The run's records with this args hash (tool name included), oldest first."""
        view = self._runs.get(run_id)
        return () if view is None else view.by_key.get(args_hash) or ()

    def error_records(self, run_id: RunKey) -> int:
        """How many of the run's records carry an error identity."""
        view = self._runs.get(run_id)
        return 0 if view is None else view.errors

    def find_call(self, run_id: RunKey, call_id: str | None) -> CallRecord | None:
        """The run's record with this call id, or None (always None without an id)."""
        if not call_id:
            return None
        view = self._runs.get(run_id)
        return None if view is None else view.by_call.get(call_id)

    def open_call(
        self, run_id: RunKey, call_id: str | None, tool_name: str, args_hash: str
    ) -> CallRecord | None:
        """The record a re-delivered admission hook refers to: the run's newest record with this
        call id, when it is this call (same tool and arguments) and still open — pending, or
        blocked (a blocked call never runs, so no outcome closes it). Once its outcome is
        recorded the id is free again: hosts that number calls per turn send ``call_0`` in
        every turn, and each of those is a new call."""
        if not call_id:
            return None
        view = self._runs.get(run_id)
        record = None if view is None else view.by_call.get(call_id)
        if (
            record is None or record.result_hash is not None
            or record.args_hash != args_hash or record.tool_name != tool_name
        ):
            return None
        kind = record.outcome_kind
        return record if kind is None or kind == OUTCOME_VETO else None

    def admitted_record(
        self, run_id: RunKey, call_id: str | None, tool_name: str, args_hash: str
    ) -> CallRecord | None:
        """The pending call an outcome belongs to when it was admitted under other arguments
        (None when the outcome's own arguments find it, the spec's rule, or nothing does).

        A tool may change its arguments in place while it runs (``args.setdefault("timeout",
        30)``), so the after hook hashes other arguments than the before hook did. The outcome
        still belongs to the admitted call: the run's open call with this call id, or, for an
        outcome without an id, the newest call of the tool when it is pending and has no id
        (looked for among the newest ``ADMITTED_LOOKBACK`` records of the run)."""
        view = self._runs.get(run_id)
        if view is None:
            return None
        if call_id:
            record = view.by_call.get(call_id)
            if (record is None or record.args_hash == args_hash  # the common case
                    or record.tool_name != tool_name or record.result_hash is not None
                    or record.outcome_kind not in (None, OUTCOME_VETO)):
                return None
            exact = view.by_key.get(args_hash) or ()
            return None if any(r.pending and r.call_id == call_id for r in exact) else record
        if any(r.pending for r in view.by_key.get(args_hash) or ()):
            return None
        for i, record in enumerate(reversed(view.records)):
            if record.tool_name == tool_name:
                return record if record.pending and record.call_id is None else None
            if i >= ADMITTED_LOOKBACK:
                break
        return None

    def reversed_run(self, run_id: RunKey) -> Iterator[CallRecord]:
        """The run's records, newest first."""
        return reversed(self.run_records(run_id))

    # -- mutation ----------------------------------------------------------------------------

    def append(self, record: CallRecord) -> CallRecord:
        """Append a record with no window limit (see :meth:`push`)."""
        return self.push(record, None)

    def push(self, record: CallRecord, limit: int | None) -> CallRecord:
        """Append a record, then keep the window at ``limit`` records (one in, one out)."""
        history = self.history
        history.append(record)
        view = self._runs.get(record.run_id)
        if view is None:
            view = self._runs[record.run_id] = RunView()
            if self.compaction:  # a run starts (or returns): finished runs' guards can go
                self._prune_compaction()
        view.records.append(record)
        by_key = view.by_key.get(record.args_hash)
        if by_key is None:
            view.by_key[record.args_hash] = [record]
        else:
            by_key.append(record)
        if record.call_id:
            view.by_call[record.call_id] = record
        if record.error_identity_hash is not None:
            view.errors += 1
        if record.core_hash is not None:  # an equivalent form (inline: every call comes here)
            view.by_core.setdefault(record.core_hash, []).append(record)
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
            self._runs[record.run_id].errors += change

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
        by_key = self._runs[record.run_id].by_key
        old = by_key.get(record.args_hash)
        if old is not None:
            old.remove(record)
            if not old:
                del by_key[record.args_hash]
        record.args_hash = args_hash
        order = {id(r): i for i, r in enumerate(self.run_records(record.run_id))}
        target = by_key.setdefault(args_hash, [])
        position = len(target)
        while position > 0 and order.get(id(target[position - 1]), -1) > order[id(record)]:
            position -= 1
        target.insert(position, record)

    def warning_is_new(self, key: str, bucket: int) -> bool:
        """Whether ``bucket`` is newer than the last one warned for ``key`` (nothing changes)."""
        return bucket > self.warning_buckets.get(key, 0)

    def remember_warning(self, key: str, bucket: int) -> bool:
        """Dedupe: True when ``bucket`` is newer than the last one warned for ``key``."""
        if not self.warning_is_new(key, bucket):
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
            history=[CallRecord(**r.to_dict()) for r in self.history],
            warning_buckets=dict(self.warning_buckets),
            recovery_used=dict(self.recovery_used),
            compaction={k: PostCompactionGuard.from_dict(g.to_dict()) for k, g in self.compaction.items()},
            learned=dict(self.learned),
            grants=dict(self.grants),
        )
        return clone

    # -- persistence (stores serialise with these) -------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The state as plain JSON data, for the stores (read back by :meth:`from_dict`)."""
        return {
            "history": [r.to_dict() for r in self.history],
            "warning_buckets": dict(self.warning_buckets),
            "recovery_used": dict(self.recovery_used),
            "compaction": {k: g.to_dict() for k, g in self.compaction.items()},
            "learned": dict(self.learned),
            # (only when a human let a run go on: other stored states stay as they were)
            **({"grants": dict(self.grants)} if self.grants else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionState:
        """A state from :meth:`to_dict`'s form; raises ``ValueError`` (or ``TypeError``) on
        one of the wrong shape, which stores treat as a corrupt state."""
        history = data.get("history", ())
        buckets = data.get("warning_buckets", {})
        recovery = data.get("recovery_used", {})
        compaction = data.get("compaction", {})
        grants = data.get("grants", {})
        if not (isinstance(history, list) and isinstance(buckets, dict)
                and isinstance(recovery, dict) and isinstance(compaction, dict)
                and isinstance(grants, dict)
                and all(type(n) is int for n in (*buckets.values(), *grants.values()))):
            raise ValueError("not a session state")
        return cls(
            history=[CallRecord.from_dict(r) for r in history],
            warning_buckets=dict(buckets),
            recovery_used=dict(recovery),
            compaction={str(k): PostCompactionGuard.from_dict(v) for k, v in compaction.items()},
            learned=check_learned(data.get("learned", {})),
            grants={str(k): v for k, v in grants.items()},
        )

    # -- internals ---------------------------------------------------------------------------

    def _forget(self, record: CallRecord) -> None:
        # The record leaving the window is the oldest of its run and of its key, so each view
        # gives it up from its front; a run whose last record leaves goes with its views.
        view = self._runs[record.run_id]
        records = view.records
        records.popleft() if records[0] is record else records.remove(record)
        if not records:
            del self._runs[record.run_id]
            return
        by_key = view.by_key[record.args_hash]
        if len(by_key) == 1:
            del view.by_key[record.args_hash]
        else:
            by_key.remove(record)
        call_id = record.call_id
        if call_id and view.by_call.get(call_id) is record:
            del view.by_call[call_id]
        if record.error_identity_hash is not None:
            view.errors -= 1
        view.drop_variant(record)

    def _prune_compaction(self) -> None:
        # An unarmed post-compaction guard holds nothing a later arm() would use (arming
        # replaces its tail with the run's history), so only armed ones are kept, and at most
        # MAX_COMPACTION_RUNS of those: one guard per run ever seen would grow without bound.
        guards = self.compaction
        for key in [key for key, guard in guards.items() if not guard.armed]:
            del guards[key]
        while len(guards) > MAX_COMPACTION_RUNS:
            del guards[next(iter(guards))]

    def _reindex(self) -> None:
        records = list(self.history)
        self.history.clear()
        self._runs.clear()
        for record in records:
            self.append(record)


def restart_run(state: SessionState, run_id: RunKey) -> None:
    """Give the run a fresh loop budget (a human answered "continue"): its records leave the
    window, and its warning slots and recovery turn are forgotten, so every count starts over.
    The post-compaction guard and learned volatile fields are kept (and a door's own marks in
    ``recovery_used`` are the door's to clear). (A function, not a method: SessionState's
    methods are what every call needs.)"""
    if state._runs.pop(run_id, None) is not None:
        state.history[:] = [r for r in state.history if r.run_id != run_id]
    state.recovery_used.pop(run_id or "", None)
    others = tuple(f"{run}:" for run in state._runs if run)
    for slot in [k for k in state.warning_buckets
                 if (k.startswith(f"{run_id}:") if run_id else not k.startswith(others))]:
        del state.warning_buckets[slot]


class RunView:
    """One run's records in order, by args hash, by call id and (equivalent forms) by core
    hash, and how many carry an error identity (an error streak needs that many, so the
    detectors' O(1) gate can rule it out).
    Kept by :class:`SessionState`; never mutate it from outside."""

    __slots__ = ("by_call", "by_core", "by_key", "errors", "records")

    def __init__(self) -> None:
        self.records: deque[CallRecord] = deque()
        # Lists, not deques: most keys hold one record for their whole life, and a deque
        # allocates a 64-slot block on creation.
        self.by_key: dict[str, list[CallRecord]] = {}
        self.by_call: dict[str, CallRecord] = {}
        self.errors = 0
        # Records that are an equivalent form of other arguments, by that core hash.
        self.by_core: dict[str, list[CallRecord]] = {}

    def drop_variant(self, record: CallRecord) -> None:
        """Take a record leaving the window out of the core-hash index."""
        records = self.by_core.get(record.core_hash or "", [])
        if record in records:
            records.remove(record)
            if not records:
                del self.by_core[record.core_hash or ""]


_EMPTY: deque[CallRecord] = deque()


def check_learned(data: Any) -> dict[str, Any]:
    """``data`` as a session's learned state; raises ``ValueError`` when a part learning reads
    has the wrong shape (a corrupt stored state). Keys it does not know pass through."""
    if not isinstance(data, dict):
        raise ValueError("learned state is not an object")
    _check_map(data.get("seen", {}), lambda v: isinstance(v, str))
    _check_map(data.get("last", {}), lambda v: isinstance(v, dict) and _all_str(v))
    _check_map(data.get("volatile", {}),
               lambda v: isinstance(v, list) and all(isinstance(p, str) for p in v))
    _check_map(data.get("scores", {}), lambda v: isinstance(v, dict) and all(
        isinstance(k, str) and type(n) is int for k, n in v.items()))
    return dict(data)


def _check_map(value: Any, valid: Any) -> None:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and valid(v) for k, v in value.items()):
        raise ValueError("learned state has the wrong shape")


def _all_str(mapping: dict[Any, Any]) -> bool:
    return all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items())
