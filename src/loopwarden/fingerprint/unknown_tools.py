"""Which missing tool an error complains about (§c.8): OpenClaw's patterns and, for the
``early`` preset, other frameworks' wordings.
"""

from __future__ import annotations

import re
from typing import Final

from ..base.lazy_re import lazy_pattern

# Compiled on first use (most calls never fail; see loopwarden.base.lazy_re).
_OPENCLAW: Final = (
    r"unknown tool[:\s]+[\"']?([a-z0-9_.-]+)[\"']?",
    r"tool\s+[\"']?([a-z0-9_.-]+)[\"']?\s+(?:not found|is not available)",
)


_NAME: Final = r"[\"'`]?([\w.:/-]*[\w])[\"'`]?"
# The wordings of the frameworks loopwarden integrates with (LangChain/LangGraph, OpenAI Agents
# SDK, Claude Code, MCP servers), with namespaced names such as `google:search` or
# `mcp__server__tool` that OpenClaw's own pattern cannot capture.
_EXTENDED: Final = (
    r"no such tool(?: available)?[:\s]+" + _NAME,
    r"unknown (?:tool|function)(?: name| id)?[:\s]+" + _NAME,
    r"no (?:tool|function) named\s+" + _NAME,
    _NAME + r" is not a valid tool",
    r"(?:tool|function)\s+" + _NAME
    + r"\s+(?:was\s+)?(?:not found|is not available|does not exist|is not registered)",
)


_OPENCLAW_PATTERNS: Final = tuple(lazy_pattern(source, re.IGNORECASE) for source in _OPENCLAW)
_EXTENDED_PATTERNS: Final = (
    *(lazy_pattern(source, re.IGNORECASE) for source in _EXTENDED), *_OPENCLAW_PATTERNS)


def extract_unknown_tool(text: str, *, extended: bool = False) -> str | None:
    """Lower-cased name of the missing tool an error complains about, else ``None`` (§c.8).

    Faithful to OpenClaw including its quirk: ``Unknown tool id: x`` yields ``"id"``.
    ``extended`` (the ``early`` preset) first tries other frameworks' wordings and namespaced
    names.
    """
    raw = text.strip()
    for pattern in _EXTENDED_PATTERNS if extended else _OPENCLAW_PATTERNS:
        match = pattern().search(raw)
        if match:
            return match.group(1).lower()
    return None
