"""Doors: thin adapters from agent frameworks to :class:`loopwarden.LoopGuard`.

One module per framework (``langchain``, ``openai_agents``, ``claude_agent_sdk``, ...). Each
imports its framework at module top, so import only the door you use; ``import loopwarden``
never imports any of them. A door translates ids, results and verdicts; it never detects.
A door too big for one module keeps its parts in private siblings named after it (the MCP
proxy's ``_mcp_guard``, ``_mcp_messages``, ``_mcp_transport``), which only it imports.
"""
