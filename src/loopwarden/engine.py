"""``LoopDetector``: record calls and outcomes into a :class:`SessionState` and detect loops.

Pure and synchronous: the guard adds policy, stores and events on top. :meth:`LoopDetector.prepare`
turns a call into a :class:`PreparedCall` — fingerprinted once, its run id normalised — and
:meth:`~LoopDetector.record`, :meth:`~LoopDetector.record_outcome`, :meth:`~LoopDetector.detect`
and :meth:`~LoopDetector.observe` take it, so the guard does that work once per call. The
spec's raw-argument forms (DESIGN.md §3: ``record_call``, ``record_outcome``, ``detect`` with a
tool name and its arguments) prepare the call and go the same way.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from time import time_ns as _time_ns
from typing import TYPE_CHECKING, Any, overload

from ._text import log_text
from .detectors import Detection, Facts, Limits, Prospect, evaluate, gates_for, write_churn
from .fingerprint import (
    Outcome,
    args_hash_of_json,
    canonical_json,
    error_text,
    mutation_target_hash,
    profiled_outcome,
    result_error_text,
    text_outcome,
)
from .fingerprint.leaves import Leaves, leaves_of
from .history import (
    OUTCOME_TERMINAL_EXEC_FAILURE,
    OUTCOME_VETO,
    CallRecord,
    SessionState,
    normalize_run_id,
    warning_bucket,
    warning_key,
)
from .profiles import ProfileRegistry, ToolProfile, default_registry, mutating_by_name
from .types import MISSING
from .volatile import mask_value, mask_volatile

if TYPE_CHECKING:
    # Imported when needed: a caller that passes its config (the Claude Code hook passes a
    # plain snapshot, see _config_snapshot) never loads pydantic.
    from .config import LoopDetectionConfig

__all__ = ["LoopDetector", "PreparedCall", "limits_for", "resolve_registry"]

log = logging.getLogger("loopwarden.detection")

_PREPARED_CACHE_SIZE = 1024
_TOOL_LIMITS_CACHE_SIZE = 1024  # tool names: a model can invent any number of them
_UNRESOLVED = Limits()  # a cache-miss marker (compared by identity)
_PREPARED_MAX_ARGS = 8192  # bytes of canonical JSON: the cache holds at most ~8 MB

_DETECTOR_LOG: dict[tuple[str, str], tuple[int, str]] = {
    ("global_circuit_breaker", "critical"): (
        logging.ERROR, "Global circuit breaker triggered: {tool} repeated {n} times with no progress"),
    ("known_poll_no_progress", "critical"): (
        logging.ERROR, "Critical polling loop detected: {tool} repeated {n} times"),
    ("known_poll_no_progress", "warning"): (
        logging.WARNING, "Polling loop warning: {tool} repeated {n} times"),
    ("ping_pong", "critical"): (
        logging.ERROR, "Critical ping-pong loop detected: alternating calls count={n} currentTool={tool}"),
    ("ping_pong", "warning"): (
        logging.WARNING, "Ping-pong loop warning: alternating calls count={n} currentTool={tool}"),
    ("cycle", "critical"): (
        logging.ERROR, "Critical cycle loop detected: repeating cycle count={n} currentTool={tool}"),
    ("cycle", "warning"): (
        logging.WARNING, "Cycle loop warning: repeating cycle count={n} currentTool={tool}"),
    ("generic_repeat", "critical"): (
        logging.ERROR, "Critical generic loop detected: {tool} repeated {n} times"),
    ("argument_churn", "warning"): (
        logging.WARNING, "Argument churn warning: {tool} cycled through stable argument patterns"),
    ("generic_repeat", "warning"): (
        logging.WARNING, "Loop warning: {tool} called {n} times with identical arguments"),
    ("error_repeat", "critical"): (
        logging.ERROR, "Critical error repeat detected: {tool} failed {n} times with the same error"),
    ("error_repeat", "warning"): (
        logging.WARNING, "Error repeat warning: {tool} failed {n} times with the same error"),
}


def limits_for(config: LoopDetectionConfig) -> Limits:
    d = config.detectors
    return Limits(
        warning=config.warning_threshold,
        critical=config.critical_threshold,
        global_breaker=config.global_circuit_breaker_threshold,
        unknown_tool=config.unknown_tool_threshold,
        error_repeat=config.error_repeat_threshold,
        generic_repeat=d.generic_repeat,
        known_poll=d.known_poll_no_progress,
        ping_pong=d.ping_pong,
        argument_churn=d.argument_churn,
        error_repeat_on=config.error_repeat_enabled,
        progress=config.progress_aware,
        eased_critical=_eased_critical(config.critical_threshold,
                                       config.global_circuit_breaker_threshold),
        cycle=d.cycle,
    )


def _eased_critical(critical: int, breaker: int) -> int:
    return min(breaker, max(critical + 1, critical * 3 // 2))


def _with_tool_thresholds(
    config: LoopDetectionConfig, base: Limits, tool_name: str
) -> Limits | None:
    """``base`` with ``tool_name``'s ``perTool`` thresholds, or None when it is exempt."""
    thresholds = config.tool_thresholds(tool_name)
    if thresholds is None:
        return None
    warning, critical, breaker = thresholds
    if (warning, critical, breaker) == (base.warning, base.critical, base.global_breaker):
        return base
    return dataclasses.replace(
        base, warning=warning, critical=critical, global_breaker=breaker,
        eased_critical=_eased_critical(critical, breaker))


