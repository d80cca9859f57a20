"""Streaks over one run's history, walked back from the newest call: unknown-tool repeats
(§d.5), identical no-progress outcomes of one call (§d.3, and ``early``'s progress-aware
variant) and error repeats. The detectors that read them are :mod:`.unknown_tool`,
:mod:`.no_progress` and :mod:`.error_repeat`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...fingerprint.outcomes import OUTCOME_TERMINAL_EXEC_FAILURE
from ..history import CallRecord, SessionState
from .base import Prospect


@dataclass(frozen=True, slots=True)
class Streak:
    """A streak walked back from the newest call: its length, the outcome (or error identity) it
    repeats, the unknown tool's name."""

    count: int = 0
    latest_result_hash: str | None = None
    name: str | None = None
    # ``early``: every interval between the calls was paced (blocks wait for the global
    # breaker), or the caller is backing off / this is a pacing call (no warning either).
    paced: bool = False
    compliant: bool = False


NO_STREAK = Streak()

#: An interval between two polls at least this long (ms) is paced rather than fast: longer than
#: a model's usual turn, so only a deliberate wait (a sleep, a poll timeout) reaches it.
MIN_PACE_MS = 10_000
#: Back-off: the newest intervals reach at least this multiple of the streak's shortest one.
BACKOFF_GROWTH = 1.5
BACKOFF_WINDOW = 3


def unknown_tool_streak(state: SessionState, run: str | None, tool: str) -> Streak:
    """§d.5, keeping unknown-tool evidence across loop vetoes (the newer upstream behaviour)."""
    count = 0
    name: str | None = None
    for r in state.reversed_run(run):
        if r.is_veto:
            continue
        if r.tool_name != tool or r.unknown_tool_name is None:
            break
        if name is None:
            name = r.unknown_tool_name
        elif r.unknown_tool_name != name:
            break
        count += 1
    return Streak(count, None, name) if count else NO_STREAK


def walk_same_args(records: Iterable[CallRecord]) -> Streak:
    """The streak of identical outcomes over ``records`` (one call's, newest first), vetoes
    counted once anchored."""
    streak = 0
    anchor: str | None = None
    pending_vetoes = 0
    for r in records:
        if r.is_veto:
            pending_vetoes += 1
            continue
        if r.result_hash is None:
            continue
        if anchor is None:
            anchor = r.result_hash
            streak = pending_vetoes + 1
            pending_vetoes = 0
            continue
        if r.result_hash != anchor:
            break
        streak += pending_vetoes + 1
        pending_vetoes = 0
    if anchor is None:
        return Streak(pending_vetoes) if pending_vetoes else NO_STREAK
    return Streak(streak, anchor)


def _walk_terminal_failures(records: Iterable[CallRecord], tool: str) -> Streak:
    streak = 0
    anchor: CallRecord | None = None
    pending_vetoes = 0
    for r in records:
        if r.tool_name != tool:
            break
        if r.is_veto:
            pending_vetoes += 1
            continue
        if r.result_hash is None:
            continue
        if r.outcome_kind != OUTCOME_TERMINAL_EXEC_FAILURE:
            break
        if anchor is None:
            anchor = r
            streak = pending_vetoes + 1
            pending_vetoes = 0
            continue
        if r.result_hash != anchor.result_hash:
            same_failure = (
                r.args_hash == anchor.args_hash
                and r.failure_identity_hash is not None
                and r.failure_identity_hash == anchor.failure_identity_hash
            )
            if not same_failure:
                break
        streak += pending_vetoes + 1
        pending_vetoes = 0
    if anchor is None:
        return NO_STREAK
    return Streak(streak, anchor.result_hash)


def no_progress_streak(state: SessionState, run: str | None, call: Prospect) -> Streak:
    """§d.3: identical outcomes of this exact call (vetoes counted once anchored); for ``exec``
    also a contiguous tail of terminal failures across different commands."""
    same = walk_same_args(reversed(state.key_records(run, call.args_hash)))
    if call.tool_name != "exec":
        return same
    terminal = _walk_terminal_failures(state.reversed_run(run), call.tool_name)
    return terminal if terminal.count > same.count else same


