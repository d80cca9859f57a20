"""Coding agents' loops and their progress (issue 21), driven through ``LoopGuard`` as a model
that insists would drive it: each loop shape is stopped within its budget of executions, and
its progress twin is never blocked. One test per shape runs through the real ``claude-hook``
command."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from loopwarden import LoopDetectionConfig, LoopGuard
from loopwarden.cli import app

Step = tuple[str, dict[str, Any], Any, Any]  # tool, args, result, error
Shape = Callable[[int], Step]
PRESETS = ("openclaw", "early")
EXTENSIONS_OFF = {"oneToolCycle": False, "failureRepeat": False, "equivalentArguments": False}


def run(shape: Shape, preset: str, calls: int = 60, **config: Any) -> tuple[int, int | None]:
    """(calls executed, the call first blocked) for a model that retries after every block
    until the run is ended."""
    guard = LoopGuard(LoopDetectionConfig(enabled=True, preset=preset, **config))
    executed, blocked = 0, None
    for i in range(calls):
        tool, args, result, error = shape(i)
        verdict = guard.before_tool_call(tool, args, session="s", call_id=f"c{i}")
        if verdict.action == "block":
            blocked = blocked or i + 1
            if verdict.terminate:
                break
            continue
        executed += 1
        guard.after_tool_call(tool, args, session="s", result=result, error=error,
                              call_id=f"c{i}")
    return executed, blocked


def bash(command: str, out: str) -> tuple[str, dict[str, Any], Any, Any]:
    return "Bash", {"command": command}, {"stdout": out, "stderr": "", "interrupted": False}, None


def exec_failure(command: str, output: str, code: int = 2) -> Step:
    details = {"status": "failed", "exitCode": code, "aggregated": output}
    return "exec", {"command": command}, {"content": [{"type": "text", "text": output}],
                                          "details": details}, None


# -- one-tool cycles ---------------------------------------------------------------------------


def one_tool_cycle(period: int, tool: str = "Bash") -> Shape:
    def step(i: int) -> Step:
        name = f"src/module_{i % period}.py"
        if tool == "exec":
            return ("exec", {"command": f"cat {name}"},
                    {"content": [{"type": "text", "text": f"body of {name}"}],
                     "details": {"status": "completed", "exitCode": 0,
                                 "aggregated": f"body of {name}"}}, None)
        return bash(f"cat {name}", f"body of {name}")
    return step


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("period", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("tool", ["Bash", "exec"])
def test_a_one_tool_cycle_is_stopped_within_25_executions(preset: str, period: int,
                                                          tool: str) -> None:
    executed, blocked = run(one_tool_cycle(period, tool), preset)
    assert blocked is not None and executed <= 25


@pytest.mark.parametrize("preset", PRESETS)
def test_a_one_tool_cycle_whose_output_changes_is_progress(preset: str) -> None:
    def reading_a_growing_log(i: int) -> Step:
        return bash(f"tail logs/part{i % 3}.log", f"line {i}: compiled unit {i}")
    assert run(reading_a_growing_log, preset) == (60, None)


@pytest.mark.parametrize("preset", PRESETS)
def test_calls_that_change_the_world_are_never_part_of_a_one_tool_cycle(preset: str) -> None:
    """Three files formatted in turn, the formatter printing the same line each time: each
    call rewrites a file, which is progress, not a cycle."""
    def formatting(i: int) -> Step:
        return "write", {"path": f"f{i % 3}.py", "content": f"v{i}"}, {
            "content": [{"type": "text", "text": "ok"}], "details": {"changed": True}}, None
    executed, blocked = run(formatting, preset)
    assert blocked is None and executed == 60


@pytest.mark.parametrize("preset", PRESETS)
def test_one_argument_churning_with_one_shared_outcome_stays_warning_only(preset: str) -> None:
    def churn(i: int) -> Step:
        return bash(f"grep -r pattern{i % 3} src", "")
    assert run(churn, preset, calls=40, detectors=EXTENSIONS_OFF) == run(churn, preset, calls=40)


def test_with_the_extension_off_a_one_tool_cycle_runs_as_before() -> None:
    assert run(one_tool_cycle(3), "openclaw", detectors=EXTENSIONS_OFF) == (60, None)


# -- the same failure with a fresh argument ----------------------------------------------------


def missing_folder(i: int) -> Step:
    return ("Bash", {"command": f"ls /srv/data-{i}"}, None,
            f"ls: cannot access '/srv/data-{i}': No such file or directory")


def missing_subcommand(i: int) -> Step:
    return exec_failure(f"acme get --request-id req-{9000 + i}",
                        f"error: unexpected argument 'get' found (request req-{9000 + i})")


def toggled_flags(i: int) -> Step:
    """A script's usage error for two ids, the pty flag and the working folder toggled: the
    shell's text output ends with its exit footer."""
    client = ("c-41d7", "c-test")[i % 2]
    args: dict[str, Any] = {"command": f"node tools/lookup.js {client} profile"}
    if i % 3:
        args["pty"] = True
    if i % 4 == 1:
        args["workdir"] = "/srv/app"
    return ("exec", args, f"Unknown command: {client}. Use: resolve | ensure | list\n\n"
            "(Command exited with code 1)", None)


