"""``LoopGuard``: the policy every door uses — warn, dampen, block — over a pluggable store.

Each hook builds one transaction (``transactions.py``, ``batch.py``, ``asking.py``) and hands it
to a driver: :func:`drive` for the sync hooks, :func:`adrive` for their awaitable twins, which
are the same transaction run the other way. The rules are the guard's policy (``policy.py``). Every hook is total:
whatever the host passes (ids whose ``__str__`` raises, unhashable sessions, args that cannot
be fingerprinted), it answers with a verdict and logs what went wrong; only
:class:`CompactionLoopPersistedError` (the outcome hooks) and :class:`LoopBlockedError` (the
decorator) are raised on purpose.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from ..base.types import MISSING, ToolCall
from ..engine.history import CallRecord
from .asking import DEFAULT_MAX_GRANTS, Decision, Question, answer_transaction, ask_transaction
from .batch import AdmitBatch
from .core import GuardCore
from .decorators import IdSource, tool, wrap
from .transactions import ArmCompaction, Observe, ReadHistory, adrive, drive, one_call
from .verdicts import BatchAdmission, ExitBehavior, Verdict

F = TypeVar("F", bound=Callable[..., Any])


class LoopGuard(GuardCore):
    """Warn → dampen → block over a store, for one agent deployment (many sessions).

    With ``config=None`` the guard is enabled with the default thresholds (a guard you create
    guards); an explicit :class:`LoopDetectionConfig` keeps OpenClaw's tri-state ``enabled``.
    ``LOOPWARDEN_DISABLED=1`` in the environment when the guard is built makes it allow every
    call and record nothing (``observe_call``, which gates nothing, still reports).
    ``fail_closed=True`` blocks calls while the store cannot be reached (see ``policy.py``).
    """

    # -- one call ----------------------------------------------------------------------------

    def before_tool_call(
        self, tool_name: str, args: Any, *, session: str, run_id: str | None = None,
        call_id: str | None = None, agent_id: str | None = None,
    ) -> Verdict:
        """Decide whether the call may run (spec §f.1 V2 wrapper + §f.2 dampening)."""
        return drive(self, one_call(self, tool_name, args, session, run_id,
                                    call_id, agent_id))

    async def abefore_tool_call(
        self, tool_name: str, args: Any, *, session: str, run_id: str | None = None,
        call_id: str | None = None, agent_id: str | None = None,
    ) -> Verdict:
        """The awaitable form of :meth:`before_tool_call`."""
        return await adrive(self, one_call(self, tool_name, args, session, run_id,
                                           call_id, agent_id))

    def after_tool_call(
        self, tool_name: str, args: Any, *, session: str, result: Any = MISSING,
        error: Any = MISSING, run_id: str | None = None, call_id: str | None = None,
        agent_id: str | None = None,
    ) -> Verdict:
        """Record the outcome. Returns a ``warn`` verdict when the ``early`` preset's
        post-outcome check finds this result completed a pattern (annotate the result with it).
        Raises :class:`CompactionLoopPersistedError` when a loop survived compaction."""
        return drive(self, one_call(self, tool_name, args, session, run_id, call_id,
                                    agent_id, result, error, settle=True))

    async def aafter_tool_call(
        self, tool_name: str, args: Any, *, session: str, result: Any = MISSING,
        error: Any = MISSING, run_id: str | None = None, call_id: str | None = None,
        agent_id: str | None = None,
    ) -> Verdict:
        """The awaitable form of :meth:`after_tool_call`."""
        return await adrive(self, one_call(self, tool_name, args, session, run_id,
                                           call_id, agent_id, result, error, settle=True))

    def observe_call(
        self, tool_name: str, args: Any, *, session: str, result: Any = MISSING,
        error: Any = MISSING, run_id: str | None = None, call_id: str | None = None,
        agent_id: str | None = None,
    ) -> tuple[Verdict, Verdict]:
        """Feed a call that has already run (a saved transcript, a tailed log): the verdict the
        guard would have given before it, and the one after its outcome, in one transaction.
        A call that would have been blocked is still recorded as having run."""
        return drive(self, Observe.of(self, tool_name, args, session, run_id, call_id,
                                          agent_id, result, error))

    # -- a turn, a compaction, the history ---------------------------------------------------

    def admit_batch(
        self, calls: Sequence[ToolCall], *, session: str, run_id: str | None = None,
        agent_id: str | None = None,
    ) -> BatchAdmission:
        """Admit one assistant turn's calls atomically, with one recovery turn per run."""
        return drive(self, AdmitBatch.of(self, calls, session, run_id, agent_id))

    async def aadmit_batch(
        self, calls: Sequence[ToolCall], *, session: str, run_id: str | None = None,
        agent_id: str | None = None,
    ) -> BatchAdmission:
        """The awaitable form of :meth:`admit_batch`."""
        return await adrive(self, AdmitBatch.of(self, calls, session, run_id, agent_id))

    def compaction_retried(self, *, session: str, run_id: str | None = None) -> None:
        """Arm the post-compaction guard of this session and run (after a compaction-retry)."""
        drive(self, ArmCompaction.of(self, session, run_id))

    async def acompaction_retried(self, *, session: str, run_id: str | None = None) -> None:
        """The awaitable form of :meth:`compaction_retried`."""
        await adrive(self, ArmCompaction.of(self, session, run_id))

    # -- ask a human (exit_behavior="ask") --------------------------------------------------

    def ask(
        self, verdict: Verdict, *, session: str, run_id: str | None = None,
        agent_id: str | None = None, max_grants: int = DEFAULT_MAX_GRANTS, channel: str = "",
    ) -> Question | None:
        """The :class:`Question` to put before a human for a terminal ``verdict``, or None
        when the run has had ``max_grants`` "continue" answers already (then end the run, as
        ``"end"`` does). ``channel`` names how the door asks (for the ``ask`` event)."""
        return drive(self, ask_transaction(self, verdict, session, run_id, agent_id,
                                           max_grants, channel))

    async def aask(
        self, verdict: Verdict, *, session: str, run_id: str | None = None,
        agent_id: str | None = None, max_grants: int = DEFAULT_MAX_GRANTS, channel: str = "",
    ) -> Question | None:
        """The awaitable form of :meth:`ask`."""
        return await adrive(self, ask_transaction(self, verdict, session, run_id, agent_id,
                                                  max_grants, channel))

    def answer(
        self, question: Question, decision: Decision, *, args: Any = MISSING,
        answered_by: str = "human", agent_id: str | None = None,
    ) -> Verdict:
        """Act on a human's answer to ``question``. ``"continue"``: the run gets a fresh loop
        budget (every count starts over) and the asked call is admitted: run it, and report its
        outcome with :meth:`after_tool_call` (pass its ``args`` so it is recorded). ``"stop"``:
        the terminal verdict again; end the run. Raises ``ValueError`` for another answer."""
        return drive(self, answer_transaction(self, question, decision, args, answered_by,
                                              agent_id))

    async def aanswer(
        self, question: Question, decision: Decision, *, args: Any = MISSING,
        answered_by: str = "human", agent_id: str | None = None,
    ) -> Verdict:
        """The awaitable form of :meth:`answer`."""
        return await adrive(self, answer_transaction(self, question, decision, args,
                                                     answered_by, agent_id))

    def history(self, session: str) -> list[CallRecord]:
        """The session's history, oldest first (``[]`` when the store cannot be read: the
        failure is logged and counted like any store failure)."""
        return drive(self, ReadHistory(session))

    # -- the doors ---------------------------------------------------------------------------

    @classmethod
    def of(cls, guard: LoopGuard | None = None, *, preset: str | None = None,
           **overrides: Any) -> LoopGuard:
        """What every Python door guards with: ``guard``, or a new enabled
        ``LoopGuard(preset=..., **overrides)``; a :class:`~loopwarden.ConfigError` (a
        ``ValueError``) for a guard and keywords together, which the guard would ignore."""
        if guard is None:
            return cls(preset=preset, **overrides)
        if preset is not None or overrides:
            from ..config import ConfigError

            raise ConfigError("set it on the LoopGuard you pass (or pass no guard)",
                              path="preset" if preset is not None else next(iter(overrides)))
        return guard

    # -- the decorator door ------------------------------------------------------------------

    def tool(
        self, fn: F | None = None, /, *, name: str | None = None,
        session: IdSource = "default", run_id: IdSource | None = None,
        on_block: Literal["raise", "return"] = "raise", exit_behavior: ExitBehavior = "end",
    ) -> Any:
        """Guard a plain sync or async function as a tool: ``@guard.tool`` or
        ``@guard.tool(name=..., session=..., on_block="return")``. Arguments are bound to the
        function's parameters, so positional and keyword calls hash alike. See :meth:`wrap`."""
        return tool(self, fn, name=name, session=session, run_id=run_id, on_block=on_block,
                    exit_behavior=exit_behavior)

    def wrap(
        self, fn: F, *, name: str | None = None, session: IdSource = "default",
        run_id: IdSource | None = None, on_block: Literal["raise", "return"] = "raise",
        exit_behavior: ExitBehavior = "end",
    ) -> F:
        """``fn`` guarded. ``session`` / ``run_id``: a string, or a callable given the call's
        bound arguments as a dict (a zero-argument callable works too). A warned call's ``str``
        result gets the warning note appended (an OpenClaw-shaped dict result gets a text
        block); other results are returned unchanged and the note is logged. A blocked call
        raises :class:`LoopBlockedError` (or returns the blocked result, ``on_block="return"``);
        the terminal stop (a second critical in the same session and run) raises
        :class:`~loopwarden.LoopTerminatedError` unless ``exit_behavior="continue"``, since a
        plain function cannot end its caller's run any other way."""
        return wrap(self, fn, name=name, session=session, run_id=run_id, on_block=on_block,
                    exit_behavior=exit_behavior)
