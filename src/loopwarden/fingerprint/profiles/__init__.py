"""Per-tool knowledge: which calls are polls, which are message sends, which result keys churn,
and (``early`` preset) which calls change state, which only wait, and how long a call waits.

A :class:`ProfileRegistry` maps tool names (and aliases) to immutable :class:`ToolProfile`
records. :data:`default_registry` holds profiles that reproduce OpenClaw's built-in tools; users
add their own instead of forking::

    from loopwarden import profiles
    profiles.register("check_job", poll=True, volatile_keys={"checked_at"})

Registries are copy-on-write: readers take one immutable snapshot, writers publish a new one under
a lock, so lookups from many threads never see a half-applied registration.

Everything is imported from ``loopwarden.fingerprint.profiles``; the modules inside are not a public API:
:mod:`.registry` (the profile and registry types, tool-name rules), :mod:`.shell` (what a
shell command changes and how long it waits) and :mod:`.builtin` (the built-in profiles).
"""

from __future__ import annotations

from typing import Final

# (`name as name`: names outside __all__ that callers import from here, re-exported.)
from .builtin import _builtin_profiles as _builtin_profiles
from .registry import PROJECTION_EXEC as PROJECTION_EXEC
from .registry import PROJECTION_PROCESS as PROJECTION_PROCESS
from .registry import PROJECTION_WRITE as PROJECTION_WRITE
from .registry import ArgsPredicate as ArgsPredicate
from .registry import ProfileRegistry, ToolProfile, mutating_by_name
from .registry import WaitSeconds as WaitSeconds
from .registry import bare_tool_name as bare_tool_name
from .shell import shell_changes_files as shell_changes_files
from .shell import shell_only_sleeps as shell_only_sleeps
from .shell import shell_wait_seconds as shell_wait_seconds

__all__ = ["ProfileRegistry", "ToolProfile", "default_registry", "mutating_by_name"]

default_registry: Final = ProfileRegistry(_builtin_profiles())

register = default_registry.register
add = default_registry.add
unregister = default_registry.unregister
get = default_registry.get
canonical_name = default_registry.canonical_name
is_known_poll = default_registry.is_known_poll
is_send_like = default_registry.is_send_like
is_mutating = default_registry.is_mutating
