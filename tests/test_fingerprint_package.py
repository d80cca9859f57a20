"""The fingerprint package's seams (issue #12): the projection registry, and the layering fixes
(one outcome-kind constant, a public projection on profiles, the detector's own registry for the
write-target hash)."""

from __future__ import annotations

from loopwarden import profiles
from loopwarden.fingerprint import outcome_of
from loopwarden.fingerprint.outcomes import PROJECTIONS


def test_every_builtin_projection_has_a_registry_entry() -> None:
    named = {profiles.PROJECTION_EXEC, profiles.PROJECTION_PROCESS, profiles.PROJECTION_WRITE}
    assert set(PROJECTIONS) == named
    used = {p._projection for p in map(profiles.default_registry.get,
                                       profiles.default_registry.names())
            if p is not None and p._projection is not None}
    assert used <= set(PROJECTIONS)


def test_registry_entries_project_their_tools() -> None:
    # exec hashes by status (the tail of a running command), not by every detail field.
    running = {"details": {"status": "running", "tail": "x", "pid": 1}, "content": []}
    other_pid = {"details": {"status": "running", "tail": "x", "pid": 2}, "content": []}
    assert outcome_of("exec", {}, running) == outcome_of("exec", {}, other_pid)
    assert outcome_of("check_job", {}, running) != outcome_of("check_job", {}, other_pid)
    changed = {"details": {"changed": True}, "content": []}
    assert outcome_of("write", {"path": "a"}, changed).outcome_kind == "write-mutation"
