"""Equivalent argument forms and failure identities that see through fresh ids (issue 21):
the pure functions under ``detectors.equivalentArguments`` and ``detectors.failureRepeat``."""

from __future__ import annotations

import json

import pytest

from loopwarden.engine.detectors.failure_repeat import echo_masked, reads_as_failure
from loopwarden.fingerprint import args_hash
from loopwarden.fingerprint.defaults import core_args_hash, without_defaults


@pytest.mark.parametrize("args", [
    {"model": "default"}, {"model": "Default"}, {"mode": "auto"}, {"verbose": False},
    {"offset": 0}, {"filter": ""}, {"tags": []}, {"options": {}}, {"cursor": None},
    {"options": {"model": "default", "limit": 0}},
])
def test_keys_that_restate_a_default_are_left_out_of_the_core(args: dict[str, object]) -> None:
    assert core_args_hash("t", {"a": 1, **args}, "exact") == args_hash("t", {"a": 1})


@pytest.mark.parametrize("args", [
    {"model": "opus"}, {"verbose": True}, {"offset": 10}, {"filter": "x"}, {"tags": ["a"]},
    {"options": {"model": "opus"}},
])
def test_keys_with_a_choice_keep_the_call_apart(args: dict[str, object]) -> None:
    assert without_defaults(args) is args
    assert core_args_hash("t", args, "exact") == "exact"


def test_a_value_that_raises_keeps_the_exact_hash() -> None:
    class Hostile(dict):  # type: ignore[type-arg]
        def items(self):  # type: ignore[no-untyped-def]
            raise RuntimeError("no")
    assert core_args_hash("t", Hostile(a=None), "exact") == "exact"


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_an_id_attribute_is_masked_at_any_json_depth(depth: int) -> None:
    def text(nonce: str) -> str:
        value = f'Request failed: 404 <untrusted-content id="{nonce}">gone</untrusted-content>'
        for _ in range(depth):
            value = json.dumps({"error": value})
        return value
    assert echo_masked(text("a8f3c1"), {}) == echo_masked(text("0b77e2"), {})


@pytest.mark.parametrize(("one", "other"), [
    ('{"messageId": "m-17", "error": "gone"}', '{"messageId": "m-18", "error": "gone"}'),
    ("unrecognized subcommand (message id: 7301)", "unrecognized subcommand (message id: 7314)"),
    ("failed request_id=ab12cd", "failed request_id=ff0042"),
])
def test_values_labelled_as_ids_are_masked(one: str, other: str) -> None:
    assert echo_masked(one, {}) == echo_masked(other, {})


def test_a_different_message_is_still_a_different_failure() -> None:
    assert echo_masked("404 Not Found id=1a2b", {}) != echo_masked("403 Forbidden id=1a2b", {})


def test_a_url_path_and_a_json_escaped_folder_count_as_echoes() -> None:
    url = {"url": "https://docs.example.com/api/v2"}
    assert "<arg>" in echo_masked("no page at /api/v2 on docs.example.com", url)
    folder = {"workdir": "C:\\Users\\dev"}
    assert "<arg>" in echo_masked(json.dumps({"error": "cannot enter C:\\Users\\dev"}), folder)


@pytest.mark.parametrize(("text", "failed"), [
    ("ls: cannot access '/x': No such file or directory\n", True),
    ("bash: line 1: acme: command not found", True),
    ("error: unrecognized subcommand 'get'\n\nUsage: acme <COMMAND>", True),
    ("fatal: not a git repository (or any of the parent directories): .git", True),
    ("a.txt\nb.txt\n", False),
    ("2026-12-04 12:00:01 error: timeout in worker 3", False),
    ("x\n" * 1500 + "ls: cannot access '/x': No such file or directory", False),
])
def test_a_short_shell_output_reads_as_a_failure(text: str, failed: bool) -> None:
    assert reads_as_failure(text) is failed
