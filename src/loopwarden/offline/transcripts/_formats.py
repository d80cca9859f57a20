"""The transcript formats, in one table: each format's reader and how it is recognised.

A new format is one module (``read`` and a ``sniff``) and one row here; the reader registry
(:mod:`loopwarden.offline.transcripts`) and format detection (:mod:`._detect`) both read this table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopwarden.base.types import ToolCall
from loopwarden.offline.transcripts import (
    claude_code,
    claude_code_md,
    loopwarden_jsonl,
    openai_chat,
    openclaw,
    openhands,
    swe_agent,
)
from loopwarden.offline.transcripts._common import Reporter

Reader = Callable[[Path, Reporter], Iterator[ToolCall]]


@dataclass(frozen=True, slots=True)
class TranscriptFormat:
    """One format: its name (``--format``), its reader, and the sniffers that recognise it.

    ``head`` sees the first few KB of text; ``record`` one JSONL record (a dict); ``document``
    a whole JSON document. ``rank`` orders the sniffers, most specific first: a SWE-agent or
    OpenHands document holds chat messages too, so it is asked before the chat reader."""

    name: str
    read: Reader
    rank: int
    shape: str  # what a file of this format holds, for the message when one does not parse
    head: Callable[[str], bool] | None = None
    record: Callable[[dict[str, Any]], bool] | None = None
    document: Callable[[Any], bool] | None = None


# In the order ``--format`` lists them.
_TABLE: tuple[TranscriptFormat, ...] = (
    TranscriptFormat("openclaw", openclaw.read, 1,
                     'OpenClaw session JSONL: {"type": "message"} records with toolCall blocks',
                     record=openclaw.sniff),
    TranscriptFormat("claude-code", claude_code.read, 2,
                     "Claude Code session JSONL: assistant records with tool_use blocks",
                     record=claude_code.sniff),
    TranscriptFormat("claude-code-md", claude_code_md.read, 0,
                     'a "# Claude Session Export" Markdown file', head=claude_code_md.sniff),
    TranscriptFormat("openai-chat", openai_chat.read, 6,
                     "OpenAI chat messages (a JSON list or JSONL) with tool_calls",
                     record=openai_chat.sniff, document=openai_chat.sniff),
    TranscriptFormat("swe-agent", swe_agent.read, 4,
                     "a SWE-agent .traj JSON document with a trajectory list",
                     record=swe_agent.sniff, document=swe_agent.sniff),
    TranscriptFormat("openhands", openhands.read, 5,
                     "an OpenHands event history (a JSON list, JSONL or a history record)",
                     record=openhands.sniff, document=openhands.sniff),
    TranscriptFormat("loopwarden", loopwarden_jsonl.read, 3,
                     'loopwarden JSONL: one {"tool", "args", "result"} call per line',
                     record=loopwarden_jsonl.sniff),
)

FORMATS: tuple[str, ...] = tuple(fmt.name for fmt in _TABLE)
BY_NAME: dict[str, TranscriptFormat] = {fmt.name: fmt for fmt in _TABLE}
_RANKED = sorted(_TABLE, key=lambda fmt: fmt.rank)
HEAD_SNIFFERS: tuple[tuple[str, Callable[[str], bool]], ...] = tuple(
    (fmt.name, fmt.head) for fmt in _RANKED if fmt.head is not None)
RECORD_SNIFFERS: tuple[tuple[str, Callable[[dict[str, Any]], bool]], ...] = tuple(
    (fmt.name, fmt.record) for fmt in _RANKED if fmt.record is not None)
DOCUMENT_SNIFFERS: tuple[tuple[str, Callable[[Any], bool]], ...] = tuple(
    (fmt.name, fmt.document) for fmt in _RANKED if fmt.document is not None)
