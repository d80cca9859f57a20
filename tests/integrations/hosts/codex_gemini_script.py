"""The scripted model behind the host tests: what it asks for, turn by turn, and what it saw.

A host binary (Codex CLI, Gemini CLI) talks to a model server on 127.0.0.1; the server is
host-specific (``openai_responses_server.py``, ``gemini_server.py``) but the model is this one:
a :class:`Script` decides the next tool call from how many calls it has made, and a
:class:`Transcript` keeps every tool result the host handed back, so a test can tell when the
model first saw loopwarden's warning, when a call was first denied and when the run ended. An
insistent script never gives up by itself: it asks for its pattern again whatever it is told,
up to ``limit`` calls, then answers in text (so a host that never stops still ends).
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Marks loopwarden's texts in a tool result as the model sees it.
WARNING_MARK = "Tool-loop warning"
DENIAL_MARKS = ("CRITICAL", "loopwarden stopped this run", "Do not repeat this exact tool",
                "Critical tool-loop recovery", "blocked")
FINAL_TEXT = "Done."


@dataclass(frozen=True)
class Action:
    """One tool call the model asks for: a shell command, or a named tool with arguments."""

    command: str | None = None
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class Script:
    """``next_action(n)`` is the model's ``n``-th call (0-based); None ends the run in text."""

    next_action: Callable[[int], Action | None]
    limit: int = 40

    def action(self, made: int) -> Action | None:
        """The call after ``made`` calls, or None when the model answers in text."""
        if made >= self.limit:
            return None
        return self.next_action(made)


@dataclass
class Transcript:
    """What the model saw: one entry per tool result handed back, in order."""

    results: list[str] = field(default_factory=list)
    requests: int = 0
    calls_made: int = 0
    stamps: list[float] = field(default_factory=list)  # when each request came (monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def saw(self, result_texts: list[str]) -> None:
        """Record the results of the latest request (the whole conversation is resent each
        time, context a hook added since included)."""
        with self.lock:
            if len(result_texts) >= len(self.results):
                self.results[:] = result_texts

    def turnaround_ms(self) -> float | None:
        """Median time from one model request to the next while the model makes tool calls:
        one tool call's turnaround as the host runs it (hooks, the tool, the next request)."""
        gaps = [(b - a) * 1000 for a, b in zip(self.stamps, self.stamps[1:], strict=False)]
        gaps = gaps[:self.calls_made]  # (not the wait after the final text)
        return statistics.median(gaps) if gaps else None

    def first(self, predicate: Callable[[str], bool]) -> int | None:
        """1-based index of the first result matching ``predicate``."""
        for index, text in enumerate(self.results, start=1):
            if predicate(text):
                return index
        return None

    def first_warning(self) -> int | None:
        """The call whose result first carried loopwarden's warning note."""
        return self.first(lambda text: WARNING_MARK in text)

    def first_denial(self, mark: str) -> int | None:
        """The first call whose result is the host's denial text ``mark``."""
        return self.first(lambda text: mark in text)


def shell_shape(commands: Callable[[int], str]) -> Callable[[int], Action | None]:
    """A pattern of shell commands, the ``n``-th from ``commands(n)``."""
    return lambda n: Action(command=commands(n))
