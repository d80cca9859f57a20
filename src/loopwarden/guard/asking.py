"""``exit_behavior="ask"``: at the terminal stop, a door puts a :class:`Question` before a human
through its host's own channel (a LangGraph interrupt, an Agents SDK approval, a Claude Code
permission prompt, an MCP elicitation) instead of ending the run.

Two transactions, so a store shared by many workers sees every grant:

- :class:`Ask` — the run's grants so far decide: a question while grants are left (an ``ask``
  event), None once they are used up (the door ends the run, as with ``"end"``).
- :class:`Answer` — ``"continue"`` grants the run a fresh budget (its loop counts start over:
  its window is cleared, the compaction guard and learned fields are kept) and admits the asked
  call, which the door then runs; ``"stop"`` answers with the terminal verdict again. Either
  way a ``continue`` / ``stop`` event records who answered and how many grants the run has had.

The ladder is warn → block → ask → stop; with ``max_grants`` "continue" answers per run, an
insistent model with a human who always answers "continue" is still bounded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from ..base.text import text_id
from ..base.types import MISSING
from ..engine.history import SessionState, normalize_run_id
from .core import GuardCore
from .events import LoopEvent
from .policy import Call, Step
from .transactions import Answered, Transaction
from .verdicts import STOP_MESSAGE, Verdict

Decision = Literal["continue", "stop"]
DECISIONS: tuple[Decision, ...] = ("continue", "stop")

#: How many "continue" answers one run may get by default: the next stop after those ends it.
DEFAULT_MAX_GRANTS = 2

# What each detector saw, as a noun phrase a person reads in a permission prompt.
_PATTERNS = {
    "generic_repeat": "the same call with identical results",
    "known_poll_no_progress": "a poll with no progress",
    "ping_pong": "alternating calls with no progress",
    "cycle": "a cycle of calls with identical results",
    "one_tool_cycle": "a cycle of calls with identical results",
    "failure_repeat": "the same failure",
    "error_repeat": "the same error",
    "unknown_tool_repeat": "calls to a tool that does not exist",
    "global_circuit_breaker": "repeated calls with no progress",
    "argument_churn": "changing arguments with the same outcome",
}


def describe_pattern(detector: str, paired_tool: str | None = None) -> str:
    """The loop a detector found, in plain words (for questions and logs)."""
    if detector == "ping_pong" and paired_tool:
        return f"alternating with `{paired_tool}` with no progress"
    return _PATTERNS.get(detector, "a loop")


@dataclass(frozen=True, slots=True)
class Question:
    """What a door asks a human at the terminal stop: the detection in plain words, and how many
    "continue" answers the run has had. :meth:`to_dict` is JSON-safe for any channel."""

    session: str
    run_id: str | None
    call_id: str | None
    tool_name: str
    detector: str
    count: int
    pattern: str
    text: str
    grants_used: int
    max_grants: int

    @property
    def grants_left(self) -> int:
        """How many "continue" answers are left after this one is granted."""
        return max(0, self.max_grants - self.grants_used - 1)

    def to_dict(self) -> dict[str, Any]:
        """The question as plain data (interrupt values, elicitation messages, hook texts)."""
        return asdict(self)


def question_text(tool: str, pattern: str, count: int, grants_left: int) -> str:
    """The question a human reads: what looped, how often, and what each answer does."""
    after = ("this is the last time you will be asked; the next stop ends the run"
             if grants_left == 0 else
             f"you will be asked again at the next stop ({grants_left} more time"
             f"{'s' if grants_left != 1 else ''})")
    return (f"loopwarden stopped a loop: `{tool}`, {pattern}, {count} times. Continue (the "
            f"call runs and its loop count starts over; {after}) or stop the run?")


def check_decision(value: object) -> Decision:
    """``value`` as a :data:`Decision`; a ``ValueError`` naming the allowed answers else."""
    if value not in DECISIONS:
        raise ValueError(f"an answer must be one of {', '.join(map(repr, DECISIONS))}, "
                         f"not {value!r:.80}")
    return value  # type: ignore[return-value]


def _grant_key(run: str | None) -> str:
    return run or ""


class Ask(Transaction["Question | None"]):
    """``LoopGuard.ask``: the question for a terminal verdict, or None when the run's grants
    are used up (the door ends the run)."""

    __slots__ = ("agent", "channel", "max_grants", "run", "session", "verdict")

    def __init__(self, verdict: Verdict, session: str, run_id: str | None, agent: str | None,
                 max_grants: int, channel: str) -> None:
        self.verdict = verdict
        self.session = text_id(session)
        self.run = normalize_run_id(run_id)
        self.agent = agent
        self.max_grants = max_grants
        self.channel = channel

    def apply(self, state: SessionState) -> Question | Step[Question | None] | None:
        """The question (with its ``ask`` event) while the run has grants left."""
        used = state.grants.get(_grant_key(self.run), 0)
        if used >= self.max_grants:
            return None
        question = self.question(used)
        return Step(question, [self.event(question)])

    def fallback(self) -> Question | None:
        """The store is down: ask all the same (counting from zero), so a human still decides."""
        return self.question(0)

    def question(self, used: int) -> Question:
        """The question, with ``used`` grants so far."""
        verdict = self.verdict
        detection = verdict.detection
        detector = detection.detector if detection is not None else "loop"
        count = detection.count if detection is not None else 0
        pattern = describe_pattern(detector, detection.paired_tool_name if detection else None)
        left = max(0, self.max_grants - used - 1)
        return Question(
            session=self.session, run_id=self.run, call_id=verdict.call_id,
            tool_name=verdict.tool_name, detector=detector, count=count, pattern=pattern,
            text=question_text(verdict.tool_name, pattern, count, left),
            grants_used=used, max_grants=self.max_grants,
        )

    def event(self, question: Question) -> LoopEvent:
        """The ``ask`` event: the question put before a human, on which channel."""
        return LoopEvent(
            session=question.session, run=question.run_id, agent=self.agent,
            call_id=question.call_id, tool=question.tool_name, level="critical", action="ask",
            detector=question.detector, count=question.count, message=question.text,
            grants=question.grants_used, answered_by=self.channel or None,
        )


class Answer(Transaction[Verdict]):
    """``LoopGuard.answer``: record the human's decision; "continue" grants and admits the call
    (the door runs it), "stop" answers with the terminal verdict (the door ends the run)."""

    __slots__ = ("admit", "agent", "answered_by", "core", "decision", "question", "session")

    def __init__(self, core: GuardCore, question: Question, decision: Decision, args: Any,
                 answered_by: str, agent: str | None) -> None:
        self.core = core
        self.question = question
        self.decision = decision
        self.session = question.session
        self.answered_by = answered_by
        self.agent = agent
        # The call is fingerprinted here, outside the store's lock, as every hook's is.
        self.admit = (Call(core.detector, question.tool_name, args, question.session,
                           question.run_id, question.call_id, agent)
                      if decision == "continue" and args is not MISSING else None)

    def apply(self, state: SessionState) -> Step[Verdict]:
        """The decision, on the run's state."""
        question = self.question
        key = _grant_key(question.run_id)
        used = state.grants.get(key, 0)
        if self.decision == "stop":
            return Step(self.stopped(), [self.event("stop", used)])
        used += 1
        state.grants[key] = used
        policy = self.core.policy
        policy.restart_run(state, question.run_id)
        verdict = Verdict("allow", None, question.tool_name, question.call_id)
        if self.admit is not None:
            admitted = policy.admit(state, self.admit)
            verdict = admitted.value if isinstance(admitted, Step) else admitted
        return Step(verdict, [self.event("continue", used)])

    def fallback(self) -> Verdict:
        """The store is down: the human's answer stands (the grant cannot be recorded)."""
        if self.decision == "stop":
            return self.stopped()
        return Verdict("allow", None, self.question.tool_name, self.question.call_id)

    def stopped(self) -> Verdict:
        """The terminal verdict the door ends the run with."""
        question = self.question
        return Verdict("block", None, question.tool_name, question.call_id, STOP_MESSAGE,
                       terminate=True)

    def event(self, action: Decision, grants: int) -> LoopEvent:
        """The answer's event: what was decided, by whom, and the run's grants so far."""
        question = self.question
        return LoopEvent(
            session=question.session, run=question.run_id, agent=self.agent,
            call_id=question.call_id, tool=question.tool_name, level="critical", action=action,
            detector=question.detector, count=question.count,
            message=(f"{self.answered_by} answered {action!r}: "
                     + ("the run goes on with a fresh loop budget" if action == "continue"
                        else "the run ends")),
            grants=grants, answered_by=self.answered_by, terminal=action == "stop",
        )


def ask_transaction(core: GuardCore, verdict: Verdict, session: str, run_id: str | None,
                    agent: str | None, max_grants: int, channel: str
                    ) -> Transaction[Question | None]:
    """``LoopGuard.ask``'s transaction (None at once while the kill switch is on)."""
    if core.disabled or not verdict.terminate:
        return Answered(None)
    return Ask(verdict, session, run_id, agent, max_grants, channel)


def answer_transaction(core: GuardCore, question: Question, decision: object, args: Any,
                       answered_by: str, agent: str | None) -> Transaction[Verdict]:
    """``LoopGuard.answer``'s transaction; a ``ValueError`` for an answer that is neither
    "continue" nor "stop"."""
    return Answer(core, question, check_decision(decision), args, answered_by, agent)
