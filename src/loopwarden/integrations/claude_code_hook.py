"""Claude Code hooks, translated for the guard: one hook payload in, one hook output out.

Claude Code gives every hook the same JSON payload, whether the hook is a ``settings.json``
command (``loopwarden claude-hook``) or a Claude Agent SDK callback, and reads the same output
fields back. :class:`ClaudeCodeHook` is that translation, shared by both doors so they cannot
drift apart. It needs neither the SDK nor any other optional package.

Ids: session = ``session_id``; run = ``prompt_id`` (the user prompt being processed — Claude
Code's closest thing to a run), suffixed with the sub-agent's ``agent_id`` inside a sub-agent,
because parallel sub-agents' hooks interleave in one session and must not look like one
ping-pong; call id = ``tool_use_id``. Tool names (``Bash``, ``mcp__server__tool``) pass as
they are.

What reaches the model: a blocked call is denied (``permissionDecision: "deny"``) with the loop
message as reason, which Claude Code hands to the model as the tool's error result; a warning
goes out as ``additionalContext``; a loop that survived compaction stops Claude
(``continue: false``) with the abort message as ``stopReason``.

The terminal stop (spec §f.1): the first critical of a run is denied and leaves the model one
recovery turn; a second critical in the same run is terminal. With ``exit_behavior="end"`` (the
default) the terminal call is denied *and* Claude is stopped: ``continue: false`` with
:data:`~loopwarden.guard.STOP_MESSAGE` as ``stopReason`` (shown to the user; Claude Code ends
the turn after the hooks ran, whatever the model wanted next). Releases before 2.1.198 or so
(2.1.197, the newest npm installs on Node 20) ignore ``continue: false`` in an answer that
also denies, and ``continue: false`` alone would let the call run; so the stop is said a second
time on ``PostToolBatch``, which every release with hooks for it sends once a batch of calls is
settled, before the model is asked again: a batch holding a call this hook ended the run on
(its result is the terminal denial, which ends with
:data:`~loopwarden.guard.TERMINAL_TEXT`) is answered with ``continue: false``
(:func:`batch_stop_output`). Nothing runs in between, so no blocked call is executed on either
release. ``"error"`` answers the same way:
a hook cannot raise into the host (the Agent SDK turns a raising callback into a failed hook,
which Claude Code counts as no decision — the call would run), so stopping Claude with the stop
message is the error the host sees. ``"continue"`` only denies, as before.

``"ask"`` puts the terminal call before the user in Claude Code's own permission prompt
(``permissionDecision: "ask"``, the guard's question as the reason) when the session has a user
(``can_ask``; see :func:`~loopwarden.integrations._hook_asks.attended`). The hook never sees
the answer; the next hooks read it from what happens (:mod:`._hook_asks`): the call's
``PostToolUse`` means yes — the run's grant is recorded and its loop counts start over — and
its batch settling without one (``PostToolBatch``) or the next prompt starting means no, a
``stop``. A "no" that leaves the run going (``claude -p`` where the hook could not tell, or an
amended prompt) is asked again at the next stop, at most ``max_grants + 1`` times a run; past
that, or once the grants are used, or without a user, the run ends as with ``"end"``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..base.errors import HookPayloadError
from ..base.lazy_re import lazy_pattern
from ..base.log import get_logger
from ..guard import (
    STOP_MESSAGE,
    TERMINAL_SIBLING_TEXT,
    TERMINAL_TEXT,
    CompactionLoopPersistedError,
    EndOfRun,
    ExitBehavior,
    LoopGuard,
    Question,
    Verdict,
    warning_note,
)
from ..guard import check_exit_behavior as check_exit_behavior
from ..guard.asking import DEFAULT_MAX_GRANTS
from ..guard.verdicts import EXIT_BEHAVIORS as EXIT_BEHAVIORS
from ._hook_asks import HookAsks
from ._hook_asks import attended as attended

__all__ = [
    "BATCH_EVENT",
    "HANDLED_EVENTS",
    "ClaudeCodeHook",
    "ExitBehavior",
    "HookPayloadError",
    "attended",
    "batch_stop_output",
    "check_exit_behavior",
]

log = get_logger("loopwarden")

#: Who answered, in the record, when the hook learns the user's answer to its prompt.
ANSWERED_BY = "claude-code user"

HANDLED_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PreCompact")
"""The hook events the guard acts on; every other event gets an empty answer."""

BATCH_EVENT = "PostToolBatch"
"""The event that repeats the terminal stop for releases that ignore ``continue: false`` on a
denied call (see the module docstring); it reads only the payload, never the guard."""

Output = dict[str, Any]


@dataclass(frozen=True, slots=True)
class _GuardCall:
    """One planned guard call, runnable sync or async, and how to answer the hook with it."""

    call: Callable[..., Any]
    acall: Callable[..., Awaitable[Any]]
    kwargs: dict[str, Any]
    reply: Callable[[Any], Output]


@dataclass(slots=True)
class ClaudeCodeHook:
    """Answers Claude Code hook payloads with a :class:`~loopwarden.LoopGuard`.

    ``agent_id`` is the OpenClaw agent whose config applies; it is attached to the events.
    ``handle`` returns the output with Claude Code's own key names (``continue``); the Agent
    SDK door renames them for the SDK. ``exit_behavior`` is what the terminal stop does (see
    the module docstring); under ``"ask"``, ``can_ask`` says whether the session has a user to
    ask, and ``max_grants`` how many "continue" answers a run may get.
    """

    guard: LoopGuard
    agent_id: str | None = None
    exit_behavior: ExitBehavior = "end"
    can_ask: bool = False
    max_grants: int = DEFAULT_MAX_GRANTS
    end_of_run: EndOfRun = field(init=False, repr=False)
    asks: HookAsks = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.end_of_run = EndOfRun(self.exit_behavior, max_grants=self.max_grants)
        self.asks = HookAsks(self.guard, self.max_grants, ANSWERED_BY, self.agent_id)

    @property
    def asking(self) -> bool:
        """Whether the terminal stop may ask the user (``"ask"``, and a way to hear back)."""
        return self.exit_behavior == "ask" and self.asks.possible

    def handle(self, payload: Mapping[str, Any]) -> Output:
        """The hook output for ``payload`` (``{}`` for an event loopwarden does not handle);
        raises :class:`HookPayloadError` for a payload it cannot read."""
        if isinstance(payload, Mapping) and payload.get("hook_event_name") == BATCH_EVENT:
            if self.asking:
                self._batch_settled(payload)
            return batch_stop_output(payload, exit_behavior=self.exit_behavior)
        plan = self._plan(payload)
        if plan is None:
            return {}
        try:
            if self.asking:
                self._before(payload)
            verdict = plan.call(**plan.kwargs)
            if self._asks_now(payload, verdict):
                return self._ask(payload, verdict)
            return plan.reply(verdict)
        except CompactionLoopPersistedError as exc:
            return compaction_stop_output(exc)

    async def ahandle(self, payload: Mapping[str, Any]) -> Output:
        """Like :meth:`handle`, without blocking the event loop."""
        if self.asking:  # the questions' bookkeeping is a few sync store reads: off the loop
            import asyncio  # (here: the command hook never needs it, and starts faster)

            return await asyncio.to_thread(self.handle, payload)
        if isinstance(payload, Mapping) and payload.get("hook_event_name") == BATCH_EVENT:
            return batch_stop_output(payload, exit_behavior=self.exit_behavior)
        plan = self._plan(payload)
        if plan is None:
            return {}
        try:
            verdict = await plan.acall(**plan.kwargs)
            if self._asks_now(payload, verdict):  # "ask" without a user: ends the run
                return self._ask(payload, verdict)
            return plan.reply(verdict)
        except CompactionLoopPersistedError as exc:
            return compaction_stop_output(exc)

    # -- exit_behavior="ask" -----------------------------------------------------------------

    def _asks_now(self, payload: Mapping[str, Any], verdict: Any) -> bool:
        return (self.exit_behavior == "ask" and isinstance(verdict, Verdict)
                and verdict.action == "block" and verdict.terminate
                and payload.get("hook_event_name") == "PreToolUse")

    def _before(self, payload: Mapping[str, Any]) -> None:
        """Record what the user answered to earlier questions, as far as this event tells."""
        event = payload.get("hook_event_name")
        session = required_str(payload, "session_id")
        if event in ("PostToolUse", "PostToolUseFailure"):
            # The call ran: the user let it (the guard admits it in the run's fresh window,
            # and the outcome is recorded next as usual).
            self.asks.approved(session, optional_str(payload.get("tool_use_id")),
                               payload.get("tool_input") or {})
        elif event == "PreToolUse":
            # A question left open in an earlier run: the user said no, and the run ended
            # (Claude Code interrupts the turn) before its batch settled.
            prompt = _prompt_of(run_id_of(payload))
            self.asks.denied(q for q in self.asks.pending(self.asks.events(session))
                             if _prompt_of(q.run_id) != prompt)

    def _batch_settled(self, payload: Mapping[str, Any]) -> None:
        """The batch's calls are settled: a question about one of them still open was
        answered no (an approved call's PostToolUse came before this)."""
        session = optional_str(payload.get("session_id"))
        calls = payload.get("tool_calls")
        if session is None or not isinstance(calls, list):
            return
        ids = {call.get("tool_use_id") for call in calls if isinstance(call, Mapping)}
        self.asks.denied(q for q in self.asks.pending(self.asks.events(session))
                         if q.call_id in ids)

    def _ask(self, payload: Mapping[str, Any], verdict: Verdict) -> Output:
        """The terminal call put before the user, or the run ended (no user to ask, no grant
        left, or asked as often as a run may be)."""
        ending = pre_tool_use_output(verdict, exit_behavior="end")
        if self.end_of_run.action(True, can_ask=self.can_ask and self.asking) != "ask":
            return ending
        session, run = required_str(payload, "session_id"), run_id_of(payload)
        asked = self.asks.asks_in_run(self.asks.events(session), run)
        if asked > self.max_grants:  # every "no" left the run going: do not ask forever
            log.warning("loopwarden: run %s was asked %d times and goes on looping; ending it",
                        run, asked)
            return ending
        question = self.guard.ask(verdict, session=session, run_id=run, agent_id=self.agent_id,
                                  max_grants=self.max_grants, channel="claude-code prompt")
        return ending if question is None else ask_output(question)

    def _plan(self, payload: Mapping[str, Any]) -> _GuardCall | None:
        event = handled_event(payload, HANDLED_EVENTS)
        if event is None:
            return None
        g = self.guard
        ids = {"session": required_str(payload, "session_id"), "run_id": run_id_of(payload)}
        if event == "PreCompact":
            return _GuardCall(g.compaction_retried, g.acompaction_retried, ids, lambda _: {})
        call = {
            **ids,
            "tool_name": required_str(payload, "tool_name"),
            "args": payload.get("tool_input") or {},
            "call_id": optional_str(payload.get("tool_use_id")),
            "agent_id": self.agent_id,
        }
        if event == "PreToolUse":
            ending = self.exit_behavior
            return _GuardCall(g.before_tool_call, g.abefore_tool_call, call,
                              lambda v: pre_tool_use_output(v, exit_behavior=ending))
        response = payload.get("tool_response")
        failure = _failure_text(response) if event == "PostToolUse" else None
        if event == "PostToolUse" and failure is None:
            call["result"] = without_proxy_notes(response)
        else:
            call["error"] = failure or payload.get("error") or "tool failed"
        return _GuardCall(g.after_tool_call, g.aafter_tool_call, call,
                          lambda v: context_output(event, v.note))


def ask_output(question: Question) -> Output:
    """Put the call before the user in Claude Code's permission prompt, the question as the
    reason (Claude Code shows it there; the model never sees it)."""
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask",
                                   "permissionDecisionReason": question.text}}


