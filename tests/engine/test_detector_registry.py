"""A detector is one module (issue 20, item 1): its rows, switch, log line and liveness live
with it; the precedence list, the switches, the engine's gate and the config are derived from
(or checked against) the registry."""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import loopwarden.engine.detectors as detectors_package
from loopwarden import LoopDetectionConfig
from loopwarden.config import DetectorsConfig
from loopwarden.config.snapshot import NESTED_FIELDS
from loopwarden.engine import LoopDetector
from loopwarden.engine.detectors import (
    DETECTORS,
    RULES,
    SWITCHES,
    Detection,
    Detector,
    Facts,
    Limits,
    Prospect,
    Rule,
    Score,
    evaluate,
)
from loopwarden.engine.detectors import cycle as cycle_module
from loopwarden.engine.history import RunView, SessionState

SRC = Path(detectors_package.__file__).resolve().parents[2]  # src/loopwarden


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "details": {}}


def _drive(detector: LoopDetector, state: SessionState, calls: list[tuple[str, dict[str, Any]]]
           ) -> None:
    for i, (tool, args) in enumerate(calls):
        cid = f"c{len(state.run_records(None))}-{i}"
        detector.record_call(state, tool, args, call_id=cid)
        detector.record_outcome(state, tool, args, result=_text(f"{tool} out"), call_id=cid)


# -- a toy detector: one module's worth of code and one precedence line -----------------------


@dataclass(frozen=True, slots=True)
class Reads:
    count: int = 0


class ReadCounter(Detector[Reads]):
    """Toy: warns when the run holds ``warning`` calls of ``read``, whatever their arguments."""

    __slots__ = ()
    name = "read_counter"
    switches = ("read_counter",)
    empty = Reads()

    def may_fire(self, view: RunView, call: Prospect, limits: Limits) -> bool:
        return call.tool_name == "read"

    def measure(self, state: SessionState, run: str | None, call: Prospect,
                limits: Limits) -> Reads:
        return Reads(1 + sum(r.tool_name == "read" for r in state.run_records(run)))

    def score(self, facts: Facts, limits: Limits) -> Score:
        return Score(warning=facts[self].count)


READ_COUNTER = ReadCounter()
TOY_WARNING = Rule(
    READ_COUNTER, "read_counter", "warning",
    lambda f, lim: f[READ_COUNTER].count >= lim.warning,
    lambda f, _: f[READ_COUNTER].count,
    lambda f, n: f"WARNING: {n} reads.",
    lambda f: f"reads:{f.call.tool_name}",
    "Read counter warning: {tool} {n}",
    switch="read_counter",
    liveness=True,
)


def test_a_toy_detector_needs_its_module_and_one_precedence_line() -> None:
    """Nothing else changes: not Facts, not Limits, not the engine."""
    precedence = (*RULES, TOY_WARNING)  # the one precedence line
    detector = LoopDetector(LoopDetectionConfig(enabled=True))
    state = SessionState()
    _drive(detector, state, [("read", {"path": f"f{i}"}) for i in range(9)])
    call = detector.fingerprint("read", {"path": "f9"})
    limits = Limits(switches=SWITCHES | {"read_counter"})
    found = evaluate(Facts.measure(state, None, call, limits), limits, precedence)
    assert found == Detection("warning", "read_counter", 10, "WARNING: 10 reads.",
                              warning_key="reads:read")
    off = Limits(switches=SWITCHES)  # its switch off: the row never fires
    assert evaluate(Facts.measure(state, None, call, off), off, precedence) is None


def test_the_detectors_package_exports_at_most_twelve_names() -> None:
    assert len(detectors_package.__all__) <= 12


def test_switches_come_from_the_rows_and_match_the_config_and_the_snapshot() -> None:
    assert {d for rule in RULES for d in [rule.family]} == set(DETECTORS)
    assert set(DetectorsConfig.model_fields) == set(SWITCHES)
    assert set(NESTED_FIELDS["detectors"]) == set(SWITCHES)
    for detector in DETECTORS:  # a detector's switches are its rows' (none: a row always on)
        rows = [r for r in RULES if r.family is detector]
        expected = () if any(r.switch is None for r in rows) else tuple(
            dict.fromkeys(r.switch for r in rows))
        assert detector.switches == expected, detector.name


def test_rows_that_report_the_same_detection_log_the_same_line() -> None:
    lines: dict[tuple[str, str], str | None] = {}
    for rule in RULES:
        assert lines.setdefault((rule.detector, rule.level), rule.log) == rule.log


def test_each_switch_is_read_in_one_place() -> None:
    """No code reads a switch by its own attribute (``limits.cycle``, ``error_repeat_on``,
    ``config.detectors.cycle``): the rows name their switch, and ``Limits.switches`` is read
    only where rows and detectors are switched on."""
    sources = {p: p.read_text() for p in SRC.rglob("*.py")}
    # (``limits.error_repeat`` is the error-repeat threshold, a field of Limits.)
    not_fields = [s for s in SWITCHES if s not in Limits.__dataclass_fields__]
    switches, not_fields_alt = "|".join(SWITCHES), "|".join(not_fields)
    pattern = re.compile(
        rf"\.error_repeat_on\b|\b(?:config|self)\.detectors\.({switches})\b|limits\.({not_fields_alt})\b")
    assert [(p.name, m.group(0)) for p, text in sources.items()
            for m in pattern.finditer(text)] == []
    readers = sorted(p.relative_to(SRC).as_posix() for p, text in sources.items()
                     if re.search(r"\blimits\.switches\b", text))
    assert readers == ["engine/detectors/base.py", "engine/detectors/rules.py"]
    for switch in SWITCHES:
        declared = sorted({p.name for p, text in sources.items()
                           if re.search(rf'switch(es)? = \(?"{switch}"|switch="{switch}"', text)})
        assert len(declared) == 1, (switch, declared)


def _cycle_module_with(periods: str) -> ModuleType:
    """The cycle detector's module, its ``CYCLE_PERIODS`` line changed and nothing else."""
    path = Path(cycle_module.__file__)
    source, n = re.subn(r"^CYCLE_PERIODS = .*$", f"CYCLE_PERIODS = {periods}",
                        path.read_text(), count=1, flags=re.M)
    assert n == 1
    name = "loopwarden.detectors._cycle_periods_test"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "loopwarden.detectors"
    sys.modules[name] = module
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


def test_changing_cycle_periods_needs_no_other_edit() -> None:
    """With ``CYCLE_PERIODS = (3, ..., 8)`` a cycle of 8 tools is found, and its pre-check
    says yes for it, as for the shipped periods (which stop at 6)."""
    module = _cycle_module_with("(3, 4, 5, 6, 7, 8)")
    steps = [(f"tool{i}", {"i": i}) for i in range(8)]
    detector = LoopDetector(LoopDetectionConfig(enabled=True))
    state = SessionState()
    _drive(detector, state, steps * 2)
    call = detector.fingerprint(*steps[0])
    view = state.run_view(None)
    assert view is not None
    longer = module.CYCLE
    assert longer.may_fire(view, call, detector.limits)
    facts = Facts.measure(state, None, call, detector.limits)
    assert facts[longer].count == 17 and len(facts[longer].steps) == 8
    rows = (*[r for r in RULES if r.family is not cycle_module.CYCLE], module.WARNING)
    found = evaluate(facts, detector.limits, rows)
    assert found is not None and (found.detector, found.count) == ("cycle", 17)
    # The shipped module does not see it.
    assert facts[cycle_module.CYCLE].count == 0
    assert not cycle_module.CYCLE.may_fire(view, call, detector.limits)
