"""What a guard does when its store fails: the failure policy and the outage it tracks.

:class:`FailOpen` (the default) lets calls run while the store is down — detection pauses, the
agent does not; :class:`FailClosed` blocks them with :data:`STORE_DOWN_MESSAGE` until the store
answers again. Either way an outcome is never refused (the call has already run), and the
outage is logged once when it starts and once when it ends, not per call.
"""

from __future__ import annotations

import threading
from typing import Protocol

from ..base.log import get_logger
from ..base.text import log_text
from .verdicts import GuardStats, Verdict

log = get_logger("loopwarden")

STORE_DOWN_MESSAGE = (
    "CRITICAL: loopwarden could not reach its state store and is configured to fail closed. "
    "The tool call was not executed."
)


class FailurePolicy(Protocol):
    """How calls are admitted while the store cannot be reached."""

    #: How the outage's log line names the policy.
    mode: str

    def admission(self, tool: str, call_id: str | None) -> Verdict:
        """The verdict for a call that the guard could not check against the store."""
        ...


class FailOpen:
    """Allow every call while the store is down: a state store never stops the agent."""

    __slots__ = ()
    mode = "open (calls allowed)"

    def admission(self, tool: str, call_id: str | None) -> Verdict:
        """``allow``: the call runs unchecked."""
        return Verdict("allow", None, tool, call_id)


class FailClosed:
    """Block every call while the store is down: nothing runs that the guard could not check."""

    __slots__ = ()
    mode = "closed (blocking calls)"

    def admission(self, tool: str, call_id: str | None) -> Verdict:
        """``block``, with :data:`STORE_DOWN_MESSAGE` for the model."""
        return Verdict("block", None, tool, call_id, STORE_DOWN_MESSAGE)


def failure_policy(fail_closed: bool) -> FailurePolicy:
    """The policy ``LoopGuard(fail_closed=...)`` asks for."""
    return FailClosed() if fail_closed else FailOpen()


class StoreHealth:
    """Whether the store is down, as the drivers saw it: counts every failure (exactly, under a
    lock: operators alert on it) and logs each outage's start and end once."""

    __slots__ = ("down", "lock", "policy", "stats")

    def __init__(self, policy: FailurePolicy, stats: GuardStats) -> None:
        self.policy = policy
        self.stats = stats
        #: Also guards the guard's other exact counters (events delivered).
        self.lock = threading.Lock()
        self.down = False

    def failed(self, exc: Exception) -> None:
        """A store operation raised ``exc``; the caller answers with its fallback."""
        with self.lock:
            self.stats.store_failures += 1
        if not self.down:
            self.down = True
            log.error("loopwarden state store failed: %s: %s; failing %s until it recovers",
                      log_text(type(exc).__name__), log_text(exc), self.policy.mode)

    def answered(self) -> None:
        """A store transaction succeeded: the outage, if there was one, is over."""
        if self.down:
            self.down = False
            log.warning("loopwarden state store recovered; loop detection resumed")
