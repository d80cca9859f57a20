"""``loopwarden mcp-proxy`` in front of a real MCP server, driven by a real MCP client.

The script plays both parts: run plainly, it is a scripted "agent" (an MCP client) that keeps
polling a stuck job through the proxy; with ``--serve`` it is the MCP server the proxy starts.
No LLM, no network. Needs ``pip install ".[mcp]"`` (from a clone).

    python examples/mcp_proxy_example.py

In a real MCP client config the same proxy is just the server command:
``loopwarden mcp-proxy -- python examples/mcp_proxy_example.py --serve``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

try:
    from mcp.server import MCPServer
except ImportError:  # mcp 1.x names it FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

server = MCPServer("stuck-jobs")
polls = 0


@server.tool()
def check_job(job_id: str) -> str:
    """Report a job's status."""
    global polls
    polls += 1
    return f"job {job_id}: running (0% done)"


@server.tool()
def poll_count() -> int:
    """How many times check_job really ran on this server."""
    return polls


def _texts(result: Any) -> list[str]:
    return [block.text for block in result.content if getattr(block, "type", "") == "text"]


async def agent() -> None:
    proxy = StdioServerParameters(
        command=sys.executable,
        args=["-m", "loopwarden.cli", "mcp-proxy", "--",
              sys.executable, __file__, "--serve"],
    )
    async with stdio_client(proxy) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        print("tools seen through the proxy:", ", ".join(t.name for t in tools.tools))
        for call in range(1, 31):
            result = await session.call_tool("check_job", {"job_id": "build-42"})
            texts = _texts(result)
            failed = getattr(result, "is_error", getattr(result, "isError", False))
            if failed:
                print(f"call {call:2}: BLOCKED  {texts[0]}")
                break
            if len(texts) > 1:
                print(f"call {call:2}: warned   {texts[-1]}")
            else:
                print(f"call {call:2}: ran      {texts[0]}")
        ran = _texts(await session.call_tool("poll_count", {}))[0]
        print(f"\nThe server ran check_job {ran} times; the proxy stopped the loop at call {call}.")


if __name__ == "__main__":
    if "--serve" in sys.argv:
        server.run()
    else:
        asyncio.run(agent())
