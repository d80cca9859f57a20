"""The MCP proxy: a stdio MCP server that fronts a real one and guards every ``tools/call``.

The proxy works on MCP's JSON-RPC messages instead of re-serving the upstream through an SDK
server, so everything it does not guard passes through untouched: the upstream's tool list with
its schemas, resources, prompts, server-to-client requests (sampling, elicitation),
notifications, and every protocol revision either side speaks. Only two things change:

- a ``tools/call`` the guard blocks never reaches the upstream; the client gets a tool result
  with ``isError: true`` and the loop message instead;
- a warned call's result gets the warning note appended as one more text block.

One proxy process serves one client connection, and that connection is the guard's session.
A client that knows its agent's run can send it in the request's ``_meta`` (``runId``,
``run_id`` or ``loopwarden/runId``); a model-level tool call id may come as ``toolCallId``.

Calls in flight count: a ``tools/call`` admitted while identical ones still wait for the
upstream counts them as repeats (see :attr:`LoopGuard.in_flight_seconds`), so a burst of
identical concurrent calls is stopped like the same calls made one by one.

Task-augmented calls (MCP 2025-11-25: ``tools/call`` with a ``task`` parameter) are guarded
like any call. A blocked one is answered at once with the blocked tool result (receivers may
answer a task-augmented request directly); an admitted one's ``CreateTaskResult`` links its
``taskId`` to the call, and the outcome is recorded when it comes: the ``tasks/result``
answer (annotated with the call's warning), or a ``failed`` status (``tasks/get``,
``tasks/cancel``, ``notifications/tasks/status``). A cancelled task records nothing.

The proxy cannot end its client's run: MCP has no message for that. At the terminal stop it
keeps blocking the looping calls. With ``exit_behavior="ask"`` it asks first, when the client
declared the ``elicitation`` capability: the call is held and the client gets an
``elicitation/create`` with the guard's question and a one-field form (continue / stop);
"continue" forwards the call and starts the run's loop counts over, anything else blocks it
(see ``_mcp_asking``). A client without elicitation gets the blocked result, and the log says
the run was not asked.

:class:`McpLoopGuard` is the transport-free translation; :func:`run_proxy` wires it between our
stdin/stdout and the upstream process. They live in private modules next to this one, whose
names this module re-exports: ``_mcp_guard`` (:class:`McpLoopGuard`), ``_mcp_messages`` (what
is read from and made into one JSON-RPC message) and ``_mcp_transport`` (:func:`run_proxy`).

The transport never dies of what it reads, and nothing from the client reaches the upstream
unread. A leading UTF-8 byte order mark is dropped; nesting too deep for ``json`` is read by
orjson (1,024 levels); a client line that is still not UTF-8 JSON is answered with a JSON-RPC
parse error (-32700, with the request's id when its ends show one) and not forwarded; a client
request the guard could not inspect is answered with an internal error (-32603). From the
upstream, what cannot be parsed goes on as it came; a lone surrogate is re-sent as a JSON
escape. Lines are framed in linear time and bounded (:data:`DEFAULT_MAX_MESSAGE_BYTES`), the
same way in both directions.

Memory is bounded too: the calls awaiting the upstream's answer are kept up to
:data:`DEFAULT_MAX_PENDING_CALLS` calls and :data:`DEFAULT_MAX_PENDING_BYTES` bytes; past
either the oldest is evicted (logged, counted in :attr:`McpLoopGuard.stats`) and its outcome is
never recorded. Ids are matched as JSON-RPC types them: an upstream answering ``"1"`` for ``1``
leaves the call pending until evicted, and is logged. Logs carry sizes, tool names, detectors
and counts, never argument or result text.

On Linux the upstream dies with the proxy even when the proxy is killed outright (SIGKILL), by
the kernel's parent-death signal; elsewhere only a proxy that gets to stop it does.
"""

from __future__ import annotations

# ``as``: names kept importable from here but outside __all__, which lists what other floors
# use (the docs name MAX_TASKS and the bounds; tests call blocked_response).
from ._mcp_guard import CALL_ID_META_KEYS as CALL_ID_META_KEYS
from ._mcp_guard import MAX_TASKS as MAX_TASKS
from ._mcp_guard import RUN_ID_META_KEYS as RUN_ID_META_KEYS
from ._mcp_guard import McpLoopGuard
from ._mcp_messages import blocked_response as blocked_response
from ._mcp_pending import DEFAULT_MAX_PENDING_BYTES
from ._mcp_pending import DEFAULT_MAX_PENDING_CALLS as DEFAULT_MAX_PENDING_CALLS
from ._mcp_pending import ProxyStats as ProxyStats
from ._mcp_transport import DEFAULT_MAX_MESSAGE_BYTES, run_proxy
from ._mcp_transport import MAX_MESSAGE_BYTES_ENV as MAX_MESSAGE_BYTES_ENV
from ._mcp_transport import max_message_bytes_from_env as max_message_bytes_from_env

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "DEFAULT_MAX_PENDING_BYTES", "McpLoopGuard", "run_proxy"]
