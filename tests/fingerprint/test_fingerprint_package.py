"""The fingerprint package's seams (issue #12): the projection registry, and the layering fixes
(one outcome-kind constant, a public projection on profiles, the detector's own registry for the
write-target hash)."""

from __future__ import annotations

import pytest

from loopwarden import LoopDetectionConfig, profiles
from loopwarden.engine import LoopDetector
from loopwarden.fingerprint import mutation_target_hash, outcome_of
from loopwarden.fingerprint.outcomes import PROJECTIONS
from loopwarden.fingerprint.profiles import ProfileRegistry, ToolProfile


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


def test_history_and_the_hashes_share_one_spelling_of_each_outcome_kind() -> None:
    from loopwarden.engine import history
    from loopwarden.fingerprint import outcomes

    assert history.OUTCOME_VETO is outcomes.OUTCOME_VETO
    assert history.OUTCOME_TERMINAL_EXEC_FAILURE is outcomes.OUTCOME_TERMINAL_EXEC_FAILURE
    assert history.OUTCOME_WRITE_MUTATION is outcomes.OUTCOME_WRITE_MUTATION
    veto = {"details": {"status": "blocked", "deniedReason": "tool-loop"}}
    assert outcome_of("x", {}, veto).outcome_kind == history.OUTCOME_VETO


def test_a_profile_exposes_its_projection_read_only() -> None:
    exec_profile = profiles.default_registry.get("exec")
    assert exec_profile is not None and exec_profile.projection == profiles.PROJECTION_EXEC
    assert profiles.ToolProfile("mine").projection is None
    mine = profiles.ToolProfile("mine", _projection=profiles.PROJECTION_WRITE)
    assert mine.projection == profiles.PROJECTION_WRITE
    # (A frozen slots dataclass refuses with a TypeError on some Pythons, for any attribute.)
    with pytest.raises((AttributeError, TypeError)):
        mine.projection = None  # type: ignore[misc]
    assert mine.projection == profiles.PROJECTION_WRITE


def test_mutation_target_hash_reads_the_registry_it_is_given() -> None:
    args = {"path": "/tmp/b.md"}
    aliased = ProfileRegistry([ToolProfile("write", mutating=True, aliases=("save",))])
    expected = mutation_target_hash("write", args)
    assert expected is not None
    assert mutation_target_hash("save", args, registry=aliased) == expected
    assert mutation_target_hash("save", args) is None  # the built-ins have no "save"


def test_the_detector_hashes_write_targets_by_its_own_registry() -> None:
    # The global registry is changed so that "write" names another tool there; the detector's
    # own registry still has "write", so its write calls keep their target hash (it used to be
    # looked up in the global registry and came out None).
    args = {"path": "/tmp/b.md"}
    expected = mutation_target_hash("write", args)
    own = ProfileRegistry([ToolProfile("write", mutating=True)])
    detector = LoopDetector(LoopDetectionConfig(enabled=True), profiles=own)
    original = profiles.default_registry.get("write")
    assert original is not None
    profiles.unregister("write")
    try:
        profiles.register("save", aliases=("write",))
        assert profiles.canonical_name("write") == "save"
        assert detector.fingerprint("write", args).mutation_target_hash == expected
    finally:
        profiles.unregister("save")
        profiles.add(original)
    assert profiles.default_registry.get("write") == original
