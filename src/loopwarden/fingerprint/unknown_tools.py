"""Which missing tool an error complains about (§c.8): OpenClaw's patterns and, for the
``early`` preset, other frameworks' wordings.
"""

from __future__ import annotations

import re
from typing import Final

_UNKNOWN_TOOL_PATTERNS: Final = (
    re.compile(r"unknown tool[:\s]+[\"']?([a-z0-9_.-]+)[\"']?", re.IGNORECASE),
    re.compile(
        r"tool\s+[\"']?([a-z0-9_.-]+)[\"']?\s+(?:not found|is not available)", re.IGNORECASE
    ),
)


_NAME: Final = r"[\"'`]?([\w.:/-]*[\w])[\"'`]?"
# The wordings of the frameworks loopwarden integrates with (LangChain/LangGraph, OpenAI Agents
# SDK, Claude Code, MCP servers), with namespaced names such as `google:search` or
# `mcp__server__tool` that OpenClaw's own pattern cannot capture.
_EXTENDED_UNKNOWN_TOOL_PATTERNS: Final = (
    re.compile(r"no such tool(?: available)?[:\s]+" + _NAME, re.IGNORECASE),
    re.compile(r"unknown (?:tool|function)(?: name| id)?[:\s]+" + _NAME, re.IGNORECASE),
    re.compile(r"no (?:tool|function) named\s+" + _NAME, re.IGNORECASE),
    re.compile(_NAME + r" is not a valid tool", re.IGNORECASE),
    re.compile(
        r"(?:tool|function)\s+" + _NAME
        + r"\s+(?:was\s+)?(?:not found|is not available|does not exist|is not registered)",
        re.IGNORECASE,
    ),
)


def extract_unknown_tool(text: str, *, extended: bool = False) -> str | None:
    """Lower-cased name of the missing tool an error complains about, else ``None`` (§c.8).

    Faithful to OpenClaw including its quirk: ``Unknown tool id: x`` yields ``"id"``.
    ``extended`` (the ``early`` preset) first tries other frameworks' wordings and namespaced
    names.
    """
    raw = text.strip()
    patterns = _EXTENDED_UNKNOWN_TOOL_PATTERNS + _UNKNOWN_TOOL_PATTERNS if extended else _UNKNOWN_TOOL_PATTERNS
    for pattern in patterns:
        match = pattern.search(raw)
        if match:
            return match.group(1).lower()
    return None
