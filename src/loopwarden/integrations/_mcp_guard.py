"""The MCP proxy's transport-free translation: :class:`McpLoopGuard` guards the ``tools/call``
traffic of one client connection, given parsed messages.

It keeps what an answer must be matched with: the calls in flight (bounded, see
:mod:`._mcp_pending`), the client batches some of whose calls were blocked, and the
task-augmented calls whose outcome comes later. Part of
:mod:`loopwarden.integrations.mcp_proxy`, which describes the behaviour.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..base.types import MISSING
from ..guard import EndOfRun, ExitBehavior, LoopGuard, Verdict, append_note
from ..guard.asking import DEFAULT_MAX_GRANTS
from ._mcp_asking import McpAsks
from ._mcp_messages import (
    _annotate_error,
    _created_task,
    _error_text,
    _id_key,
    _is_final,
    _is_input_retry,
    _is_request,
    _meta_str,
    _notes,
    _response_key,
    _task_param,
    _tool_error,
    blocked_response,
)
from ._mcp_pending import (
    DEFAULT_MAX_PENDING_BYTES,
    DEFAULT_MAX_PENDING_CALLS,
    InFlight,
    PendingCalls,
    ProxyStats,
)

RUN_ID_META_KEYS = ("runId", "run_id", "loopwarden/runId")
CALL_ID_META_KEYS = ("toolCallId", "tool_call_id", "loopwarden/toolCallId")


@dataclass(slots=True)
class _Task:
    """An admitted task-augmented call whose result the upstream has yet to hand over."""

    flight: InFlight
    #: The warning notes for the result, once the outcome is recorded (a failure seen in a
    #: status before the client fetched the result).
    notes: list[str] | None = None


#: Tasks the proxy remembers at once: a client that never fetches its results must not grow
#: the proxy's memory. The oldest link is dropped first (its call then stays unrecorded).
MAX_TASKS = 4096
_TASK_METHODS = ("tasks/result", "tasks/get", "tasks/cancel")


@dataclass(slots=True)
class _PendingBatch:
    """A client batch some of whose calls were blocked: their responses wait to be merged into
    the upstream's array answer to the calls that were forwarded."""

    awaited: set[str]  # forwarded requests the upstream has yet to answer
    order: list[str]  # every request of the batch, in the client's order
    replies: list[dict[str, Any]]  # the blocked calls' responses


class _Batches:
    """The client batches some of whose calls were blocked, by the keys of their forwarded
    requests the upstream has yet to answer; and the answers of the batches given up on (a
    call evicted unanswered), which go out with the next client message."""

    __slots__ = ("_by_key", "_completed", "max_keys")

    def __init__(self, max_keys: int) -> None:
        self.max_keys = max_keys
        self._by_key: dict[str, _PendingBatch] = {}
        self._completed: list[list[dict[str, Any]]] = []

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def add(self, awaited: list[str], order: list[str], blocked: list[dict[str, Any]]) -> None:
        """A batch waiting for the upstream's answers to ``awaited``; past ``max_keys`` keys
        the oldest is given up on, as an evicted call is."""
        batch = _PendingBatch(set(awaited), order, blocked)
        for key in awaited:
            self._by_key[key] = batch
        while len(self._by_key) > self.max_keys:
            self.give_up(next(iter(self._by_key)))

    def answered(self, message: Any) -> _PendingBatch | None:
        """The pending batch ``message`` answers a call of, taken off the pending list."""
        if not self._by_key:
            return None
        key = _response_key(message)
        batch = self._by_key.get(key) if key is not None else None
        if batch is not None:
            for awaited in batch.awaited:
                self._by_key.pop(awaited, None)
        return batch

    def cancel(self, key: str) -> list[Any] | None:
        """Stops waiting for ``key``; returns its batch's answers once nothing is awaited."""
        batch = self._by_key.pop(key, None)
        if batch is None:
            return None
        batch.awaited.discard(key)
        return None if batch.awaited else list(batch.replies)

    def give_up(self, key: str) -> None:
        """:meth:`cancel` for a call evicted unanswered: the answers go out later."""
        replies = self.cancel(key)
        if replies is not None:
            self._completed.append(replies)

    def take_completed(self) -> list[Any]:
        """The answers of the batches given up on since the last call."""
        completed, self._completed = self._completed, []
        return completed


