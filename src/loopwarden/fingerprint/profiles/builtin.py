"""The built-in profiles: OpenClaw's tools (spec §c.6: polls, message sends and their
volatile keys, the process and browser tools) and the other agents' tools loopwarden knows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from ..volatile import require_any
from .registry import PROJECTION_EXEC, PROJECTION_PROCESS, PROJECTION_WRITE, ToolProfile
from .shell import _shell

#: ``message``/channel-tool actions whose results carry fresh delivery ids (spec §c.6).
MESSAGE_SEND_ACTIONS: Final = frozenset(
    {
        "send",
        "broadcast",
        "reply",
        "thread-reply",
        "sendWithEffect",
        "sendAttachment",
        "upload-file",
        "sticker",
        "poll",
    }
)

#: Keys dropped (recursively) from send-like results before hashing (spec §c.6).
SEND_VOLATILE_KEYS: Final = frozenset(
    {
        "messageId",
        "message_id",
        "messageIds",
        "platformMessageId",
        "platformMessageIds",
        "fileId",
        "file_id",
        "fileKey",
        "pollId",
        "poll_id",
        "receipt",
        "runId",
        "idempotencyKey",
        "ts",
        "timestamp",
        "sentAt",
        "deliveredAt",
        "createdAt",
    }
)

# OpenClaw docks one tool per messaging channel; each channel's send recogniser accepts the
# tool's send actions (or a bare send without an action).
_CHANNEL_TOOLS: Final = (
    "telegram",
    "discord",
    "slack",
    "whatsapp",
    "signal",
    "feishu",
    "line",
    "imessage",
    "matrix",
    "msteams",
    "googlechat",
    "mattermost",
)


def _action(args: object) -> object:
    return args.get("action") if isinstance(args, Mapping) else None


def _process_poll(args: object) -> bool:
    return _action(args) in ("poll", "log")


def _message_send(args: object) -> bool:
    action = _action(args)
    return isinstance(action, str) and action in MESSAGE_SEND_ACTIONS


def _channel_send(args: object) -> bool:
    if not isinstance(args, Mapping):
        return False
    action = args.get("action")
    return action is None or (isinstance(action, str) and action in MESSAGE_SEND_ACTIONS)



# -- OpenClaw's process and browser tools ----------------------------------------------------------

_PROCESS_MUTATIONS: Final = frozenset({"write", "send-keys", "submit", "paste", "kill"})


def _process_mutating(args: object) -> bool:
    return _action(args) in _PROCESS_MUTATIONS


def _millis(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return float(value) / 1000


def _process_wait(args: object) -> float | None:
    # A poll with a timeout blocks until output arrives or the timeout passes.
    return _millis(args.get("timeout")) if isinstance(args, Mapping) else None


_BROWSER_READS: Final = frozenset(
    {"snapshot", "screenshot", "status", "tabs", "console", "pdf", "profiles"})


def _browser_kind(args: Mapping[str, object]) -> object:
    request = args.get("request")
    if isinstance(request, Mapping) and "kind" in request:
        return request.get("kind")
    return args.get("kind")


def _browser_waits(args: object) -> bool:
    return isinstance(args, Mapping) and args.get("action") in ("act", "wait") and (
        args.get("action") == "wait" or _browser_kind(args) == "wait")


def _browser_mutating(args: object) -> bool:
    if not isinstance(args, Mapping):
        return False
    action = args.get("action")
    return isinstance(action, str) and action not in _BROWSER_READS and not _browser_waits(args)


def _browser_wait_seconds(args: object) -> float | None:
    if not _browser_waits(args):
        return None
    assert isinstance(args, Mapping)
    request = args.get("request")
    source = request if isinstance(request, Mapping) else args
    value = source.get("timeMs", source.get("time_ms", source.get("ms")))
    return _millis(value)


def _editor_mutating(args: object) -> bool:
    # OpenHands / SWE-agent str_replace_editor: every command but `view` changes a file.
    command = args.get("command") if isinstance(args, Mapping) else None
    return isinstance(command, str) and command != "view"


def _stdin_wait(args: object) -> float | None:
    return _millis(args.get("yield_time_ms")) if isinstance(args, Mapping) else None


def _builtin_profiles() -> list[ToolProfile]:
    builtins = [
        _shell("exec", aliases=("bash",), _projection=PROJECTION_EXEC),
        ToolProfile("process", poll=_process_poll, mutating=_process_mutating,
                    wait_seconds=_process_wait, _projection=PROJECTION_PROCESS),
        ToolProfile("command_status", poll=True),
        ToolProfile("wait", poll=True, poll_critical_at_warning=True),
        ToolProfile("write", mutating=True, _projection=PROJECTION_WRITE),
        ToolProfile("edit", mutating=True),
        ToolProfile("apply_patch", mutating=True),
        ToolProfile("browser", mutating=_browser_mutating, pacing=_browser_waits,
                    wait_seconds=_browser_wait_seconds),
        ToolProfile("message", send_like=_message_send),
        ToolProfile("sessions_send", send_like=True),
        # OpenClaw 2026.9.6 treats these as sends too: their fresh message ids are no progress.
        ToolProfile("conversations_send", send_like=True),
        ToolProfile("conversations_turn", send_like=True),
    ]
    builtins.extend(ToolProfile(name, send_like=_channel_send) for name in _CHANNEL_TOOLS)
    builtins.extend(_ecosystem_profiles())
    return builtins


def _empty_stdin(args: object) -> bool:
    chars = args.get("chars") if isinstance(args, Mapping) else None
    return not chars


def _ecosystem_profiles() -> list[ToolProfile]:
    """Tools the OpenClaw spec does not name, active in every preset. Poll outputs carry fresh
    timestamps, elapsed times or job ids on every call, so polls mask volatile spans even under
    the ``openclaw`` preset: otherwise a poll that never progresses never repeats an outcome."""
    keywords = ("with", "shell", "bash", "task", "job")
    background_id = require_any(
        re.compile(rf"(?i)\b(?:{'|'.join(keywords)})[ _]?id:?\s*[\w-]+"),
        (f"{word}{sep}id" for word in keywords for sep in ("", " ", "_")))
    polls = [ToolProfile(name, poll=True, mask_volatile=True)
             for name in ("BashOutput", "TaskOutput", "AgentOutputTool")]
    # Shells mask like every tool under the preset (their outputs are large, so masking them
    # under `openclaw` would cost more than it finds); their polls above always mask.
    shells = [_shell(name) for name in ("shell", "local_shell", "exec_command", "container.exec")]
    return [
        # Claude Code: background shells and sub-agent tasks are read by polling tools.
        *polls,
        _shell("Bash", volatile_patterns=(background_id,)),
        *(ToolProfile(name, mutating=True) for name in ("Edit", "Write", "MultiEdit", "NotebookEdit")),
        # Codex CLI / OpenAI: shell tools report wall time; an empty stdin write is a poll.
        *shells,
        ToolProfile("write_stdin", poll=_empty_stdin, mask_volatile=True,
                    mutating=lambda args: not _empty_stdin(args), wait_seconds=_stdin_wait),
        # OpenHands and SWE-agent.
        _shell("execute_bash"),
        ToolProfile("str_replace_editor", mutating=_editor_mutating),
    ]

