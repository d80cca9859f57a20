"""A scripted model speaking the OpenAI Responses API (``POST /v1/responses``, streaming), only
as far as Codex CLI needs, on 127.0.0.1.

Each request carries the whole conversation in ``input``: the model's earlier calls
(``function_call`` items) say how many calls it made; the ``function_call_output`` items are
what the host handed back (recorded in the :class:`Transcript`). The answer is the script's
next call as a ``function_call`` item (``exec_command`` for a command, else the named tool), or a
closing text message, streamed as ``response.created`` / ``response.output_item.done`` /
``response.completed`` server-sent events.
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
            self.transcript.calls_made = made + 1
            name, arguments = _call(action, _tool_names(body))
            if name in _tool_names(body, kind="custom"):  # a freeform tool (apply_patch)
                item = {"type": "custom_tool_call", "id": f"ctc_{number}",
                        "call_id": f"call_{number}", "name": name,
                        "input": str(arguments.get("input", "")), "status": "completed"}
            else:
                item = {"type": "function_call", "id": f"fc_{number}",
                        "call_id": f"call_{number}", "name": name,
                        "arguments": json.dumps(arguments), "status": "completed"}
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


def _call(action: Action, names: list[str]) -> tuple[str, dict[str, Any]]:
    if action.command is not None:
        return "exec_command", {"cmd": action.command}
    assert action.tool is not None
    # An MCP tool's name is the host's (server prefix and all): the declared one ending so.
    name = next((n for n in names if n.endswith(action.tool)), action.tool)
    return name, action.args


def _tool_names(body: dict[str, Any], kind: str | None = None) -> list[str]:
    """The tools the host declared (those of type ``kind`` only, when given)."""
    names: list[str] = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and kind in (None, tool.get("type")):
            names.append(str(tool.get("name", "")))
            names += [str(t.get("name", "")) for t in tool.get("tools") or []
                      if isinstance(t, dict)]
    return names


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
