"""The MCP proxy's ``--exit-behavior ask``: the terminal stop put before the client's user as
an elicitation. Part of :mod:`loopwarden.integrations.mcp_proxy`.

The proxy is its client's server, so it may send ``elicitation/create`` to a client that
declared the ``elicitation`` capability (form mode) in ``initialize``. At the terminal stop the
call is held, and the client is asked the guard's question with a one-field form (``decision``:
``continue`` or ``stop``). ``accept`` with ``continue``: the human's grant is recorded, the run's
loop counts start over and the held call goes on to the server. ``stop``, ``decline``,
``cancel`` or an error: the held call gets the blocked result, as without asking, and so does
every later stop of that run, unasked (the human said to stop; the proxy cannot end the
client's run, it can only keep blocking). A client
without elicitation gets the blocked result at once, and the log says the run was not asked.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..guard import EndOfRun, LoopGuard, Question, Verdict
from ..guard.asking import Decision
from ._mcp_messages import _id_key, _response_key, blocked_response
from ._mcp_pending import InFlight

__all__ = ["DECISION_SCHEMA", "ELICIT_ID_PREFIX", "McpAsks"]

#: Ids of the proxy's own requests to the client start so (the rest is random per connection).
ELICIT_ID_PREFIX = "loopwarden-ask-"

#: The form the human fills in: one choice.
DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"decision": {
        "type": "string", "title": "Continue or stop the run?", "enum": ["continue", "stop"],
        "description": "continue: the call runs and its loop count starts over; "
                       "stop: the call is blocked and the run should end.",
    }},
    "required": ["decision"],
}

#: Questions left open at once: a client that never answers must not grow the proxy.
MAX_OPEN = 64

ANSWERED_BY = "mcp client"


@dataclass(slots=True)
class HeldCall:
    """A ``tools/call`` held while its question is open."""

    message: dict[str, Any]
    flight: InFlight  # the call, as it is awaited once forwarded
    verdict: Verdict  # the terminal stop (the blocked result, if it is blocked after all)
    question: Question


def form_elicitation(capabilities: Any) -> bool:
    """Whether ``initialize``'s client capabilities take form elicitations: ``elicitation: {}``
    (2025-06-18, form only) or one naming ``form`` (2025-11-25)."""
    if not isinstance(capabilities, Mapping):
        return False
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, Mapping):
        return False
    return "form" in elicitation or "url" not in elicitation


class McpAsks:
    """The proxy's questions on one connection: the client's capability, the held calls.

    ``await_call`` is the connection's: a held call forwarded after a "continue" awaits the
    server's answer like any forwarded call."""

    __slots__ = ("_await", "_held", "_ids", "_prefix", "_stopped", "agent_id", "client_elicits",
                 "end_of_run", "guard", "session")

    def __init__(self, guard: LoopGuard, end_of_run: EndOfRun, session: str,
                 agent_id: str | None, await_call: Callable[[str, InFlight], None]) -> None:
        self.guard = guard
        self.end_of_run = end_of_run
        self.session = session
        self.agent_id = agent_id
        self._await = await_call
        #: Set from the client's ``initialize``.
        self.client_elicits = False
        self._held: dict[str, HeldCall] = {}  # by the key of the elicitation request's id
        self._prefix = f"{ELICIT_ID_PREFIX}{uuid.uuid4().hex[:12]}-"
        self._ids = itertools.count(1)
        self._stopped: dict[str | None, None] = {}  # runs a human stopped (oldest first)

    async def from_client(self, message: dict[str, Any]) -> tuple[Any, Any] | None:
        """For the client's answer to a question: what to forward (the held call, or None)
        and what to answer (its blocked result, or None). None for any other message, which
        is read on the way (``initialize``'s capabilities, a cancelled held call)."""
        held = self._answer_to(message)
        if held is not None:
            verdict = await self._decide(held, message)
            if verdict.action == "block":
                return None, blocked_response(held.message["id"], held.verdict)
            self._await(_id_key(held.message["id"]), replace(held.flight, before=verdict))
            return held.message, None
        method = message.get("method")
        if method == "initialize":
            params = message.get("params")
            capabilities = params.get("capabilities") if isinstance(params, Mapping) else None
            self.client_elicits = form_elicitation(capabilities)
        elif method == "notifications/cancelled" and self._held:
            params = message.get("params")
            if isinstance(params, Mapping) and "requestId" in params:
                cancelled = _id_key(params["requestId"])  # the held call: dropped unanswered
                for key, call in list(self._held.items()):
                    if _id_key(call.message.get("id")) == cancelled:
                        del self._held[key]
        return None

    async def at_stop(self, message: dict[str, Any], verdict: Verdict,
                      flight: InFlight) -> dict[str, Any] | None:
        """The ``elicitation/create`` request to send instead of the blocked result, the call
        held until it is answered; None: block it (no elicitation, no grant left, the run
        stopped by a human, too many open questions; a client without elicitation is logged
        by :class:`~loopwarden.guard.EndOfRun`)."""
        if self.end_of_run.action(True, can_ask=self.client_elicits) != "ask":
            return None
        if len(self._held) >= MAX_OPEN or flight.run_id in self._stopped:
            return None
        question = await self.guard.aask(
            verdict, session=self.session, run_id=flight.run_id, agent_id=self.agent_id,
            max_grants=self.end_of_run.max_grants, channel="mcp elicitation")
        if question is None:
            return None
        request_id = f"{self._prefix}{next(self._ids)}"
        self._held[_id_key(request_id)] = HeldCall(message, flight, verdict, question)
        return {"jsonrpc": "2.0", "id": request_id, "method": "elicitation/create",
                "params": {"message": question.text, "requestedSchema": DECISION_SCHEMA}}

    def _answer_to(self, message: Any) -> HeldCall | None:
        if not self._held:
            return None
        key = _response_key(message)
        return self._held.pop(key, None) if key is not None else None

    async def _decide(self, held: HeldCall, response: Mapping[str, Any]) -> Verdict:
        """Record the human's decision; the verdict to act on (allow: forward the call)."""
        decision: Decision = "continue" if _continues(response) else "stop"
        if decision == "stop":
            self._stopped[held.flight.run_id] = None
            while len(self._stopped) > MAX_OPEN:
                del self._stopped[next(iter(self._stopped))]
        return await self.guard.aanswer(held.question, decision, args=held.flight.args,
                                        answered_by=ANSWERED_BY, agent_id=self.agent_id)


def _continues(response: Mapping[str, Any]) -> bool:
    result = response.get("result")
    if not isinstance(result, Mapping) or result.get("action") != "accept":
        return False
    content = result.get("content")
    return isinstance(content, Mapping) and content.get("decision") == "continue"
