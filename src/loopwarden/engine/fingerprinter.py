"""Calls and outcomes as the detectors compare them: :class:`Fingerprinter` and
:class:`PreparedCall`."""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from ..base.lazy_re import lazy_pattern
from ..base.types import MISSING
from ..fingerprint import (
    Outcome,
    error_text,
    profiled_outcome,
    result_error_text,
    text_outcome,
)
from ..fingerprint.leaves import Leaves, leaves_of
from ..fingerprint.outcomes import OUTCOME_TERMINAL_EXEC_FAILURE
from ..fingerprint.profiles import ProfileRegistry, ToolProfile, default_registry
from ..fingerprint.volatile import mask_value, mask_volatile
from .detectors import Prospect
from .detectors.failure_repeat import echo_failure_identity, failure_text
from .history import normalize_run_id

if TYPE_CHECKING:
    from ..config import LoopDetectionConfig

_PREPARED_CACHE_SIZE = 1024
_PREPARED_MAX_ARGS = 8192  # bytes of canonical JSON: the cache holds at most ~8 MB


def resolve_registry(profiles: object) -> ProfileRegistry:
    """Accept a registry, the ``loopwarden.fingerprint.profiles`` module itself, or None (the built-ins)."""
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
    (:func:`~loopwarden.engine.history.normalize_run_id`): whoever builds one, the methods that take
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


class Fingerprinter:
    """The half of :class:`~loopwarden.engine.LoopDetector` that turns outcomes into the hashes
    the detectors compare, for one config's preset switches and one profile registry (the
    detector fingerprints the calls themselves, on the path every call takes)."""

    __slots__ = ("_core_args", "_extended_unknown", "_failure_echo", "_learn", "_mask",
                 "_mutations", "_progress", "registry")

    def __init__(self, config: LoopDetectionConfig, profiles: object = None) -> None:
        self.registry = resolve_registry(profiles)
        # Preset switches, read on every outcome (the config is immutable).
        self._mask = config.mask_volatile
        self._learn = config.learn_volatile
        self._extended_unknown = config.extended_unknown_tools
        self._progress = config.progress_aware
        # Whether calls are marked mutating (``early``, or a detector that reads it: set by
        # the LoopDetector once it knows its detectors).
        self._mutations = self._progress
        # Whether failures get an identity with the call's argument values masked (set by the
        # LoopDetector when a detector reads it).
        self._failure_echo = False
        # Whether calls get the hash of their arguments without default-looking keys (set by
        # the LoopDetector when ``detectors.equivalentArguments`` is on).
        self._core_args = False

    def observe(
        self, call: Prospect, args: Any, result: Any, error: Any
    ) -> tuple[Outcome, Leaves | None]:
        """The outcome of ``call`` (made with ``args``), plus (``early`` preset) the leaves to
        learn volatile fields from.

        Leaves are only taken from tools loopwarden hashes generically: OpenClaw's own
        projections already know what to ignore. The result is masked once for both."""
        if self._progress:
            observed = self._observe_progress(call, args, result, error)
        else:
            observed = self._observe(call, args, result, error)
        if not self._failure_echo:
            return observed
        return _with_failure_echo(observed[0], call, args, result, error), observed[1]

    def _observe(
        self, call: Prospect, args: Any, result: Any, error: Any
    ) -> tuple[Outcome, Leaves | None]:
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


# An exit status alone ("Exit code 1", "(Command exited with code 1)") says nothing about *which*
# failure it was: distinct commands that print it did not fail the same way. (Compiled on first
# use, by failed calls only: see loopwarden.base.lazy_re.)
_STATUS_ONLY = lazy_pattern(
    r"(?:\s|exit code \d+|\(?command exited with code \d+\)?|error|failed|[.:#()\[\]-])*",
    re.IGNORECASE)


def _with_failure_echo(outcome: Outcome, call: Prospect, args: Any, result: Any,
                       error: Any) -> Outcome:
    """``outcome`` with the failure's identity, its argument values masked (failed calls only;
    see :mod:`loopwarden.detectors.failure_repeat`)."""
    if outcome.outcome_kind is not None and outcome.outcome_kind != OUTCOME_TERMINAL_EXEC_FAILURE:
        return outcome  # a veto or a write: no failure
    try:
        identity = _echo_identity(call, args, result, error, outcome.outcome_kind)
    except Exception:
        # The result, the error and the arguments are the host's values (an object whose
        # ``__class__`` or a str subclass whose methods raise, say): such a failure gets no
        # echo-masked identity instead of failing the call.
        return outcome
    if identity is None:
        return outcome
    return outcome._replace(echo_failure_hash=identity)


def _echo_identity(call: Prospect, args: Any, result: Any, error: Any,
                   outcome_kind: str | None) -> str | None:
    """The echo-masked identity of a failed call's text, or None for a call that did not fail."""
    failed = None if error is MISSING or error is None else error_text(error)
    reported = None
    if failed is None and result is not MISSING and (
            type(result) is not str or result[:32].lstrip()[:1] in ("{", "E")):
        # (A text reports an error only as JSON or after an "Exit code N" header.)
        reported = result_error_text(result)
    text = failure_text(None if result is MISSING else result, failed, outcome_kind, reported)
    return None if text is None else echo_failure_identity(text, args, call.args_hash)


def error_identity(args_hash: str, error: Any) -> str:
    """Which failure this was, whatever the arguments: the error text with volatile spans
    masked. An error that only states an exit status is identified with its arguments."""
    masked = mask_volatile(error if type(error) is str else error_text(error))
    if _STATUS_ONLY().fullmatch(masked):
        masked = f"{args_hash}\x00{masked}"
    return hashlib.sha256(masked.encode("utf-8", "replace")).hexdigest()
