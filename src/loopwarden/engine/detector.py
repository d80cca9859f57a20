""":class:`LoopDetector`: a call's fingerprint recorded into the session's history, and the
detectors asked whether it continues a loop; with the detector's log lines (as text: the
engine never logs, the guard does)."""

from __future__ import annotations

import hashlib
import logging
from time import time_ns as _time_ns
from typing import TYPE_CHECKING, Any, overload

from ..base.text import log_text
from ..base.types import MISSING
from ..fingerprint import (
    Outcome,
    args_hash_of_json,
    canonical_json,
    error_text,
    mutation_target_hash,
    profiled_outcome,
)
from ..fingerprint.defaults import core_args_hash
from ..fingerprint.profiles import ToolProfile, mutating_by_name
from ..fingerprint.volatile import mask_volatile
from .detectors import DETECTORS, RULES, Detection, Facts, Limits, Prospect, evaluate, gates_for
from .detectors.base import WAKE_ERRORS, WAKE_REPEAT, WAKE_TAIL
from .detectors.churn import write_churn
from .detectors.no_progress import EQUIVALENT_SWITCH
from .detectors.rules import switched_on
from .fingerprinter import Fingerprinter, PreparedCall
from .history import (
    OUTCOME_VETO,
    CallRecord,
    SessionState,
    normalize_run_id,
)
from .limits import limits_for, with_tool_thresholds

if TYPE_CHECKING:
    # For annotations only: a caller that passes its config (the Claude Code hook passes a
    # plain snapshot, see cli/_config_snapshot.py) never loads pydantic.
    from ..config import LoopDetectionConfig


_TOOL_LIMITS_CACHE_SIZE = 1024  # tool names: a model can invent any number of them
_PREPARED_CACHE_SIZE = 1024
_PREPARED_MAX_ARGS = 8192  # bytes of canonical JSON: the cache holds at most ~8 MB
# A top-level argument value that may restate a default (see fingerprint.defaults, which
# decides): a nested value, or one of these (compared by hash: scalar types only; False is
# also 0 and 0.0).
_NESTED = frozenset({dict, list})
_SCALARS = frozenset({type(None), bool, int, float, str})
_DEFAULTISH = frozenset({None, False, "", "default", "Default", "DEFAULT", "auto", "Auto", "AUTO"})
_UNRESOLVED = Limits()  # a cache-miss marker (compared by identity)

# The rows' log lines, by (detector, level): rows that report the same detection log alike.
_LOG_LINES: dict[tuple[str, str], str] = {
    (rule.detector, rule.level): rule.log for rule in RULES if rule.log is not None}
_LOG_LEVELS = {"warning": logging.WARNING, "critical": logging.ERROR}


