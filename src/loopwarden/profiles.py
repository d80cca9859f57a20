"""Per-tool knowledge: which calls are polls, which are message sends, which result keys churn,
and (``early`` preset) which calls change state, which only wait, and how long a call waits.

A :class:`ProfileRegistry` maps tool names (and aliases) to immutable :class:`ToolProfile`
records. :data:`default_registry` holds profiles that reproduce OpenClaw's built-in tools; users
add their own instead of forking::

    from loopwarden import profiles
    profiles.register("check_job", poll=True, volatile_keys={"checked_at"})

Registries are copy-on-write: readers take one immutable snapshot, writers publish a new one under
a lock, so lookups from many threads never see a half-applied registration.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from ._lazy_re import lazy_pattern
from .volatile import require_any

__all__ = [
    "MESSAGE_SEND_ACTIONS",
    "MUTATING_NAME_VERBS",
    "SEND_VOLATILE_KEYS",
    "ProfileRegistry",
    "ToolProfile",
    "add",
    "canonical_name",
    "default_registry",
    "get",
    "is_known_poll",
    "is_mutating",
    "is_send_like",
    "mutating_by_name",
    "register",
    "unregister",
]

ArgsPredicate = Callable[[object], bool]
#: How many seconds a call waits before (or while) it does its work; None when it does not.
WaitSeconds = Callable[[object], "float | None"]

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

#: Leading verbs of tool names that change state, by the MCP naming convention
#: (``create_issue``, ``updateRecord``, ``mcp__fs__write_file``); used for tools without a profile.
MUTATING_NAME_VERBS: Final = frozenset(
    {
        "add", "append", "apply", "book", "cancel", "create", "delete", "edit", "insert", "modify",
        "move", "patch", "put", "remove", "rename", "replace", "save", "set", "update", "upload",
        "write",
    }
)
# The module's patterns compile on first use (loopwarden._lazy_re): most calls run none.
_NAME_VERB = lazy_pattern(r"^([a-z]+)(?:[_\-.]|(?=[A-Z])|$)")

# A wait longer than a day is not pacing but a wrong unit or a garbled argument.
_MAX_WAIT_SECONDS: Final = 86_400.0

# Built-in outcome projections, implemented in loopwarden.fingerprint.outcomes (PROJECTIONS).
PROJECTION_EXEC: Final = "exec"
PROJECTION_PROCESS: Final = "process"
PROJECTION_WRITE: Final = "write"


@dataclass(frozen=True, slots=True)
class ToolProfile:
    """What loopwarden knows about one tool.

    ``poll`` and ``send_like`` are either constants or predicates over the call's arguments.
    ``volatile_keys`` are result keys ignored (at any depth) when hashing outcomes.
    ``poll_critical_at_warning`` makes a known-poll loop critical at the warning threshold
    (OpenClaw's ``wait``). ``mask_volatile`` forces masking of volatile spans (timestamps,
    durations, ids, pids) in this tool's outcomes on (``True``) or off (``False``) whatever the
    preset; ``None`` lets the preset decide. ``volatile_patterns`` are extra regular expressions
    whose matches in this tool's outcomes are ignored. :attr:`projection` (read-only) names a
    built-in outcome projection (``exec``, ``process``, ``write``); it is set through the
    internal ``_projection`` field and kept when a profile is re-registered.

    Progress knowledge, used by the ``early`` preset only: ``mutating`` (a constant or a
    predicate over the arguments) says the call changes state (a file edit, a browser click), so
    a repeat of another call after it is a new experiment rather than a replay. ``pacing`` says
    the call only waits (``sleep 30``): it is never loop evidence on its own. ``wait_seconds``
    tells how long a call waits (a pacing call's sleep, a poll's own timeout), which stretches
    the interval between the polls around it.
    """

    name: str
    poll: bool | ArgsPredicate = False
    send_like: bool | ArgsPredicate = False
    volatile_keys: frozenset[str] = frozenset()
    aliases: tuple[str, ...] = ()
    poll_critical_at_warning: bool = False
    mask_volatile: bool | None = None
    volatile_patterns: tuple[re.Pattern[str], ...] = ()
    mutating: bool | ArgsPredicate = False
    pacing: bool | ArgsPredicate = False
    wait_seconds: WaitSeconds | None = None
    _projection: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"tool profile name must be a non-empty string, got {self.name!r}")
        # Accept any iterable from callers but store hashable, immutable forms.
        object.__setattr__(self, "volatile_keys", _key_set(self.volatile_keys))
        object.__setattr__(self, "aliases", _alias_tuple(self.name, self.aliases))
        object.__setattr__(self, "volatile_patterns", _patterns(self.volatile_patterns))

    @property
    def projection(self) -> str | None:
        """The built-in outcome projection this tool's results are hashed by, or None."""
        return self._projection

    def is_poll(self, args: object) -> bool:
        return _evaluate(self.poll, args)

    def is_send_like(self, args: object) -> bool:
        return _evaluate(self.send_like, args)

    def is_mutating(self, args: object) -> bool:
        return _evaluate(self.mutating, args)

    def is_pacing(self, args: object) -> bool:
        return _evaluate(self.pacing, args)

    def waits(self, args: object) -> float:
        """Seconds the call waits (0 when unknown or none)."""
        if self.wait_seconds is None:
            return 0.0
        try:
            seconds = self.wait_seconds(args)
        except Exception:
            return 0.0  # a faulty user function must not crash the guarded agent
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            return 0.0
        return float(seconds) if 0 < seconds < _MAX_WAIT_SECONDS else 0.0


