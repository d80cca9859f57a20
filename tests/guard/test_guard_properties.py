"""Property tests: recording outcomes and the guard never raise, whatever the agent passes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwarden import MISSING, LoopDetectionConfig, LoopDetector, LoopGuard, SessionState

pytestmark = pytest.mark.slow

leaves = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**70, max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True), st.text(), st.binary(max_size=16),
    st.just(MISSING),
)
values: st.SearchStrategy[Any] = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=5), st.integers(), st.none()), inner, max_size=4),
        st.frozensets(st.one_of(st.integers(), st.text(max_size=3)), max_size=3),
    ),
    max_leaves=20,
)
errors = st.one_of(st.just(MISSING), st.none(), st.text(), values,
                   st.builds(RuntimeError, st.text()), st.builds(ValueError))
tool_names = st.one_of(st.sampled_from(["exec", "bash", "process", "write", "message", "read",
                                        "command_status", "sessions_send", "wait"]), st.text())
configs = st.sampled_from([LoopDetectionConfig(enabled=True), LoopDetectionConfig(),
                           LoopDetectionConfig(enabled=True, preset="early")])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool=tool_names, args=values, result=values, error=errors, config=configs,
       call_id=st.one_of(st.none(), st.text(max_size=4)), run=st.one_of(st.none(), st.text(max_size=3)))
def test_record_outcome_never_raises(tool: str, args: Any, result: Any, error: Any,
                                     config: LoopDetectionConfig, call_id: str | None,
                                     run: str | None) -> None:
    detector = LoopDetector(config)
    state = SessionState()
    for _ in range(3):
        detector.record_call(state, tool, args, call_id=call_id, run_id=run)
        detector.record_outcome(state, tool, args, result=result, error=error, call_id=call_id,
                                run_id=run)
        detector.detect(state, tool, args, run_id=run)
    assert len(state.history) <= config.history_size


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(st.tuples(tool_names, values, values, errors), min_size=1, max_size=25),
       config=configs)
def test_guard_never_raises(calls: list[tuple[str, Any, Any, Any]], config: LoopDetectionConfig) -> None:
    guard = LoopGuard(config)
    guard.sinks.clear()
    for i, (tool, args, result, error) in enumerate(calls):
        v = guard.before_tool_call(tool, args, session="p", run_id="r", call_id=str(i))
        assert v.action in ("allow", "warn", "block")
        guard.after_tool_call(tool, args, session="p", run_id="r", call_id=str(i), result=result,
                              error=error)
        v.annotate(result)
    assert guard.stats.internal_errors == 0