class DetectorCore(Fingerprinter):
    """The detector's parts every guarded call takes: fingerprinting, recording and detection
    for a fingerprinted call (:class:`LoopDetector` adds the spec's forms over them)."""

    __slots__ = ("_error_identities", "_gates", "_history_size", "_per_tool", "_prepared",
                 "_prepared_for", "_tool_limits", "_tools", "config", "limits")

    def __init__(
        self, config: LoopDetectionConfig | None = None, profiles: object = None
    ) -> None:
        if config is None:
            from ..config import LoopDetectionConfig

            config = LoopDetectionConfig()
        super().__init__(config, profiles)
        self.config = config
        self.limits = limits_for(self.config)
        # The O(1) pre-checks of the detectors the switches leave on (per-tool limits change
        # thresholds only), asked in turn before a call is measured.
        self._gates = gates_for(self.limits)
        # Failed outcomes' error identities, for the detectors that read them.
        self._error_identities = any(
            d.reads_error_identity and d.enabled(self.limits) for d in DETECTORS)
        if any(d.reads_mutations and d.enabled(self.limits) for d in DETECTORS):
            self._mutations = True
        self._failure_echo = any(
            d.reads_failure_echo and d.enabled(self.limits) for d in DETECTORS)
        self._core_args = switched_on(self.limits, EQUIVALENT_SWITCH)  # equivalent forms
        self._history_size = self.config.history_size
        # perTool: limits resolved once per tool name (None: exempt). Empty perTool skips all.
        self._per_tool = bool(self.config.per_tool)
        self._tool_limits: dict[str, Limits | None] = {}
        # Fingerprints of recent calls by their canonical arguments: the guard's after-call
        # hook, and every repeat of a looping call, then skip hashing, profile look-ups and
        # the write-target hash; and what the registry says of each tool name (its profile,
        # canonical name, and whether the name says it changes the world). Valid for one
        # registry snapshot (profiles can change).
        self._prepared: dict[tuple[str, bytes], Prospect] = {}
        self._tools: dict[str, tuple[ToolProfile | None, str, bool]] = {}
        self._prepared_for: object = None

    def prepare(
        self, tool_name: str, args: Any, *, run_id: object = None, cwd: str | None = None
    ) -> PreparedCall:
        """The call, fingerprinted (:meth:`fingerprint`) and its run id normalised, as the
        other methods take it."""
        return PreparedCall(self.fingerprint(tool_name, args, cwd=cwd), run_id, args)

    def fingerprint(self, tool_name: str, args: Any, cwd: str | None = None) -> Prospect:
        """Fingerprint a call: canonical tool name, args hash, and what its profile says.
        Cached by canonical arguments (not for a ``cwd``), for one registry snapshot."""
        canonical = canonical_json(args)
        if cwd is not None:
            return self._fingerprint(tool_name, args, canonical, cwd)
        snapshot = self.registry.snapshot
        if snapshot is not self._prepared_for:
            self._prepared = {}
            self._tools = {}
            self._prepared_for = snapshot
        if len(canonical) > _PREPARED_MAX_ARGS:  # rarely repeated, and would pin memory
            return self._fingerprint(tool_name, args, canonical, None)
        key = (tool_name, canonical)
        prospect = self._prepared.get(key)
        if prospect is None:
            prospect = self._fingerprint(tool_name, args, canonical, None)
            if len(self._prepared) >= _PREPARED_CACHE_SIZE:
                # Clearing (one atomic call) rather than LRU eviction: safe under threads,
                # and a loop refills the cache with its own calls at once.
                self._prepared.clear()
            self._prepared[key] = prospect
        return prospect

    def _fingerprint(
        self, tool_name: str, args: Any, canonical: bytes, cwd: str | None
    ) -> Prospect:
        known = self._tools.get(tool_name) if cwd is None else None
        if known is None:
            known = self._tool(tool_name)
        profile, tool, mutating = known
        if profile is None:
            prospect = Prospect(tool_name, args_hash_of_json(tool_name, canonical))
            if self._mutations:
                prospect.mutating = mutating
        else:
            prospect = Prospect(
                tool,
                args_hash_of_json(tool, canonical),
                profile.is_poll(args),
                profile.poll_critical_at_warning,
                mutation_target_hash(tool, args, cwd, registry=self.registry)
                if tool == "write" else None,
                profile,
            )
            if self._mutations:
                prospect.mutating = profile.is_mutating(args)
            if self._progress:
                prospect.pacing = profile.is_pacing(args)
                prospect.wait_ms = int(profile.waits(args) * 1000)
        if self._core_args:  # (inline, over the top-level values: every new call is here)
            prospect.core_hash = prospect.args_hash
            for value in args.values() if type(args) is dict else ():
                if type(value) in _NESTED or (type(value) in _SCALARS and value in _DEFAULTISH):
                    prospect.core_hash = core_args_hash(tool, args, prospect.args_hash)
                    break
        return prospect

    def _tool(self, tool_name: str) -> tuple[ToolProfile | None, str, bool]:
        """What the registry says of ``tool_name``: its profile, its canonical name, and (for
        a tool with no profile, when calls are marked mutating) whether its name says it
        changes the world. Asked once per tool name and registry snapshot."""
        profile = self.registry.get(tool_name)
        known: tuple[ToolProfile | None, str, bool]
        if profile is None:
            known = (None, tool_name, self._mutations and mutating_by_name(tool_name))
        else:
            known = (profile, self.registry.canonical_name(tool_name), False)
        if len(self._tools) >= _TOOL_LIMITS_CACHE_SIZE:
            self._tools.clear()  # as for _prepared: one atomic call, safe under threads
        self._tools[tool_name] = known
        return known

    def outcome(self, tool_name: str, args: Any, result: Any = MISSING, error: Any = MISSING) -> Outcome:
        """The hashes a call's result or error is recorded with (spec §c.3), masked as its
        profile says."""
        if self._progress or self._failure_echo:
            return self.observe(self.fingerprint(tool_name, args), args, result, error)[0]
        profile = self.registry.get(tool_name)
        if profile is not None or self._mask:
            result, error = self._masked(profile, result, error)
        return profiled_outcome(tool_name, profile, args, result, error,
                                extended_unknown=self._extended_unknown)

    def limits_for_tool(self, tool_name: str) -> Limits | None:
        """The limits of detections whose subject is ``tool_name`` (canonical, as in
        :class:`Prospect`): its ``perTool`` thresholds, or None when it is exempt."""
        if not self._per_tool:
            return self.limits
        cache = self._tool_limits
        limits = cache.get(tool_name, _UNRESOLVED)
        if limits is not _UNRESOLVED:
            return limits
        limits = with_tool_thresholds(self.config, self.limits, tool_name)
        if len(cache) >= _TOOL_LIMITS_CACHE_SIZE:
            cache.clear()  # as for _prepared: one atomic call, safe under threads
        cache[tool_name] = limits
        return limits

    def is_exempt(self, tool_name: str) -> bool:
        """Whether ``perTool`` exempts ``tool_name`` from every verdict."""
        return self._per_tool and self.limits_for_tool(tool_name) is None

    def record_prospect(
        self, state: SessionState, prospect: Prospect, run: str | None,
        call_id: str | None = None, new: bool = False,
    ) -> CallRecord:
        """:meth:`record_call` for a fingerprinted call in ``run`` (normalised). ``new=True``:
        the caller has just looked for an open call with this id
        (:meth:`SessionState.open_call`) and found none, so the record is appended without
        looking again."""
        if not new:
            existing = state.open_call(run, call_id, prospect.tool_name, prospect.args_hash)
            if existing is not None:
                return existing
        # All positional: keyword construction of a 12-field dataclass costs noticeably more.
        record = CallRecord(prospect.tool_name, prospect.args_hash, call_id or None, run,
                            _time_ns() // 1_000_000, None, None, None, None, False,
                            prospect.mutation_target_hash, None, prospect.mutating,
                            prospect.pacing, prospect.wait_ms)
        record.core_hash = None if prospect.core_hash == prospect.args_hash else prospect.core_hash
        return state.push(record, self._history_size)

    def record_prospect_outcome(
        self, state: SessionState, call: Prospect, run: str | None, outcome: Outcome,
        error: Any = MISSING, call_id: str | None = None,
    ) -> CallRecord | None:
        """:meth:`record_outcome` for a fingerprinted call in ``run`` (normalised), its
        ``outcome`` hashed (``error``: the raw error, for the error-repeat identity)."""
        if outcome.result_hash is None and outcome.outcome_kind is None:
            return None
        record = state.find_call(run, call_id)
        if record is None or record.tool_name != call.tool_name:
            record = self._pending_for(state, run, call, call_id)
        elif record.result_hash is not None or record.outcome_kind is not None:  # not pending
            # A retried hook: the outcome is already counted. Only a call that was blocked and
            # then run anyway (an override, or a replay) replaces its veto with what happened.
            if not record.is_veto or outcome.outcome_kind == OUTCOME_VETO:
                return record
        elif record.args_hash != call.args_hash:
            # (A pending record with this id and these args is the newest one with this id,
            # which is what the search would find.)
            record = self._pending_for(state, run, call, call_id)
        if record is None:
            record = self.record_prospect(state, call, run, call_id, True)
        record.result_hash = outcome.result_hash
        record.outcome_kind = outcome.outcome_kind
        record.failure_identity_hash = outcome.failure_identity_hash
        record.unknown_tool_name = outcome.unknown_tool_name
        record.no_progress = outcome.no_progress
        record.echo_failure_hash = outcome.echo_failure_hash
        if self._progress:
            # A failed or blocked call changed nothing, so it is no mutation.
            if record.mutating and (outcome.error_identity_hash is not None
                                    or outcome.outcome_kind is not None
                                    or (outcome.result_hash or "").startswith("error:")):
                record.mutating = False
            if self._error_identities:
                state.set_error_identity(record, outcome.error_identity_hash)
            return record
        if self._error_identities and error is not MISSING and error is not None:
            masked = mask_volatile(error_text(error))
            state.set_error_identity(
                record, hashlib.sha256(masked.encode("utf-8", "replace")).hexdigest())
        return record

    @staticmethod
    def _pending_for(
        state: SessionState, run: str | None, call: Prospect, call_id: str | None
    ) -> CallRecord | None:
        for r in reversed(state.key_records(run, call.args_hash)):
            if r.pending and (not call_id or r.call_id == call_id):
                return r
        return None

    def detect_prospect(self, state: SessionState, call: Prospect, run: str | None
                        ) -> Detection | None:
        """:meth:`detect` for a fingerprinted call in ``run`` (normalised)."""
        limits = self.limits_for_tool(call.tool_name) if self._per_tool else self.limits
        if limits is None:  # exempt: recorded like any call, never the subject of a verdict
            return None
        view = state.run_view(run)
        if view is None:
            return None
        # What wakes the detectors (see WAKE_TAIL): read once, so that a call no detector that
        # is on can fire for — most calls — asks no pre-check at all.
        last = view.records[-1]
        woken = WAKE_ERRORS if view.errors else 0
        if call.args_hash in view.by_key or call.core_hash in view.by_core or (
                call.core_hash in view.by_key):  # (core_hash: None unless equivalent forms)
            woken |= WAKE_REPEAT
        if last.outcome_kind == OUTCOME_VETO or (last.tool_name == call.tool_name and (
                last.result_hash is None or last.no_progress or last.outcome_kind is not None
                or last.unknown_tool_name is not None or last.echo_failure_hash is not None)):
            woken |= WAKE_TAIL
        if woken:
            for wakes, may_fire in self._gates:
                if wakes & woken and may_fire(view, call, limits):
                    return evaluate(Facts.measure(state, run, call, limits), limits)
        return None  # no rule can fire: most calls skip measuring


