"""A scripted model speaking the Gemini API (``streamGenerateContent?alt=sse``, and the plain
``generateContent`` Gemini CLI uses for its side questions), only as far as Gemini CLI needs,
on 127.0.0.1.

Each request carries the whole conversation in ``contents``: the model's earlier
``functionCall`` parts say how many calls it made; the ``functionResponse`` parts (with any
text the host put beside them) are what the host handed back, recorded in the
:class:`Transcript`. The answer is the script's next call (``run_shell_command`` for a command,
else the named tool) or a closing text, as one server-sent event.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from codex_gemini_script import FINAL_TEXT, Action, Script, Transcript

__all__ = ["GeminiServer"]

# What the side questions (is the model looping? who speaks next?) are told: no loop, the user.
_SIDE_ANSWER = json.dumps({"reasoning": "scripted", "next_speaker": "user",
                           "unproductive_state_confidence": 0.0,
                           "unproductive_state_analysis": "", "confidence": 0.0})


class GeminiServer:
    """The server, in a thread of the test process; ``url`` is ``GOOGLE_GEMINI_BASE_URL``."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.transcript = Transcript()
        self.bodies: list[dict[str, Any]] = []
        self.side_questions = 0
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL Gemini CLI is pointed at."""
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def __enter__(self) -> GeminiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(5)

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        """The streamed chunk answering one conversation request."""
        self.bodies.append(body)
        contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
        made = 0
        seen: list[str] = []
        for content in contents:
            parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
            made += sum(1 for p in parts if "functionCall" in p)
            answers = [json.dumps(p["functionResponse"].get("response")) for p in parts
                       if isinstance(p.get("functionResponse"), dict)]
            texts = " ".join(p["text"] for p in parts if isinstance(p.get("text"), str))
            if answers:
                seen.extend(f"{a} {texts}".strip() for a in answers)
            elif texts and seen and content.get("role") == "user":
                seen[-1] = f"{seen[-1]} {texts}"  # context a hook added after the result
        self.transcript.saw(seen)
        self.transcript.requests += 1
        self.transcript.stamps.append(time.monotonic())
        action = self.script.action(made)
        if action is None:
            part: dict[str, Any] = {"text": FINAL_TEXT}
        else:
            self.transcript.calls_made = made + 1
            name, args = _call(action, _tool_names(body))
            part = {"functionCall": {"name": name, "args": args}}
        return _chunk(part)


def _call(action: Action, names: list[str]) -> tuple[str, dict[str, Any]]:
    if action.command is not None:
        return "run_shell_command", {"command": action.command}
    assert action.tool is not None
    # An MCP tool's name is the host's (server prefix and all): the declared one ending so.
    name = next((n for n in names if n.endswith(action.tool)), action.tool)
    return name, action.args


def _tool_names(body: dict[str, Any]) -> list[str]:
    return [str(d.get("name", "")) for tool in body.get("tools") or [] if isinstance(tool, dict)
            for d in tool.get("functionDeclarations") or [] if isinstance(d, dict)]


def _chunk(part: dict[str, Any]) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": [part]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                              "totalTokenCount": 15},
            "modelVersion": "gemini-2.5-flash"}


def _handler(server: GeminiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._send_json(200, {"models": []})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._send_json(400, {"error": {"message": "not JSON"}})
                return
            path = self.path.split("?")[0]
            if path.endswith(":countTokens"):
                self._send_json(200, {"totalTokens": 10})
            elif path.endswith(":streamGenerateContent"):
                chunk = server.respond(body)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
                self.wfile.flush()
                self.close_connection = True
            elif path.endswith(":generateContent"):
                server.side_questions += 1
                self._send_json(200, _chunk({"text": _SIDE_ANSWER}))
            else:
                self._send_json(404, {"error": {"message": f"no {path} here"}})

        def _send_json(self, status: int, value: Any) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
