"""What every detector shares: the prospective call, the limits, the measurements' value types
and the :class:`Detection` a rule produces. Nothing here measures anything."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # only an annotation: the detectors need no profile code
    from ..profiles import ToolProfile

Level = Literal["warning", "critical"]


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
    count: int = 0
    latest_result_hash: str | None = None
    name: str | None = None
    # ``early``: every interval between the calls was paced (blocks wait for the global
    # breaker), or the caller is backing off / this is a pacing call (no warning either).
    paced: bool = False
    compliant: bool = False


@dataclass(frozen=True, slots=True)
class PingPong:
    count: int = 0
    paired_tool_name: str | None = None
    paired_signature: str | None = None
    no_progress_evidence: bool = False


@dataclass(frozen=True, slots=True)
class Churn:
    count: int = 0
    variant_count: int = 0
    write_mutation: bool = False


@dataclass(frozen=True, slots=True)
class Cycle:
    count: int = 0  # calls in the cycling tail, blocked attempts and the prospective call included
    steps: tuple[str, ...] = ()  # the cycle's args hashes, starting at the prospective call
    tools: tuple[str, ...] = ()  # their tool names, in the same order


NO_STREAK = Streak()
NO_PING_PONG = PingPong()
NO_CHURN = Churn()
NO_CYCLE = Cycle()