class LoopDetector(DetectorCore):
    """OpenClaw's loop detector (spec §c–§e) with loopwarden's configurable thresholds: the
    spec's forms (a tool name and arguments, or a :class:`PreparedCall`) over
    :class:`DetectorCore`'s entry points for fingerprinted calls."""

    __slots__ = ()

    def record_call(
        self,
        state: SessionState,
        tool_name: str,
        args: Any,
        *,
        call_id: str | None = None,
        run_id: str | None = None,
    ) -> CallRecord:
        """Append a pending call (admission time). A call id whose call is still open in the
        run's window (:meth:`SessionState.open_call`) returns that record, so a retried hook
        never counts twice; the id of a call whose outcome is recorded is a new call."""
        return self.record(state, self.prepare(tool_name, args, run_id=run_id), call_id=call_id)

    def record(
        self, state: SessionState, call: PreparedCall, call_id: str | None = None,
        new: bool = False,
    ) -> CallRecord:
        """:meth:`record_call` for a prepared call (see :meth:`record_prospect`)."""
        return self.record_prospect(state, call.prospect, call.run_id, call_id, new)

    @overload
    def record_outcome(
        self, state: SessionState, call: PreparedCall, /, *, outcome: Outcome | None = None,
        result: Any = MISSING, error: Any = MISSING, call_id: str | None = None,
    ) -> CallRecord | None: ...

    @overload
    def record_outcome(
        self, state: SessionState, tool_name: str, args: Any, *, result: Any = MISSING,
        error: Any = MISSING, call_id: str | None = None, run_id: str | None = None,
    ) -> CallRecord | None: ...

    def record_outcome(
        self,
        state: SessionState,
        tool_name: PreparedCall | str,
        args: Any = MISSING,
        *,
        outcome: Outcome | None = None,
        result: Any = MISSING,
        error: Any = MISSING,
        call_id: str | None = None,
        run_id: str | None = None,
    ) -> CallRecord | None:
        """Attach an outcome to its pending call (same run, id, tool and args), or append it as
        a complete record (spec §e.2). Returns None when there is nothing to record.

        Takes a :class:`PreparedCall` with its ``outcome`` hashed beforehand (else it is hashed
        from ``result`` / ``error``), or the spec's tool name and arguments."""
        if type(tool_name) is not str and isinstance(tool_name, PreparedCall):
            prepared = tool_name
        else:
            prepared = self.prepare(tool_name, args, run_id=run_id)
        call = prepared.prospect
        if outcome is None:
            outcome = self.outcome(call.tool_name, prepared.args, result, error)
        return self.record_prospect_outcome(state, call, prepared.run_id, outcome, error, call_id)

    def reconcile_call(
        self,
        state: SessionState,
        tool_name: str,
        args: Any,
        *,
        call_id: str | None = None,
        run_id: str | None = None,
        cwd: str | None = None,
    ) -> dict[str, Any]:
        """Re-bind the newest pending call of this tool to its final (post-hook) arguments
        (OpenClaw's ``reconcileToolCallExecutionParams``) and report write churn for it."""
        run = normalize_run_id(run_id)
        call = self.fingerprint(tool_name, args, cwd=cwd)
        pending: CallRecord | None = None
        for r in state.reversed_run(run):
            if r.tool_name == call.tool_name and r.pending and (not call_id or r.call_id == call_id):
                pending = r
                break
        if pending is None:
            return {"active": False, "count": 0, "variantCount": 0, "matchedPendingCall": False,
                    "executionParamsChanged": False}
        changed = pending.args_hash != call.args_hash
        if changed:
            state.rebind(pending, call.args_hash)
        pending.mutation_target_hash = call.mutation_target_hash
        churn = write_churn(state, run, call, skip=pending)
        limits = self.limits_for_tool(call.tool_name)
        active = limits is not None and churn.count >= limits.warning
        return {"active": active, "count": churn.count,
                "variantCount": churn.variant_count, "matchedPendingCall": True,
                "executionParamsChanged": changed}

    @overload
    def detect(self, state: SessionState, call: PreparedCall, /) -> Detection | None: ...

    @overload
    def detect(
        self, state: SessionState, tool_name: str, args: Any, *, run_id: str | None = None
    ) -> Detection | None: ...

    # (The implementation takes every argument by position, unlike the spec's signature above:
    # a call with keywords, or to a function with keyword-only parameters, is not specialised
    # by CPython, and the guard asks on every call.)
    def detect(
        self, state: SessionState, tool_name: PreparedCall | str, args: Any = MISSING,
        run_id: str | None = None,
    ) -> Detection | None:
        """The loop this call would continue, if any. Takes a :class:`PreparedCall`, or the
        spec's tool name and arguments (then None while the rolling detectors are off; the
        guard asks only when they are on)."""
        if type(tool_name) is not str and isinstance(tool_name, PreparedCall):
            return self.detect_prospect(state, tool_name.prospect, tool_name.run_id)
        if not self.config.rolling_enabled:
            return None
        prepared = self.prepare(tool_name, args, run_id=run_id)
        return self.detect_prospect(state, prepared.prospect, prepared.run_id)


def detector_log_line(detection: Detection, tool: str) -> tuple[int, str] | None:
    """The detector's log line for ``detection`` (its logging level and text), or None for a
    detection that has none. The engine never logs: the guard decides when the line is due
    (see ``guard.core.detect``) and logs it on ``loopwarden.detection``."""
    line = _LOG_LINES.get((detection.detector, detection.level))
    if line is None:
        return None
    return _LOG_LEVELS[detection.level], line.format(tool=log_text(tool), n=detection.count)
