"""Nothing a caller hands loopwarden can crash the process, hang it, or make hashing raise.

orjson 3.12.0-3.13.0 do not limit the nesting of tuples: a few thousand of them corrupt its heap
and abort the process. Every orjson version writes a shared container out at each reference, so
41 lists sharing their child (2**40 paths) never finish. Custom objects can raise from any
method or make up new children forever. Each case runs in a child process, with a timeout and a
2 GiB address-space limit, so a regression fails its test without taking the suite down (or the
machine's memory).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest

from loopwarden import args_hash, canonical_json
from loopwarden.fingerprint import canonical_json_slow, digest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

_PRELUDE = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
"""


def _child(code: str, timeout: float = 60) -> str:
    """Run ``code`` in a fresh interpreter; return its stdout, failing on any non-zero exit."""
    completed = subprocess.run(
        [sys.executable, "-c", _PRELUDE + textwrap.dedent(code)],
        capture_output=True, text=True, timeout=timeout, cwd=REPO, env={**os.environ},
    )
    assert completed.returncode == 0, (completed.returncode, completed.stderr[-2000:])
    return completed.stdout


# --------------------------------------------------------------------------------------------
# 1. Deep tuples never reach orjson

_DEEP_TUPLE = """
x = "leaf"
for _ in range(5000):
    x = (x,)
"""


def test_the_reported_deep_tuple_call_does_not_abort_the_process() -> None:
    out = _child(_DEEP_TUPLE + """
from loopwarden import LoopDetectionConfig, LoopGuard
print(LoopGuard(LoopDetectionConfig(enabled=True)).before_tool_call("t", {"x": x}, session="s").action)
""")
    assert out.split() == ["allow"]


@pytest.mark.parametrize(("shape", "as_lists"), [
    ("x", "xl"),
    ("{'x': x}", "{'x': xl}"),
    ("[1, {'x': [x]}]", "[1, {'x': [xl]}]"),
    ("(x, x)", "[xl, xl]"),
    # orjson serialises an enum by its value, which can be the deep tuple
    ("__import__('enum').Enum('E', {'A': x}).A", "xl"),
])
def test_deep_tuples_anywhere_in_a_value_hash_like_lists(shape: str, as_lists: str) -> None:
    out = _child(_DEEP_TUPLE + f"""
xl = "leaf"
for _ in range(5000):
    xl = [xl]
from loopwarden import args_hash, canonical_json, outcome_of
from loopwarden.fingerprint import digest, error_text
from loopwarden.fingerprint.leaves import leaves_of
from loopwarden.fingerprint.volatile import mask_value
value, listed = {shape}, {as_lists}  # the same data, built from lists
assert canonical_json(value) == canonical_json(listed)
assert digest(value) == digest(listed)
assert args_hash("t", value) == args_hash("t", listed)
for result in (value, {{"content": [{{"type": "text", "text": "t"}}], "details": {{"v": value}}}}):
    assert outcome_of("read", value, result).result_hash
    assert outcome_of("message", {{"action": "send"}}, result).result_hash
assert outcome_of("exec", value, None, value).result_hash.startswith("error:")
from loopwarden.fingerprint import json_bytes  # (new: imported after the checks above)
error_text(value); json_bytes(value); leaves_of(value); mask_value(value)
print("ok")
""")
    assert out.split() == ["ok"]


@pytest.mark.parametrize("preset", ["openclaw", "early"])
def test_deep_tuples_in_results_errors_and_ids_do_not_abort_the_guard(preset: str,
                                                                     tmp_path: Path) -> None:
    out = _child(_DEEP_TUPLE + f"""
from loopwarden import LoopDetectionConfig, LoopGuard
from loopwarden.guard.stores.sqlite import SQLiteStore
for store in (None, SQLiteStore({str(tmp_path / "state.db")!r})):
    config = LoopDetectionConfig(enabled=True, preset={preset!r}, warning_threshold=2,
                                 critical_threshold=4)
    guard = LoopGuard(config, store=store)
    guard.sinks.clear()
    actions = []
    for i in range(6):  # far enough to warn and block, so events are stored too
        call = dict(session="s", call_id=x if i == 0 else f"c{{i}}")
        actions.append(guard.before_tool_call("t", {{"x": x}}, **call).action)
        actions.append(guard.after_tool_call("t", {{"x": x}}, result={{"content": [], "details":
                                              {{"x": x}}}}, **call).action)
        actions.append(guard.after_tool_call("t", {{"x": x}}, error=x, **call).action)
        guard.after_tool_call("t", {{"x": x}}, result=x, **call)
    assert guard.stats.store_failures == 0 and guard.stats.internal_errors == 0, guard.stats
    print(sorted(set(actions)))
""")
    assert all(line == "['allow', 'block', 'warn']" for line in out.splitlines()), out


