"""Claude Code session JSONL (``~/.claude/projects/<project>/<session>.jsonl``).

One record per line. ``{"type": "assistant", "message": {"role": "assistant", "content":
[...]}}`` records carry ``tool_use`` blocks and ``{"type": "user", "message": {...}}`` records
carry the ``tool_result`` blocks or a typed prompt; other record types (``summary``,
``system``, ``file-history-snapshot``, …) are skipped. Pairing, errors and runs follow
:mod:`loopwarden.offline.transcripts._anthropic`, so this reader and the Markdown export reader give
the same calls for the same session.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwarden.base.types import ToolCall
from loopwarden.offline.transcripts._anthropic import Conversation
from loopwarden.offline.transcripts._common import Reporter, iter_json_lines

_SESSION_KEYS = ("uuid", "parentUuid", "sessionId", "leafUuid")


def sniff(record: dict[str, Any]) -> bool:
    """True when one parsed JSONL record looks like a Claude Code session record."""
    kind = record.get("type")
    if not isinstance(kind, str):
        return False
    if kind == "file-history-snapshot":
        return "snapshot" in record
    return any(key in record for key in _SESSION_KEYS)


def read(path: Path, report: Reporter) -> Iterator[ToolCall]:
    """The tool calls of a Claude Code session file, in call order; problems go to ``report``."""
    conversation = Conversation(report)
    for lineno, record in iter_json_lines(path, report):
        kind = record.get("type")
        if kind != "assistant" and kind != "user":
            continue
        message = record.get("message")
        if type(message) is not dict:
            report(lineno, f"{kind} record without a message object")
            continue
        if kind == "assistant":
            conversation.assistant(message.get("content"), lineno)
        else:
            conversation.user(message.get("content"), lineno)
            yield from conversation.queue.ready()
    yield from conversation.finish()
