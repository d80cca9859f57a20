"""A scripted model behind the Anthropic Messages API, as far as Claude Code needs it.

Claude Code (``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT``) streams ``POST /v1/messages``; this
server answers every request of the agent's conversation (a request offering the ``Bash`` tool)
with the next tool call of a script, and any side request (a title, a quota probe) with a short
text. The script is a function from the call number (1, 2, ...) to a tool call, or None when the
model is done. An *insistent* script never returns None: only the host can end its run, so a
run that ends shows the hook stopped it; :data:`MAX_CALLS` bounds a run nothing stops.

Every conversation request is kept (:attr:`ScriptedModel.turns`), with the text of what the
model was shown since its last tool call (tool results, hook context), so a test can tell at
which call the model first saw a warning or a denial.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["MAX_CALLS", "Script", "ScriptedModel", "ToolCall", "Turn", "serve"]

MAX_CALLS = 60
"""An insistent model gives up after this many calls (a run nothing stopped)."""

ToolCall = tuple[str, dict[str, Any]]
Script = Callable[[int], "ToolCall | None"]


@dataclass
class Turn:
    """One conversation request: the call number the model answers with and what it saw."""

    call: int
    seen: str
    answered: ToolCall | None = None
    at: float = field(default_factory=time.monotonic)
    """When the request arrived (monotonic seconds): the turnaround of a call is the time
    between the request that issued it and the next one."""


@dataclass
class ScriptedModel:
    """The model's side of the conversation, driven by ``script``."""

    script: Script
    turns: list[Turn] = field(default_factory=list)
    side_requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """The content blocks of the reply to ``request``."""
        tools = {tool.get("name") for tool in request.get("tools") or [] if isinstance(tool, dict)}
        if "Bash" not in tools:
            with self.lock:
                self.side_requests += 1
            return [{"type": "text", "text": "Scripted reply."}]
        messages = request.get("messages") or []
        call = 1 + sum(1 for message in messages if message.get("role") == "assistant"
                       for block in _blocks(message) if block.get("type") == "tool_use")
        planned = self.script(call) if call <= MAX_CALLS else None
        with self.lock:
            self.turns.append(Turn(call, _seen_since_last_call(messages), planned))
        if planned is None:
            return [{"type": "text", "text": "Done."}]
        name, arguments = planned
        return [{"type": "tool_use", "id": f"toolu_{call:04d}_{len(self.turns):04d}",
                 "name": name, "input": arguments}]


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def _seen_since_last_call(messages: list[dict[str, Any]]) -> str:
    """The text of the user-side messages after the last assistant message."""
    seen: list[str] = []
    for message in reversed(messages):
        if message.get("role") == "assistant":
            break
        seen.append(json.dumps(_blocks(message), ensure_ascii=False))
    return "\n".join(reversed(seen))


def _sse(blocks: list[dict[str, Any]], model: str) -> Iterator[bytes]:
    """The streaming events of a reply made of ``blocks``."""
    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

    yield event("message_start", {"message": {
        "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}})
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            yield event("content_block_start",
                        {"index": index, "content_block": {"type": "text", "text": ""}})
            yield event("content_block_delta", {"index": index, "delta": {
                "type": "text_delta", "text": block["text"]}})
        else:
            yield event("content_block_start", {"index": index, "content_block": {
                **block, "input": {}}})
            yield event("content_block_delta", {"index": index, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
        yield event("content_block_stop", {"index": index})
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    yield event("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                                  "usage": {"output_tokens": 5}})
    yield event("message_stop", {})


def _handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                request = {}
            path = self.path.split("?", 1)[0]
            if path.endswith("/count_tokens"):
                self._json({"input_tokens": 10})
            elif path.endswith("/v1/messages"):
                blocks = model.answer(request)
                name = str(request.get("model") or "scripted")
                if request.get("stream"):
                    self._stream(b"".join(_sse(blocks, name)))
                else:
                    stop = "tool_use" if blocks[-1]["type"] == "tool_use" else "end_turn"
                    self._json({"id": "msg_scripted", "type": "message", "role": "assistant",
                                "model": name, "content": blocks, "stop_reason": stop,
                                "stop_sequence": None,
                                "usage": {"input_tokens": 10, "output_tokens": 5}})
            else:
                self._json({"type": "error", "error": {"type": "not_found_error",
                                                       "message": path}}, status=404)

        def do_GET(self) -> None:
            self._json({"type": "error", "error": {"type": "not_found_error",
                                                   "message": self.path}}, status=404)

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _json(self, body: dict[str, Any], status: int = 200) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, data: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def serve(script: Script) -> Iterator[tuple[str, ScriptedModel]]:
    """Run a scripted model on 127.0.0.1; yields its base URL and the model's record."""
    model = ScriptedModel(script)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(model))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", model
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