def resolve_registry(profiles: object) -> ProfileRegistry:
    """Accept a registry, the ``loopwarden.profiles`` module itself, or None (the built-ins)."""
    if profiles is None:
        return default_registry
    if isinstance(profiles, ProfileRegistry):
        return profiles
    registry = getattr(profiles, "default_registry", None)
    if isinstance(registry, ProfileRegistry):
        return registry
    raise TypeError(f"profiles must be a ProfileRegistry, got {type(profiles).__name__}")


class PreparedCall:
    """A call as the engine judges it: its fingerprint (:attr:`prospect`), its arguments (the
    outcome projections read them) and its run id, normalised here
    (:func:`~loopwarden.history.normalize_run_id`): whoever builds one, the methods that take
    it never see a raw run id. :meth:`LoopDetector.prepare` builds them."""

    __slots__ = ("args", "prospect", "run_id")

    def __init__(self, prospect: Prospect, run_id: object = None, args: Any = MISSING) -> None:
        self.prospect = prospect
        self.run_id = normalize_run_id(run_id)
        self.args = args

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PreparedCall):
            return NotImplemented
        return (self.prospect, self.run_id, self.args) == (other.prospect, other.run_id,
                                                           other.args)

    __hash__ = None  # type: ignore[assignment]  # (equal by value, and its args may be a dict)

    def __repr__(self) -> str:
        return f"PreparedCall({self.prospect!r}, run_id={self.run_id!r})"