def _patterns(patterns: Iterable[str | re.Pattern[str]]) -> tuple[re.Pattern[str], ...]:
    if isinstance(patterns, (str, re.Pattern)):
        patterns = (patterns,)
    return tuple(p if isinstance(p, re.Pattern) else re.compile(p) for p in patterns)


def _evaluate(flag: bool | ArgsPredicate, args: object) -> bool:
    if not callable(flag):
        return bool(flag)
    try:
        return bool(flag(args))
    except Exception:
        # A faulty user predicate must not crash the agent loop it is guarding.
        return False


def _key_set(keys: Iterable[str]) -> frozenset[str]:
    if isinstance(keys, str):
        return frozenset((keys,))
    result = frozenset(keys)
    for key in result:
        if not isinstance(key, str):
            raise TypeError(f"volatile keys must be strings, got {key!r}")
    return result


def _alias_tuple(name: str, aliases: Iterable[str]) -> tuple[str, ...]:
    if isinstance(aliases, str):
        aliases = (aliases,)
    result: list[str] = []
    for alias in aliases:
        if not isinstance(alias, str) or not alias:
            raise ValueError(f"tool alias must be a non-empty string, got {alias!r}")
        if alias != name and alias not in result:
            result.append(alias)
    return tuple(result)


class _Snapshot:
    """One published state of a registry, never changed after publication. (A plain class: a
    dataclass costs a millisecond to create, at every import of this module.)"""

    __slots__ = ("lookup", "profiles")

    def __init__(self, profiles: Mapping[str, ToolProfile],
                 lookup: Mapping[str, ToolProfile]) -> None:
        self.profiles = profiles  # canonical name -> profile
        self.lookup = lookup  # canonical name or alias -> profile


