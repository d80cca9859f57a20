"""A small real MCP server (stdio) for the proxy tests and example.

``check_job`` is a poll whose job never finishes, so it always returns the same answer;
``echo`` is a normal tool; ``fail`` always raises; ``calls`` reports how many times each tool
really ran here, which is how a test sees what the proxy let through.
"""

from __future__ import annotations

from collections import Counter

try:
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x names it FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer
    from mcp.server.fastmcp.exceptions import ToolError

server = MCPServer("loopwarden-echo")
ran: Counter[str] = Counter()


@server.tool()
def check_job(job_id: str) -> str:
    """Report a job's status (this job is stuck: the answer never changes)."""
    ran["check_job"] += 1
    return f"job {job_id}: running (0% done)"


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    ran["echo"] += 1
    return text


@server.tool()
def fail(reason: str) -> str:
    """Always fail with the given reason."""
    ran["fail"] += 1
    raise ToolError(reason)


@server.tool()
def calls(tool: str) -> int:
    """How many times TOOL ran on this server."""
    return ran[tool]


if __name__ == "__main__":
    server.run()