def test_store_codecs_and_reports_never_hand_orjson_a_deep_tuple() -> None:
    out = _child(_DEEP_TUPLE + """
from loopwarden.engine.history import CallRecord, SessionState
from loopwarden.offline.scan import output_chars
from loopwarden.guard.stores._codec import decode_state, encode_state, field_text
state = SessionState()
state.append(CallRecord(x, "t:0", call_id=x))
assert decode_state(encode_state(state)).history[0].call_id.startswith('[[[')
field_text("learned", x); field_text("call_id", x)
assert output_chars({"rows": x}) > 10_000
print("ok")
""")
    assert out.split() == ["ok"]


# --------------------------------------------------------------------------------------------
# 2. Shared references and endless values: work bounded by distinct objects and a budget

_DAG = """
def dag(levels, leaf="leaf", kind=list):
    x = kind([leaf])
    for _ in range(levels):
        x = kind([x, x])
    return x
"""


@pytest.mark.parametrize("kind", ["list", "tuple", "lambda items: dict(zip('ab', items))"])
def test_exponentially_shared_values_hash_in_bounded_time_and_memory(kind: str) -> None:
    out = _child(_DAG + f"""
from loopwarden import LoopDetectionConfig, LoopGuard, args_hash, canonical_json
kind = {kind}
x = dag(40, kind=kind)
first = args_hash("t", x)
assert first == args_hash("t", dag(40, kind=kind)), "deterministic"
assert first != args_hash("t", dag(40, "other", kind=kind)), "content still counts"
assert canonical_json(x).startswith(b'{{"__oversized__":{{"bytes":')
for preset in ("openclaw", "early"):
    guard = LoopGuard(LoopDetectionConfig(enabled=True, preset=preset))
    guard.sinks.clear()
    guard.before_tool_call("t", {{"x": x}}, session="s", call_id="c")
    guard.after_tool_call("t", {{"x": x}}, session="s", call_id="c",
                          result={{"content": [{{"type": "text", "text": "t"}}], "details": {{"x": x}}}})
    guard.after_tool_call("t", x, session="s", result=x)
    assert guard.stats.internal_errors == 0
print(peak_mb())
""")
    assert int(out) < 1024


def test_one_long_string_shared_by_many_references_is_hashed_once() -> None:
    out = _child("""
from loopwarden import LoopDetectionConfig, LoopGuard, args_hash, canonical_json
text = "x" * 10**6
# 10 GB each when written out (5 times the child's address space), yet few enough items that
# only the text's length, keys included, tells the quick check they are too big for orjson.
values = [[text] * 10**4, {"rows": [{text: 1} for _ in range(10**4)]}, [{text: 1}] * 10**4,
          {"content": [{"type": "text", "text": text}] * 10**4, "details": {}}]
for value in values:
    assert canonical_json(value).startswith(b'{"__oversized__":'), canonical_json(value)[:80]
    assert args_hash("t", value) == args_hash("t", value)
for preset in ("openclaw", "early"):
    guard = LoopGuard(LoopDetectionConfig(enabled=True, preset=preset))
    guard.sinks.clear()
    for value in values:
        guard.before_tool_call("t", value, session="s")
        guard.after_tool_call("t", value, session="s", result=value)
print(peak_mb())
""", timeout=120)
    assert int(out) < 1024


_ENDLESS = """
import itertools
from collections.abc import Mapping
class Fresh:  # a new child object on every access of its state
    @property
    def __dict__(self):
        return {"child": Fresh(), "n": 1}
class Endless(Mapping):  # items that never end, each a new endless mapping
    def __getitem__(self, key): return key
    def __iter__(self): return itertools.count()
    def __len__(self): return 1
    def items(self): return ((str(i), Endless()) for i in itertools.count())
class Forever(list):  # a list whose __iter__ never ends (its stored items do)
    def __iter__(self): return itertools.repeat(self)
class Countless(set):
    def __iter__(self): return itertools.count()
"""


@pytest.mark.parametrize("make", ["Fresh()", "Endless()", "Forever([1, {2}])",
                                  "{'s': Countless({1})}"])
