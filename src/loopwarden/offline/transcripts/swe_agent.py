"""SWE-agent trajectories (``*.traj``): one JSON document with a ``trajectory`` list.

Each step is ``{"action", "observation", "thought", "response", ...}`` where ``action`` is the
command line the agent ran (``open setup.py``, ``edit 4:4\\n...\\nend_of_edit``, ``ls -F``).

Rules:
- ``tool_name`` is the action's first word (``open``, ``edit``, ``python``) and ``args`` is
  ``{"command": <the whole action>}``; ``result`` is the step's ``observation``.
- SWE-agent does not mark failed commands, so ``error`` is always None.
- A trajectory is one task without user turns: ``run_id`` is None.
- Steps with an empty action (format errors, the model's give-up) are not tool calls.
- Old trajectories without ``trajectory`` are read from the ``action`` fields of the assistant
  messages in ``history`` (demonstrations excluded), paired with the next user message as the
  observation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwarden.base.types import MISSING, ToolCall
from loopwarden.offline.transcripts._common import Reporter, load_json_document

from ...base.text import content_text


def sniff(value: Any) -> bool:
    """True when a parsed JSON document is a SWE-agent trajectory."""
    if not isinstance(value, dict):
        return False
    steps = value.get("trajectory")
    if isinstance(steps, list):
        return not steps or (isinstance(steps[0], dict) and "action" in steps[0])
    history = value.get("history")
    return isinstance(history, list) and "info" in value and _history_has_actions(history)


def read(path: Path, report: Reporter) -> Iterator[ToolCall]:
    """The tool calls of a SWE-agent trajectory, one per action; problems go to ``report``."""
    document = load_json_document(path, report)
    if document is MISSING:
        return
    if not isinstance(document, dict):
        report(None, f"expected a trajectory object, got {type(document).__name__}")
        return
    steps = document.get("trajectory")
    if isinstance(steps, list):
        yield from _from_steps(steps, report)
        return
    history = document.get("history")
    if isinstance(history, list):
        yield from _from_history(history, report)
        return
    report(None, "no 'trajectory' or 'history' list")


def _from_steps(steps: list[Any], report: Reporter) -> Iterator[ToolCall]:
    for index, step in enumerate(steps):
        if not isinstance(step, dict):
            report(None, f"trajectory[{index}] is a {type(step).__name__}, not an object")
            continue
        call = _call(step.get("action"), step.get("observation", MISSING))
        if call is not None:
            yield call
        elif "action" in step and not isinstance(step["action"], str):
            report(None, f"trajectory[{index}].action is not a string")


def _from_history(history: list[Any], report: Reporter) -> Iterator[ToolCall]:
    pending: ToolCall | None = None
    for index, message in enumerate(history):
        if not isinstance(message, dict):
            report(None, f"history[{index}] is a {type(message).__name__}, not an object")
            continue
        if message.get("is_demo") is True:
            continue  # demonstrations from the prompt, not this run's calls
        role = message.get("role")
        if role == "assistant" and "action" in message:
            if pending is not None:
                yield pending
            pending = _call(message.get("action"), MISSING)
        elif role == "user" and pending is not None:
            pending.result = content_text(message.get("content"))
            yield pending
            pending = None
    if pending is not None:
        yield pending


def _call(action: Any, observation: Any) -> ToolCall | None:
    if not isinstance(action, str):
        return None
    words = action.split(None, 1)
    if not words:
        return None
    return ToolCall(words[0], {"command": action}, None, None, observation)


def _history_has_actions(history: list[Any]) -> bool:
    return any(
        isinstance(message, dict) and message.get("role") == "assistant" and "action" in message
        for message in history[:20]
    )
