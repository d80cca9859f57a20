"""``exit_behavior="ask"`` for command hooks: the questions a hook put before the user, read
back from the run record.

A command hook lives for one event, and the host answers a permission prompt itself: the hook
that asked never sees the answer. What it leaves is the ``ask`` event in the store
(:meth:`~loopwarden.LoopGuard.ask` records it, with the call id). A later hook reads it back:
a ``PostToolUse`` for that call id means the user let the call run (a ``continue`` answer);
the call's batch settling without it (``PostToolBatch``), or the next prompt's run starting,
means the user said no (a ``stop`` answer). Each question gets one answer, recorded once.

Only stores that keep events (SQLite, Redis, memory) can carry a question from one hook to the
next; with another store the hook cannot ask and ends the run, as ``"end"`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..base.log import get_logger
from ..base.types import MISSING
from ..guard import LoopGuard, Question
from ..guard.asking import describe_pattern
from ..guard.events import LoopEvent

__all__ = ["HookAsks", "attended"]

log = get_logger("loopwarden")

#: How many of the session's newest events are read back for its questions. A question is
#: answered within a few calls; the asks counted for the bound lie between the run's stops.
EVENT_LOOKBACK = 256

_ANSWERS = ("continue", "stop")


def attended(environ: dict[str, str] | Any) -> bool:
    """Whether the Claude Code session that ran this hook has a user at a terminal to ask.

    Claude Code 2.1.332 tells its hooks (``CLAUDE_CODE_SESSION_ATTENDED``: ``1`` in an
    interactive session, ``0`` under ``claude -p`` and the SDKs); older releases only name the
    entry point (``CLAUDE_CODE_ENTRYPOINT``: ``cli`` interactive, ``sdk-cli`` for ``-p``,
    ``sdk-py`` / ``sdk-ts`` for the Agent SDKs, whose prompts go to the program). Neither
    set (an http hook, or another caller): assume a user; a prompt no one can answer is
    denied by Claude Code, never run (observed in 2.1.332 and 2.1.197), and the asks of a run
    are bounded.
    """
    flag = environ.get("CLAUDE_CODE_SESSION_ATTENDED")
    if flag in ("0", "1"):
        return flag == "1"
    entry = environ.get("CLAUDE_CODE_ENTRYPOINT") or ""
    return not entry.startswith("sdk")


@dataclass(slots=True)
class HookAsks:
    """The questions of one session, read from ``guard``'s store, and their answers."""

    guard: LoopGuard
    max_grants: int
    answered_by: str
    agent_id: str | None = None

    @property
    def possible(self) -> bool:
        """Whether the store keeps the events a question is carried in."""
        return callable(getattr(self.guard.store, "events", None))

    def events(self, session: str) -> list[LoopEvent]:
        """The session's newest events (oldest first); none when the store cannot say (the
        failure is logged: a question then stays unanswered in the record)."""
        read: Callable[..., Sequence[LoopEvent]] | None = getattr(self.guard.store, "events",
                                                                   None)
        if read is None:
            return []
        try:
            try:
                return list(read(session, limit=EVENT_LOOKBACK))
            except TypeError:  # a store without a limit (the memory store)
                return list(read(session))[-EVENT_LOOKBACK:]
        except Exception as exc:  # a store failure must not fail the hook
            log.warning("loopwarden: cannot read the questions of session %s back: %s",
                        session, type(exc).__name__)
            return []

    def pending(self, events: Iterable[LoopEvent]) -> list[Question]:
        """The questions not answered yet, oldest first."""
        answered: set[str | None] = set()
        pending: dict[str | None, Question] = {}
        for event in reversed(list(events)):
            if event.action in _ANSWERS:
                answered.add(event.call_id)
            elif (event.action == "ask" and event.call_id not in answered
                  and event.call_id not in pending):
                pending[event.call_id] = self.question(event)
        return list(reversed(pending.values()))

    def asks_in_run(self, events: Iterable[LoopEvent], run: str | None) -> int:
        """How many times the run has been asked (answered either way, or not at all)."""
        return sum(1 for event in events if event.action == "ask" and event.run == run)

    def question(self, event: LoopEvent) -> Question:
        """The question an ``ask`` event records."""
        return Question(
            session=event.session, run_id=event.run, call_id=event.call_id, tool_name=event.tool,
            detector=event.detector, count=event.count,
            pattern=describe_pattern(event.detector, event.paired_tool), text=event.message,
            grants_used=event.grants or 0, max_grants=self.max_grants,
        )

    def approved(self, session: str, call_id: str | None, args: Any = MISSING) -> bool:
        """The call asked about ran (its outcome came): record the user's ``continue`` (the
        run's grant; the call is admitted in the fresh window, so its outcome is recorded as
        usual next). False when no question was open for it."""
        if call_id is None:
            return False
        for question in self.pending(self.events(session)):
            if question.call_id == call_id:
                self.guard.answer(question, "continue", args=args,
                                  answered_by=self.answered_by, agent_id=self.agent_id)
                return True
        return False

    def denied(self, questions: Iterable[Question]) -> None:
        """The user said no to these questions (the calls never ran): record ``stop``."""
        for question in questions:
            self.guard.answer(question, "stop", answered_by=self.answered_by,
                              agent_id=self.agent_id)