class ProfileRegistry:
    """A thread-safe, copy-on-write map from tool names and aliases to :class:`ToolProfile`."""

    snapshot: object
    """An immutable token of the current profiles: a new object after every change, so callers
    can cache what they derived from the profiles against it. (An attribute, not a property:
    the detector reads it on every call.)"""

    def __init__(self, profiles: Iterable[ToolProfile] = ()) -> None:
        self._lock = threading.Lock()
        # One snapshot for all of them: publishing one per profile is quadratic, and the
        # default registry is built on every import (every Claude Code hook call).
        installed: dict[str, ToolProfile] = {}
        for profile in profiles:
            _install(installed, profile)
        self._publish(_build_snapshot(installed))

    def register(
        self,
        name: str,
        *,
        poll: bool | ArgsPredicate = False,
        send_like: bool | ArgsPredicate = False,
        volatile_keys: Iterable[str] = (),
        aliases: Iterable[str] = (),
        poll_critical_at_warning: bool = False,
        mask_volatile: bool | None = None,
        volatile_patterns: Iterable[str | re.Pattern[str]] = (),
        mutating: bool | ArgsPredicate = False,
        pacing: bool | ArgsPredicate = False,
        wait_seconds: WaitSeconds | None = None,
    ) -> ToolProfile:
        """Create (or replace) the profile of ``name`` and return it."""
        profile = ToolProfile(
            name=name,
            poll=poll,
            send_like=send_like,
            volatile_keys=_key_set(volatile_keys),
            aliases=(aliases,) if isinstance(aliases, str) else tuple(aliases),
            poll_critical_at_warning=poll_critical_at_warning,
            mask_volatile=mask_volatile,
            volatile_patterns=_patterns(volatile_patterns),
            mutating=mutating,
            pacing=pacing,
            wait_seconds=wait_seconds,
        )
        return self.add(profile)

    def add(self, profile: ToolProfile) -> ToolProfile:
        """Install ``profile``; the last registration of a name or alias wins.

        An alias may not shadow another profile's own name (``ValueError``). Re-registering a
        built-in keeps its outcome projection, so ``register("exec", volatile_keys=...)`` still
        hashes exec results by status.
        """
        with self._lock:
            profiles = dict(self._snapshot.profiles)
            profile = _install(profiles, profile)
            self._publish(_build_snapshot(profiles))
            return profile

    def unregister(self, tool_name: str) -> ToolProfile | None:
        """Remove the profile reached by ``tool_name`` (name or alias) and return it."""
        with self._lock:
            profile = self._snapshot.lookup.get(tool_name)
            if profile is None:
                return None
            profiles = dict(self._snapshot.profiles)
            del profiles[profile.name]
            self._publish(_build_snapshot(profiles))
            return profile

    def _publish(self, snapshot: _Snapshot) -> None:
        self._snapshot = self.snapshot = snapshot

    def get(self, tool_name: str) -> ToolProfile | None:
        """The profile of a tool name or alias. An MCP-style namespaced name
        (``mcp__server__tool``, ``server:tool``) falls back to the profile of its bare tool
        name, so ``register("check_job", poll=True)`` also covers ``mcp__jobs__check_job``."""
        lookup = self._snapshot.lookup
        profile = lookup.get(tool_name)
        if profile is None and ("__" in tool_name or ":" in tool_name):
            bare = bare_tool_name(tool_name)
            if bare != tool_name:
                profile = lookup.get(bare)
        return profile

    def canonical_name(self, tool_name: str) -> str:
        """Aliases map to their tool (``bash`` → ``exec``); a namespaced name stays itself."""
        profile = self._snapshot.lookup.get(tool_name)
        return tool_name if profile is None else profile.name

    def is_known_poll(self, tool_name: str, args: object) -> bool:
        profile = self.get(tool_name)
        return profile is not None and profile.is_poll(args)

    def is_send_like(self, tool_name: str, args: object) -> bool:
        profile = self.get(tool_name)
        return profile is not None and profile.is_send_like(args)

    def is_mutating(self, tool_name: str, args: object) -> bool:
        """Whether the call changes state: its profile says so, or (no profile) its name follows
        the MCP verb convention (``create_issue``, ``mcp__fs__write_file``)."""
        profile = self.get(tool_name)
        if profile is None:
            return mutating_by_name(tool_name)
        return profile.is_mutating(args)

    def names(self) -> tuple[str, ...]:
        """Canonical names of every registered profile, sorted."""
        return tuple(sorted(self._snapshot.profiles))

    def copy(self) -> ProfileRegistry:
        """An independent registry starting from this one's profiles (e.g. per guard)."""
        clone = ProfileRegistry()
        # Snapshots are never mutated after publication, so sharing one is safe.
        clone._publish(self._snapshot)
        return clone

    def __contains__(self, tool_name: object) -> bool:
        return isinstance(tool_name, str) and tool_name in self._snapshot.lookup

    def __len__(self) -> int:
        return len(self._snapshot.profiles)

    def __repr__(self) -> str:
        return f"ProfileRegistry({list(self.names())!r})"


def _install(profiles: dict[str, ToolProfile], profile: ToolProfile) -> ToolProfile:
    """Put ``profile`` into ``profiles`` as :meth:`ProfileRegistry.add` describes; returns the
    profile installed (with the previous projection, if it had none)."""
    previous = profiles.get(profile.name)
    if previous is not None and profile.projection is None:
        profile = dataclasses.replace(profile, _projection=previous.projection)
    for alias in profile.aliases:
        owner = profiles.get(alias)
        if owner is not None and owner.name != profile.name:
            raise ValueError(f"alias {alias!r} is already the name of a registered tool")
    profiles[profile.name] = profile
    _release_names(profiles, profile)
    return profile


def _release_names(profiles: dict[str, ToolProfile], new: ToolProfile) -> None:
    """Take ``new``'s name and aliases away from any other profile that still claims them."""
    claimed = {new.name, *new.aliases}
    for other_name, other in list(profiles.items()):
        if other_name == new.name or not other.aliases:
            continue
        kept = tuple(alias for alias in other.aliases if alias not in claimed)
        if kept != other.aliases:
            profiles[other_name] = dataclasses.replace(other, aliases=kept)


def _build_snapshot(profiles: dict[str, ToolProfile]) -> _Snapshot:
    lookup: dict[str, ToolProfile] = {}
    for profile in profiles.values():
        for alias in profile.aliases:
            lookup[alias] = profile
    # Own names win over any stale alias entry.
    lookup.update(profiles)
    return _Snapshot(profiles=profiles, lookup=lookup)


def bare_tool_name(tool_name: str) -> str:
    """``mcp__server__tool`` → ``tool``; ``server:tool`` → ``tool``; others unchanged."""
    if tool_name.startswith("mcp__"):
        return tool_name.rsplit("__", 1)[-1]
    if ":" in tool_name:
        return tool_name.rsplit(":", 1)[-1]
    return tool_name


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