class McpLoopGuard:
    """Guards the ``tools/call`` traffic of one MCP client connection (one guard session).

    Feed it every parsed message: :meth:`from_client` for what the client sends (it says what to
    forward and what to answer directly), :meth:`from_upstream` for what the upstream sends (it
    returns the message for the client, annotated when needed). A message it has nothing to do
    with comes back as the same object, so a transport can forward the original bytes.
    """

    def __init__(
        self, guard: LoopGuard, *, session: str | None = None, agent_id: str | None = None,
        max_pending_calls: int = DEFAULT_MAX_PENDING_CALLS,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        exit_behavior: ExitBehavior = "end", max_grants: int = DEFAULT_MAX_GRANTS,
    ) -> None:
        self.guard = guard
        self.session = session or f"mcp-{uuid.uuid4()}"
        self.agent_id = agent_id
        # "ask": the terminal stop is elicited (_mcp_asking); else it blocks, as every stop.
        self._asks = None if exit_behavior != "ask" else McpAsks(
            guard, EndOfRun("ask", max_grants=max_grants), self.session, agent_id, self._await)
        #: What the connection gave up to stay bounded (evicted calls, unreadable lines...).
        self.stats = ProxyStats()
        self._in_flight = PendingCalls(max_pending_calls, max_pending_bytes, self.stats)
        # Clients may reuse JSON-RPC ids once a request is answered; the guard would take a
        # reused call id for a retried hook and not count the call, so ids are made unique.
        self._seq = itertools.count(1)
        self._batches = _Batches(max_pending_calls)
        # taskId -> the call it runs; request key -> the tasks/* method and the task it asks
        # about.
        self._tasks: dict[str, _Task] = {}
        self._task_requests: dict[str, tuple[str, str]] = {}

    async def from_client(self, message: Any, *, size: int | None = None
                          ) -> tuple[Any, list[Any]]:
        """Returns what to forward upstream (None: nothing) and the messages to send straight
        back to the client (the results of blocked calls).

        ``size`` is the message's length as read, which the pending calls' byte bound counts
        (a batch's calls share it; without it a forwarded call's size is measured).

        A batch is answered with one array (JSON-RPC 2.0): when some of its calls are blocked
        and others forwarded, the blocked calls' responses wait for the upstream's array and
        are merged into it (:meth:`from_upstream`)."""
        if not isinstance(message, list):
            forward, reply = await self._client_message(message, size)
            done = self._batches.take_completed()
            return forward, [*done, *([reply] if reply is not None else [])]
        forwards: list[Any] = []
        blocked: list[dict[str, Any]] = []
        replies: list[Any] = []  # earlier batches a cancellation completed
        share = None if size is None else size // max(len(message), 1)
        for item in message:
            forward, reply = await self._client_message(item, share, batched=True)
            if forward is not None:
                forwards.append(forward)
            if isinstance(reply, dict):
                blocked.append(reply)
            elif reply is not None:
                replies.append(reply)
        replies[:0] = self._batches.take_completed()
        if not blocked:
            return (message if len(forwards) == len(message) else forwards or None), replies
        awaited = [_id_key(f["id"]) for f in forwards if _is_request(f)]
        if not awaited:  # nothing will come back from the upstream: answer now
            return forwards or None, [*replies, blocked]
        order = [_id_key(item["id"]) for item in message if _is_request(item)]
        self._batches.add(awaited, order, blocked)
        return forwards, [*replies, *self._batches.take_completed()]

    async def from_upstream(self, message: Any) -> Any:
        """Returns the message for the client: a ``tools/call`` result with the outcome
        recorded and, when the call was warned, the warning note appended; the upstream's
        answer to a batch with the responses of the batch's blocked calls merged in."""
        if not isinstance(message, list):
            out = await self._upstream_message(message)
            batch = self._batches.answered(message)
            # An upstream that answers a batch's calls one by one: the blocked calls' answers
            # go with the first of them.
            return out if batch is None else [out, *batch.replies]
        out = [await self._upstream_message(item) for item in message]
        batches: list[_PendingBatch] = []
        for item in message:
            batch = self._batches.answered(item)
            if batch is not None and all(b is not batch for b in batches):
                batches.append(batch)
        if not batches:
            return message if all(a is b for a, b in zip(out, message, strict=True)) else out
        for batch in batches:
            out.extend(batch.replies)
        rank: dict[str | None, int] = {key: n for n, key in enumerate(batches[0].order)}
        out.sort(key=lambda m: rank.get(_response_key(m), len(rank)))  # the client's order
        return out

    @property
    def in_flight(self) -> int:
        """How many forwarded ``tools/call`` requests wait for the upstream's response."""
        return len(self._in_flight)

    @property
    def in_flight_bytes(self) -> int:
        """The size of those requests as read (bounded by ``max_pending_bytes``)."""
        return self._in_flight.bytes

    def awaiting(self) -> bool:
        """Whether some upstream response matters to the guard: when not, the transport need
        not parse what the upstream sends."""
        return bool(self._in_flight or self._batches or self._tasks or self._task_requests)

    # -- client -> upstream ------------------------------------------------------------------

    async def _client_message(self, message: Any, size: int | None,
                              batched: bool = False) -> tuple[Any, Any]:
        """What to forward, and what to answer: a blocked call's response (a dict), or the
        array of a batch whose last awaited call was cancelled."""
        if not isinstance(message, dict):
            return message, None
        method = message.get("method")
        if method == "tools/call" and "id" in message:
            return await self._tools_call(message, size, batched)
        if self._asks is not None and (answered := await self._asks.from_client(message)):
            return answered  # the answer to a question: the held call, forwarded or blocked
        if method in _TASK_METHODS and "id" in message and self._tasks:
            task_id = _task_param(message.get("params"))
            if task_id in self._tasks:
                self._task_requests[_id_key(message["id"])] = (method, task_id)
                while len(self._task_requests) > MAX_TASKS:  # never answered: forgotten
                    del self._task_requests[next(iter(self._task_requests))]
        if method == "notifications/cancelled":
            # The upstream will not answer a cancelled call; nothing is recorded for it.
            params = message.get("params")
            if isinstance(params, dict) and "requestId" in params:
                key = _id_key(params["requestId"])
                self._in_flight.pop(key)
                self._task_requests.pop(key, None)
                return message, self._batches.cancel(key)
        return message, None

    async def _tools_call(self, message: dict[str, Any], size: int | None, batched: bool
                          ) -> tuple[Any, dict[str, Any] | None]:
        params = message.get("params")
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            return message, None  # malformed: the upstream answers with its own error
        name: str = params["name"]
        args = params.get("arguments")
        args = {} if args is None else args
        meta = params.get("_meta")
        meta = meta if isinstance(meta, Mapping) else {}
        run_id = _meta_str(meta, RUN_ID_META_KEYS)
        key = _id_key(message["id"])
        size = _json_size(message) if size is None else size
        if _is_input_retry(params):
            self._await(key, InFlight(name, args, run_id, None, None, size))
            return message, None
        call_id = _meta_str(meta, CALL_ID_META_KEYS) or f"mcp-{next(self._seq)}"
        verdict = await self.guard.abefore_tool_call(
            name, args, session=self.session, run_id=run_id, call_id=call_id,
            agent_id=self.agent_id,
        )
        if verdict.action == "block":
            if self._asks is not None and verdict.terminate and not batched and (ask := await (
                    self._asks.at_stop(message, verdict, InFlight(name, args, run_id, call_id,
                                                                  None, size)))):
                return None, ask  # the call waits for the human's answer (a batch: never)
            return None, blocked_response(message["id"], verdict)
        self._await(key, InFlight(name, args, run_id, call_id, verdict, size))
        return message, None

    def _await(self, key: str, flight: InFlight) -> None:
        for evicted in self._in_flight.add(key, flight):
            self._batches.give_up(evicted)

    # -- upstream -> client ------------------------------------------------------------------

    async def _upstream_message(self, message: Any) -> Any:
        if not isinstance(message, dict):
            return message
        if "method" in message or "id" not in message:
            # Notifications and server-to-client requests pass through; a task's status is read.
            if message.get("method") == "notifications/tasks/status" and self._tasks:
                await _task_status(self, message.get("params"))
            return message
        key = _id_key(message["id"])
        flight = self._in_flight.pop(key)
        if flight is None:
            if self._in_flight:
                self._in_flight.note_unmatched(message["id"])
            asked = self._task_requests.pop(key, None) if self._task_requests else None
            return message if asked is None else await self._task_answer(*asked, message)
        task_id = _created_task(message.get("result"))
        if task_id is not None:  # the call runs as a task: its outcome comes later
            self._tasks[task_id] = _Task(flight)
            while len(self._tasks) > MAX_TASKS:
                del self._tasks[next(iter(self._tasks))]
            return message
        return await self._outcome(flight, message)

    async def _outcome(self, flight: InFlight, message: dict[str, Any],
                       notes: list[str] | None = None) -> Any:
        """Records the answer to a call (unless ``notes`` says it is recorded already) and
        returns it with the call's warning notes."""
        if "error" in message:
            if notes is None:
                after = await self._record(flight, error=_error_text(message["error"]))
                notes = _notes(flight.before, after)
            return _annotate_error(message, notes)
        result = message.get("result")
        if not _is_final(result):
            # An input request: no outcome yet. A retry with the answers comes as a new
            # request and records the outcome then.
            return message
        if notes is None:
            after = await self._record(flight, result=result, error=_tool_error(result))
            notes = _notes(flight.before, after)
        if not notes:
            return message
        annotated: Any = result
        for note in notes:
            annotated = append_note(annotated, note)
        return {**message, "result": annotated}

    async def _task_answer(self, method: str, task_id: str, message: dict[str, Any]) -> Any:
        """The upstream's answer to a ``tasks/*`` request about a task of ours: for
        ``tasks/result`` the call's own answer; for ``tasks/get`` and ``tasks/cancel`` the
        task's state (an error there, e.g. cancelling a finished task, says nothing of it)."""
        task = self._tasks.get(task_id)
        if task is None:
            return message
        result = message.get("result")
        if method == "tasks/result":
            if "error" in message or _is_final(result):
                del self._tasks[task_id]
                return await self._outcome(task.flight, message, task.notes)
        elif isinstance(result, dict):
            await _task_status(self, result)
        return message

    async def _record(self, flight: InFlight, *, result: Any = MISSING,
                      error: Any = MISSING) -> Verdict:
        return await self.guard.aafter_tool_call(
            flight.tool, flight.args, session=self.session, result=result, error=error,
            run_id=flight.run_id, call_id=flight.call_id, agent_id=self.agent_id,
        )


async def _task_status(core: McpLoopGuard, task: Any) -> None:
    """A task's state (a ``Task``): a failure is the call's outcome, a cancelled task will have
    none."""
    if not isinstance(task, dict):
        return
    task_id = task.get("taskId")
    entry = core._tasks.get(task_id) if isinstance(task_id, str) else None
    if entry is None:
        return
    status = task.get("status")
    if status == "cancelled":
        del core._tasks[task["taskId"]]
    elif status == "failed" and entry.notes is None:
        message = task.get("statusMessage")
        error = message if isinstance(message, str) and message else "task failed"
        after = await core._record(entry.flight, error=error)
        entry.notes = _notes(entry.flight.before, after)


def _json_size(message: Any) -> int:
    """A message's JSON length, for callers that do not say how long it was as read."""
    try:
        return len(json.dumps(message, ensure_ascii=False, default=str))
    except (ValueError, TypeError, RecursionError):
        return 0
