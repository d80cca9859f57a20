"""``loopwarden mcp-proxy --exit-behavior ask`` with the real ``mcp`` client over stdio: the
terminal stop is an ``elicitation/create`` to a client that declared the capability; one
without it gets the blocked result, and the proxy's log says why.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from loopwarden.integrations._mcp_asking import DECISION_SCHEMA, form_elicitation

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters, types  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
ECHO_SERVER = HERE / "mcp_echo_server.py"
POLL = ("check_job", {"job_id": "build-42"})


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    return env


class Human:
    """A scripted human behind the client's elicitation callback."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.asked: list[dict[str, Any]] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params.model_dump(by_alias=True, mode="json", exclude_none=True))
        return types.ElicitResult(**self.answers.pop(0))


CONTINUE = {"action": "accept", "content": {"decision": "continue"}}
STOP = {"action": "accept", "content": {"decision": "stop"}}


@asynccontextmanager
async def _connect(human: Human | None, errlog: Any) -> AsyncIterator[ClientSession]:
    argv = [sys.executable, "-m", "loopwarden.cli", "mcp-proxy", "--exit-behavior", "ask",
            "--", sys.executable, str(ECHO_SERVER)]
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(HERE),
                                   env=_child_env())
    async with stdio_client(params, errlog=errlog) as (read, write), \
            ClientSession(read, write, elicitation_callback=human) as session:
        await session.initialize()
        yield session


async def _call(session: ClientSession, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(tool, args)
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


def _blocked(result: dict[str, Any]) -> bool:
    return "loopwarden/blocked" in (result.get("_meta") or {})


async def _until_stop(session: ClientSession, human: Human | None) -> list[dict[str, Any]]:
    """An insistent model: the same poll until a question is asked or two calls are blocked
    (the recovery turn, then the terminal stop)."""
    results: list[dict[str, Any]] = []
    asked = len(human.asked) if human is not None else 0
    for _ in range(40):
        results.append(await _call(session, *POLL))
        if human is not None and len(human.asked) > asked:
            return results
        if sum(map(_blocked, results)) == 2:
            return results
    raise AssertionError("never stopped")


async def _ran(session: ClientSession) -> int:
    result = await _call(session, "calls", {"tool": "check_job"})
    return int(result["content"][0]["text"])


async def test_continue_forwards_the_held_call_and_the_count_starts_over() -> None:
    human = Human(CONTINUE)
    with tempfile.TemporaryFile("w+") as errlog:
        async with _connect(human, errlog) as session:
            results = await _until_stop(session, human)
            ran_before = await _ran(session)

            [asked] = human.asked
            assert asked["requestedSchema"] == DECISION_SCHEMA
            assert asked["message"].startswith("loopwarden stopped a loop: `check_job`")
            last = results[-1]  # the asked call: it ran, with the server's own answer
            assert not _blocked(last) and last.get("isError") is not True
            assert last["content"][0]["text"] == "job build-42: running (0% done)"
            assert ran_before == len(results) - 1  # (one blocked, the recovery turn)
            # A fresh budget: the next nine polls run unwarned and unblocked.
            fresh = [await _call(session, *POLL) for _ in range(9)]
            assert all(len(r["content"]) == 1 and not _blocked(r) for r in fresh)
            assert await _ran(session) == ran_before + 9


async def test_stop_blocks_the_held_call() -> None:
    human = Human(STOP)
    with tempfile.TemporaryFile("w+") as errlog:
        async with _connect(human, errlog) as session:
            results = await _until_stop(session, human)
            ran = await _ran(session)

            assert len(human.asked) == 1
            last = results[-1]
            assert _blocked(last) and last["isError"] is True
            assert ran == len(results) - 2  # the recovery block and the asked call never ran
            # The run stays stopped: the next polls are blocked too, unasked.
            again = [await _call(session, *POLL) for _ in range(3)]
            assert all(map(_blocked, again)) and len(human.asked) == 1
            assert await _ran(session) == ran


@pytest.mark.parametrize("answer", [{"action": "decline"}, {"action": "cancel"}])
async def test_decline_or_cancel_blocks_as_stop_does(answer: dict[str, Any]) -> None:
    human = Human(answer)
    with tempfile.TemporaryFile("w+") as errlog:
        async with _connect(human, errlog) as session:
            results = await _until_stop(session, human)
            assert _blocked(results[-1])


async def test_user_who_always_continues_is_bounded_by_the_grants() -> None:
    human = Human(CONTINUE, CONTINUE)
    with tempfile.TemporaryFile("w+") as errlog:
        async with _connect(human, errlog) as session:
            for _ in range(2):
                await _until_stop(session, human)
            results = await _until_stop(session, None)

            assert len(human.asked) == 2
            assert _blocked(results[-1])


async def test_client_without_elicitation_gets_the_blocked_result_and_the_log_says_why() -> None:
    with tempfile.TemporaryFile("w+") as errlog:
        async with _connect(None, errlog) as session:
            results = await _until_stop(session, None)
            assert _blocked(results[-1]) and _blocked(results[-2])
        errlog.seek(0)
        log = errlog.read()
    assert 'exit_behavior="ask" but no human can be asked here' in log


@pytest.mark.parametrize(("capabilities", "form"), [
    ({"elicitation": {}}, True),                          # 2025-06-18: form only
    ({"elicitation": {"form": {}, "url": {}}}, True),     # 2025-11-25
    ({"elicitation": {"url": {}}}, False),                # URL mode only: no form to fill
    ({"sampling": {}}, False),
    (None, False),
])
def test_form_elicitation_capability(capabilities: Any, form: bool) -> None:
    assert form_elicitation(capabilities) is form
