"""A scripted model speaking the OpenAI Responses API (``POST /v1/responses``, streaming), only
as far as Codex CLI needs, on 127.0.0.1.

Each request carries the whole conversation in ``input``: the model's earlier calls
(``function_call`` items) say how many calls it made; the ``function_call_output`` items are
what the host handed back (recorded in the :class:`Transcript`). The answer is the script's
next call as a ``function_call`` item (``exec_command`` for a command, else the named tool), or a
closing text message, streamed as ``response.created`` / ``response.output_item.done`` /
``response.completed`` server-sent events.

A tool Codex defers (an MCP tool, for models offered ``tool_search``) is found the way a real
model finds it: a ``tool_search_call`` item (``execution: "client"``, the tool's name as the
query) first; Codex answers with a ``tool_search_output`` listing the tool under its namespace
(``mcp__<server>``), and from then on the model calls it as a ``function_call`` with that
``namespace``. The search is not one of the model's calls (not counted, nothing in the
transcript).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from codex_gemini_script import FINAL_TEXT, Action, Script, Transcript

__all__ = ["ResponsesServer"]


class ResponsesServer:
    """The server, in a thread of the test process; ``url`` is the provider's ``base_url``."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.transcript = Transcript()
        self.bodies: list[dict[str, Any]] = []
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The ``base_url`` Codex's provider points at."""
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def __enter__(self) -> ResponsesServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(5)

    def respond(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The events answering one request."""
        self.bodies.append(body)
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        made = sum(1 for i in items if i.get("type") in ("function_call", "custom_tool_call"))
        outputs: list[str] = []
        for i in items:
            if i.get("type") in ("function_call_output", "custom_tool_call_output"):
                outputs.append(_output_text(i))
            elif outputs and i.get("role") == "developer":  # a hook's additionalContext
                outputs[-1] += " " + json.dumps(i.get("content"))
        self.transcript.saw(outputs)
        self.transcript.requests += 1
        self.transcript.stamps.append(time.monotonic())
        action = self.script.action(made)
        number = self.transcript.requests
        if action is None:
            item: dict[str, Any] = {
                "type": "message", "role": "assistant", "id": f"msg_{number}",
                "content": [{"type": "output_text", "text": FINAL_TEXT, "annotations": []}]}
        else:
            item = _search(action, body, items, number) or self._call_item(action, body,
                                                                            made, number)
        response = {"id": f"resp_{number}", "object": "response", "status": "completed",
                    "model": body.get("model", "scripted"), "output": [item],
                    "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                              "output_tokens": 5,
                              "output_tokens_details": {"reasoning_tokens": 0},
                              "total_tokens": 15}}
        in_progress = {**response, "status": "in_progress", "output": []}
        return [
            {"type": "response.created", "response": in_progress},
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": response},
        ]

    def _call_item(self, action: Action, body: dict[str, Any], made: int,
                   number: int) -> dict[str, Any]:
        """The model's next call: ``exec_command`` for a command, else the named tool as the
        host offers it (a freeform tool as a ``custom_tool_call``, a namespaced one with its
        ``namespace``)."""
        self.transcript.calls_made = made + 1
        ids = {"call_id": f"call_{number}", "status": "completed"}
        if action.command is not None:
            return {"type": "function_call", "id": f"fc_{number}", "name": "exec_command",
                    "arguments": json.dumps({"cmd": action.command}), **ids}
        assert action.tool is not None
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        namespace, tool = _find(action.tool, _offered(body, items)) or (None, {})
        name = str(tool.get("name", action.tool))
        if tool.get("type") == "custom":  # a freeform tool (apply_patch)
            return {"type": "custom_tool_call", "id": f"ctc_{number}", "name": name,
                    "input": str(action.args.get("input", "")), **ids}
        item = {"type": "function_call", "id": f"fc_{number}", "name": name,
                "arguments": json.dumps(action.args), **ids}
        return item if namespace is None else {**item, "namespace": namespace}


def _search(action: Action, body: dict[str, Any], items: list[dict[str, Any]],
            number: int) -> dict[str, Any] | None:
    """A ``tool_search_call`` for the action's tool when Codex has not offered it yet but
    offers ``tool_search`` (and the model has not searched for it already), else None."""
    if action.tool is None or _find(action.tool, _offered(body, items)) is not None:
        return None
    if not any(isinstance(t, dict) and t.get("type") == "tool_search"
               for t in body.get("tools") or []):
        return None
    searched = {json.dumps(i.get("arguments"), sort_keys=True) for i in items
                if i.get("type") == "tool_search_call"}
    arguments = {"query": action.tool, "limit": 8}
    if json.dumps(arguments, sort_keys=True) in searched:
        return None  # searched and not found: call it by its bare name, as a model would
    return {"type": "tool_search_call", "id": f"ts_{number}", "call_id": f"search_{number}",
            "execution": "client", "status": "completed", "arguments": arguments}


def _offered(body: dict[str, Any],
             items: list[dict[str, Any]]) -> list[tuple[str | None, dict[str, Any]]]:
    """Every tool the model may call, with its namespace: those the request declares and those
    an earlier ``tool_search_output`` exposed."""
    tools: list[tuple[str | None, dict[str, Any]]] = []
    found = [t for i in items if i.get("type") == "tool_search_output"
             for t in i.get("tools") or []]
    for tool in [*(body.get("tools") or []), *found]:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            tools += [(str(tool.get("name")), t) for t in tool.get("tools") or []
                      if isinstance(t, dict)]
        else:
            tools.append((None, tool))
    return tools


def _find(wanted: str, tools: list[tuple[str | None, dict[str, Any]]]
          ) -> tuple[str | None, dict[str, Any]] | None:
    """The offered tool named ``wanted``, or whose name ends with it (an MCP tool's name
    carries the host's server prefix when it is not namespaced)."""
    return next((t for t in tools if str(t[1].get("name", "")).endswith(wanted)), None)


def _output_text(item: dict[str, Any]) -> str:
    output = item.get("output")
    if isinstance(output, str):
        return output
    return json.dumps(output)


def _handler(server: ResponsesServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # /v1/models and the like: nothing to offer
            self._send_json(200, {"object": "list", "data": []})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send_json(400, {"error": {"message": "not JSON"}})
                return
            if not self.path.rstrip("/").endswith("/responses"):
                self._send_json(404, {"error": {"message": f"no {self.path} here"}})
                return
            events = server.respond(body)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for event in events:
                self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
                                 .encode())
            self.wfile.flush()
            self.close_connection = True

        def _send_json(self, status: int, value: Any) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
