"""The MCP proxy's calls awaiting an answer, bounded: :class:`PendingCalls` keeps the forwarded
``tools/call`` requests (arguments included, to record their outcome) until the upstream
answers, and never more than a count and a byte budget of them.

An upstream that never answers (or answers with ids of another type: ``"1"`` for ``1`` is a
different JSON-RPC id) would otherwise grow the proxy without end. Past either bound the oldest
call is evicted: its outcome is never recorded, and an answer that still comes for it passes to
the client unannotated. Evictions are counted in :class:`ProxyStats` and logged (the first, then
at each power of two, so a server that answers nothing does not flood the log). Part of
:mod:`loopwarden.integrations.mcp_proxy`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..base.log import get_logger
from ..base.text import log_text
from ..guard import Verdict

#: Calls awaiting the upstream's answer that the proxy keeps at most. A client rarely has more
#: than a few dozen calls out at once; the bound is for an upstream that answers none.
DEFAULT_MAX_PENDING_CALLS = 1024
#: Bytes of those calls (their requests as read) kept at most: the arguments are what is large.
DEFAULT_MAX_PENDING_BYTES = 64 << 20

log = get_logger("loopwarden.mcp")


@dataclass(slots=True)
class ProxyStats:
    """What one proxy connection gave up to stay bounded and safe, for logs and tests."""

    #: Calls dropped unanswered from the pending calls (the oldest first), and their bytes.
    evicted_calls: int = 0
    evicted_bytes: int = 0
    #: Upstream answers whose id matched a pending call's only as another type (``"1"``/``1``).
    mismatched_ids: int = 0
    #: Client lines that were not UTF-8 JSON: answered with a parse error, never forwarded.
    unreadable_lines: int = 0

    def summary(self) -> str:
        """One line for the log, empty when nothing was given up."""
        parts = []
        if self.evicted_calls:
            parts.append(f"{self.evicted_calls} calls evicted unanswered "
                         f"({self.evicted_bytes} bytes)")
        if self.mismatched_ids:
            parts.append(f"{self.mismatched_ids} answers with an id of another type")
        if self.unreadable_lines:
            parts.append(f"{self.unreadable_lines} unreadable client lines refused")
        return "; ".join(parts)


@dataclass(slots=True)
class InFlight:
    """A forwarded ``tools/call`` waiting for the upstream's response."""

    tool: str
    args: Any
    run_id: str | None
    call_id: str | None
    #: None for a retried call that carries input responses: it was admitted the first time.
    before: Verdict | None
    #: The request's size as read (what the byte bound counts).
    size: int = 0


class PendingCalls:
    """The forwarded calls by request key (see ``_id_key``), oldest first, at most
    ``max_calls`` of them and ``max_bytes`` of their requests (a single call over the byte
    bound is kept alone: the message limit bounds it)."""

    __slots__ = ("_calls", "bytes", "max_bytes", "max_calls", "stats")

    def __init__(self, max_calls: int = DEFAULT_MAX_PENDING_CALLS,
                 max_bytes: int = DEFAULT_MAX_PENDING_BYTES,
                 stats: ProxyStats | None = None) -> None:
        if max_calls <= 0 or max_bytes <= 0:
            raise ValueError(f"the pending-call bounds must be positive, not {max_calls} calls "
                             f"and {max_bytes} bytes")
        self.max_calls = max_calls
        self.max_bytes = max_bytes
        self.stats = stats if stats is not None else ProxyStats()
        self.bytes = 0
        self._calls: dict[str, InFlight] = {}

    def __len__(self) -> int:
        return len(self._calls)

    def __bool__(self) -> bool:
        return bool(self._calls)

    def __contains__(self, key: str) -> bool:
        return key in self._calls

    def add(self, key: str, flight: InFlight) -> list[str]:
        """Keeps ``flight`` as the newest call; returns the keys of the calls evicted for it."""
        self.pop(key)  # a client reusing an id still in flight: the newer call is awaited
        self._calls[key] = flight
        self.bytes += flight.size
        evicted: list[str] = []
        while len(self._calls) > 1 and (len(self._calls) > self.max_calls
                                        or self.bytes > self.max_bytes):
            oldest = next(iter(self._calls))
            self._evict(oldest, self._calls.pop(oldest))
            evicted.append(oldest)
        return evicted

    def pop(self, key: str) -> InFlight | None:
        """The call with this key, no longer pending (None when there is none)."""
        flight = self._calls.pop(key, None)
        if flight is not None:
            self.bytes -= flight.size
        return flight

    def note_unmatched(self, request_id: Any) -> None:
        """An upstream answer matched no pending call: when it names one with an id of another
        type, count it and say so (the call stays pending until answered or evicted)."""
        twin = _other_type_key(request_id)
        if twin is None or twin not in self._calls:
            return
        stats = self.stats
        stats.mismatched_ids += 1
        if _power_of_two(stats.mismatched_ids):
            log.warning("mcp-proxy: the server answered id %s, but the call was sent with id %s "
                        "(JSON-RPC ids are typed: \"1\" is not 1); its outcome is not recorded "
                        "and it stays pending until evicted (%d such answers so far)",
                        log_text(json.dumps(request_id)), log_text(twin),
                        stats.mismatched_ids)

    def _evict(self, key: str, flight: InFlight) -> None:
        self.bytes -= flight.size
        stats = self.stats
        stats.evicted_calls += 1
        stats.evicted_bytes += flight.size
        if _power_of_two(stats.evicted_calls):
            log.warning("mcp-proxy: evicted the oldest call awaiting the server's answer "
                        "(tool=%s id=%s, %d bytes) to stay within %d calls and %d bytes; its "
                        "outcome will not be recorded (%d evicted so far; --max-pending-calls "
                        "and --max-pending-bytes raise the bounds)", log_text(flight.tool),
                        log_text(key), flight.size, self.max_calls, self.max_bytes,
                        stats.evicted_calls)


def _power_of_two(n: int) -> bool:
    return n & (n - 1) == 0


def _other_type_key(request_id: Any) -> str | None:
    """The key of the same id written as the other JSON type: ``"1"`` for ``1`` and back."""
    if isinstance(request_id, bool):
        return None
    if isinstance(request_id, (int, float)):
        return json.dumps(str(request_id))
    if isinstance(request_id, str):
        try:
            number = json.loads(request_id)
        except ValueError:
            return None
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            return json.dumps(number)
    return None
