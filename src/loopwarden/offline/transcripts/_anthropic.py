"""Anthropic content blocks, shared by the Claude Code JSONL and Markdown readers.

Assistant messages carry ``tool_use`` blocks (``id``, ``name``, ``input``); the results come
back in later user messages as ``tool_result`` blocks (``tool_use_id``, ``content``,
``is_error``).

Rules:
- ``result`` is the ``tool_result`` block's ``content`` as written (a string or a list of
  blocks); ``is_error: true`` also sets ``error`` to its text.
- A user message that carries no ``tool_result`` block is a prompt and opens a new run
  (``run_id="u<n>"``, ``"u0"`` before the first prompt, as in a sub-agent's transcript).
- A ``tool_result`` whose ``tool_use`` is not in the transcript has no tool name; it is
  reported and dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from loopwarden.base.types import ToolCall
from loopwarden.offline.transcripts._common import CallQueue, Reporter

from ...base.text import content_text


class Conversation:
    """Turns Anthropic messages, in transcript order, into paired tool calls.

    Feed it messages with :meth:`assistant` and :meth:`user`; settled calls come out of
    ``queue.ready()`` (only a user message can settle one) and the rest of ``finish()``.
    """

    __slots__ = ("queue", "report", "run_id", "user_turns")

    def __init__(self, report: Reporter) -> None:
        self.queue = CallQueue()
        self.report = report
        self.user_turns = 0
        self.run_id = "u0"

    def assistant(self, content: Any, lineno: int | None) -> None:
        """Queue the ``tool_use`` blocks of an assistant message's content."""
        if type(content) is not list:
            return
        for block in content:
            if type(block) is dict and block.get("type") == "tool_use":
                self._add_call(block, lineno)

    def user(self, content: Any, lineno: int | None) -> None:
        """Settle calls with the message's ``tool_result`` blocks; a message without any is a
        prompt and starts a new run."""
        prompt = True
        if type(content) is list:
            for block in content:
                if type(block) is dict and block.get("type") == "tool_result":
                    prompt = False
                    self._settle(block, lineno)
        if prompt:
            self.user_turns += 1
            self.run_id = f"u{self.user_turns}"

    def finish(self) -> Iterator[ToolCall]:
        """The calls still held at the end of the transcript, results or not, in call order."""
        yield from self.queue.drain()

    def _add_call(self, block: dict[str, Any], lineno: int | None) -> None:
        name = block.get("name")
        if not name or type(name) is not str:
            self.report(lineno, "tool_use block without a tool name")
            return
        call_id = block.get("id")
        args = block.get("input")
        self.queue.add(
            ToolCall(
                name,
                {} if args is None else args,
                call_id if type(call_id) is str else None,
                self.run_id,
            )
        )

    def _settle(self, block: dict[str, Any], lineno: int | None) -> None:
        content = block.get("content")
        error = (content_text(content) or "error") if block.get("is_error") is True else None
        call_id = block.get("tool_use_id")
        if not self.queue.settle(call_id if type(call_id) is str else None, content, error):
            self.report(lineno, f"tool_result for unknown tool_use id {call_id!r}")
