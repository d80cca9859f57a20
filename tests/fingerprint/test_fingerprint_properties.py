"""Property tests: canonical serialisation is total, deterministic and orjson-compatible."""

from __future__ import annotations

import copy
import dataclasses
import datetime
import enum
import json
import math
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwarden.fingerprint import (
    args_hash,
    canonical_json,
    canonical_json_slow,
    digest,
    outcome_of,
)

pytestmark = pytest.mark.slow

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Every code point, lone surrogates included.
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=20)
hashable_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | any_text
    | st.binary(max_size=8)
)
hashables = st.recursive(
    hashable_scalars,
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # unbounded: includes values beyond 64 bits
    | st.floats(allow_nan=True, allow_infinity=True)
    | any_text
    | st.binary(max_size=16)
)


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(any_text, inner, max_size=4)
        | st.dictionaries(hashables, inner, max_size=4)
        | st.sets(hashables, max_size=4)
        | st.frozensets(hashables, max_size=4)
    )


values = st.recursive(scalars, _containers, max_leaves=25)

# What orjson can serialise natively (with OPT_SORT_KEYS): the fallback must match it exactly.
json_text = st.text(st.characters(codec="utf-8"), max_size=20)


class Colour(enum.Enum):
    RED = "red"
    MIXED = {"b": [1, 2], "a": None}  # noqa: RUF012


orjson_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=True, allow_infinity=True)
    | json_text
    | st.datetimes()
    | st.datetimes(timezones=st.just(datetime.timezone.utc))
    | st.dates()
    | st.times()
    | st.uuids()
    | st.sampled_from(list(Colour))
)
orjson_values = st.recursive(
    orjson_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(json_text, inner, max_size=4)
    ),
    max_leaves=30,
)

TOOLS = ["read", "exec", "bash", "process", "write", "message", "telegram", "sessions_send"]


