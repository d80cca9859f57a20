"""Spec §i group 13: the post-compaction guard (92–103), plus its wiring in the guard."""

from __future__ import annotations

import logging

import pytest

from loopwarden import (
    CompactionLoopPersistedError,
    LoopDetectionConfig,
    LoopGuard,
    PostCompactionGuard,
)

X = ("gateway", "gateway:" + "a" * 64, "r1")
Y = ("gateway", "gateway:" + "b" * 64, "r1")


def test_s92_never_armed() -> None:
    v = PostCompactionGuard().observe(*X)
    assert (v.should_abort, v.armed) == (False, False)


def test_s93_window_counts_down() -> None:
    g = PostCompactionGuard(window_size=3)
    g.arm()
    snap = g.snapshot()
    assert (snap.armed, snap.remaining_attempts) == (True, 3)
    remaining = []
    for i in range(3):
        v = g.observe("read", f"read:{i:064d}", f"r{i}")
        remaining.append(v.remaining_attempts)
    assert remaining == [2, 1, 0]
    assert g.snapshot().armed is False


def test_s94_three_identical_abort() -> None:
    g = PostCompactionGuard()
    g.arm()
    verdicts = [g.observe(*X) for _ in range(3)]
    assert [v.should_abort for v in verdicts] == [False, False, True]
    last = verdicts[-1]
    assert (last.detector, last.count, last.tool_name) == ("compaction_loop_persisted", 3, "gateway")
    assert last.message is not None and "after auto-compaction" in last.message


def test_s95_changed_results_or_args_never_abort() -> None:
    g = PostCompactionGuard()
    g.arm()
    assert not any(g.observe("gateway", X[1], f"r{i}").should_abort for i in range(3))
    g.arm()
    assert not any(g.observe("gateway", f"gateway:{i:064d}", "r1").should_abort for i in range(3))


def test_s96_calls_outside_the_window_never_abort() -> None:
    g = PostCompactionGuard(window_size=2)
    g.arm()
    g.observe(*X)
    assert g.observe(*X).should_abort is True
    assert g.snapshot().armed is False
    assert g.observe(*X).should_abort is False


def test_s97_rearm_after_exhaustion() -> None:
    g = PostCompactionGuard()
    g.arm()
    for _ in range(3):
        g.observe(*Y)
    g.arm()
    snap = g.snapshot()
    assert (snap.armed, snap.remaining_attempts) == (True, 3)


def test_s98_disabled_never_aborts() -> None:
    g = PostCompactionGuard(enabled=False)
    g.arm()
    assert not any(g.observe(*X).should_abort for _ in range(3))


def test_s99_different_calls_disarm() -> None:
    g = PostCompactionGuard()
    g.arm()
    for i in range(3):
        g.observe("t", f"t:{i:064d}", "r")
    snap = g.snapshot()
    assert (snap.armed, snap.remaining_attempts) == (False, 0)


def test_s100_window_summary_counts_rereads(caplog: pytest.LogCaptureFixture) -> None:
    g = PostCompactionGuard()
    g.observe("read", "read:report", "r0")
    g.observe("exec", "exec:ls", "r1")
    with caplog.at_level(logging.INFO, logger="loopwarden"):
        g.arm()
        assert not g.observe("read", "read:report", "new").should_abort
        assert not g.observe("read", "read:other", "r2").should_abort
        assert not g.observe("gateway", "gateway:probe", "r3").should_abort
    text = caplog.text
    assert "post-compaction window closed" in text
    assert "toolCalls=3" in text and "preCompactionRepeats=1" in text and "read" in text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_s101_only_fresh_calls(caplog: pytest.LogCaptureFixture) -> None:
    g = PostCompactionGuard()
    with caplog.at_level(logging.INFO, logger="loopwarden"):
        g.arm()
        for i in range(3):
            g.observe("read", f"read:{i}", "r")
    assert "preCompactionRepeats=0" in caplog.text


def test_s102_baseline_keeps_last_16(caplog: pytest.LogCaptureFixture) -> None:
    g = PostCompactionGuard()
    for i in range(20):
        g.observe("read", f"read:old-{i}", "r")
    with caplog.at_level(logging.INFO, logger="loopwarden"):
        g.arm()
        g.observe("read", "read:old-0", "r")
        g.observe("read", "read:old-19", "r")
        g.observe("read", "read:fresh", "r")
    assert "toolCalls=3" in caplog.text and "preCompactionRepeats=1" in caplog.text


def test_s103_error_from_verdict() -> None:
    g = PostCompactionGuard()
    g.arm()
    v = [g.observe(*X) for _ in range(3)][-1]
    err = CompactionLoopPersistedError.from_verdict(v)
    assert err.name == "PostCompactionLoopPersistedError"
    assert err.detector == "compaction_loop_persisted"
    assert (err.count, err.tool_name, str(err)) == (3, "gateway", v.message)


def test_window_size_honoured_and_invalid_falls_back() -> None:
    g = PostCompactionGuard(window_size=5)
    g.arm()
    assert g.snapshot().remaining_attempts == 5
    bad = PostCompactionGuard(window_size=0)
    assert bad.window_size == 3


def test_arm_logs(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="loopwarden"):
        PostCompactionGuard(window_size=4).arm()
    assert "post-compaction guard armed for 4 attempts" in caplog.text


# -- wired through LoopGuard ----------------------------------------------------------------------

ARGS = {"action": "lookup", "path": "x"}
RESULT = {"content": [{"type": "text", "text": "same"}], "details": {}}


def _drive(guard: LoopGuard, n: int) -> None:
    for i in range(n):
        guard.before_tool_call("gateway", ARGS, session="s", run_id="r", call_id=f"c{i}")
        guard.after_tool_call("gateway", ARGS, session="s", run_id="r", call_id=f"c{i}",
                              result=RESULT)


@pytest.mark.parametrize("enabled", [None, True])
def test_guard_aborts_after_compaction_unless_disabled(enabled: bool | None) -> None:
    guard = LoopGuard(LoopDetectionConfig(enabled=enabled))
    _drive(guard, 2)
    guard.compaction_retried(session="s", run_id="r")
    _drive(guard, 2)
    with pytest.raises(CompactionLoopPersistedError) as info:
        _drive(guard, 1)
    assert info.value.count == 3 and info.value.tool_name == "gateway"
    assert guard.stats.aborts == 1


def test_guard_compaction_guard_off_when_disabled() -> None:
    guard = LoopGuard(LoopDetectionConfig(enabled=False))
    guard.compaction_retried(session="s", run_id="r")
    _drive(guard, 5)
    assert guard.stats.aborts == 0


def test_guard_window_size_from_config() -> None:
    guard = LoopGuard(LoopDetectionConfig(post_compaction_guard={"windowSize": 2}))
    guard.compaction_retried(session="s", run_id="r")
    _drive(guard, 1)
    with pytest.raises(CompactionLoopPersistedError):
        _drive(guard, 1)


def test_guard_compaction_is_per_run() -> None:
    guard = LoopGuard()
    guard.compaction_retried(session="s", run_id="other")
    _drive(guard, 5)  # run "r" was never armed: identical calls there never abort
    assert guard.stats.aborts == 0 and len(guard.history("s")) == 5
    with pytest.raises(CompactionLoopPersistedError):
        for i in range(3):
            guard.after_tool_call("gateway", ARGS, session="s", run_id="other",
                                  call_id=f"o{i}", result=RESULT)
