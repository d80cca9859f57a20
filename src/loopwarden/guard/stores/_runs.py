"""What ``SQLiteStore.runs`` returns (a module of its own: only ``loopwarden runs`` loads it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run's loop events, summarised (what ``loopwarden runs`` lists)."""

    session: str
    run: str | None
    first: int  # epoch ms of the first event
    last: int
    events: int
    warnings: int
    blocks: int
    aborts: int
    agents: tuple[str, ...]
    detectors: tuple[str, ...]
    asks: int = 0  # exit_behavior="ask": questions put before a human
    grants: int = 0  # and the "continue" answers among them

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain JSON data (tuples as lists), for ``loopwarden runs --json``."""
        data = asdict(self)
        data["agents"], data["detectors"] = list(self.agents), list(self.detectors)
        return data
