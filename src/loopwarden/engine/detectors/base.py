"""What every detector shares: the :class:`Detector` interface, its :class:`Rule` rows, the
prospective call, the limits, the :class:`Facts` the rows read and the :class:`Detection` a row
produces. A detector's own measurement type lives in its module."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, TypeVar

if TYPE_CHECKING:  # only annotations: the detectors need no profile code
    from ...fingerprint.profiles import ToolProfile
    from ..history import RunView, SessionState

Level = Literal["warning", "critical"]
T = TypeVar("T")

# What can wake a detector: the O(1) facts about a run's window that the engine reads once per
# call before asking any pre-check (:attr:`Detector.wakes`). A call that wakes no detector that
# is on is never measured, and no pre-check is asked.
#: The call's arguments are in the run's window (a repeat, a ping-pong side, a cycle's step).
WAKE_REPEAT = 1
#: The newest record is a veto, or this tool's and not a settled plain result (pending, a
#: no-progress flag, an outcome kind, an unknown-tool or an echo failure).
WAKE_TAIL = 2
#: The window holds an outcome with an error identity.
WAKE_ERRORS = 4
#: Any call: a detector that does not say what wakes it is always asked.
WAKE_ALWAYS = WAKE_REPEAT | WAKE_TAIL | WAKE_ERRORS


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
    """Effective thresholds and switches (already preset-filled and order-repaired).

    ``switches`` names the detector switches that are on (the snake_case keys of the config's
    ``detectors``, see :attr:`Rule.switch`); a row whose switch is not named never fires."""

    warning: int = 10
    critical: int = 20
    global_breaker: int = 30
    unknown_tool: int = 10
    error_repeat: int = 10
    # ``early``: repeats count only without progress (see
    # :func:`~loopwarden.detectors.streaks.progress_streak`); a paced or backing-off repeat is
    # blocked at ``eased_critical`` (reachable when a pacing call sits between every two polls
    # of a 30-call window).
    progress: bool = False
    eased_critical: int = 30
    switches: frozenset[str] = frozenset()


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
    # ``detectors.equivalentArguments``: the hash of the arguments without the keys that only
    # restate a default (``args_hash`` when there are none); None while the switch is off.
    core_hash: str | None = None


class Score(NamedTuple):
    """The largest count a detector's rules could compare with each calibrated threshold, for
    one prospective call (:func:`loopwarden.calibration.score_run` keeps the maximum per run)."""

    warning: int = 0  # compared with warningThreshold
    critical: int = 0  # with criticalThreshold (and the breaker, derived from it)
    unknown_tool: int = 0
    error_repeat: int = 0


class Facts:
    """The measurements of one prospective call: each detector's, taken once, when a row (or
    calibration) first asks for it with ``facts[DETECTOR]``. A detector whose switches are all
    off measures nothing: its :attr:`Detector.empty` value stands in."""

    __slots__ = ("_measured", "_run", "_state", "call", "limits")

    def __init__(self, state: SessionState, run: str | None, call: Prospect,
                 limits: Limits) -> None:
        self._state = state
        self._run = run
        self.call = call
        self.limits = limits
        self._measured: dict[Detector[Any], Any] = {}

    @classmethod
    def measure(cls, state: SessionState, run: str | None, call: Prospect,
                limits: Limits) -> Facts:
        """The facts of ``call`` (measurements are taken on first use, from the same state)."""
        return cls(state, run, call, limits)

    def __getitem__(self, detector: Detector[T]) -> T:
        try:
            value: T = self._measured[detector]
        except KeyError:
            if detector.enabled(self.limits):
                value = detector.measure(self._state, self._run, self.call, self.limits)
            else:
                value = detector.empty
            self._measured[detector] = value
        return value


Count = Callable[[Facts, Limits], int]


@dataclass(frozen=True, slots=True, eq=False)  # compared and hashed by identity
class Rule:
    """One row of a detector: the detection it makes (``detector``, ``level``) when ``fires``,
    with its count, model-facing message, warning key and log line.

    ``family`` is the detector whose measurement the row reads; ``switch`` the config switch
    (a snake_case key of ``detectors``) that turns the row on, None for a row that is always
    on; ``liveness``: a warning of this row reports argument churn as its liveness signal. The
    precedence of all rows is one list, :data:`loopwarden.detectors.RULES`."""

    family: Detector[Any]
    detector: str
    level: Level
    fires: Callable[[Facts, Limits], bool]
    count: Count
    message: Callable[[Facts, int], str]
    key: Callable[[Facts], str]
    #: The log line (logger ``loopwarden.detection``), with ``{tool}`` and ``{n}``; None: the
    #: detection is logged elsewhere.
    log: str | None
    switch: str | None = None
    liveness: bool = False
    #: The other side of the loop, for detections that have one (ping-pong's other tool).
    paired: Callable[[Facts], str | None] | None = None


class Detector(ABC, Generic[T]):
    """One detector: a measurement of the run's history (:meth:`measure`, its ``T``), the
    :class:`Rule` rows that compare it with the thresholds (defined in its module, each naming
    it as its ``family``, each placed in the precedence list), the O(1) pre-check that lets
    most calls skip measuring, and what calibration reads of the measurement.

    The contract that keeps the pre-check honest: whenever one of this detector's rules fires
    on :meth:`measure`'s value (with the limits it was given), :meth:`enabled` and
    :meth:`may_fire` are True (``tests/test_detector_objects.py`` checks it on random
    histories)."""

    __slots__ = ()

    #: A short name for messages and test ids (the rules carry the names detections report).
    name: str = ""
    #: The config switches of its rows (snake_case keys of ``detectors``); empty: always on.
    switches: tuple[str, ...] = ()
    #: The measurement when nothing was found (and when every switch is off).
    empty: T
    #: Whether its measurement reads the error identities of failed outcomes (the engine
    #: computes them only for such a detector).
    reads_error_identity: bool = False
    #: Whether it reads which calls change the world (``CallRecord.mutating``, which the
    #: fingerprinter then computes in every preset).
    reads_mutations: bool = False
    #: Whether it reads failures' identities with the call's own argument values masked
    #: (``CallRecord.echo_failure_hash``, which the engine then computes).
    reads_failure_echo: bool = False
    #: What can wake it (``WAKE_*`` flags): :meth:`may_fire` is False whenever none of them
    #: holds, so the engine skips asking it then.
    wakes: int = WAKE_ALWAYS

    def enabled(self, limits: Limits) -> bool:
        """Whether any of its rows can fire under these switches: a detector whose switches
        are all off stays out of :class:`~loopwarden.engine.LoopDetector`'s gate."""
        return not self.switches or not limits.switches.isdisjoint(self.switches)

    @abstractmethod
    def may_fire(self, view: RunView, call: Prospect, limits: Limits) -> bool:
        """A conservative O(1) test on the run's window (at least one record): False only when
        none of this detector's rules can fire for ``call``. Every threshold but the
        unknown-tool and error-repeat ones is at least ``limits.warning``."""

    @abstractmethod
    def measure(self, state: SessionState, run: str | None, call: Prospect, limits: Limits) -> T:
        """This detector's part of :class:`Facts` (``facts[self]``)."""

    @abstractmethod
    def score(self, facts: Facts, limits: Limits) -> Score:
        """What calibration reads: the counts this detector's rules compare with each
        threshold (0 where none of them does)."""