def openclaw_shaped(details: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    entry = st.fixed_dictionaries({"type": st.just("text"), "text": any_text}) | values
    return st.fixed_dictionaries(
        {"content": st.lists(entry, max_size=3) | values, "details": details}
    )


results = (
    values
    | openclaw_shaped(values)
    | openclaw_shaped(st.dictionaries(st.sampled_from(["status", "exitCode", "changed"]), values))
)
args_values = values | st.dictionaries(
    st.sampled_from(["action", "path", "command"]),
    st.sampled_from(["poll", "log", "send"]) | values,
)


def _nested_list(depth: int) -> list[Any]:
    root: list[Any] = []
    current = root
    for _ in range(depth):
        child: list[Any] = []
        current.append(child)
        current = child
    return root


def _nested_dict(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    current = root
    for _ in range(depth):
        child: dict[str, Any] = {}
        current["k"] = child
        current = child
    return root


# --------------------------------------------------------------------------------------------
# Totality and determinism


@SETTINGS
@given(values)
def test_args_hash_never_raises_and_is_deterministic(value: Any) -> None:
    first = args_hash("tool", value)
    assert first == args_hash("tool", value)
    assert first == args_hash("tool", copy.deepcopy(value))
    assert len(first) == len("tool:") + 64


@SETTINGS
@given(st.sampled_from(TOOLS), args_values, results, st.none() | values)
def test_outcome_of_never_raises_and_is_deterministic(
    tool: str, args: Any, result: Any, error: Any
) -> None:
    first = outcome_of(tool, args, result, error)
    assert first == outcome_of(tool, args, result, error)
    assert first == outcome_of(tool, copy.deepcopy(args), copy.deepcopy(result), error)
    if first.result_hash is not None:
        assert len(first.result_hash.removeprefix("error:")) == 64


@SETTINGS
@given(values)
def test_canonical_json_is_valid_utf8(value: Any) -> None:
    canonical_json(value).decode("utf-8")


# --------------------------------------------------------------------------------------------
# Fast path vs fallback


@SETTINGS
@given(orjson_values)
def test_fallback_is_byte_identical_to_orjson(value: Any) -> None:
    expected = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    assert canonical_json_slow(value) == expected
    assert canonical_json(value) == expected


@SETTINGS
@given(orjson_values, hashable_scalars)
def test_one_unsupported_leaf_does_not_change_the_rest(value: Any, odd: Any) -> None:
    # Forcing the fallback (bytes leaf) must serialise the orjson-native part identically.
    native = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    mixed = canonical_json({"odd": b"\x00", "value": value})
    assert mixed == b'{"odd":{"data":"AA==","type":"Uint8Array"},"value":' + native + b"}"


def test_nan_and_infinity_serialise_as_null_in_both_paths() -> None:
    for special in (math.nan, math.inf, -math.inf):
        assert canonical_json(special) == b"null"
        assert canonical_json_slow(special) == b"null"
        assert canonical_json([special, b""]).startswith(b"[null,")


# --------------------------------------------------------------------------------------------
# Cross-process determinism

_CROSS_PROCESS_SCRIPT = """
import json, sys
from loopwarden.fingerprint import args_hash, outcome_of
values = [
    {"b", "a", "c", "zz", "y"},
    frozenset({("x", 1), ("y", 2), "s"}),
    {frozenset({"k", "j"}): 1, (1, "a"): 2, None: 3, 1: "one", "1": "uno"},
    {"text": "\\ud800 lone", "blob": b"\\x00\\xff", "nested": [{"q", "r"}, (1, 2.5)]},
    [float("nan"), 2 ** 100, -(2 ** 70)],
]
out = [args_hash("t", v) for v in values]
out.append(outcome_of("message", {"action": "send"}, {"details": {"tags": {"p", "q"}}}).result_hash)
json.dump(out, sys.stdout)
"""


def _hashes_in_subprocess(seed: str) -> list[str]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    completed = subprocess.run(
        [sys.executable, "-c", _CROSS_PROCESS_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    hashes: list[str] = json.loads(completed.stdout)
    return hashes


@pytest.mark.integration
def test_hashes_are_identical_across_processes() -> None:
    runs = [_hashes_in_subprocess(seed) for seed in ("0", "1", "4242", "random")]
    assert all(run == runs[0] for run in runs)
    assert len(set(runs[0])) == len(runs[0])


# --------------------------------------------------------------------------------------------
# Cycles, shared references, depth


def test_cycles_serialise_as_circular_and_isomorphic_cycles_hash_equal() -> None:
    first: list[Any] = [1]
    first.append(first)
    second: list[Any] = [1]
    second.append(second)
    assert canonical_json(first) == b'[1,"[Circular]"]'
    assert args_hash("t", first) == args_hash("t", second)

    mutual_a: dict[str, Any] = {"name": "a"}
    mutual_b: dict[str, Any] = {"name": "b", "peer": mutual_a}
    mutual_a["peer"] = mutual_b
    assert canonical_json(mutual_a) == b'{"name":"a","peer":{"name":"b","peer":"[Circular]"}}'


def test_shared_references_are_serialised_in_full() -> None:
    shared = [1, 2]
    assert canonical_json([shared, shared, {"again": shared}]) == b'[[1,2],[1,2],{"again":[1,2]}]'


def test_object_cycles_through_attributes_and_keys() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self

    assert b'"me":"[Circular]"' in canonical_json(Node())

    @dataclasses.dataclass(frozen=True)
    class Key:
        label: str

    holder: dict[Any, Any] = {}
    holder[Key("k")] = holder
    assert canonical_json(holder) == b'{"{\\"label\\":\\"k\\"}":"[Circular]"}'


def test_100k_deep_nesting_does_not_recurse() -> None:
    deep_list = _nested_list(100_000)
    assert canonical_json(deep_list) == b"[" * 100_001 + b"]" * 100_001
    deep_dict = _nested_dict(100_000)
    assert len(canonical_json(deep_dict)) == 100_000 * len('{"k":}') + 2
    outcome = outcome_of("read", {}, {"content": [], "details": {"tree": deep_dict}})
    assert outcome.result_hash is not None
    wrapped = _nested_list(100_000)
    wrapped.append('<<<EXTERNAL_UNTRUSTED_CONTENT id="0123456789abcdef">>>')
    assert len(digest(wrapped)) == 64


def test_deep_send_results_strip_volatile_keys_iteratively() -> None:
    def deep(message_id: str) -> dict[str, Any]:
        root = _nested_dict(50_000)
        root["messageId"] = message_id
        return {"content": [], "details": root}

    args = {"action": "send"}
    assert outcome_of("message", args, deep("a")) == outcome_of("message", args, deep("b"))


# --------------------------------------------------------------------------------------------
# Rich Python values


@dataclasses.dataclass
class Point:
    x: int
    y: Any = None


class Plain:
    def __init__(self, value: Any) -> None:
        self.value = value


class Slotted:
    __slots__ = ("__secret", "a")

    def __init__(self) -> None:
        self.a = 1
        self.__secret = 2


class Exploding:
    @property
    def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
        raise RuntimeError("no state for you")


class BrokenMapping(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("broken")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("broken")

    def __len__(self) -> int:
        return 1


def _rich_values() -> list[Any]:
    return [
        Point(1, {"b": 2, "a": 1}),
        Plain(Plain(3)),
        Slotted(),
        ValueError("boom"),
        uuid.UUID(int=7),
        datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
        datetime.time(1, 2, tzinfo=datetime.timezone.utc),
        Path("/tmp/x"),
        Colour.MIXED,
        memoryview(b"ab"),
        bytearray(b"c"),
        range(3),
        len,
        object(),
    ]


def test_rich_values_serialise_deterministically_without_addresses() -> None:
    data = canonical_json(_rich_values())
    assert data == canonical_json(_rich_values())
    assert b" at 0x" not in data
    text = data.decode()
    assert '{"x":1,"y":{"a":1,"b":2}}' in text
    assert '{"__object__":"tests.test_fingerprint_properties.Plain"' in text or "Plain" in text
    assert '{"message":"boom","name":"ValueError"}' in text
    assert '"_Slotted__secret":2' in text
    assert '{"a":null,"b":[1,2]}' in text  # enum -> its value
    assert '{"data":"YWI=","type":"Uint8Array"}' in text
    assert '"/tmp/x"' in text


def test_pydantic_models_serialise_via_model_dump() -> None:
    import pydantic

    class Model(pydantic.BaseModel):
        b: int
        a: list[int]

    assert canonical_json(Model(b=1, a=[2])) == b'{"a":[2],"b":1}'


def test_misbehaving_objects_never_raise() -> None:
    for value in (Exploding(), BrokenMapping(), [Exploding(), {"k": BrokenMapping()}]):
        assert isinstance(canonical_json(value), bytes)
        assert len(args_hash("t", value)) == len("t:") + 64
        assert outcome_of("t", value, value, value).result_hash is not None


def test_colliding_stringified_keys_are_kept_in_a_stable_order() -> None:
    first = canonical_json({1: "int", "1": "str", None: "none", "null": "s"})
    second = canonical_json({"null": "s", "1": "str", None: "none", 1: "int"})
    assert first == second == b'{"1":"int","1":"str","null":"none","null":"s"}'


def test_surrogates_become_replacement_characters() -> None:
    assert canonical_json("a\ud800b") == '"a\ufffdb"'.encode()
    # A valid pair written as two code points is the astral character it encodes.
    assert canonical_json("\ud83d\ude00") == canonical_json("\U0001f600")
    assert canonical_json({"\udfff": 1}) == '{"\ufffd":1}'.encode()


def test_huge_integers_serialise() -> None:
    assert canonical_json(2**64) == str(2**64).encode()
    huge = canonical_json(10**5000)
    assert huge.startswith(b'"0x')
    assert canonical_json(10**5000) == huge
