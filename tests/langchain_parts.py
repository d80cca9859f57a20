"""Parts the LangChain door's tests share: a tool that counts its runs, and a middleware that
sends each call to the tools unadmitted."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import hook_config
from langchain_core.messages import AIMessage
from langchain_core.tools import tool


class JobTool:
    """A tool that reports the same status forever and counts how often it really ran."""

    def __init__(self) -> None:
        self.runs = 0

        @tool
        def check_job(job: str) -> str:
            """Report the status of a build job."""
            self.runs += 1
            return f"{job}: still running"

        @tool("check_job")
        async def acheck_job(job: str) -> str:
            """Report the status of a build job."""
            self.runs += 1
            return f"{job}: still running"

        self.sync, self.async_ = check_job, acheck_job


class SkipToTools(AgentMiddleware[Any, Any]):
    """Listed after LoopGuardMiddleware, its after_model runs first and jumps straight to the
    tools, past LoopGuardMiddleware's after_model: each call reaches wrap_tool_call unadmitted."""

    @hook_config(can_jump_to=["tools"])
    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        message = state["messages"][-1]
        if isinstance(message, AIMessage) and message.tool_calls:
            return {"jump_to": "tools"}
        return None
