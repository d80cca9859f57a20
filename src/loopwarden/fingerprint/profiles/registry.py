"""The profile types: :class:`ToolProfile` (what loopwarden knows about one tool) and
:class:`ProfileRegistry` (a copy-on-write map from tool names and aliases to profiles), with the
tool-name rules the registry applies to tools it has no profile for.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from ...base.lazy_re import lazy_pattern

ArgsPredicate = Callable[[object], bool]
#: How many seconds a call waits before (or while) it does its work; None when it does not.
WaitSeconds = Callable[[object], "float | None"]

#: Leading verbs of tool names that change state, by the MCP naming convention
#: (``create_issue``, ``updateRecord``, ``mcp__fs__write_file``); used for tools without a profile.
MUTATING_NAME_VERBS: Final = frozenset(
    {
        "add", "append", "apply", "book", "cancel", "create", "delete", "edit", "insert", "modify",
        "move", "patch", "put", "remove", "rename", "replace", "save", "set", "update", "upload",
        "write",
    }
)
# Compiled on first use (loopwarden.base.lazy_re): most calls run no pattern of this package.
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
        """Whether this call (by its arguments) polls for progress."""
        return _evaluate(self.poll, args)

    def is_send_like(self, args: object) -> bool:
        """Whether this call sends a message (its result carries fresh delivery ids)."""
        return _evaluate(self.send_like, args)

    def is_mutating(self, args: object) -> bool:
        """Whether this call changes state (``early`` preset)."""
        return _evaluate(self.mutating, args)

    def is_pacing(self, args: object) -> bool:
        """Whether this call only waits (``early`` preset)."""
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
        """Whether the call is a poll by its tool's profile (False for tools without one)."""
        profile = self.get(tool_name)
        return profile is not None and profile.is_poll(args)

    def is_send_like(self, tool_name: str, args: object) -> bool:
        """Whether the call is a message send by its tool's profile (False without one)."""
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


def mutating_by_name(tool_name: str) -> bool:
    """Whether a tool's (bare) name starts with a state-changing verb (``delete_file``)."""
    match = _NAME_VERB().match(bare_tool_name(tool_name))
    return match is not None and match.group(1).lower() in MUTATING_NAME_VERBS

