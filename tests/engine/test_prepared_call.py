"""``LoopDetector.prepare`` returns a ``PreparedCall``: the engine's one way in.

The spec's raw-argument forms (``record_call``, ``record_outcome``, ``detect`` with a tool name
and its arguments) and the prepared forms the guard uses must reach the same verdicts and leave
the same history, whatever the run id looks like: the prepared call is where it is normalised.
"""

from __future__ import annotations

from typing import Any

import pytest

from loopwarden import LoopDetectionConfig, LoopDetector, SessionState
from loopwarden.engine import PreparedCall


@pytest.mark.parametrize("raw, normal", [
    (None, None), ("", None), ("   ", None), (" run-1 ", "run-1"), (7, "7"),
])
def test_the_run_id_is_normalised_where_the_call_is_prepared(raw: object, normal: str | None) -> None:
    detector = LoopDetector()
    assert detector.prepare("read", {"path": "a"}, run_id=raw).run_id == normal
    # Whoever builds one: the methods that take a PreparedCall never see a raw run id.
    assert PreparedCall(detector.fingerprint("read", {"path": "a"}), raw).run_id == normal


def test_prepare_fingerprints_as_fingerprint_does() -> None:
    detector = LoopDetector()
    prepared = detector.prepare("exec", {"command": "ls"}, run_id="r")
    assert prepared.prospect == detector.fingerprint("exec", {"command": "ls"})
    assert prepared.args == {"command": "ls"}
    assert prepared == detector.prepare("exec", {"command": "ls"}, run_id=" r ")
    assert prepared != detector.prepare("exec", {"command": "ls"}, run_id="other")


def _history(state: SessionState) -> list[tuple[Any, ...]]:
    return [(r.tool_name, r.args_hash, r.call_id, r.run_id, r.result_hash, r.outcome_kind,
             r.pending) for r in state.history]


@pytest.mark.parametrize("preset", ["openclaw", "early"])
@pytest.mark.parametrize("run_id", [None, " run-1 ", "run-1"])
def test_raw_and_prepared_forms_agree_call_for_call(preset: str, run_id: str | None) -> None:
    config = LoopDetectionConfig(enabled=True, preset=preset)
    raw, prepared = LoopDetector(config), LoopDetector(config)
    raw_state, prepared_state = SessionState(), SessionState()
    # A loop that warns, with a ping-pong and an error in between.
    calls = [("read", {"path": "a"}, "same text", None)] * 12
    calls += [("ls", {"dir": "x"}, "x", None), ("cat", {"f": "y"}, "y", None)] * 6
    calls += [("exec", {"command": "make"}, None, "boom")] * 6
    calls += [("read", {"path": "a"}, "same text", None)] * 12
    raw_verdicts, prepared_verdicts = [], []
    for i, (tool, args, result, error) in enumerate(calls):
        cid = f"c{i}"
        raw_verdicts.append(raw.detect(raw_state, tool, args, run_id=run_id))
        raw.record_call(raw_state, tool, args, call_id=cid, run_id=run_id)
        raw.record_outcome(raw_state, tool, args, result=result, error=error, call_id=cid,
                           run_id=run_id)

        call = prepared.prepare(tool, args, run_id=run_id)
        prepared_verdicts.append(prepared.detect(prepared_state, call))
        prepared.record(prepared_state, call, call_id=cid)
        prepared.record_outcome(prepared_state, call, result=result, error=error, call_id=cid)
    assert raw_verdicts == prepared_verdicts
    assert sum(v is not None for v in raw_verdicts) > 10  # the loops were seen
    assert _history(raw_state) == _history(prepared_state)


def test_recording_a_prepared_call_twice_with_one_id_counts_it_once() -> None:
    detector = LoopDetector()
    state = SessionState()
    call = detector.prepare("read", {"path": "a"}, run_id="r")
    first = detector.record(state, call, call_id="c1")
    assert detector.record(state, call, call_id="c1") is first  # a retried hook
    assert len(state.history) == 1