def batch_stop_output(payload: Mapping[str, Any], *,
                      exit_behavior: ExitBehavior = "end") -> Output:
    """Stop Claude when the settled batch holds a call this hook denied as terminal (its result
    ends with the terminal text); ``{}`` otherwise, and always with ``exit_behavior="continue"``."""
    calls = payload.get("tool_calls")
    if exit_behavior == "continue" or not isinstance(calls, list):
        return {}
    for call in calls:
        response = call.get("tool_response") if isinstance(call, Mapping) else None
        if _text_of(response).rstrip().endswith(_TERMINAL_ENDINGS):
            return {"continue": False, "stopReason": STOP_MESSAGE}
    return {}


def run_id_of(payload: Mapping[str, Any]) -> str | None:
    """The run a hook belongs to: the user prompt, per sub-agent inside a sub-agent."""
    prompt = optional_str(payload.get("prompt_id"))
    agent = optional_str(payload.get("agent_id"))
    if agent is None:
        return prompt
    return f"{prompt or ''}/agent:{agent}"


def pre_tool_use_output(verdict: Verdict, *, exit_behavior: ExitBehavior = "end") -> Output:
    """Deny a blocked call with the loop message; give a warning as context; else say nothing
    (never ``allow``, which would skip Claude Code's own permission checks). A terminal block
    also stops Claude (``continue: false``) unless ``exit_behavior`` is ``"continue"``."""
    if verdict.action != "block":
        return context_output("PreToolUse", verdict.note)
    reason = verdict.message or "tool call blocked by loopwarden"
    ending = verdict.terminate and exit_behavior != "continue"
    if ending and verdict.block_text is None:  # a one-call verdict: say what OpenClaw says
        reason = f"{reason}\n\n{TERMINAL_TEXT}"
    output: Output = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            # Denied as well: the call must not run even where continue is not honoured.
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        },
        "systemMessage": f"loopwarden blocked {verdict.tool_name}: {_headline(verdict)}",
    }
    if ending:
        output["continue"] = False
        output["stopReason"] = STOP_MESSAGE
    return output


