"""Value types shared by every layer: the ``MISSING`` sentinel and ``ToolCall``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

__all__ = ["MISSING", "ToolCall"]


class Missing:
    """Type of :data:`MISSING`: "no value was given", distinct from a real ``None`` result."""

    _instance: Missing | None = None

    def __new__(cls) -> Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Final = Missing()


@dataclass(slots=True)
class ToolCall:
    """One tool call, as the guard, the transcript readers and the integrations see it.

    ``result`` is :data:`MISSING` while the outcome is unknown; ``error`` is ``None`` (or
    :data:`MISSING`) when the call did not fail, else an exception or an error text.
    """

    tool_name: str
    args: Any
    call_id: str | None = None
    run_id: str | None = None
    result: Any = MISSING
    error: Any = None
