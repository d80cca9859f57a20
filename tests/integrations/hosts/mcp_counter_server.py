"""A real stdio MCP server for the host tests: ``check_job`` is a poll whose job never
finishes, and each time it really runs it appends a line to ``$CALLS_LOG``."""

from __future__ import annotations

import os

try:
    from mcp.server import MCPServer
except ImportError:  # mcp 1.x names it FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer

server = MCPServer("loopwarden-jobs")


@server.tool()
def check_job(job_id: str) -> str:
    """Report a job's status (this job is stuck: the answer never changes)."""
    with open(os.environ["CALLS_LOG"], "a", encoding="utf-8") as log:
        log.write("ran\n")
    return f"job {job_id}: running (0% done)"


if __name__ == "__main__":
    server.run()