class LoopDetector:
    """OpenClaw's loop detector (spec §c–§e) with loopwarden's configurable thresholds."""

    __slots__ = (
        "_extended_unknown", "_gates", "_history_size", "_learn", "_mask", "_per_tool",
        "_prepared", "_prepared_for", "_progress", "_tool_limits", "config", "limits", "registry",
    )

    def __init__(
        self, config: LoopDetectionConfig | None = None, profiles: object = None
    ) -> None:
        if config is None:
            from .config import LoopDetectionConfig

            config = LoopDetectionConfig()
        self.config = config
        self.limits = limits_for(self.config)
        # The O(1) pre-checks of the detectors the switches leave on (per-tool limits change
        # thresholds only), asked in turn before a call is measured.
        self._gates = gates_for(self.limits)
        self.registry = resolve_registry(profiles)
        # Preset switches, read on every outcome (the config is immutable).
        self._mask = self.config.mask_volatile
        self._learn = self.config.learn_volatile
        self._extended_unknown = self.config.extended_unknown_tools
        self._history_size = self.config.history_size
        self._progress = self.config.progress_aware
        # perTool: limits resolved once per tool name (None: exempt). Empty perTool skips all.
        self._per_tool = bool(self.config.per_tool)
        self._tool_limits: dict[str, Limits | None] = {}
        # Fingerprints of recent calls by their canonical arguments: the guard's after-call
        # hook, and every repeat of a looping call, then skip hashing, profile look-ups and
        # the write-target hash. Valid for one registry snapshot (profiles can change).
        self._prepared: dict[tuple[str, bytes], Prospect] = {}
        self._prepared_for: object = None

    def limits_for_tool(self, tool_name: str) -> Limits | None:
        """The limits of detections whose subject is ``tool_name`` (canonical, as in
        :class:`Prospect`): its ``perTool`` thresholds, or None when it is exempt."""
        if not self._per_tool:
            return self.limits
        cache = self._tool_limits
        limits = cache.get(tool_name, _UNRESOLVED)
        if limits is not _UNRESOLVED:
            return limits
        limits = _with_tool_thresholds(self.config, self.limits, tool_name)
        if len(cache) >= _TOOL_LIMITS_CACHE_SIZE:
            cache.clear()  # as for _prepared: one atomic call, safe under threads
        cache[tool_name] = limits
        return limits

    def is_exempt(self, tool_name: str) -> bool:
        """Whether ``perTool`` exempts ``tool_name`` from every verdict."""
        return self._per_tool and self.limits_for_tool(tool_name) is None

    # -- fingerprinting ----------------------------------------------------------------------

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
        profile = self.registry.get(tool_name)
        if profile is None:
            prospect = Prospect(tool_name, args_hash_of_json(tool_name, canonical))
            if self._progress:
                prospect.mutating = mutating_by_name(tool_name)
            return prospect
        tool = self.registry.canonical_name(tool_name)
        prospect = Prospect(
            tool,
            args_hash_of_json(tool, canonical),
            profile.is_poll(args),
            profile.poll_critical_at_warning,
            mutation_target_hash(tool, args, cwd, registry=self.registry)
            if tool == "write" else None,
            profile,
        )
        if self._progress:
            prospect.mutating = profile.is_mutating(args)
            prospect.pacing = profile.is_pacing(args)
            prospect.wait_ms = int(profile.waits(args) * 1000)
        return prospect

    def outcome(self, tool_name: str, args: Any, result: Any = MISSING, error: Any = MISSING) -> Outcome:
        """The hashes a call's result or error is recorded with (spec §c.3), masked as its
        profile says."""
        if self._progress:
            return self.observe(self.prepare(tool_name, args), result, error)[0]
        profile = self.registry.get(tool_name)
        if profile is not None or self._mask:
            result, error = self._masked(profile, result, error)
        return profiled_outcome(tool_name, profile, args, result, error,
                                extended_unknown=self._extended_unknown)

    def observe(
        self, prepared: PreparedCall, result: Any, error: Any
    ) -> tuple[Outcome, Leaves | None]:
        """The call's outcome, plus (``early`` preset) the leaves to learn volatile fields from.

        Leaves are only taken from tools loopwarden hashes generically: OpenClaw's own
        projections already know what to ignore. The result is masked once for both."""
        call, args = prepared.prospect, prepared.args
        if self._progress:
            return self._observe_progress(call, args, result, error)
        profile = call.profile
        if profile is not None or self._mask:
            result, error = self._masked(profile, result, error)
        if type(result) is str and (error is MISSING or error is None):
            # Most results are text: no profile projects text, so it is hashed as it is.
            outcome = text_outcome(result)
        else:
            outcome = profiled_outcome(call.tool_name, profile, args, result, error,
                                       extended_unknown=self._extended_unknown)
        learnable = (
            self._learn and result is not MISSING and (error is MISSING or error is None)
            and not (profile is not None and (profile.projection or profile.is_send_like(args)))
        )
        return outcome, leaves_of(result) if learnable else None

    def _observe_progress(
        self, call: Prospect, args: Any, result: Any, error: Any
    ) -> tuple[Outcome, Leaves | None]:
        """``early``: a result that reports a failure in its body is that failure, and every
        failure gets an identity for error repeat (see :func:`error_identity`)."""
        failed = error is not MISSING and error is not None
        if not failed and result is not MISSING:
            reported = result_error_text(result)
            if reported is not None:
                result, error, failed = MISSING, reported, True
        profile = call.profile
        raw_error = error
        if profile is not None or self._mask:
            result, error = self._masked(profile, result, error)
        outcome = profiled_outcome(call.tool_name, profile, args, result, error,
                                   extended_unknown=self._extended_unknown)
        identity: str | None
        if failed:
            identity = error_identity(call.args_hash, raw_error)
        elif outcome.outcome_kind == OUTCOME_TERMINAL_EXEC_FAILURE:
            identity = outcome.failure_identity_hash
        else:
            identity = None
        if identity is not None:
            outcome = outcome._replace(error_identity_hash=identity)
        # Projections apply to structured results only: a projected tool's text is learned.
        projected = profile is not None and (
            (profile.projection is not None and type(result) is not str)
            or profile.is_send_like(args))
        learnable = self._learn and not failed and result is not MISSING and not projected
        return outcome, leaves_of(result) if learnable else None

    def _masked(self, profile: ToolProfile | None, result: Any, error: Any) -> tuple[Any, Any]:
        builtin = self._mask
        extra: tuple[Any, ...] = ()
        if profile is not None:
            if profile.mask_volatile is not None:
                builtin = profile.mask_volatile
            extra = profile.volatile_patterns
        if not builtin and not extra:
            return result, error
        if result is not MISSING:
            result = mask_value(result, extra, builtin=builtin)
        if error is not MISSING and error is not None:
            # (error_text, not isinstance: it never raises, and gives a str subclass's plain text)
            error = mask_volatile(error_text(error), extra, builtin=builtin)
        return result, error

    # -- recording ---------------------------------------------------------------------------

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
        """:meth:`record_call` for a prepared call. ``new=True``: the caller has just looked
        for an open call with this id (:meth:`SessionState.open_call`) and found none, so the
        record is appended without looking again."""
        prospect, run = call.prospect, call.run_id
        if not new:
            existing = state.open_call(run, call_id, prospect.tool_name, prospect.args_hash)
            if existing is not None:
                return existing
        # All positional: keyword construction of a 12-field dataclass costs noticeably more.
        record = CallRecord(prospect.tool_name, prospect.args_hash, call_id or None, run,
                            _time_ns() // 1_000_000, None, None, None, None, False,
                            prospect.mutation_target_hash, None, prospect.mutating,
                            prospect.pacing, prospect.wait_ms)
        return state.push(record, self._history_size)

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
        run = prepared.run_id
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
            record = self.record(state, prepared, call_id=call_id, new=True)
        record.result_hash = outcome.result_hash
        record.outcome_kind = outcome.outcome_kind
        record.failure_identity_hash = outcome.failure_identity_hash
        record.unknown_tool_name = outcome.unknown_tool_name
        record.no_progress = outcome.no_progress
        if self._progress:
            # A failed or blocked call changed nothing, so it is no mutation.
            if record.mutating and (outcome.error_identity_hash is not None
                                    or outcome.outcome_kind is not None
                                    or (outcome.result_hash or "").startswith("error:")):
                record.mutating = False
            if self.limits.error_repeat_on:
                state.set_error_identity(record, outcome.error_identity_hash)
            return record
        if self.limits.error_repeat_on and error is not MISSING and error is not None:
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

    # -- detection ---------------------------------------------------------------------------

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
            call, run = tool_name.prospect, tool_name.run_id
        elif not self.config.rolling_enabled:
            return None
        else:
            prepared = self.prepare(tool_name, args, run_id=run_id)
            call, run = prepared.prospect, prepared.run_id
        limits = self.limits_for_tool(call.tool_name) if self._per_tool else self.limits
        if limits is None:  # exempt: recorded like any call, never the subject of a verdict
            return None
        view = state.run_view(run)
        if view is None:
            return None
        for may_fire in self._gates:
            if may_fire(view, call, limits):
                break
        else:  # no rule can fire: most calls skip measuring
            return None
        detection = evaluate(Facts.measure(state, run, call, limits), limits)
        if detection is not None:
            _log_detection(detection, call.tool_name, state, run, limits)
        return detection


