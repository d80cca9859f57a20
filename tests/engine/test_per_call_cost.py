"""Per-call cost independent of the history size (issue 24, item 12): the ping-pong detector's
checks look at a bounded tail of the run, never at every record of it.

The cost itself is measured in ``bench/bench_guard.py`` (history 1000 / history 30, printed);
here each check is shown not to touch the records it has no business with: records that
refuse to be iterated, and a veto far back in the run that no alternation can reach.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from loopwarden.engine.detectors import Limits, Prospect
from loopwarden.engine.detectors.pingpong import PING_PONG, _pacing_in_tail
from loopwarden.engine.history import OUTCOME_VETO, CallRecord, SessionState


class _NoCopy(deque[CallRecord]):
    """A run's records that may be indexed from the end but not walked whole."""

    def __iter__(self) -> Iterator[CallRecord]:
        raise AssertionError("the whole run was walked")


def _record(n: int, *, veto: bool = False, pacing: bool = False) -> CallRecord:
    return CallRecord("read", f"h{n}", call_id=f"c{n}", run_id="run",
                      result_hash=None if veto else f"r{n}",
                      outcome_kind=OUTCOME_VETO if veto else None, pacing=pacing)


def test_pacing_in_tail_reads_the_last_two_records_only() -> None:
    records = _NoCopy(_record(n) for n in range(1000))
    assert _pacing_in_tail(records) is False
    records.append(_record(1000, pacing=True))
    assert _pacing_in_tail(records) is True
    records.append(_record(1001))
    assert _pacing_in_tail(records) is True  # the other side of the alternation paces
    assert _pacing_in_tail(_NoCopy([_record(0, pacing=True)])) is True


def test_a_veto_far_back_does_not_make_every_call_measure_ping_pong() -> None:
    # 1,000 records, the oldest a blocked call; then no alternation anywhere. Scanning the whole
    # run for a veto said "maybe" on every repeated call, so every call measured the run.
    state = SessionState()
    state.append(_record(0, veto=True))
    for n in range(1, 1000):
        state.append(_record(n))
    view = state.run_view("run")
    assert view is not None
    repeat = Prospect("read", "h500")  # in the run, but not the alternation's other side
    assert PING_PONG.may_fire(view, repeat, Limits()) is False

    # A veto among the newest records may still shift an alternation: then it says yes.
    state.append(_record(1000, veto=True))
    assert PING_PONG.may_fire(view, repeat, Limits()) is True


def test_a_run_shorter_than_the_alternation_needs_is_ruled_out_at_once() -> None:
    state = SessionState()
    state.append(_record(0, veto=True))
    for n in range(1, 5):
        state.append(_record(n))
    view = state.run_view("run")
    assert view is not None
    # warning 10: an alternation counted at 10 needs 9 records of the run; it holds 5.
    assert PING_PONG.may_fire(view, Prospect("read", "h3"), Limits()) is False