def mutating_by_name(tool_name: str) -> bool:
    """Whether a tool's (bare) name starts with a state-changing verb (``delete_file``)."""
    match = _NAME_VERB().match(bare_tool_name(tool_name))
    return match is not None and match.group(1).lower() in MUTATING_NAME_VERBS


# -- shells: which commands change files, which only wait ----------------------------------------

_SHELL_WRAPPERS: Final = frozenset({"bash", "sh", "zsh", "-c", "-lc", "-l", "/bin/bash", "/bin/sh"})
_DURATION_FACTORS: Final = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_SLEEP = r"sleep\s+(\d+(?:\.\d+)?)([smhd]?)"
_ONLY_SLEEPS = lazy_pattern(rf"\s*(?:{_SLEEP}\s*(?:&&|;)?\s*)+")
_LEADING_SLEEP = lazy_pattern(rf"\s*{_SLEEP}\s*(?:&&|;)")
_SLEEPS = lazy_pattern(_SLEEP)
# Conservative on purpose: only commands that plainly write files. A missed mutation costs what
# loopwarden did before (a repeat counts); a false one would hide a real loop.
_FILE_COMMANDS = (
    r"rm|mv|cp|mkdir|rmdir|touch|chmod|chown|ln|tee|truncate|patch|unzip|install"
    r"|sed\s+(?:-\w+\s+)*-i|perl\s+(?:-\w+\s+)*-i"
    r"|git\s+(?:add|commit|checkout|switch|restore|reset|merge|rebase|apply|am|cherry-pick"
    r"|stash|pull|clone|rm|mv|init)"
    r"|(?:npm|pnpm|yarn|bun)\s+(?:install|i|add|remove|uninstall|ci)"
    r"|(?:python3?\s+-m\s+)?pip3?\s+(?:install|uninstall)|uv\s+(?:add|remove|sync|pip\s+install)"
    r"|cargo\s+(?:add|install)|go\s+(?:get|mod\s+tidy)"
)
_FILE_COMMAND = lazy_pattern(rf"(?:^|&&|\|\||[;|(`]|\$\()\s*(?:sudo\s+)?(?:{_FILE_COMMANDS})\b")
# `> file` and `>> file`, but not `2>&1`, `>/dev/null` or a comparison inside quotes-free tests.
_REDIRECT = lazy_pattern(r"(?<![0-9&>=<-])>>?\s*(?!&|/dev/null\b)[\w./~\"'$-]")


def _command(args: object) -> str | None:
    """The command line of a shell call (``command`` or ``cmd``, a string or an argv list)."""
    if not isinstance(args, Mapping):
        return None
    command = args.get("command", args.get("cmd"))
    if isinstance(command, str):
        return command
    if isinstance(command, (list, tuple)) and all(isinstance(part, str) for part in command):
        parts = list(command)
        while len(parts) > 1 and parts[0] in _SHELL_WRAPPERS:
            parts.pop(0)
        return " ".join(parts)
    return None


def _seconds(number: str, unit: str) -> float:
    return float(number) * _DURATION_FACTORS[unit]


def shell_changes_files(args: object) -> bool:
    command = _command(args)
    return command is not None and bool(
        _FILE_COMMAND().search(command) or _REDIRECT().search(command))


def shell_only_sleeps(args: object) -> bool:
    command = _command(args)
    return command is not None and _ONLY_SLEEPS().fullmatch(command) is not None


def shell_wait_seconds(args: object) -> float | None:
    """The sleeps a command does before its work (``sleep 30 && tail log``), or all of them."""
    command = _command(args)
    if command is None:
        return None
    if _ONLY_SLEEPS().fullmatch(command):
        return sum(_seconds(n, u) for n, u in _SLEEPS().findall(command)) or None
    total = 0.0
    position = 0
    leading_sleep = _LEADING_SLEEP()
    while (match := leading_sleep.match(command, position)) is not None:
        total += _seconds(match.group(1), match.group(2))
        position = match.end()
    return total or None


def _shell(name: str, **kwargs: object) -> ToolProfile:
    return ToolProfile(name, mutating=shell_changes_files, pacing=shell_only_sleeps,
                       wait_seconds=shell_wait_seconds, **kwargs)  # type: ignore[arg-type]


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


default_registry: Final = ProfileRegistry(_builtin_profiles())

register = default_registry.register
add = default_registry.add
unregister = default_registry.unregister
get = default_registry.get
canonical_name = default_registry.canonical_name
is_known_poll = default_registry.is_known_poll
is_send_like = default_registry.is_send_like
is_mutating = default_registry.is_mutating
