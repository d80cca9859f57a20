"""Tool profile registry: built-ins, registration, aliases, copies and volatile keys."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from loopwarden import profiles
from loopwarden.fingerprint import outcome_of
from loopwarden.fingerprint.profiles import ProfileRegistry, ToolProfile, default_registry


def result(text: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "details": details or {}}


@pytest.fixture
def registry() -> ProfileRegistry:
    return default_registry.copy()


# --------------------------------------------------------------------------------------------
# Built-ins


def test_exec_has_bash_alias_and_unknown_names_pass_through() -> None:
    assert profiles.canonical_name("bash") == "exec"
    assert profiles.canonical_name("exec") == "exec"
    assert profiles.canonical_name("read") == "read"
    assert profiles.canonical_name("Bash") == "Bash"
    exec_profile = profiles.get("bash")
    assert exec_profile is not None and exec_profile.name == "exec"
    assert exec_profile.aliases == ("bash",)
    assert profiles.get("read") is None


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("command_status", {"id": "x"}, True),
        ("command_status", None, True),
        ("process", {"action": "poll", "sessionId": "s"}, True),
        ("process", {"action": "log", "sessionId": "s"}, True),
        ("process", {"action": "list"}, False),
        ("process", {"action": "kill", "sessionId": "s"}, False),
        ("process", ["poll"], False),
        ("process", "poll", False),
        ("wait", {"seconds": 5}, True),
        ("exec", {"command": "sleep 1"}, False),
        ("bash", {"command": "sleep 1"}, False),
        ("read", {"path": "a"}, False),
    ],
)
def test_known_polls(tool: str, args: object, expected: bool) -> None:
    assert profiles.is_known_poll(tool, args) is expected


def test_s40_wait_is_a_known_poll_that_is_critical_at_the_warning_threshold() -> None:
    wait = profiles.get("wait")
    assert wait is not None
    assert wait.poll_critical_at_warning
    assert profiles.is_known_poll("wait", {})
    process = profiles.get("process")
    assert process is not None and not process.poll_critical_at_warning


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("message", {"action": "send"}, True),
        ("message", {"action": "broadcast"}, True),
        ("message", {"action": "thread-reply"}, True),
        ("message", {"action": "sendWithEffect"}, True),
        ("message", {"action": "sendAttachment"}, True),
        ("message", {"action": "sticker"}, True),
        ("message", {"action": "read"}, False),
        ("message", {"action": "channel-create"}, False),
        ("message", {}, False),
        ("message", "send", False),
        ("sessions_send", {"message": "hi"}, True),
        ("sessions_send", None, True),
        ("telegram", {"to": "1", "text": "hi"}, True),
        ("discord", {"action": "reply"}, True),
        ("slack", {"action": "read"}, False),
        ("msteams", "not a dict", False),
        ("read", {"action": "send"}, False),
    ],
)
def test_send_like(tool: str, args: object, expected: bool) -> None:
    assert profiles.is_send_like(tool, args) is expected


# --------------------------------------------------------------------------------------------
# Registration


def test_register_returns_an_immutable_profile(registry: ProfileRegistry) -> None:
    profile = registry.register("check_job", poll=True, volatile_keys={"checked_at"})
    assert profile == ToolProfile("check_job", poll=True, volatile_keys=frozenset({"checked_at"}))
    assert registry.get("check_job") is profile
    assert registry.is_known_poll("check_job", {"id": 1})
    with pytest.raises(AttributeError):
        profile.poll = False  # type: ignore[misc]


def test_register_accepts_any_iterable_and_a_single_string(registry: ProfileRegistry) -> None:
    profile = registry.register("t", volatile_keys=["a", "b"], aliases="t2")
    assert profile.volatile_keys == frozenset({"a", "b"})
    assert profile.aliases == ("t2",)
    assert registry.register("u", volatile_keys="ts").volatile_keys == frozenset({"ts"})


@pytest.mark.parametrize("name", ["", None, 3])
def test_invalid_names_are_rejected(registry: ProfileRegistry, name: Any) -> None:
    with pytest.raises(ValueError):
        registry.register(name)


def test_non_string_volatile_keys_are_rejected(registry: ProfileRegistry) -> None:
    with pytest.raises(TypeError):
        registry.register("t", volatile_keys=[1])  # type: ignore[list-item]


def test_aliases_resolve_to_the_canonical_profile(registry: ProfileRegistry) -> None:
    registry.register("search", aliases=("web_search", "google"), poll=False)
    assert registry.canonical_name("google") == "search"
    assert registry.get("web_search") is registry.get("search")
    assert "google" in registry and "bing" not in registry


def test_an_alias_may_not_shadow_another_tools_name(registry: ProfileRegistry) -> None:
    with pytest.raises(ValueError, match="already the name"):
        registry.register("shell", aliases=("exec",))


def test_registering_an_alias_name_takes_it_over(registry: ProfileRegistry) -> None:
    registry.register("bash", poll=True)
    assert registry.canonical_name("bash") == "bash"
    exec_profile = registry.get("exec")
    assert exec_profile is not None and exec_profile.aliases == ()
    assert registry.is_known_poll("bash", {})


def test_an_alias_moves_to_its_latest_owner(registry: ProfileRegistry) -> None:
    registry.register("first", aliases=("shared",))
    registry.register("second", aliases=("shared",))
    assert registry.canonical_name("shared") == "second"
    first = registry.get("first")
    assert first is not None and first.aliases == ()


def test_reregistering_a_builtin_keeps_its_outcome_projection(registry: ProfileRegistry) -> None:
    registry.register("exec", volatile_keys={"host"}, aliases=("bash", "sh"))

    def running(session: str, host: str) -> dict[str, Any]:
        return result(f"(session {session})", {"status": "running", "tail": "t", "host": host})

    # Still hashed by status + tail (exec projection), now also through the new alias.
    assert outcome_of("sh", {}, running("a", "h1"), registry=registry) == outcome_of(
        "exec", {}, running("b", "h2"), registry=registry
    )


def test_unregister(registry: ProfileRegistry) -> None:
    assert registry.unregister("bash") is not None
    assert registry.get("exec") is None and registry.get("bash") is None
    assert registry.unregister("exec") is None
    assert registry.canonical_name("bash") == "bash"


def test_names_and_len(registry: ProfileRegistry) -> None:
    names = registry.names()
    assert names == tuple(sorted(names))
    assert {"exec", "process", "command_status", "wait", "write", "message"} <= set(names)
    assert "bash" not in names
    assert len(registry) == len(names)


def test_profile_objects_can_be_added_directly(registry: ProfileRegistry) -> None:
    profile = ToolProfile("job_status", poll=lambda args: isinstance(args, dict) and "id" in args)
    assert registry.add(profile) is profile
    assert registry.is_known_poll("job_status", {"id": 1})
    assert not registry.is_known_poll("job_status", {})


def test_failing_predicates_count_as_false(registry: ProfileRegistry) -> None:
    def explode(args: object) -> bool:
        raise RuntimeError("bug in user predicate")

    registry.register("fragile", poll=explode, send_like=explode)
    assert not registry.is_known_poll("fragile", {})
    assert not registry.is_send_like("fragile", {})


# --------------------------------------------------------------------------------------------
# Copies and the module-level default registry


def test_copies_are_independent(registry: ProfileRegistry) -> None:
    registry.register("check_job", poll=True)
    assert default_registry.get("check_job") is None
    nested = registry.copy()
    nested.register("other", poll=True)
    assert registry.get("other") is None
    registry.unregister("check_job")
    assert nested.get("check_job") is not None


def test_module_level_register_uses_the_default_registry() -> None:
    name = "loopwarden_test_module_level_tool"
    try:
        profile = profiles.register(name, poll=True, volatile_keys={"checked_at"})
        assert profiles.get(name) is profile
        assert default_registry.get(name) is profile
        assert profiles.is_known_poll(name, {})
        assert profiles.canonical_name(name) == name
    finally:
        profiles.unregister(name)
    assert profiles.get(name) is None


# --------------------------------------------------------------------------------------------
# Volatile keys change outcome hashes


def job_result(checked_at: int, status: str = "running") -> dict[str, Any]:
    return result(
        "job 7 is running",
        {"status": status, "checked_at": checked_at, "job": {"id": 7, "checked_at": checked_at}},
    )


def test_user_volatile_keys_are_ignored_at_any_depth(registry: ProfileRegistry) -> None:
    first, second = job_result(1), job_result(2)
    assert outcome_of("check_job", {}, first) != outcome_of("check_job", {}, second)
    registry.register("check_job", poll=True, volatile_keys={"checked_at"})
    assert outcome_of("check_job", {}, first, registry=registry) == outcome_of(
        "check_job", {}, second, registry=registry
    )
    # Other fields still count as progress.
    assert outcome_of("check_job", {}, first, registry=registry) != outcome_of(
        "check_job", {}, job_result(1, status="done"), registry=registry
    )


def test_volatile_keys_apply_to_plain_dict_and_list_results(registry: ProfileRegistry) -> None:
    registry.register("check_job", volatile_keys={"checked_at"})

    def outcome(value: object) -> str | None:
        return outcome_of("check_job", {}, value, registry=registry).result_hash

    assert outcome({"status": "running", "checked_at": 1}) == outcome(
        {"status": "running", "checked_at": 2}
    )
    assert outcome([{"checked_at": 1, "n": 1}]) == outcome([{"checked_at": 2, "n": 1}])
    assert outcome({"status": "running"}) != outcome({"status": "done"})


def test_volatile_keys_combine_with_send_like_stripping(registry: ProfileRegistry) -> None:
    registry.register("notify", send_like=True, volatile_keys={"deliveredVia"})

    def sent(message_id: str, via: str) -> dict[str, Any]:
        return result("sent", {"ok": True, "messageId": message_id, "deliveredVia": via})

    assert outcome_of("notify", {}, sent("m1", "a"), registry=registry) == outcome_of(
        "notify", {}, sent("m2", "b"), registry=registry
    )


def test_volatile_keys_keep_cycles_intact(registry: ProfileRegistry) -> None:
    registry.register("graph", volatile_keys={"ts"})

    def cyclic(ts: int) -> dict[str, Any]:
        details: dict[str, Any] = {"ts": ts, "node": {"ts": ts}}
        details["node"]["parent"] = details
        return result("g", details)

    assert outcome_of("graph", {}, cyclic(1), registry=registry) == outcome_of(
        "graph", {}, cyclic(2), registry=registry
    )


# --------------------------------------------------------------------------------------------
# Thread safety


@pytest.mark.slow
def test_concurrent_reads_during_registration(registry: ProfileRegistry) -> None:
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                assert registry.canonical_name("bash") == "exec"
                assert registry.is_known_poll("process", {"action": "poll"})
                profile = registry.get("write")
                assert profile is not None and profile.name == "write"
        except BaseException as error:  # surfaced below
            errors.append(error)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        for i in range(500):
            registry.register(f"tool_{i}", aliases=(f"alias_{i}",), poll=i % 2 == 0)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors
    assert len(registry) == len(default_registry) + 500
    assert registry.canonical_name("alias_499") == "tool_499"