# An exit status alone ("Exit code 1", "(Command exited with code 1)") says nothing about *which*
# failure it was: distinct commands that print it did not fail the same way.
_STATUS_ONLY = re.compile(
    r"(?:\s|exit code \d+|\(?command exited with code \d+\)?|error|failed|[.:#()\[\]-])*",
    re.IGNORECASE)


def error_identity(args_hash: str, error: Any) -> str:
    """Which failure this was, whatever the arguments: the error text with volatile spans
    masked. An error that only states an exit status is identified with its arguments."""
    masked = mask_volatile(error if type(error) is str else error_text(error))
    if _STATUS_ONLY.fullmatch(masked):
        masked = f"{args_hash}\x00{masked}"
    return hashlib.sha256(masked.encode("utf-8", "replace")).hexdigest()


def _log_detection(detection: Detection, tool: str, state: SessionState, run: str | None,
                   limits: Limits) -> None:
    """The detector's log line. OpenClaw logs it on every evaluation (a warning on every call
    from the 10th to the 19th); loopwarden logs a warning once per warning bucket, when the
    guard warns (spec §f.2's dedupe, the same key and bucket), and a critical every time."""
    entry = _DETECTOR_LOG.get((detection.detector, detection.level))
    if entry is None or not log.isEnabledFor(entry[0]):
        return
    if detection.level == "warning" and not state.warning_is_new(
            warning_key(detection.detector, detection.warning_key, tool, run),
            warning_bucket(detection.count, limits.warning)):
        return
    log.log(entry[0], entry[1].format(tool=log_text(tool), n=detection.count))
