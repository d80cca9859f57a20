"""What every detector shares: the :class:`Detector` interface, the prospective call, the
limits, the measurements' value types and the :class:`Detection` a rule produces."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Literal, NamedTuple, TypeVar

if TYPE_CHECKING:  # only annotations: the detectors need no profile code, and Facts needs them
    from ...fingerprint.profiles import ToolProfile
    from ..history import RunView, SessionState
    from .rules import Facts

Level = Literal["warning", "critical"]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Detection:
    """What a detector found for a prospective call."""

    level: Level
    detector: str
    count: int
    message: str
    paired_tool_name: str | None = None
    warning_key: str | None = None
    liveness_signal: str | None = None

    @property
    def stuck(self) -> bool:
        """Always True: a detection is the spec's ``{stuck: True, ...}`` result (§b)."""
        return True


@dataclass(frozen=True, slots=True)
class Limits:
    """Effective thresholds and switches (already preset-filled and order-repaired)."""

    warning: int = 10
    critical: int = 20
    global_breaker: int = 30
    unknown_tool: int = 10
    error_repeat: int = 10
    generic_repeat: bool = True
    known_poll: bool = True
    ping_pong: bool = True
    argument_churn: bool = True
    error_repeat_on: bool = False
    # ``early``: repeats count only without progress (see :func:`progress_streak`); a paced or
    # backing-off repeat is blocked at ``eased_critical`` (reachable when a pacing call sits
    # between every two polls of a 30-call window).
    progress: bool = False
    eased_critical: int = 30
    cycle: bool = True


@dataclass(slots=True)  # built twice per call; frozen would double that cost
class Prospect:
    """The call about to be made, already fingerprinted."""

    tool_name: str
    args_hash: str
    known_poll: bool = False
    poll_critical_at_warning: bool = False
    mutation_target_hash: str | None = None
    # The tool's profile when it was fingerprinted (its outcome is hashed by the same one).
    profile: ToolProfile | None = field(default=None, repr=False, compare=False)
    # From the profile, ``early`` preset only: changes state / only waits / waits this long.
    mutating: bool = False
    pacing: bool = False
    wait_ms: int = 0


@dataclass(frozen=True, slots=True)
class Streak:
    """A streak walked back from the newest call: its length, the outcome (or error identity) it
    repeats, the unknown tool's name."""

    count: int = 0
    latest_result_hash: str | None = None
    name: str | None = None
    # ``early``: every interval between the calls was paced (blocks wait for the global
    # breaker), or the caller is backing off / this is a pacing call (no warning either).
    paced: bool = False
    compliant: bool = False


@dataclass(frozen=True, slots=True)
class PingPong:
    """An A-B alternation ending before this call (§d.4): its length with this call, the other
    side, and whether both sides' outcomes held still."""

    count: int = 0
    paired_tool_name: str | None = None
    paired_signature: str | None = None
    no_progress_evidence: bool = False


@dataclass(frozen=True, slots=True)
class Churn:
    """Argument churn (§d.8): the calls churning, their distinct argument variants, and whether
    it is a write target rewritten."""

    count: int = 0
    variant_count: int = 0
    write_mutation: bool = False


@dataclass(frozen=True, slots=True)
class Cycle:
    """A cycle of 3 to 6 calls (see :func:`~loopwarden.engine.detectors.cycle.no_progress_cycle`): how
    many calls its tail holds, its steps' args hashes and their tools."""

    count: int = 0  # calls in the cycling tail, blocked attempts and the prospective call included
    steps: tuple[str, ...] = ()  # the cycle's args hashes, starting at the prospective call
    tools: tuple[str, ...] = ()  # their tool names, in the same order


NO_STREAK = Streak()
NO_PING_PONG = PingPong()
NO_CHURN = Churn()
NO_CYCLE = Cycle()


class Score(NamedTuple):
    """The largest count a detector's rules could compare with each calibrated threshold, for
    one prospective call (:func:`loopwarden.offline.calibration.score_run` keeps the maximum per run)."""

    warning: int = 0  # compared with warningThreshold
    critical: int = 0  # with criticalThreshold (and the breaker, derived from it)
    unknown_tool: int = 0
    error_repeat: int = 0



class Detector(ABC, Generic[T]):
    """One detector: a measurement of the run's history, the rules of ``RULES`` that compare it
    with the thresholds (each names this detector as its ``family``), the O(1) pre-check that
    lets most calls skip measuring, and what calibration reads of the measurement.

    The contract that keeps the pre-check honest: whenever one of this detector's rules fires
    on :meth:`measure`'s value (with the limits it was given), :meth:`enabled` and
    :meth:`may_fire` are True (``tests/test_detector_objects.py`` checks it on random
    histories)."""

    __slots__ = ()

    #: A short name for messages and test ids (the rules carry the names detections report).
    name: str = ""

    def enabled(self, limits: Limits) -> bool:
        """Whether any of this detector's rules can fire under these switches: a detector
        whose switch is off stays out of :class:`~loopwarden.engine.LoopDetector`'s gate."""
        return True

    @abstractmethod
    def may_fire(self, view: RunView, call: Prospect, limits: Limits) -> bool:
        """A conservative O(1) test on the run's window (at least one record): False only when
        none of this detector's rules can fire for ``call``. Every threshold but the
        unknown-tool and error-repeat ones is at least ``limits.warning``."""

    @abstractmethod
    def measure(self, state: SessionState, run: str | None, call: Prospect, limits: Limits) -> T:
        """This detector's part of :class:`~loopwarden.engine.detectors.Facts`."""

    @abstractmethod
    def score(self, facts: Facts, limits: Limits) -> Score:
        """What calibration reads: the counts this detector's rules compare with each
        threshold (0 where none of them does)."""