def context_output(event: str, note: str | None) -> Output:
    """Hand ``note`` to the model as the ``event``'s ``additionalContext`` (``{}``: no note)."""
    if not note:
        return {}
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": note}}


def compaction_stop_output(error: CompactionLoopPersistedError) -> Output:
    """Stop Claude: the loop survived compaction, the run must end (spec §g)."""
    message = str(error)
    return {"continue": False, "stopReason": message, "systemMessage": f"loopwarden: {message}"}


_TERMINAL_ENDINGS = (TERMINAL_TEXT, TERMINAL_SIBLING_TEXT)

# The note loopwarden's MCP proxy adds to a warned result, whatever the count; Gemini CLI wraps
# each text part of an MCP result in <untrusted_context> tags. Compiled on first use (the hook
# starts often, and most results never need it), after a plain substring test.
_NOTE_HEAD, _NOTE_TAIL = warning_note(0).split("0")
_PROXY_NOTE = lazy_pattern(r"(?:<untrusted_context>\s*)?" + re.escape(_NOTE_HEAD) + r"\d+"
                           + re.escape(_NOTE_TAIL) + r"(?:\s*</untrusted_context>)?")


def without_proxy_notes(response: object) -> object:
    """An MCP tool's response as the tool gave it: without the warning notes loopwarden's MCP
    proxy adds to a warned result (an item of their own in the result's ``content``, Claude
    Code's content list, or Gemini CLI's ``llmContent`` parts). Shared by every hook door: a
    host that also runs ``loopwarden mcp-proxy`` hands the hook the proxy's note with the
    result, and the note alone would make each outcome from the warned call on new, restart
    the identical-outcome streak the hook counts, and keep the hook from ever denying."""
    if isinstance(response, list):
        return _without_notes(response)
    if isinstance(response, Mapping):
        for key in ("content", "llmContent"):
            items = response.get(key)
            if isinstance(items, list):
                kept = _without_notes(items)
                if kept is not items:
                    return {**response, key: kept}
    return response