def fresh_mutation(state: SessionState, run: str | None, record: CallRecord) -> bool:
    """A completed state change that is not a replay of an earlier identical one in the window
    (writing the same content twice, or clicking the same element again, is a replay)."""
    if not record.mutating or record.result_hash is None:
        return False
    same = state.key_records(run, record.args_hash)
    return not same or same[0] is record


def progress_streak(
    state: SessionState, run: str | None, call: Prospect, core: str | None = None
) -> Streak:
    """``early``'s no-progress streak: identical outcomes of this exact call, newest first,
    ended by a fresh mutation of any other call (a repeat after an edit is a new experiment);
    pacing calls in between stretch the intervals between the calls, which tell fast polling
    from paced polling and back-off. For ``exec`` also the terminal-failure tail (§d.3).
    With ``core``: over every form of the call with that core hash (equivalent arguments)."""
    key = call.args_hash if core is None else core
    count = 0
    anchor: str | None = None
    pending_vetoes = 0
    intervals: list[int] = []  # newest first
    waited = 0  # pacing since the newer counted call
    newer: CallRecord | None = None
    trailing: int | None = None
    for r in state.reversed_run(run):
        if r.args_hash != key and (core is None or r.core_hash != core):
            if fresh_mutation(state, run, r):
                break
            waited += r.wait_ms
            continue
        if r.is_veto:
            pending_vetoes += 1
            continue
        if r.result_hash is None:
            continue
        if anchor is None:
            anchor = r.result_hash
            count = pending_vetoes + 1
            trailing = waited
        elif r.result_hash != anchor:
            break
        else:
            count += pending_vetoes + 1
            assert newer is not None
            intervals.append(max(newer.timestamp - r.timestamp, waited + newer.wait_ms))
        pending_vetoes = 0
        waited = 0
        newer = r
    if anchor is None:
        same = Streak(pending_vetoes) if pending_vetoes else NO_STREAK
    else:
        intervals.reverse()
        if trailing or call.wait_ms:  # a pre-call check: the wait before this call counts too
            intervals.append((trailing or 0) + call.wait_ms)
        paced, backoff = _pacing(intervals)
        same = Streak(count, anchor, None, paced or call.pacing, backoff or call.pacing)
    if call.tool_name != "exec" or core is not None:
        return same
    terminal = _walk_terminal_failures(state.reversed_run(run), call.tool_name)
    return terminal if terminal.count > same.count else same


def _pacing(intervals: list[int]) -> tuple[bool, bool]:
    """(paced, backing off) from the intervals between a streak's calls, oldest first.

    Paced: each of the newest intervals is a deliberate wait (>= :data:`MIN_PACE_MS`).
    Backing off: paced, and the caller now waits clearly longer than it did at its quickest
    (sleeps of 30, 60, 90 s): what the poll warning asks for, so it is compliance."""
    recent = intervals[-BACKOFF_WINDOW:]
    if not recent or min(recent) < MIN_PACE_MS:
        return False, False
    backoff = len(intervals) >= 2 and max(recent) >= BACKOFF_GROWTH * max(min(intervals), 1)
    return True, backoff


def error_streak(
    state: SessionState, run: str | None, tool: str, *, progress: bool = False
) -> Streak:
    """loopwarden's error repeat: the newest outcomes of this tool failing with one masked error,
    whatever the arguments. Other tools' records and pending calls do not interrupt it; with
    ``progress`` (``early``) a fresh mutation by another tool does."""
    count = 0
    identity: str | None = None
    for r in state.reversed_run(run):
        if r.tool_name != tool or r.is_veto or r.pending:
            if progress and r.tool_name != tool and fresh_mutation(state, run, r):
                break
            continue
        if r.error_identity_hash is None:
            break
        if identity is None:
            identity = r.error_identity_hash
        elif r.error_identity_hash != identity:
            break
        count += 1
    return Streak(count, identity) if count else NO_STREAK


def tool_tail_may_reach(records: Sequence[CallRecord], tool: str, n: int) -> bool:
    """Could a streak that walks back from the newest record through records of ``tool`` only
    (argument churn, exec's terminal failures) count ``n``? It needs the newest record to be
    this tool's, pending or with a no-progress flag or an outcome kind, and the record ``n``
    back to be this tool's too."""
    last = records[-1]
    return (
        last.tool_name == tool
        and (last.result_hash is None or last.no_progress or last.outcome_kind is not None)
        and len(records) >= n
        and records[-n].tool_name == tool
    )