def _untrusted_404(url: str, nonce: str, envelope: bool) -> str:
    """A fetch tool's 404 as JSON text: its error string carries the page inside an
    untrusted-content wrapper whose id is fresh on every call."""
    if envelope:
        page = (f'<<<EXTERNAL_UNTRUSTED_CONTENT id="{nonce}">>>\nSource: Web Fetch\n---\n'
                f'Page not found\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id="{nonce}">>>')
    else:
        page = f'<untrusted-content id="{nonce}">Page not found</untrusted-content>'
    return json.dumps({"status": "error", "tool": "web_fetch",
                       "error": f"Request failed: 404 Not Found for {url}\n{page}"}, indent=2)


URL_VARIANTS = ["https://docs.example.com/api/v2/widgets", "https://docs.example.com/api/v2/widgets/",
                "https://docs.example.com/v2/api/widgets", "https://example.com/docs/api/widgets",
                "https://docs.example.com/api/widgets?version=2"]


def fetch_404_fresh_nonce(i: int) -> Step:
    """URL variants retried, each 404's body carrying a fresh short id in JSON text."""
    url = URL_VARIANTS[i % len(URL_VARIANTS)]
    return "web_fetch", {"url": url}, _untrusted_404(url, f"{0xa8f3c1 + 7 * i:x}", False), None


def fetch_404_fresh_envelope(i: int) -> Step:
    """The same with OpenClaw's envelope, its 8-hex-digit id (too short to be its nonce)."""
    url = URL_VARIANTS[i % len(URL_VARIANTS)]
    return "web_fetch", {"url": url}, _untrusted_404(url, f"{0x5e1f0a27 + i:08x}", True), None


def missing_subcommand_fresh_message_id(i: int) -> Step:
    """The same CLI call, its error naming a fresh message id the call never passed."""
    return ("exec", {"command": "acme messages get"},
            f"error: unrecognized subcommand 'get' (message id: m{7301 + 13 * i})\n\n"
            "(Command exited with code 2)", None)


def shell_dir_toggled_workdir(i: int) -> Step:
    """`dir` with the working folder toggled, failing the same way each time."""
    args: dict[str, Any] = {"command": "dir"}
    if i % 2:
        args["workdir"] = "C:\\Users\\dev\\project"
    return ("exec", args, "dir: cannot access 'build': No such file or directory\n\n"
            "(Command exited with code 2)", None)


def codex_shell_output(i: int) -> Step:
    """A failure that reaches the guard only as the text it printed (Codex gives hooks no
    exit code)."""
    return ("Bash", {"command": f"ls /nonexistent/item-{i}"},
            f"ls: cannot access '/nonexistent/item-{i}': No such file or directory\n", None)


FRESH_FAILURES = [missing_folder, missing_subcommand, toggled_flags, fetch_404_fresh_nonce,
                  fetch_404_fresh_envelope, missing_subcommand_fresh_message_id,
                  shell_dir_toggled_workdir, codex_shell_output]


@pytest.mark.parametrize(("preset", "budget"), [("openclaw", 25), ("early", 15)])
@pytest.mark.parametrize("shape", FRESH_FAILURES, ids=lambda f: f.__name__)
def test_the_same_failure_with_a_fresh_argument_is_stopped(preset: str, budget: int,
                                                           shape: Shape) -> None:
    executed, blocked = run(shape, preset)
    assert blocked is not None and executed <= budget


def first_warning(shape: Shape, preset: str, calls: int = 40) -> int | None:
    """The call whose verdict first warned (1-based), for a model that heeds nothing."""
    guard = LoopGuard(LoopDetectionConfig(enabled=True, preset=preset))
    for i in range(calls):
        tool, args, result, error = shape(i)
        verdict = guard.before_tool_call(tool, args, session="s", call_id=f"c{i}")
        if verdict.action != "allow" or verdict.message:
            return i + 1
        guard.after_tool_call(tool, args, session="s", result=result, error=error,
                              call_id=f"c{i}")
    return None


