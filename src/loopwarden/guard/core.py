"""The guard's state.

:class:`GuardCore` is what :class:`~loopwarden.guard.LoopGuard` is made of below its public
hooks: the detector and the switches derived from its config, the loop policy, the store and
its failure policy, the sinks and the counters. The rules live in the policy (``policy.py``),
the transactions and their drivers in ``transactions.py`` and ``batch.py``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..base.log import get_logger
from ..base.text import log_text, text_id
from ..engine import LoopDetector
from .events import EventSink, LoggingSink
from .policy import FailClosed, LoopPolicy, StoreHealth, failure_policy
from .stores.base import Store
from .stores.memory import MemoryStore
from .verdicts import GuardStats, Verdict

if TYPE_CHECKING:
    from ..config import LoopDetectionConfig  # only the engine loads it, and only when needed


log = get_logger("loopwarden")

DISABLE_ENV = "LOOPWARDEN_DISABLED"

_disabled_logged = False


def _disabled_by_env() -> bool:
    """The ``LOOPWARDEN_DISABLED`` kill switch, read when a guard is built (logged once)."""
    global _disabled_logged
    value = os.environ.get(DISABLE_ENV, "").strip().lower()
    off = value not in ("", "0", "false", "no", "off")
    if off and not _disabled_logged:
        _disabled_logged = True
        log.warning("%s=%s: loopwarden guards allow every tool call (loop detection is off)",
                    DISABLE_ENV, value)
    return off


def _warn_enabled_unset() -> None:
    """Say once per guard that an explicit config without ``enabled`` detects no loops."""
    log.warning(
        "LoopGuard(config=...): the config leaves `enabled` unset, so the rolling loop "
        "detectors are OFF (only the post-compaction guard runs). Set "
        "tools.loopDetection.enabled = true in the file, or pass "
        "LoopDetectionConfig(enabled=True, ...), or use LoopGuard(preset=..., **overrides) "
        "which starts from the enabled default")


class GuardCore:
    """A guard's state: what every transaction reads and every driver updates (the
    constructor's arguments are :class:`~loopwarden.guard.LoopGuard`'s)."""

    #: How long an admitted call counts as in flight while its outcome has not come: an
    #: identical call admitted meanwhile counts it as a no-progress repeat, as OpenClaw counts
    #: a batch's earlier siblings, so a burst of concurrent identical calls is stopped like the
    #: same calls made one after another. Older calls without an outcome are not in flight (a
    #: host that never calls ``after_tool_call`` would otherwise pile them up); 0 turns
    #: in-flight counting off. Sequential hosts (each outcome reported before the next call)
    #: never have a call in flight.
    in_flight_seconds: float = 60.0
    #: Deny every later call of a run once a terminal verdict stopped it, with
    #: :data:`~loopwarden.guard.STOP_MESSAGE`. For doors whose host cannot end a run from a
    #: tool hook (Codex CLI): the run goes on, so the guard keeps it stopped. Off by default:
    #: hosts that end the run never send another call of it.
    deny_after_stop: bool = False

    def __init__(
        self,
        config: LoopDetectionConfig | None = None,
        *,
        store: Store | None = None,
        profiles: object = None,
        sinks: Sequence[EventSink] = (),
        fail_closed: bool = False,
        preset: str | None = None,
        **overrides: object,
    ) -> None:
        if config is None:
            from ..config import LoopDetectionConfig  # a hook passing its snapshot never loads it

            config = LoopDetectionConfig(enabled=True)
        if preset is not None:
            overrides["preset"] = preset
        if overrides:
            # Keyword customisations apply on top of the given (or the enabled default) config:
            # "block sooner" must never be the switch that turns the guard off.
            config = config.with_overrides(**overrides)
        if config.enabled is None:
            _warn_enabled_unset()
        self.detector = LoopDetector(config, profiles)
        self.config = self.detector.config
        # The config is immutable; these derived switches are read on every call.
        #: The rolling detectors are on (``enabled`` is exactly True).
        self.rolling: bool = self.config.rolling_enabled
        #: ``early``: a result that completes a pattern is warned on at once.
        self.post_outcome: bool = self.config.post_outcome_warnings and self.rolling
        #: The post-compaction guard is on (``enabled`` is not False).
        self.compaction_on: bool = self.config.compaction_guard_enabled
        self.store: Store = store if store is not None else MemoryStore()
        self.sinks: list[EventSink] = [LoggingSink(), *sinks]
        self.stats = GuardStats()
        #: The store's outage state and the failure policy (see :attr:`fail_closed`).
        self.store_health = StoreHealth(failure_policy(fail_closed), self.stats)
        #: The kill switch: every hook answers "allow" and touches no state.
        self.disabled = _disabled_by_env()
        #: When a call is warned on, blocked, or stops its run.
        self.policy = LoopPolicy(self)

    @property
    def fail_closed(self) -> bool:
        """Whether calls are blocked while the store cannot be reached (else they run)."""
        return isinstance(self.store_health.policy, FailClosed)

    @fail_closed.setter
    def fail_closed(self, value: bool) -> None:
        """Set the failure policy: True blocks calls while the store cannot be reached."""
        self.store_health.policy = failure_policy(value)


def internal_error(stats: GuardStats, tool: object, exc: Exception) -> Verdict:
    """``allow`` for a hook whose input the guard could not handle: logged and counted (in a
    guard's ``stats``), never raised (every hook is total)."""
    # Counters are diagnostics: a lock-free increment may, rarely, lose a count under threads.
    stats.internal_errors += 1
    # The exception's type, not its text: that may quote the call's arguments.
    log.warning("tool loop outcome tracking failed: tool=%s error=%s", log_text(tool),
                type(exc).__name__)
    return Verdict("allow", tool_name=text_id(tool))
