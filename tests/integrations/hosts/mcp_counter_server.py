"""A real stdio MCP server for the host tests: ``check_job`` is a poll whose job never
finishes, and each time it really runs it appends a line to ``$CALLS_LOG``. With
``$CHECK_JOB_TEXT_ONLY=1`` its result is text content alone (no ``structuredContent``), as many
servers answer: the hosts then hand a hook the content, with the proxy's warning note in it."""

from __future__ import annotations

import os

try:
    from mcp.server import MCPServer
except ImportError:  # mcp 1.x names it FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer

server = MCPServer("loopwarden-jobs")


@server.tool(structured_output=os.environ.get("CHECK_JOB_TEXT_ONLY") != "1")
def check_job(job_id: str) -> str:
    """Report a job's status (this job is stuck: the answer never changes)."""
    with open(os.environ["CALLS_LOG"], "a", encoding="utf-8") as log:
        log.write("ran\n")
    return f"job {job_id}: running (0% done)"


if __name__ == "__main__":
    server.run()