def test_values_that_make_up_children_forever_stop_at_the_node_budget(make: str) -> None:
    out = _child(_ENDLESS + f"""
from loopwarden import LoopDetectionConfig, LoopGuard, args_hash, canonical_json, outcome_of
from loopwarden.fingerprint.leaves import leaves_of
from loopwarden.fingerprint.volatile import mask_value
value = {make}
data = canonical_json(value)
assert data == canonical_json({make}), "deterministic"
outcome_of("message", {{"action": "send"}}, {{"content": [], "details": {{"v": value}}}})
leaves_of(value); mask_value(value)
guard = LoopGuard(LoopDetectionConfig(enabled=True, preset="early"))
guard.sinks.clear()
guard.after_tool_call("t", {{}}, session="s", result={{"content": [], "details": {{"v": value}}}})
assert guard.stats.internal_errors == 0
print(b"[Truncated]" in data or b"Forever" not in data, peak_mb())
""", timeout=300)
    truncated_or_plain, peak = out.split()
    assert truncated_or_plain == "True"
    assert int(peak) < 1024


def test_shared_values_keep_the_bytes_of_their_expanded_form() -> None:
    """Serialising a shared subtree once must not change the canonical form of anything that
    finished before: the memo repeats the very bytes a full walk writes."""
    for levels in range(1, 10):  # (3**9 paths)
        shared: Any = ["leaf", {"k": 1.5, "b": None}]
        for _ in range(levels):
            shared = [shared, {"z": shared, "a": (shared,)}]
        tree = orjson.loads(orjson.dumps(shared))  # the same data, nothing shared
        expected = orjson.dumps(tree, option=orjson.OPT_SORT_KEYS)
        assert canonical_json(shared) == expected
        assert canonical_json_slow(shared) == expected
        # the fallback (a bytes leaf forces it) around a shared value
        assert canonical_json({"odd": b"", "v": shared}) == (
            b'{"odd":{"data":"","type":"Uint8Array"},"v":' + expected + b"}")
        assert digest(shared) == digest(tree)


def test_cycles_inside_shared_values_keep_their_context() -> None:
    # A subtree that reaches an ancestor serialises differently under each parent: never reused.
    a: list[Any] = []
    s: list[Any] = [a]
    a.append(s)
    assert canonical_json([a, s]) == b'[[["[Circular]"]],[["[Circular]"]]]'
    assert canonical_json([a, s, {1}]) == b'[[["[Circular]"]],[["[Circular]"]],[1]]'


# --------------------------------------------------------------------------------------------
# Raising methods: total and deterministic

_EVIL = """
class Boom(Exception):
    pass
def boom(*args, **kwargs):
    raise Boom("no")
class Meta(type):
    @property
    def __module__(cls):  # what loopwarden names an object's type by
        raise Boom("no module")
class Nameless(metaclass=Meta):
    pass
class Evil:
    __eq__ = __hash__ = __repr__ = __str__ = __iter__ = __len__ = __format__ = boom
    __getattr__ = __bool__ = boom
    @property
    def __class__(self):
        raise Boom("no class")
    @property
    def __dict__(self):
        raise Boom("no state")
class EvilStr(str):
    __eq__ = __hash__ = __str__ = __format__ = __len__ = __iter__ = __contains__ = boom
    strip = isascii = __radd__ = boom
class EvilDict(dict):
    items = keys = values = __iter__ = get = __getitem__ = __len__ = boom
class EvilList(list):
    __iter__ = __len__ = __eq__ = __repr__ = boom
"""


def test_values_whose_methods_raise_hash_deterministically_and_never_raise() -> None:
    out = _child(_EVIL + """
from loopwarden import LoopDetectionConfig, LoopGuard, args_hash, canonical_json, outcome_of
from loopwarden.fingerprint import digest, error_text
from loopwarden.fingerprint.leaves import leaves_of
from loopwarden.fingerprint.volatile import mask_value
def values():
    return [Nameless(), Evil(), EvilStr("text"), EvilDict(a=Evil()), EvilList([1, Evil()]),
            {"a": Evil(), "b": [EvilStr("q"), Nameless()], "c": (EvilDict(),)}]
seen = []
for value, again in zip(values(), values()):
    assert args_hash("t", value) == args_hash("t", again)
    assert canonical_json(value) == canonical_json(again)
    assert digest(value) == digest(again)
    for tool in ("read", "exec", "message"):
        result = {"content": [{"type": "text", "text": EvilStr("x")}], "details": value}
        assert outcome_of(tool, value, result) == outcome_of(tool, again, result)
        assert outcome_of(tool, value, value, value) == outcome_of(tool, again, again, again)
    error_text(value); leaves_of(value); mask_value(value)
    seen.append(args_hash("t", value))
assert args_hash(EvilStr("tool"), {}) == args_hash("tool", {})
assert args_hash(Evil(), {}) == args_hash(Evil(), {})
assert canonical_json(EvilStr("text")) == b'"text"'  # a str subclass is its characters
for preset in ("openclaw", "early"):
    guard = LoopGuard(LoopDetectionConfig(enabled=True, preset=preset))
    guard.sinks.clear()
    for value in values():
        guard.before_tool_call("t", value, session="s", call_id="c")
        guard.after_tool_call("t", value, session="s", call_id="c", result=value)
        guard.after_tool_call("t", value, session="s", error=value)
    assert guard.stats.internal_errors == 0 and guard.stats.store_failures == 0, guard.stats
print(len(set(seen)))
""")
    assert int(out) == 6


