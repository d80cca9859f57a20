"""The post-compaction guard (spec §g): after an automatic compaction-retry, abort the run if the
agent immediately repeats the same (tool, args, result) triple for the whole window."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..base.errors import CompactionLoopPersistedError
from ..base.log import get_logger
from ..base.text import log_text

__all__ = ["CompactionLoopPersistedError", "CompactionVerdict", "PostCompactionGuard"]

log = get_logger("loopwarden.compaction")

DETECTOR = "compaction_loop_persisted"
_RECENT_TAIL = 16


@dataclass(frozen=True, slots=True)
class CompactionVerdict:
    """What :meth:`PostCompactionGuard.observe` says of one outcome (spec §g's ``{shouldAbort,
    armed, remainingAttempts, ...}``)."""

    should_abort: bool
    armed: bool
    remaining_attempts: int
    detector: str | None = None
    count: int = 0
    tool_name: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class CompactionSnapshot:
    """Spec §g's ``snapshot()``: whether the window is open and how many attempts remain."""

    armed: bool
    remaining_attempts: int


Triple = tuple[str, str, str]


class PostCompactionGuard:
    """One guard per session and run. ``window_size`` is honoured (loopwarden keeps the
    configurable PCG-v1 window) and the PCG-v2 window summary is logged when a window closes."""

    __slots__ = ("_baseline", "_recent", "_remaining", "_repeats", "_tools", "_window",
                 "enabled", "window_size")

    def __init__(self, window_size: int = 3, enabled: bool = True) -> None:
        ok = isinstance(window_size, int) and not isinstance(window_size, bool) and window_size > 0
        self.window_size = window_size if ok else 3
        self.enabled = enabled
        self._remaining = 0
        self._window: list[Triple] = []
        self._recent: deque[tuple[str, str]] = deque(maxlen=_RECENT_TAIL)
        self._baseline: frozenset[tuple[str, str]] = frozenset()
        self._repeats = 0
        self._tools: set[str] = set()

    def arm(self, recent: Iterable[tuple[str, str]] | None = None) -> None:
        """(Re)open the window. ``recent``, when given, replaces the pre-compaction tail used
        for the re-read instrumentation (the guard passes the run's newest history)."""
        if not self.enabled:
            return
        if recent is not None:
            self._recent.clear()
            self._recent.extend(recent)
        if self._remaining > 0:
            self._close_window()
        self._remaining = self.window_size
        self._window = []
        self._baseline = frozenset(self._recent)
        self._repeats = 0
        self._tools = set()
        log.info("post-compaction guard armed for %d attempts", self.window_size)

    def observe(self, tool_name: str, args_hash: str, result_hash: str | None) -> CompactionVerdict:
        """Note one completed call: in an open window, abort once the same (tool, args, result)
        fills it (spec §g). A pending outcome only reports the state."""
        if not self.enabled:
            return CompactionVerdict(False, False, 0)
        if result_hash is None:
            return CompactionVerdict(False, self._remaining > 0, self._remaining)
        signature = (tool_name, args_hash)
        self._recent.append(signature)
        if self._remaining <= 0:
            return CompactionVerdict(False, False, 0)
        self._remaining -= 1
        call = (tool_name, args_hash, result_hash)
        self._window.append(call)
        if signature in self._baseline:
            self._repeats += 1
            self._tools.add(tool_name)
        matches = sum(1 for c in self._window if c == call)
        if matches >= self.window_size:
            message = (
                f"CRITICAL: tool {tool_name} repeated {matches} times with identical arguments and "
                f"identical results within {self.window_size} attempts after auto-compaction. The "
                "compaction did not break the loop. Aborting to prevent runaway resource use."
            )
            log.error(
                "post-compaction loop persisted: tool=%s repeated %d times with identical "
                "args+result post-compaction", log_text(tool_name), matches,
            )
            remaining = self._remaining
            self._remaining = 0
            return CompactionVerdict(True, remaining > 0, remaining, DETECTOR, matches, tool_name,
                                     message)
        if self._remaining == 0:
            self._close_window()
        return CompactionVerdict(False, self._remaining > 0, self._remaining)

    @property
    def armed(self) -> bool:
        """Whether the window is open (attempts remain)."""
        return self._remaining > 0

    def snapshot(self) -> CompactionSnapshot:
        """Whether the window is open and how many attempts remain."""
        return CompactionSnapshot(self._remaining > 0, self._remaining)

    def _close_window(self) -> None:
        tools = f" tools={log_text(','.join(sorted(self._tools)))}" if self._tools else ""
        log.info(
            "post-compaction window closed: toolCalls=%d preCompactionRepeats=%d%s",
            len(self._window), self._repeats, tools,
        )

    # -- persistence -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The guard as plain JSON data, for the stores (read back by :meth:`from_dict`)."""
        return {
            "window_size": self.window_size, "enabled": self.enabled,
            "remaining": self._remaining, "window": [list(c) for c in self._window],
            "recent": [list(s) for s in self._recent], "baseline": [list(s) for s in self._baseline],
            "repeats": self._repeats, "tools": sorted(self._tools),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PostCompactionGuard:
        """A guard from :meth:`to_dict`'s form (missing keys take their defaults)."""
        guard = cls(int(data.get("window_size", 3)), bool(data.get("enabled", True)))
        guard._remaining = int(data.get("remaining", 0))
        guard._window = [(str(a), str(b), str(c)) for a, b, c in data.get("window", ())]
        guard._recent.extend((str(a), str(b)) for a, b in data.get("recent", ()))
        guard._baseline = frozenset((str(a), str(b)) for a, b in data.get("baseline", ()))
        guard._repeats = int(data.get("repeats", 0))
        guard._tools = {str(t) for t in data.get("tools", ())}
        return guard