def _without_notes(items: list[Any]) -> list[Any]:
    """``items`` without the proxy's notes (``items`` itself when it holds none)."""
    kept = [item for item in items if not _is_proxy_note(item)]
    return kept if len(kept) != len(items) else items


def _is_proxy_note(item: object) -> bool:
    text = item.get("text") if isinstance(item, Mapping) else None
    return (isinstance(text, str) and _NOTE_HEAD in text
            and _PROXY_NOTE().fullmatch(text) is not None)


def _text_of(value: object) -> str:
    """The text of a tool result: a string, or the text blocks of a content list."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        value = value.get("content")
    if isinstance(value, list):
        return "\n".join(block["text"] for block in value
                         if isinstance(block, Mapping) and isinstance(block.get("text"), str))
    return ""


def _failure_text(response: object) -> str | None:
    """The error of a failed call reported through ``PostToolUse`` (releases without
    ``PostToolUseFailure``, and MCP results): a result marked ``is_error`` / ``isError``."""
    if not isinstance(response, Mapping):
        return None
    if response.get("is_error") is not True and response.get("isError") is not True:
        return None
    return _text_of(response) or str(response.get("error") or "") or "tool failed"


def _headline(verdict: Verdict) -> str:
    d = verdict.detection
    if d is None:
        return verdict.message or "tool loop"
    return f"tool loop ({d.detector}, {d.count} calls)"


def _prompt_of(run: str | None) -> str | None:
    """The user prompt a run belongs to (a sub-agent's run is inside its prompt's)."""
    return None if run is None else run.split("/agent:", 1)[0]


def handled_event(payload: object, handled: tuple[str, ...]) -> str | None:
    """The payload's ``hook_event_name`` when it is one of ``handled``, else None (the event is
    answered with ``{}``); :class:`HookPayloadError` for a payload that is no JSON object."""
    if not isinstance(payload, Mapping):
        raise HookPayloadError(f"a hook payload must be a JSON object, got {type(payload).__name__}")
    event = payload.get("hook_event_name")
    return event if event in handled else None


def required_str(payload: Mapping[str, Any], key: str) -> str:
    """``payload[key]``, a non-empty string; :class:`HookPayloadError` else (every hook host)."""
    value = payload.get(key)
    if not isinstance(value, str) or not value:
        raise HookPayloadError(f"hook payload has no {key!r}")
    return value


def optional_str(value: object) -> str | None:
    """``value`` when it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None
