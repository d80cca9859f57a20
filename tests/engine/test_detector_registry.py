"""A detector is one module (issue 20, item 1): its rows, switch, log line and liveness live
with it; the precedence list, the switches, the engine's gate, the config's ``detectors`` and
the hook's snapshot of it are derived from (or checked against) what the detectors declare."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import loopwarden.engine.detectors as detectors_package
from loopwarden import LoopDetectionConfig
from loopwarden.config import ConfigError, DetectorsConfig
from loopwarden.config.switches import declared_switches, detector_switch, withdraw_switch
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


def toy_module() -> tuple[Rule, str]:
    """Everything the toy detector's module holds (its switch declared, as the shipped
    detectors declare theirs): its warning row, and its switch."""
    switch = detector_switch("read_counter")

    @dataclass(frozen=True, slots=True)
    class Reads:
        count: int = 0

    class ReadCounter(Detector[Reads]):
        """Toy: warns when the run holds ``warning`` calls of ``read``, whatever their
        arguments."""

        __slots__ = ()
        name = "read_counter"
        switches = (switch,)
        empty = Reads()

        def may_fire(self, view: RunView, call: Prospect, limits: Limits) -> bool:
            return call.tool_name == "read"

        def measure(self, state: SessionState, run: str | None, call: Prospect,
                    limits: Limits) -> Reads:
            return Reads(1 + sum(r.tool_name == "read" for r in state.run_records(run)))

        def score(self, facts: Facts, limits: Limits) -> Score:
            return Score(warning=facts[self].count)

    counter = ReadCounter()
    warning = Rule(
        counter, "read_counter", "warning",
        lambda f, lim: f[counter].count >= lim.warning,
        lambda f, _: f[counter].count,
        lambda f, n: f"WARNING: {n} reads.",
        lambda f: f"reads:{f.call.tool_name}",
        "Read counter warning: {tool} {n}",
        switch=switch,
        liveness=True,
    )
    return warning, switch


@pytest.fixture
def toy() -> Iterator[Rule]:
    """The toy's module, imported for one test (its switch withdrawn after)."""
    warning, switch = toy_module()
    yield warning
    withdraw_switch(switch)


def _toy_verdict(config: LoopDetectionConfig, toy: Rule) -> Detection | None:
    precedence = (*RULES, toy)  # the one precedence line
    detector = LoopDetector(config)
    state = SessionState()
    _drive(detector, state, [("read", {"path": f"f{i}"}) for i in range(9)])
    call = detector.fingerprint("read", {"path": "f9"})
    return evaluate(Facts.measure(state, None, call, detector.limits), detector.limits, precedence)


def test_a_toy_detector_needs_its_module_and_one_precedence_line(toy: Rule) -> None:
    """Nothing else changes: not Facts, not Limits, not the config, not the engine."""
    assert _toy_verdict(LoopDetectionConfig(enabled=True), toy) == Detection(
        "warning", "read_counter", 10, "WARNING: 10 reads.", warning_key="reads:read")


@pytest.mark.parametrize("key", ["readCounter", "read_counter"])
def test_a_toy_detectors_own_switch_turns_it_off_and_on_in_a_config(toy: Rule, key: str) -> None:
    off = LoopDetectionConfig(enabled=True, detectors={key: False})
    assert off.detectors.read_counter is False
    assert "read_counter" not in off.detector_switches
    assert _toy_verdict(off, toy) is None  # its switch off: the row never fires
    on = LoopDetectionConfig(enabled=True, detectors={key: True})
    assert on.detectors.read_counter is True
    found = _toy_verdict(on, toy)
    assert found is not None and found.detector == "read_counter"
    assert on.explicit_mapping() == {"enabled": True, "detectors": {"readCounter": True}}


def test_a_toy_switch_is_unknown_once_withdrawn(toy: Rule) -> None:
    withdraw_switch("read_counter")
    with pytest.raises(ConfigError) as caught:
        LoopDetectionConfig(detectors={"readCounter": False})
    assert caught.value.path == "detectors.readCounter" and caught.value.value is False
    assert "unknown key (valid keys: argumentChurn, cycle," in str(caught.value)


def test_the_detectors_package_exports_at_most_twelve_names() -> None:
    assert len(detectors_package.__all__) <= 12


def test_switches_come_from_the_rows_and_match_the_config_and_the_snapshot() -> None:
    from loopwarden.cli._config_snapshot import snapshot_from_dict, snapshot_of

    assert {d for rule in RULES for d in [rule.family]} == set(DETECTORS)
    assert set(declared_switches()) == set(SWITCHES)  # what the config accepts
    assert set(DetectorsConfig().switches()) == set(SWITCHES)
    snapshot = snapshot_from_dict(snapshot_of(LoopDetectionConfig()))
    assert snapshot is not None and set(vars(snapshot.detectors)) == set(SWITCHES)
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
    """A switch's name is written once in src/, where its detector declares it
    (``detector_switch("cycle")``); rows and detectors name the constant. No code reads a
    switch by its own attribute (``limits.cycle``, ``error_repeat_on``,
    ``config.detectors.cycle``): ``Limits.switches`` is read only where rows and detectors are
    switched on, and the config's ``detectors`` only where ``detector_switches`` is derived."""
    sources = {p.relative_to(SRC).as_posix(): p.read_text() for p in SRC.rglob("*.py")}
    for switch in SWITCHES:  # the name, quoted, as a switch: its declaration only
        written = [(path, m.group(0)) for path, text in sources.items()
                   for m in re.finditer(rf'(?:switch(?:es)?\s*=\s*\(?|detector_switch\(|'
                                        rf'\.switches\(\)\[|detectors\[)"{switch}"', text)]
        assert len(written) == 1 and written[0][1].startswith("detector_switch("), written
    # (``limits.error_repeat`` is the error-repeat threshold, a field of Limits.)
    not_fields = [s for s in SWITCHES if s not in Limits.__dataclass_fields__]
    switches, not_fields_alt = "|".join(SWITCHES), "|".join(not_fields)
    pattern = re.compile(
        rf"\.error_repeat_on\b|\b(?:config|self)\.detectors\.({switches})\b"
        rf"|limits\.({not_fields_alt})\b")
    assert [(p, m.group(0)) for p, text in sources.items() for m in pattern.finditer(text)] == []
    readers = sorted(p for p, text in sources.items() if re.search(r"\blimits\.switches\b", text))
    assert readers == ["engine/detectors/base.py", "engine/detectors/rules.py"]
    readers = sorted(p for p, text in sources.items()
                     if re.search(r"\bdetector_switches\b", text))
    assert readers == ["cli/_config_snapshot.py", "config/model.py", "engine/limits.py"]


def _cycle_module_with(periods: str) -> ModuleType:
    """The cycle detector's module, its ``CYCLE_PERIODS`` line changed and nothing else."""
    path = Path(cycle_module.__file__)
    source, n = re.subn(r"^CYCLE_PERIODS = .*$", f"CYCLE_PERIODS = {periods}",
                        path.read_text(), count=1, flags=re.M)
    assert n == 1
    name = "loopwarden.engine.detectors._cycle_periods_test"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "loopwarden.engine.detectors"
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
