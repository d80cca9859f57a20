"""Claude Code sessions exported to Markdown ("Claude Session Export", full conversation mode).

Layout: a ``# Claude Session Export`` header, then ``## Conversation`` and one section per
message, separated by ``---`` lines, each opened by a heading and a timestamp line::

    ### Assistant
    > 12/1/2025, 2:40:12 PM

    [ {"type": "tool_use", "id": "toolu_…", "name": "Read", "input": {…}} ]

A body is either the raw Anthropic content-block JSON array or plain text (a typed prompt).
Pairing, errors and runs follow :mod:`loopwarden.offline.transcripts._anthropic`. A body that starts
like a block array but is not valid JSON is reported (with the line of its ``###`` header)
and skipped.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from loopwarden.base.types import ToolCall
from loopwarden.offline.transcripts._anthropic import Conversation
from loopwarden.offline.transcripts._common import Reporter, open_regular

_HEADERS = {"### User": "user", "### Assistant": "assistant"}
_SEPARATORS = frozenset({"---", "## Conversation"})
_BLOCK_ARRAY = re.compile(r"\[\s*(\{|\])")


def sniff(head: str) -> bool:
    """True when the start of a file looks like a Claude Session Export."""
    text = head.lstrip("\ufeff \t\r\n")
    if text.startswith("# Claude Session Export"):
        return True
    return "## Conversation" in head and ("\n### User\n" in head or "\n### Assistant\n" in head)


class _Section:
    __slots__ = ("body", "line", "role")

    def __init__(self, role: str, line: int) -> None:
        self.role = role
        self.line = line
        self.body: list[str] = []


def read(path: Path, report: Reporter) -> Iterator[ToolCall]:
    """The tool calls of a Claude Code Markdown export, in call order; problems go to ``report``."""
    conversation = Conversation(report)
    sections = 0
    for section in _sections(path, report):
        sections += 1
        content = _content(section, report)
        if content is None:
            continue
        if section.role == "assistant":
            conversation.assistant(content, section.line)
        else:
            conversation.user(content, section.line)
            yield from conversation.queue.ready()
    if not sections and path.stat().st_size:
        report(None, "no messages found (not a Claude Session Export?)")
    yield from conversation.finish()


def _sections(path: Path, report: Reporter) -> Iterator[_Section]:
    """Split the export into messages.

    A message starts with a ``### User``/``### Assistant`` line that follows a ``---`` rule
    and is followed by a ``> timestamp`` line; the same heading typed inside a prompt is body
    text.
    """
    section: _Section | None = None
    header: tuple[str, int, str] | None = None  # a heading waiting for its timestamp line
    last_text = ""  # last non-blank line
    with io.TextIOWrapper(open_regular(path), encoding="utf-8", errors="replace") as fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.rstrip("\r\n")
            if "\x00" in line:  # a crash's or a preallocation's unwritten space
                report(lineno, "NUL bytes ignored (space never written, e.g. after a crash)")
                line = line.replace("\x00", "")
            if header is not None:
                header_role, start, heading = header
                header = None
                if line.startswith("> "):
                    if section is not None:
                        yield section
                    section = _Section(header_role, start)
                    continue
                if section is not None:
                    section.body.append(heading)
            role = _HEADERS.get(line)
            if role is not None and last_text in _SEPARATORS:
                header = (role, lineno, line)
            elif section is not None:
                section.body.append(line)
            if line.strip():
                last_text = line
    if section is not None:
        if header is not None:
            section.body.append(header[2])
        yield section


def _content(section: _Section, report: Reporter) -> Any:
    """The message's content blocks or prompt text; None when the block JSON is broken."""
    body = section.body
    while body and not body[-1].strip():
        body.pop()
    if body and body[-1] == "---":
        body.pop()
    text = "\n".join(body).strip()
    if not _BLOCK_ARRAY.match(text):
        return text
    try:
        blocks = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        report(section.line, f"{section.role} message is not valid block JSON ({exc.msg})")
        return None
    if isinstance(blocks, list):
        return blocks
    return text
