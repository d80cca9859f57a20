"""Spec §i scenarios at the level of argument and outcome hashing (loopwarden.fingerprint)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from loopwarden.base.types import MISSING
from loopwarden.fingerprint import (
    UNTRUSTED_ZERO_ID,
    Outcome,
    args_hash,
    canonical_json,
    canonicalise_untrusted,
    digest,
    error_text,
    extract_unknown_tool,
    mask_when_spans,
    mutation_target_hash,
    orjson_safe,
    outcome_of,
)

HASH_RE = re.compile(r"[0-9a-f]{64}")
NONCE_A = "0123456789abcdef"
NONCE_B = "fedcba9876543210"
NONCE_C = "a1b2c3d4e5f60718"


def result(text: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "details": details or {}}


def exec_result(
    status: str,
    *,
    exit_code: object = None,
    aggregated: str | None = None,
    text: str = "",
    **details: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"status": status, **details}
    if exit_code is not None:
        body["exitCode"] = exit_code
    if aggregated is not None:
        body["aggregated"] = aggregated
    return result(text, body)


def exec_outcome(command: str, res: dict[str, Any]) -> Outcome:
    return outcome_of("exec", {"command": command}, res)


# --------------------------------------------------------------------------------------------
# Group 1: argument hashing


def test_s01_same_tool_and_params_hash_equal() -> None:
    assert args_hash("read", {"path": "/file1"}) == args_hash("read", {"path": "/file1"})


def test_s02_different_params_hash_differently() -> None:
    assert args_hash("read", {"path": "/file1"}) != args_hash("read", {"path": "/file2"})


def test_s03_different_tools_hash_differently() -> None:
    assert args_hash("read", {"path": "/a"}) != args_hash("write", {"path": "/a"})


@pytest.mark.parametrize("params", ["string-param", 123, None])
def test_s04_non_object_params_hash_as_tool_prefix_and_hex(params: object) -> None:
    value = args_hash("tool", params)
    assert value.startswith("tool:")
    assert len(value) == len("tool:") + 64
    assert re.fullmatch(r"tool:[0-9a-f]{64}", value)


def test_s05_key_order_is_irrelevant() -> None:
    assert args_hash("t", {"a": 1, "b": 2}) == args_hash("t", {"b": 2, "a": 1})


def test_s06_large_params_keep_fixed_length() -> None:
    assert len(args_hash("read", {"data": "x" * 20000})) == len("read:") + 64


def test_s07_cycles_and_shared_children_hash_like_a_fresh_structure() -> None:
    shared = {"k": [1, 2]}
    cyclic: dict[str, Any] = {"first": shared, "second": shared}
    cyclic["self"] = cyclic
    fresh: dict[str, Any] = {"self": None, "second": {"k": [1, 2]}, "first": {"k": [1, 2]}}
    fresh["self"] = fresh
    assert args_hash("tool", cyclic) == args_hash("tool", fresh)
    assert re.fullmatch(r"tool:[a-f0-9]{64}", args_hash("tool", cyclic))
    assert b'"[Circular]"' in canonical_json(cyclic)
    # Shared, non-cyclic references are serialised in full each time.
    assert canonical_json(cyclic).count(b'{"k":[1,2]}') == 2


def test_a_long_key_shared_by_small_dicts_is_not_handed_to_orjson() -> None:
    # Few items, but each reference writes the key out again: orjson would build it whole.
    key = "k" * 40_000
    shared = {key: 1}
    assert not orjson_safe([shared, shared])
    assert not orjson_safe([{key: i} for i in range(2000)])  # 80 MB of one shared key
    assert orjson_safe([{key: 1}, {"other" + key: 2}])  # no sharing: its own size, safe
    assert canonical_json([shared, shared]) == canonical_json([{key: 1}, {key: 1}])


# --------------------------------------------------------------------------------------------
# Group 2: recording (hash part)


def test_s16_process_log_with_huge_text_hashes_to_64_hex() -> None:
    outcome = outcome_of(
        "process",
        {"action": "log", "sessionId": "sess-1"},
        result("x" * 40000, {"status": "running", "totalLines": 1, "totalChars": 40000}),
    )
    assert outcome.result_hash is not None
    assert HASH_RE.fullmatch(outcome.result_hash)


# --------------------------------------------------------------------------------------------
# Group 5: known polling (hash part of the POLL fixture)


def test_s34_identical_polls_hash_equal_and_changing_output_differs() -> None:
    poll_args = {"action": "poll", "sessionId": "sess-1"}
    poll = result(
        "(no new output)\n\nProcess still running.", {"status": "running", "aggregated": "steady"}
    )
    assert outcome_of("process", poll_args, poll) == outcome_of("process", poll_args, poll)
    changing = {
        outcome_of(
            "process", poll_args, result(f"line {i}", {"status": "running", "aggregated": f"{i}"})
        ).result_hash
        for i in range(25)
    }
    assert len(changing) == 25


def test_process_poll_ignores_fields_outside_its_projection() -> None:
    poll_args = {"action": "poll", "sessionId": "sess-1"}
    first = result("same", {"status": "running", "aggregated": "a", "pid": 1, "startedAt": 5})
    second = result("same", {"status": "running", "aggregated": "a", "pid": 2, "startedAt": 9})
    assert outcome_of("process", poll_args, first) == outcome_of("process", poll_args, second)
    missing_status = result("same", {"aggregated": "a"})
    null_status = result("same", {"status": None, "aggregated": "a"})
    # A missing status (JS undefined) stays distinct from an explicit null.
    assert (
        outcome_of("process", poll_args, missing_status).result_hash
        != outcome_of("process", poll_args, null_status).result_hash
    )


# --------------------------------------------------------------------------------------------
# Group 8: exec normalisation


def test_s49_exec_completed_ignores_duration_and_cwd() -> None:
    outcomes = {
        exec_outcome(
            "grafana-api.sh datasources",
            exec_result(
                "completed",
                exit_code=0,
                aggregated="[datasource list]",
                durationMs=100 + i,
                cwd=f"/tmp/run-{i}",
            ),
        )
        for i in range(20)
    }
    assert len(outcomes) == 1
    (outcome,) = outcomes
    assert outcome.outcome_kind is None


def test_s50_exec_running_hashes_only_the_tail() -> None:
    hashes = {
        exec_outcome(
            "tail -f log",
            exec_result(
                "running",
                text=f"Command still running (session s{i}, pid {1000 + i})",
                sessionId=f"s{i}",
                pid=1000 + i,
                startedAt=1_700_000_000 + i,
                cwd=f"/w/{i}",
                tail="waiting for connection",
            ),
        ).result_hash
        for i in range(20)
    }
    assert len(hashes) == 1


def test_s51_exec_changing_output_hashes_differently() -> None:
    hashes = {
        exec_outcome("date", exec_result("completed", exit_code=0, aggregated=f"tick {i}"))
        for i in range(30)
    }
    assert len({o.result_hash for o in hashes}) == 30
    assert all(o.outcome_kind is None for o in hashes)


def test_s52_exec_failed_without_exit_code_is_not_terminal() -> None:
    outcomes = [
        exec_outcome(
            "flaky",
            exec_result("failed", aggregated="", text=f"connection refused, attempt {i}"),
        )
        for i in range(30)
    ]
    assert len({o.result_hash for o in outcomes}) == 30
    assert all(o.outcome_kind is None and o.failure_identity_hash is None for o in outcomes)


TERMINAL_KINDS = [
    exec_result(
        "completed",
        exit_code=1,
        text="Traceback: missing package\n\n(Command exited with code 1)",
    ),
    exec_result(
        "failed", exit_code=126, aggregated="", text="Command not executable (permission denied)"
    ),
    exec_result("failed", exit_code=127, aggregated="", text="Command not found"),
]


@pytest.mark.parametrize("res", TERMINAL_KINDS)
def test_s53_terminal_failures_across_changing_commands(res: dict[str, Any]) -> None:
    outcomes = [exec_outcome(f"python job-{i}.py", res) for i in range(20)]
    assert all(o.outcome_kind == "terminal-exec-failure" for o in outcomes)
    assert all(o.failure_identity_hash is not None for o in outcomes)
    assert len({o.result_hash for o in outcomes}) == 1


DRIFTS = [
    lambda i: f"job failed at 2026-05-0{i % 9 + 1}T10:11:{i:02d}.123Z: boom",
    lambda i: f"[10:11:{i:02d}] job failed: boom",
    lambda i: f"job failed on attempt {i}: boom",
    lambda i: f"job failed (retry={i}): boom",
    lambda i: f"job failed after {i}ms: boom",
    lambda i: f"job failed after {i}s: boom",
    lambda i: f"worker pid={4000 + i} failed: boom",
]


@pytest.mark.parametrize("drift", DRIFTS)
def test_s54_failure_identity_ignores_when_spans(drift: Any) -> None:
    outcomes = [
        exec_outcome("./job.sh", exec_result("completed", exit_code=1, aggregated=drift(i)))
        for i in range(1, 21)
    ]
    assert len({o.result_hash for o in outcomes}) == 20
    assert all(o.outcome_kind == "terminal-exec-failure" for o in outcomes)
    assert len({o.failure_identity_hash for o in outcomes}) == 1


@pytest.mark.parametrize(
    ("base", "changed"),
    [
        ((1, "job failed: boom"), (2, "job failed: boom")),
        ((1, "job failed: boom"), (1, "job failed: another reason")),
        ((1, "job failed: boom (errno 2)"), (1, "job failed: boom (errno 13)")),
        ((1, "job failed on 2026-05-01: boom"), (1, "job failed on 2026-05-02: boom")),
    ],
)
def test_s55_significant_differences_change_the_failure_identity(
    base: tuple[int, str], changed: tuple[int, str]
) -> None:
    def failure(exit_code: int, output: str) -> Outcome:
        return exec_outcome(
            "./job.sh", exec_result("completed", exit_code=exit_code, aggregated=output)
        )

    first, second = failure(*base), failure(*changed)
    assert first.outcome_kind == second.outcome_kind == "terminal-exec-failure"
    assert first.failure_identity_hash != second.failure_identity_hash


def test_s56_pid_drift_keeps_identity_other_command_output_differs() -> None:
    first = [
        exec_outcome(
            "node first.js",
            exec_result("failed", exit_code=1, aggregated=f"Error in first.js (pid {900 + i})"),
        )
        for i in range(20)
    ]
    second = exec_outcome(
        "node second.js", exec_result("failed", exit_code=1, aggregated="Error in second.js")
    )
    assert len({o.failure_identity_hash for o in first}) == 1
    assert second.failure_identity_hash != first[0].failure_identity_hash


VETO = {
    "content": [{"type": "text", "text": "blocked"}],
    "details": {"status": "blocked", "deniedReason": "tool-loop"},
}


def test_s57_own_loop_veto_has_no_result_hash() -> None:
    outcome = outcome_of("exec", {"command": "job-20"}, VETO)
    assert outcome == Outcome(None, outcome_kind="tool-loop-veto")


def test_s84_other_denials_keep_normal_hashing() -> None:
    plugin_veto = {
        "content": [{"type": "text", "text": "denied by plugin"}],
        "details": {"status": "blocked", "deniedReason": "plugin-before-tool-call"},
    }
    first = outcome_of("message", {"action": "read"}, plugin_veto)
    assert first.outcome_kind is None
    assert first.result_hash is not None
    assert first == outcome_of("message", {"action": "read"}, plugin_veto)


@pytest.mark.parametrize(
    "res",
    [
        exec_result("completed", exit_code=1, text="\n\n(Command exited with code 1)"),
        exec_result("completed", exit_code=0, aggregated="done"),
        exec_result("failed", exit_code=1, aggregated="slow", timedOut=True),
        exec_result("failed", exit_code=float("inf"), aggregated="odd"),
        exec_result("failed", aggregated="no code"),
        exec_result("completed", exit_code=1.0, text="(Command exited with code 1)"),
    ],
)
def test_s58_non_terminal_exec_results_have_no_outcome_kind(res: dict[str, Any]) -> None:
    outcome = exec_outcome("python job.py", res)
    assert outcome.result_hash is not None
    assert outcome.outcome_kind is None
    assert outcome.failure_identity_hash is None


def test_exec_approval_status_projection() -> None:
    pending = exec_result("approval-pending", reason="needs ok", host="gw", command="rm -rf x")
    again = dict(pending, details={**pending["details"], "requestedAt": 123})
    assert exec_outcome("rm -rf x", pending) == exec_outcome("rm -rf x", again)


def test_bash_is_an_alias_of_exec() -> None:
    res = exec_result("completed", exit_code=0, aggregated="ok", durationMs=1)
    res2 = exec_result("completed", exit_code=0, aggregated="ok", durationMs=2)
    assert outcome_of("bash", {}, res) == outcome_of("bash", {}, res2)


# --------------------------------------------------------------------------------------------
# Group 9: untrusted-content canonicalisation


def wrap(payload: str, nonce: str, depth: int = 0) -> str:
    text = (
        f'<<<EXTERNAL_UNTRUSTED_CONTENT id="{nonce}">>>\n{payload}\n'
        f'<<<END_EXTERNAL_UNTRUSTED_CONTENT id="{nonce}">>>'
    )
    for _ in range(depth):
        text = json.dumps(text)
    return text


def browser_outcome(text: str) -> Outcome:
    return outcome_of(
        "browser",
        {"action": "act", "request": {"kind": "press", "key": "NotAKey"}},
        result(text, {"fetchedAt": "2026-09-01T00:00:00Z", "tookMs": 12}),
    )


def test_s60_thrown_errors_differing_only_by_nonce_hash_equal() -> None:
    errors = [
        RuntimeError("Protected network error: " + wrap("net::ERR_BLOCKED", nonce))
        for nonce in (NONCE_A, NONCE_B, NONCE_C)
    ]
    outcomes = {outcome_of("browser", {"action": "act"}, error=e) for e in errors}
    assert len(outcomes) == 1
    (outcome,) = outcomes
    assert outcome.result_hash is not None and outcome.result_hash.startswith("error:")
    assert outcome.no_progress


@pytest.mark.parametrize("depth", [0, 1, 2, 3, 4])
def test_s60_returned_results_differing_only_by_nonce_hash_equal(depth: int) -> None:
    hashes = {
        browser_outcome(wrap('Unknown key "NotAKey"', nonce, depth)).result_hash
        for nonce in (NONCE_A, NONCE_B, NONCE_C)
    }
    assert len(hashes) == 1


def test_s60_arguments_are_never_canonicalised() -> None:
    first = args_hash("browser", {"text": wrap("page", NONCE_A)})
    second = args_hash("browser", {"text": wrap("page", NONCE_B)})
    assert first != second


def web_fetch(text: str, **details: Any) -> str | None:
    body = {"status": 200, "url": "https://example.com", "fetchedAt": 1, "tookMs": 5}
    body.update(details)
    return outcome_of("web_fetch", {"url": "https://example.com"}, result(text, body)).result_hash


def test_s61_baseline_fresh_nonces_only_hash_equal() -> None:
    assert web_fetch(wrap("same page", NONCE_A)) == web_fetch(wrap("same page", NONCE_B))


def marker(nonce: str, *, end: bool = False, run: int = 0) -> str:
    slashes = "\\" * run
    prefix = "END_" if end else ""
    return f'<<<{prefix}EXTERNAL_UNTRUSTED_CONTENT id={slashes}"{nonce}{slashes}">>>'


S61_VARIANTS: dict[str, tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]] = {
    "payload": ((wrap("same page", NONCE_A), {}), (wrap("other page", NONCE_B), {})),
    "status": ((wrap("same page", NONCE_A), {}), (wrap("same page", NONCE_B), {"status": 500})),
    "timestamp": (
        (wrap("same page", NONCE_A), {"fetchedAt": 1}),
        (wrap("same page", NONCE_B), {"fetchedAt": 2}),
    ),
    "tookMs": (
        (wrap("same page", NONCE_A), {"tookMs": 5}),
        (wrap("same page", NONCE_B), {"tookMs": 6}),
    ),
    "ordinary 16-char id": (
        (wrap("same page", NONCE_A), {"id": NONCE_A}),
        (wrap("same page", NONCE_B), {"id": NONCE_B}),
    ),
    "malformed marker": (
        (
            f"<<<EXTERNAL_UNTRUSTED_CONTENT id={NONCE_A}>>>\nsame page\n{marker(NONCE_A, end=True)}",
            {},
        ),
        (
            f"<<<EXTERNAL_UNTRUSTED_CONTENT id={NONCE_B}>>>\nsame page\n{marker(NONCE_B, end=True)}",
            {},
        ),
    ),
    "uppercase nonce": (
        (wrap("same page", NONCE_A.upper()), {}),
        (wrap("same page", NONCE_B.upper()), {}),
    ),
    "unrelated id text": (
        (wrap(f'see id="{NONCE_A}"', NONCE_A), {}),
        (wrap(f'see id="{NONCE_B}"', NONCE_B), {}),
    ),
    "unpaired start": (
        (f"{marker(NONCE_A)}\nsame page", {}),
        (f"{marker(NONCE_B)}\nsame page", {}),
    ),
    "unpaired end": (
        (f"same page\n{marker(NONCE_A, end=True)}", {}),
        (f"same page\n{marker(NONCE_B, end=True)}", {}),
    ),
    "mismatched pair": (
        (f"{marker(NONCE_A)}\nsame page\n{marker(NONCE_C, end=True)}", {}),
        (f"{marker(NONCE_B)}\nsame page\n{marker(NONCE_C, end=True)}", {}),
    ),
    "intervening marker": (
        (f"{marker(NONCE_A)}\nsame {marker(NONCE_C)} page\n{marker(NONCE_A, end=True)}", {}),
        (f"{marker(NONCE_B)}\nsame {marker(NONCE_C)} page\n{marker(NONCE_B, end=True)}", {}),
    ),
    "split across fields": (
        (f"{marker(NONCE_A)}\nsame page", {"footer": marker(NONCE_A, end=True)}),
        (f"{marker(NONCE_B)}\nsame page", {"footer": marker(NONCE_B, end=True)}),
    ),
}


@pytest.mark.parametrize("variant", sorted(S61_VARIANTS))
def test_s61_changes_other_than_a_well_formed_nonce_stay_significant(variant: str) -> None:
    (text_a, details_a), (text_b, details_b) = S61_VARIANTS[variant]
    assert web_fetch(text_a, **details_a) != web_fetch(text_b, **details_b)


@pytest.mark.parametrize("depth", [0, 1, 2, 3, 4])
def test_s62_marker_pairs_split_across_encoded_json_fields(depth: int) -> None:
    def split(nonce: str) -> object:
        fields = {"start": marker(nonce), "body": "same page", "end": marker(nonce, end=True)}
        if depth == 0:
            return fields
        text = json.dumps(fields)
        for _ in range(depth - 1):
            text = json.dumps(text)
        return text

    assert digest(split(NONCE_A)) != digest(split(NONCE_B))


def test_s63_envelope_around_20000_backslashes_encoded_once() -> None:
    def encoded(payload: str, nonce: str) -> str:
        return json.dumps(wrap("\\" * 20000 + payload, nonce))

    same_a = web_fetch(encoded('"same"', NONCE_A))
    same_b = web_fetch(encoded('"same"', NONCE_B))
    changed = web_fetch(encoded('"changed"', NONCE_C))
    assert same_a == same_b
    assert changed != same_a


@pytest.mark.parametrize("depth", [0, 1, 2, 3, 4])
def test_s64_empty_id_differs_zero_id_is_canonical(depth: int) -> None:
    valid = digest(wrap("page", NONCE_A, depth))
    assert digest(wrap("page", "", depth)) != valid
    assert digest(wrap("page", UNTRUSTED_ZERO_ID, depth)) == valid


@pytest.mark.parametrize("run", [2, 4, 5, 6, 8, 14])
def test_s65_marker_backslash_runs_not_of_the_form_2n_minus_1(run: int) -> None:
    def text(nonce: str) -> str:
        return f"{marker(nonce, run=run)}page{marker(nonce, end=True, run=run)}"

    assert digest(text(NONCE_A)) != digest(text(NONCE_B))


@pytest.mark.parametrize("run", [1, 3, 7])
def test_s65_control_runs_of_the_form_2n_minus_1_are_canonical(run: int) -> None:
    def text(nonce: str) -> str:
        return f"{marker(nonce, run=run)}page{marker(nonce, end=True, run=run)}"

    assert digest(text(NONCE_A)) == digest(text(NONCE_B))


@pytest.mark.parametrize("run", [1, 3, 7])
def test_s66_payload_quote_escaped_one_level_shallower(run: int) -> None:
    shallower = "\\" * (run // 2)

    def text(nonce: str, quote_run: str) -> str:
        payload = f'say {quote_run}"hi{quote_run}"'
        return f"{marker(nonce, run=run)}{payload}{marker(nonce, end=True, run=run)}"

    assert digest(text(NONCE_A, shallower)) != digest(text(NONCE_B, shallower))
    consistent = "\\" * run
    assert digest(text(NONCE_A, consistent)) == digest(text(NONCE_B, consistent))


def test_canonicalise_untrusted_rewrites_only_the_ids() -> None:
    text = "before " + wrap("body", NONCE_A) + " after " + wrap("more", NONCE_B, 1)
    canonical = canonicalise_untrusted(text)
    assert NONCE_A not in canonical and NONCE_B not in canonical
    assert canonical == "before " + wrap("body", UNTRUSTED_ZERO_ID) + " after " + wrap(
        "more", UNTRUSTED_ZERO_ID, 1
    )
    assert canonicalise_untrusted("no markers") == "no markers"


# --------------------------------------------------------------------------------------------
# Group 10: write outcomes


def test_s67_write_no_ops_hash_equal_and_are_no_progress() -> None:
    a = outcome_of("write", {"path": "a.md"}, result("a.md unchanged", {"changed": False}))
    b = outcome_of("write", {"path": "b.md"}, result("b.md unchanged", {"changed": False}))
    assert a.result_hash == b.result_hash
    assert a.no_progress and b.no_progress
    assert a.outcome_kind is None


def test_s68_successful_writes_hash_differently_and_are_mutations() -> None:
    a = outcome_of(
        "write",
        {"path": "a.md", "content": "x"},
        result("Wrote a.md", {"changed": True, "diff": "--- a.md\n+++ a.md\n+x"}),
    )
    b = outcome_of(
        "write",
        {"path": "b.md", "content": "x"},
        result("Wrote b.md", {"changed": True, "diff": "--- b.md\n+++ b.md\n+x"}),
    )
    assert a.result_hash != b.result_hash
    assert not a.no_progress and not b.no_progress
    assert a.outcome_kind == b.outcome_kind == "write-mutation"


def test_mutation_target_hash_resolves_paths_lexically() -> None:
    absolute = mutation_target_hash("write", {"path": "/tmp/b.md"})
    assert absolute is not None and HASH_RE.fullmatch(absolute)
    assert mutation_target_hash("write", {"path": "x/../b.md"}, "/tmp") == absolute
    assert mutation_target_hash("write", {"path": "b.md"}, "/tmp") == absolute
    assert mutation_target_hash("write", {"path": "/tmp/c.md"}) != absolute
    assert mutation_target_hash("read", {"path": "/tmp/b.md"}) is None
    assert mutation_target_hash("write", {"content": "no path"}) is None
    assert mutation_target_hash("write", "not a dict") is None


# --------------------------------------------------------------------------------------------
# Group 11: messaging sends


def message_payload(i: int) -> dict[str, Any]:
    return {
        "ok": True,
        "channel": "feishu",
        "chatId": "oc_chat",
        "runId": f"run_{i}",
        "messageId": f"om_{i}",
        "receipt": {"platformMessageId": f"p_{i}"},
    }


def send_result(details: dict[str, Any]) -> dict[str, Any]:
    return result(json.dumps(details, indent=2), details)


SEND_ARGS = {"action": "send", "target": "feishu:oc_chat", "text": "ping"}


def test_s75_sends_differing_only_by_delivery_ids_hash_equal() -> None:
    first = outcome_of("message", SEND_ARGS, send_result(message_payload(1)))
    second = outcome_of("message", SEND_ARGS, send_result(message_payload(2)))
    assert first.result_hash == second.result_hash


def test_s76_broadcast_results_hash_equal() -> None:
    def broadcast(i: int) -> dict[str, Any]:
        return send_result(
            {
                "results": [
                    {
                        "channel": ch,
                        "ok": True,
                        "result": {"messageId": f"{ch}-{i}", "receipt": {"n": i}},
                    }
                    for ch in ("slack", "telegram")
                ]
            }
        )

    args = {"action": "broadcast", "text": "ping"}
    assert outcome_of("message", args, broadcast(1)) == outcome_of("message", args, broadcast(2))


@pytest.mark.parametrize(
    ("tool", "args", "volatile"),
    [
        ("sessions_send", {"sessionKey": "agent:main", "message": "ping"}, "runId"),
        ("telegram", {"action": "send", "to": "123", "text": "ping"}, "messageId"),
        ("telegram", {"to": "123", "text": "ping"}, "messageId"),
        ("message", {"action": "reply", "replyTo": "m0", "text": "ping"}, "messageId"),
        ("message", {"action": "upload-file", "path": "a.png"}, "fileId"),
        ("message", {"action": "poll", "question": "?", "options": ["a"]}, "pollId"),
    ],
)
def test_s77_send_like_tools_and_actions_strip_fresh_ids(
    tool: str, args: dict[str, Any], volatile: str
) -> None:
    hashes = {
        outcome_of(tool, args, send_result({"ok": True, volatile: f"id-{i}"})).result_hash
        for i in range(20)
    }
    assert len(hashes) == 1


def test_s78_sends_with_different_text_have_different_args_hashes() -> None:
    hashes = {args_hash("message", {**SEND_ARGS, "text": f"line {i}"}) for i in range(20)}
    assert len(hashes) == 20


@pytest.mark.parametrize("action", ["read", "channel-create"])
def test_s79_non_send_actions_keep_ids_significant(action: str) -> None:
    args = {"action": action, "channel": "general"}
    first = outcome_of("message", args, send_result({"messageId": "m1", "ts": "1"}))
    second = outcome_of("message", args, send_result({"messageId": "m2", "ts": "2"}))
    assert first.result_hash != second.result_hash


def test_s79_channel_tool_non_send_action_keeps_ids_significant() -> None:
    args = {"action": "read", "chat": "123"}
    first = outcome_of("telegram", args, send_result({"messageId": "m1"}))
    second = outcome_of("telegram", args, send_result({"messageId": "m2"}))
    assert first.result_hash != second.result_hash


def test_s80_different_route_ids_hash_differently() -> None:
    def routed(route: str, i: int) -> dict[str, Any]:
        return send_result({"ok": True, "messageId": f"m{i}", "route": {"id": route}})

    same_route = {outcome_of("message", SEND_ARGS, routed("r1", i)).result_hash for i in range(3)}
    assert len(same_route) == 1
    assert (
        outcome_of("message", SEND_ARGS, routed("r1", 1)).result_hash
        != outcome_of("message", SEND_ARGS, routed("r2", 1)).result_hash
    )


def plugin_send(i: int, conversation: str = "loop-room") -> dict[str, Any]:
    return send_result(
        {
            "message": {
                "id": f"qa_{i}",
                "accountId": "acct",
                "direction": "outbound",
                "conversation": {"id": conversation},
                "senderId": "bot",
                "text": "ping",
                "timestamp": 1_700_000_000 + i,
            }
        }
    )


def test_s85_plugin_shaped_sends_drop_message_ids_keep_conversation_ids() -> None:
    same = {outcome_of("message", SEND_ARGS, plugin_send(i)).result_hash for i in range(20)}
    assert len(same) == 1
    moving = {
        outcome_of("message", SEND_ARGS, plugin_send(i, f"room-{i}")).result_hash for i in range(20)
    }
    assert len(moving) == 20


# --------------------------------------------------------------------------------------------
# Unknown-tool extraction, error text, outcome basics


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Tool exec not found", "exec"),
        ("Unknown tool: missing_a", "missing_a"),
        ("Unknown tool id: missing_b", "id"),
        ("  error: UNKNOWN TOOL 'Web.Search'  ", "web.search"),
        ('tool "image_gen" is not available', "image_gen"),
        ("Tool my-tool   not found", "my-tool"),
        ("file not found", None),
        ("permission denied", None),
    ],
)
def test_unknown_tool_extraction(text: str, expected: str | None) -> None:
    assert extract_unknown_tool(text) == expected


def test_s47_unknown_tool_errors_record_the_tool_name() -> None:
    outcome = outcome_of("exec", {"x": 1}, error=RuntimeError("Tool exec not found"))
    assert outcome.unknown_tool_name == "exec"
    assert outcome.result_hash is not None and outcome.result_hash.startswith("error:")
    assert HASH_RE.fullmatch(outcome.result_hash.removeprefix("error:"))


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ValueError("boom"), "boom"),
        (ValueError(), "ValueError"),
        (KeyError("k"), "'k'"),
        ("plain text", "plain text"),
        (42, "42"),
        (1.0, "1"),
        (1.5, "1.5"),
        (float("nan"), "NaN"),
        (True, "true"),
        (2**80, str(2**80)),
        ({"b": 1, "a": 2}, '{"a":2,"b":1}'),
        ([1, "x"], '[1,"x"]'),
    ],
)
def test_error_text_rules(error: object, expected: str) -> None:
    assert error_text(error) == expected


def test_errors_win_over_results_and_none_or_missing_mean_no_error() -> None:
    res = result("fine")
    errored = outcome_of("read", {}, res, RuntimeError("x"))
    assert errored.result_hash is not None and errored.result_hash.startswith("error:")
    assert outcome_of("read", {}, res, None) == outcome_of("read", {}, res, MISSING)
    assert outcome_of("read", {}, res) == outcome_of("read", {}, res, None)


def test_same_error_text_from_exception_or_string_hashes_equal() -> None:
    assert outcome_of("t", {}, error=RuntimeError("boom")) == outcome_of("t", {}, error="boom")


def test_missing_result_records_nothing_but_none_is_a_real_result() -> None:
    assert outcome_of("read", {}) == Outcome(None)
    none_outcome = outcome_of("read", {}, None)
    assert none_outcome.result_hash is not None and HASH_RE.fullmatch(none_outcome.result_hash)


def test_non_mapping_results_hash_by_value() -> None:
    assert outcome_of("t", {}, [1, 2]) == outcome_of("t", {}, (1, 2))
    assert outcome_of("t", {}, "a").result_hash != outcome_of("t", {}, "b").result_hash


def test_openclaw_shaped_results_hash_details_and_text_only() -> None:
    base = result("same output", {"ok": True})
    with_extra = {**base, "isError": False, "meta": {"n": 1}}
    assert outcome_of("read", {}, base) == outcome_of("read", {}, with_extra)
    assert outcome_of("read", {}, base) != outcome_of("read", {}, result("other", {"ok": True}))
    assert outcome_of("read", {}, base) != outcome_of("read", {}, result("same output", {}))


def test_text_joins_typed_text_entries_and_trims() -> None:
    joined = {
        "content": [
            {"type": "text", "text": "  a"},
            {"type": "image", "data": "..."},
            {"text": "untyped entries are ignored"},
            {"type": "text", "text": "b  "},
        ],
        "details": {},
    }
    assert outcome_of("read", {}, joined) == outcome_of("read", {}, result("a\nb"))


def test_plain_dict_results_are_their_own_details() -> None:
    first = outcome_of("check_job", {}, {"status": "running", "progress": 1})
    second = outcome_of("check_job", {}, {"status": "running", "progress": 2})
    assert first.result_hash != second.result_hash
    bare_veto = {"status": "blocked", "deniedReason": "tool-loop"}
    assert outcome_of("check_job", {}, bare_veto).outcome_kind == "tool-loop-veto"


def test_mask_when_spans_keeps_why_and_masks_when() -> None:
    text = (
        "2026-05-01T10:11:12.123Z failed attempt 3 retry=4 after 15ms and 2 s "
        "(pid=123 ppid: 9) at 10:11:12 errno 2 on 2026-05-01 exit code 1"
    )
    assert mask_when_spans(text) == (
        "# failed # # after # and # (# #) at # errno 2 on 2026-05-01 exit code 1"
    )
