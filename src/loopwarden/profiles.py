"""Per-tool knowledge: which calls are polls, which are message sends, which result keys churn.

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

from .volatile import require_any

__all__ = [
    "MESSAGE_SEND_ACTIONS",
    "SEND_VOLATILE_KEYS",
    "ProfileRegistry",
    "ToolProfile",
    "add",
    "canonical_name",
    "default_registry",
    "get",
    "is_known_poll",
    "is_send_like",
    "register",
    "unregister",
]

ArgsPredicate = Callable[[object], bool]

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

# Built-in outcome projections implemented in loopwarden.fingerprint.
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
    whose matches in this tool's outcomes are ignored. ``_projection`` names a built-in outcome projection (``exec``,
    ``process``, ``write``); it is internal and kept when a profile is re-registered.
    """

    name: str
    poll: bool | ArgsPredicate = False
    send_like: bool | ArgsPredicate = False
    volatile_keys: frozenset[str] = frozenset()
    aliases: tuple[str, ...] = ()
    poll_critical_at_warning: bool = False
    mask_volatile: bool | None = None
    volatile_patterns: tuple[re.Pattern[str], ...] = ()
    _projection: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"tool profile name must be a non-empty string, got {self.name!r}")
        # Accept any iterable from callers but store hashable, immutable forms.
        object.__setattr__(self, "volatile_keys", _key_set(self.volatile_keys))
        object.__setattr__(self, "aliases", _alias_tuple(self.name, self.aliases))
        object.__setattr__(self, "volatile_patterns", _patterns(self.volatile_patterns))

    def is_poll(self, args: object) -> bool:
        return _evaluate(self.poll, args)

    def is_send_like(self, args: object) -> bool:
        return _evaluate(self.send_like, args)


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


@dataclass(frozen=True)
class _Snapshot:
    profiles: Mapping[str, ToolProfile]  # canonical name -> profile
    lookup: Mapping[str, ToolProfile]  # canonical name or alias -> profile


class ProfileRegistry:
    """A thread-safe, copy-on-write map from tool names and aliases to :class:`ToolProfile`."""

    snapshot: object
    """An immutable token of the current profiles: a new object after every change, so callers
    can cache what they derived from the profiles against it. (An attribute, not a property:
    the detector reads it on every call.)"""

    def __init__(self, profiles: Iterable[ToolProfile] = ()) -> None:
        self._lock = threading.Lock()
        self._publish(_Snapshot(profiles={}, lookup={}))
        for profile in profiles:
            self.add(profile)

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
        )
        return self.add(profile)

    def add(self, profile: ToolProfile) -> ToolProfile:
        """Install ``profile``; the last registration of a name or alias wins.

        An alias may not shadow another profile's own name (``ValueError``). Re-registering a
        built-in keeps its outcome projection, so ``register("exec", volatile_keys=...)`` still
        hashes exec results by status.
        """
        with self._lock:
            snapshot = self._snapshot
            profiles = dict(snapshot.profiles)
            previous = profiles.get(profile.name)
            if previous is not None and profile._projection is None:
                profile = dataclasses.replace(profile, _projection=previous._projection)
            for alias in profile.aliases:
                owner = profiles.get(alias)
                if owner is not None and owner.name != profile.name:
                    raise ValueError(f"alias {alias!r} is already the name of a registered tool")
            profiles[profile.name] = profile
            _release_names(profiles, profile)
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


def _release_names(profiles: dict[str, ToolProfile], new: ToolProfile) -> None:
    """Take ``new``'s name and aliases away from any other profile that still claims them."""
    claimed = {new.name, *new.aliases}
    for other_name, other in list(profiles.items()):
        if other_name == new.name:
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


def _builtin_profiles() -> list[ToolProfile]:
    builtins = [
        ToolProfile("exec", aliases=("bash",), _projection=PROJECTION_EXEC),
        ToolProfile("process", poll=_process_poll, _projection=PROJECTION_PROCESS),
        ToolProfile("command_status", poll=True),
        ToolProfile("wait", poll=True, poll_critical_at_warning=True),
        ToolProfile("write", _projection=PROJECTION_WRITE),
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
    shells = [ToolProfile(name) for name in ("shell", "local_shell", "exec_command", "container.exec")]
    return [
        # Claude Code: background shells and sub-agent tasks are read by polling tools.
        *polls,
        ToolProfile("Bash", volatile_patterns=(background_id,)),
        # Codex CLI / OpenAI: shell tools report wall time; an empty stdin write is a poll.
        *shells,
        ToolProfile("write_stdin", poll=_empty_stdin, mask_volatile=True),
    ]


default_registry: Final = ProfileRegistry(_builtin_profiles())

register = default_registry.register
add = default_registry.add
unregister = default_registry.unregister
get = default_registry.get
canonical_name = default_registry.canonical_name
is_known_poll = default_registry.is_known_poll
is_send_like = default_registry.is_send_like
