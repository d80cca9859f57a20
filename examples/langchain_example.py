"""loopwarden + LangChain v1 ``create_agent``, without an LLM: a scripted model keeps asking for
the same status check; loopwarden warns the model at the 11th call, blocks the 21st (the
model's one recovery turn) and ends the run at the 22nd (``exit_behavior="end"``, the default).

Run: python examples/langchain_example.py   (needs: pip install ".[langchain]" from a clone)
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from loopwarden import LoopDetectionConfig, LoopGuard
from loopwarden.integrations.langchain import LoopGuardMiddleware

runs = 0


@tool
def check_job(job: str) -> str:
    """Report the status of a build job."""
    global runs
    runs += 1
    return f"{job}: still running"


class StubbornModel(BaseChatModel):
    """Stands in for an LLM stuck in a polling loop: 24 identical calls, then it gives up."""

    turns: int = 0

    @property
    def _llm_type(self) -> str:
        return "stubborn"

    def bind_tools(self, tools: Any, **kwargs: Any) -> StubbornModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.turns += 1
        if self.turns > 24:
            return ChatResult(generations=[ChatGeneration(message=AIMessage("Giving up."))])
        call = {"name": "check_job", "args": {"job": "build-7"}, "id": f"call-{self.turns}"}
        return ChatResult(generations=[ChatGeneration(message=AIMessage("", tool_calls=[call]))])


def main() -> None:
    guard = LoopGuard(LoopDetectionConfig(enabled=True))
    agent = create_agent(StubbornModel(), [check_job], middleware=[LoopGuardMiddleware(guard)],
                         checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [("user", "Wait until build-7 is done.")]},
                       {"configurable": {"thread_id": "demo"}, "recursion_limit": 100})
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    for n, message in enumerate(results, start=1):
        if "This run is stopping now." in message.text:
            print(f"call {n:2}: STOPPED -> model sees: {message.text[:90]!r}...")
        elif "[System note" in message.text:
            print(f"call {n:2}: WARNED  -> model sees: {message.text!r}")
        elif message.status == "error":
            print(f"call {n:2}: BLOCKED -> model sees: {message.text[:90]!r}...")
    print(f"the tool really ran {runs} times in {len(results)} calls; "
          f"final answer: {out['messages'][-1].text!r}")


if __name__ == "__main__":
    main()