@pytest.mark.parametrize(("shape", "due"), [(toggled_flags, 10), (shell_dir_toggled_workdir, 22),
                                            (missing_subcommand_fresh_message_id, 10),
                                            (fetch_404_fresh_nonce, 10)],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_early_warns_in_time_for_the_failure_shapes(shape: Shape, due: int) -> None:
    """The described transcripts' due calls (the 10th looping call, or the loop's last)."""
    warned = first_warning(shape, "early")
    assert warned is not None and warned <= due


def _fixed(shape: Shape, fixed_at: int, ok: str) -> Shape:
    """``shape`` until the model fixes the cause, then a different, successful call."""
    def step(i: int) -> Step:
        if i < fixed_at:
            return shape(i)
        tool, args, _, _ = shape(i)
        return tool, {**args, "attempt": i}, f"{ok} {i}", None
    return step


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("shape", FRESH_FAILURES, ids=lambda f: f.__name__)
def test_a_failure_fixed_within_a_few_tries_is_never_blocked(preset: str, shape: Shape) -> None:
    """The progress twin of every failure shape: five failures, then the cause is fixed and
    the work goes on (each later call different, each result new)."""
    assert run(_fixed(shape, 5, "done"), preset)[1] is None


@pytest.mark.parametrize("preset", PRESETS)
def test_different_failures_with_fresh_arguments_are_not_one_failure(preset: str) -> None:
    """A different message, errno or exit code is a different failure."""
    errors = ["No such file or directory", "Permission denied", "Not a directory",
              "Input/output error"]
    def exploring(i: int) -> Step:
        return ("Bash", {"command": f"ls /srv/data-{i}"}, None,
                f"ls: cannot access '/srv/data-{i}': {errors[i % 4]}")
    def exit_codes(i: int) -> Step:
        return exec_failure(f"make target{i}", f"make: *** [target{i}] Error {i % 4 + 1}",
                            code=i % 4 + 1)
    assert run(exploring, preset)[1] is None
    assert run(exit_codes, preset)[1] is None


@pytest.mark.parametrize("preset", PRESETS)
def test_failures_between_successes_are_progress(preset: str) -> None:
    def fixing(i: int) -> Step:
        if i % 2:
            return bash(f"ls /srv/data-{i}", f"file{i}.csv")
        return missing_folder(i)
    assert run(fixing, preset) == (60, None)


def test_with_the_extension_off_a_fresh_argument_failure_runs_as_before() -> None:
    assert run(missing_folder, "openclaw", detectors=EXTENSIONS_OFF) == (60, None)


@pytest.mark.parametrize("preset", PRESETS)
def test_different_pages_fetched_one_after_another_are_not_one_failure(preset: str) -> None:
    """A 404 with a fresh id, then a 403, a 500 and a 404 again: different failures."""
    statuses = ["404 Not Found", "403 Forbidden", "500 Internal Server Error", "410 Gone"]
    def crawling(i: int) -> Step:
        url = f"https://docs.example.com/page-{i}"
        body = json.dumps({"status": "error", "error": f"Request failed: {statuses[i % 4]} "
                           f'<untrusted-content id="{i:06x}">page</untrusted-content>'})
        return "web_fetch", {"url": url}, body, None
    assert run(crawling, preset)[1] is None


# -- equivalent argument forms -----------------------------------------------------------------

CARD = "Model: default (sonnet)\nContext: 12k/200k tokens\nQueue: idle"


def status_forms(order: Callable[[int], bool], card: Callable[[int], str] = lambda i: CARD,
                 extra: dict[str, Any] | None = None) -> Shape:
    """A status tool called with ``{}`` or an equivalent form, ``order`` choosing which."""
    other = {"model": "default"} if extra is None else extra
    def step(i: int) -> Step:
        return "session_status", ({} if order(i) else dict(other)), {
            "content": [{"type": "text", "text": card(i)}], "details": {"card": card(i)}}, None
    return step


FORMS = {
    "alternating": lambda i: i % 2 == 0,
    "in pairs": lambda i: (i // 2) % 2 == 0,
    "irregular": lambda i: (i * 7919) % 5 < 2,
}


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("form", list(FORMS))
def test_equivalent_argument_forms_with_one_result_are_one_repeated_call(preset: str,
                                                                         form: str) -> None:
    executed, blocked = run(status_forms(FORMS[form]), preset)
    assert blocked is not None and executed <= 20


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("form", list(FORMS))
def test_equivalent_forms_whose_result_changes_are_progress(preset: str, form: str) -> None:
    assert run(status_forms(FORMS[form], lambda i: f"Queue: {i} jobs done"), preset)[1] is None


@pytest.mark.parametrize("preset", PRESETS)
def test_a_key_that_is_no_default_keeps_its_call_apart(preset: str) -> None:
    """``{}`` and ``{"model": "opus"}`` are two calls, even with one result: as before."""
    shape = status_forms(FORMS["in pairs"], extra={"model": "opus"})
    off = {**EXTENSIONS_OFF}
    assert run(shape, preset) == run(shape, preset, detectors=off)


def test_with_the_extension_off_equivalent_forms_run_as_before() -> None:
    shape = status_forms(FORMS["in pairs"])
    assert run(shape, "openclaw", detectors=EXTENSIONS_OFF) == (60, None)


# -- progress with units ---------------------------------------------------------------------


def status(text: Callable[[int], str]) -> Shape:
    return lambda i: ("exec", {"command": "job status"}, text(i), None)


PROGRESS = {
    "percent": status(lambda i: f"running {2 * i}% done"),
    "percent complete": status(lambda i: f"{2 * i}% complete"),
    "MB of MB": status(lambda i: f"downloaded {3 * i}MB of 120MB"),
    "GB": status(lambda i: f"copied {i}.5GB"),
    "KiB": status(lambda i: f"received {512 * i} KiB"),
    "json percent": status(lambda i: json.dumps({"progress": f"{2 * i}%"})),
    "n/m files": status(lambda i: f"{i}/40 files"),
    "n of m": status(lambda i: f"processed {10 * i} of 400 files"),
    "queue going down": status(lambda i: f"queue depth: {100 - i}"),
}


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", list(PROGRESS))
def test_progress_with_a_unit_is_never_blocked(preset: str, name: str) -> None:
    assert run(PROGRESS[name], preset, calls=40)[1] is None


@pytest.mark.parametrize("preset", PRESETS)
def test_a_stuck_percentage_is_still_blocked_by_the_20th_call(preset: str) -> None:
    executed, blocked = run(status(lambda i: "running 45% done"), preset, calls=40)
    assert blocked is not None and blocked <= 21 and executed <= 20


# -- sends ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["conversations_send", "conversations_turn"])
def test_conversation_sends_with_fresh_message_ids_are_no_progress(tool: str) -> None:
    def send(i: int) -> Step:
        return tool, {"to": "ops", "text": "deploy finished"}, {
            "content": [{"type": "text", "text": f"sent message m-{i}"}],
            "details": {"ok": True, "messageId": f"m-{i}", "runId": f"r-{i}"}}, None
    executed, blocked = run(send, "openclaw")
    assert blocked == 21 and executed == 20


# -- through the real claude-hook command ------------------------------------------------------


def _hook(db: Path, payload: dict[str, Any]) -> dict[str, Any] | None:
    result = CliRunner().invoke(app, ["claude-hook", "--db", str(db)], input=json.dumps(payload))
    assert result.exit_code == 0, result.output
    out = result.stdout.strip()
    return json.loads(out) if out else None


def _claude_session(db: Path, step: Shape, calls: int = 40) -> int:
    """Executions until the hook denies (PreToolUse, then PostToolUse or PostToolUseFailure)."""
    base = {"session_id": "s-21", "cwd": "/tmp/proj", "transcript_path": "/tmp/t.jsonl"}
    for i in range(calls):
        tool, args, result, error = step(i)
        pre = {**base, "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": args,
               "tool_use_id": f"toolu_{i}"}
        answer = _hook(db, pre) or {}
        if (answer.get("hookSpecificOutput") or {}).get("permissionDecision") == "deny":
            return i
        if error is None:
            post = {**pre, "hook_event_name": "PostToolUse", "tool_response": result}
        else:
            post = {**pre, "hook_event_name": "PostToolUseFailure", "error": error}
        _hook(db, post)
    return calls


@pytest.mark.integration
@pytest.mark.parametrize("shape", [one_tool_cycle(3), missing_folder],
                         ids=["bash-one-tool-cycle", "bash-fresh-argument-failure"])
def test_the_claude_hook_stops_coding_agent_loops(tmp_path: Path, shape: Shape) -> None:
    assert _claude_session(tmp_path / "hook.db", shape) <= 25
