"""loopwarden + the OpenAI Agents SDK, without an LLM or network: the SDK's ``ScriptedModel``
keeps asking for the same status check; loopwarden warns the model at the 11th call, rejects
the 21st (the model's one recovery turn) and ends the run at the 22nd (``exit_behavior="end"``,
the default).

Run: python examples/openai_agents_example.py   (needs: pip install ".[openai-agents]" from a clone)
"""

from __future__ import annotations

import asyncio

from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from loopwarden import LoopDetectionConfig, LoopGuard
from loopwarden.guard import STOP_MESSAGE
from loopwarden.integrations.openai_agents import loop_guardrails

runs = 0


@function_tool
def check_job(job: str) -> str:
    """Report the status of a build job."""
    global runs
    runs += 1
    return f"{job}: still running"


async def main() -> None:
    guard = LoopGuard(LoopDetectionConfig(enabled=True))
    rails = loop_guardrails(guard)
    # Stands in for an LLM stuck in a polling loop: 24 identical calls, then it gives up.
    steps = [[function_call("check_job", {"job": "build-7"}, call_id=f"call-{n}")]
             for n in range(1, 25)]
    model = ScriptedModel([*steps, [assistant_message("Giving up.")]])
    agent = Agent(name="ops", model=model, tools=rails.protect([check_job]))
    result = await Runner.run(agent, "Wait until build-7 is done.", max_turns=50,
                              hooks=rails.hooks,
                              run_config=RunConfig(tracing_disabled=True, group_id="demo"))
    for n, call in enumerate(model.calls[1:], start=1):
        output = call.input[-1]["output"]
        if "[System note" in output:
            print(f"call {n:2}: WARNED  -> model sees: {output!r}")
        elif output.startswith("CRITICAL"):
            print(f"call {n:2}: BLOCKED -> model sees: {output[:90]!r}...")
    if result.final_output == STOP_MESSAGE:  # the model asked for one more call: the stop
        print(f"call {len(model.calls):2}: STOPPED -> the run ends: {result.final_output[:60]!r}...")
    print(f"the tool really ran {runs} times in {len(model.calls)} calls; "
          f"final answer: {result.final_output!r}")


if __name__ == "__main__":
    asyncio.run(main())