# --------------------------------------------------------------------------------------------
# Hypothesis: deep + shared + raising structures never raise, are deterministic, and finish
# (run in a child: a regression that aborts the process must not take the suite with it)

_PROPERTIES = _EVIL + """
from hypothesis import HealthCheck, given, settings, strategies as st
from loopwarden import args_hash, canonical_json, outcome_of
from loopwarden.fingerprint import digest
from loopwarden.fingerprint.leaves import leaves_of
from loopwarden.fingerprint.volatile import mask_value

leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                   st.text(max_size=5), st.binary(max_size=3),
                   st.sampled_from(["Evil", "EvilStr", "Nameless"]))
# A plan: nodes built in order, each a container of earlier nodes (so sharing is common),
# some wrapped in a long chain of tuples, lists or dicts.
node = st.tuples(st.sampled_from(["list", "tuple", "dict", "frozenset", "EvilDict", "EvilList"]),
                 st.lists(st.integers(min_value=0, max_value=10**6), max_size=4),
                 st.sampled_from([0, 0, 0, 3, 300, 3000]),
                 st.sampled_from(["tuple", "list", "dict"]))
plans = st.tuples(st.lists(leaves, min_size=1, max_size=6), st.lists(node, max_size=12))

MAKERS = {"Evil": Evil, "EvilStr": lambda: EvilStr("s"), "Nameless": Nameless}

def hashable(value):
    try:
        hash(value)
    except Exception:
        return False
    return True

def build(plan):
    made = [MAKERS[leaf]() if type(leaf) is str and leaf in MAKERS else leaf for leaf in plan[0]]
    for kind, picks, chain, wrapper in plan[1]:
        items = [made[i % len(made)] for i in picks]
        if kind == "list":
            value = list(items)
        elif kind == "tuple":
            value = tuple(items)
        elif kind == "EvilList":
            value = EvilList(items)
        elif kind == "frozenset":
            value = frozenset(i for i in items if type(i) is not EvilStr and hashable(i))
        else:
            value = (dict if kind == "dict" else EvilDict)((str(i), v) for i, v in enumerate(items))
        for _ in range(chain):
            value = (value,) if wrapper == "tuple" else [value] if wrapper == "list" else {"k": value}
        made.append(value)
    return made[-1]

@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(plans)
def check(plan):
    value, again = build(plan), build(plan)  # two separate, equal object graphs
    assert canonical_json(value) == canonical_json(again)
    assert args_hash("t", value) == args_hash("t", again)
    assert digest(value) == digest(again)
    result = {"content": [{"type": "text", "text": "t"}], "details": {"v": value}}
    assert outcome_of("message", {"action": "send"}, result) == outcome_of(
        "message", {"action": "send"}, {"content": [{"type": "text", "text": "t"}],
                                        "details": {"v": again}})
    assert outcome_of("exec", value, value, value) == outcome_of("exec", again, again, again)
    leaves_of(value); mask_value(value)

check()
print("ok")
"""


def test_deep_shared_and_raising_structures_never_raise_are_deterministic_and_finish() -> None:
    assert _child(_PROPERTIES, timeout=600).split() == ["ok"]


# --------------------------------------------------------------------------------------------
# In-process checks of the fast path's routing (values that are safe for orjson)


def test_plain_values_still_take_orjson_byte_for_byte() -> None:
    value = {"path": "src/a.py", "n": [1, 2.5, None, True], "t": ("a", ("b",))}
    assert canonical_json(value) == orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    deep = json.loads("[" * 200 + "]" * 200)  # past the quick check's depth: the fallback
    assert canonical_json(deep) == b"[" * 200 + b"]" * 200
    assert args_hash("t", (1, 2)) == args_hash("t", [1, 2])
