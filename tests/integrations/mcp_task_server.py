"""A small MCP server on raw JSON-RPC (stdio) that is slow and runs task-augmented calls
(MCP 2025-11-25 tasks), for the proxy's in-flight and task tests.

Every request is answered from its own thread, so calls sent at once are all in flight
together. Tools:

- ``slow_status``: sleeps ``$SLOW_SECONDS`` (default 0.5), then answers the same text;
- ``flaky``: fails (as a task: status ``failed``, and ``tasks/result`` answers the JSON-RPC
  error); with ``{"notify": true}`` it also sends ``notifications/tasks/status``;
- ``calls``: how many times ``{"tool": NAME}`` really ran here (a test's view of what the
  proxy let through).

A ``tools/call`` with a ``task`` parameter is answered at once with a ``CreateTaskResult``;
``tasks/get``, ``tasks/result`` (waits for the task) and ``tasks/cancel`` work on it.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
from collections import Counter
from typing import Any

DELAY = float(os.environ.get("SLOW_SECONDS", "0.5"))
RELATED = "io.modelcontextprotocol/related-task"

write_lock = threading.Lock()
ran: Counter[str] = Counter()
ran_lock = threading.Lock()
task_ids = itertools.count(1)


class Task:
    def __init__(self, task_id: str) -> None:
        self.id = task_id
        self.status = "working"
        self.message: str | None = None
        self.result: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self.done = threading.Event()
        self.created = _now()

    def view(self) -> dict[str, Any]:
        view: dict[str, Any] = {"taskId": self.id, "status": self.status,
                                "createdAt": self.created, "lastUpdatedAt": _now(),
                                "ttl": 60000, "pollInterval": 20}
        if self.message is not None:
            view["statusMessage"] = self.message
        return view


tasks: dict[str, Task] = {}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def send(message: dict[str, Any]) -> None:
    line = json.dumps(message) + "\n"
    with write_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def answer(request_id: Any, result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def fail(request_id: Any, code: int, message: str) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def text(value: str, *, is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": value}]}
    if is_error:
        result["isError"] = True
    return result


def run_tool(name: str, args: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(result, JSON-RPC error) of one execution."""
    if name == "calls":
        with ran_lock:
            return text(str(ran[str(args.get("tool"))])), None
    with ran_lock:
        ran[name] += 1
    if name == "slow_status":
        time.sleep(DELAY)
        return text("job 7: running (0% done)"), None
    if name == "flaky":
        time.sleep(DELAY / 5)
        return None, {"code": -32603, "message": "backend unavailable"}
    return None, {"code": -32602, "message": f"unknown tool {name}"}


TOOLS = [
    {"name": name, "description": name, "inputSchema": {"type": "object"},
     "execution": {"taskSupport": "optional"}}
    for name in ("slow_status", "flaky", "calls")
]


def run_task(task: Task, name: str, args: dict[str, Any]) -> None:
    result, error = run_tool(name, args)
    if task.status == "cancelled":
        return
    if error is not None:
        task.status, task.message, task.error = "failed", error["message"], error
    else:
        task.status, task.result = "completed", result
    if args.get("notify"):  # before the result is released, so it is seen first
        send({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task.view()})
    task.done.set()


def handle(message: dict[str, Any]) -> None:
    method, request_id = message.get("method"), message.get("id")
    params = message.get("params") or {}
    if request_id is None:
        return  # notifications
    if method == "initialize":
        answer(request_id, {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}, "tasks": {"list": {}, "cancel": {},
                                                    "requests": {"tools": {"call": {}}}}},
            "serverInfo": {"name": "loopwarden-task-server", "version": "1"},
        })
    elif method == "tools/list":
        answer(request_id, {"tools": TOOLS})
    elif method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        if params.get("task") is not None:
            task_id = f"task-{next(task_ids)}"
            task = tasks[task_id] = Task(task_id)
            answer(request_id, {"task": task.view()})
            threading.Thread(target=run_task, args=(task, name, args), daemon=True).start()
            return
        result, error = run_tool(name, args)
        if error is not None:
            fail(request_id, error["code"], error["message"])
        else:
            assert result is not None
            answer(request_id, result)
    elif method in ("tasks/get", "tasks/result", "tasks/cancel"):
        task = tasks.get(params.get("taskId"))
        if task is None:
            fail(request_id, -32602, "unknown task")
        elif method == "tasks/get":
            answer(request_id, task.view())
        elif method == "tasks/cancel":
            task.status = "cancelled"
            task.done.set()
            answer(request_id, task.view())
        else:
            task.done.wait()
            if task.status == "cancelled":
                fail(request_id, -32602, "task was cancelled")
            elif task.error is not None:
                fail(request_id, task.error["code"], task.error["message"])
            else:
                assert task.result is not None
                answer(request_id, {**task.result, "_meta": {RELATED: {"taskId": task.id}}})
    else:
        fail(request_id, -32601, f"method not found: {method}")


def main() -> None:
    handlers: list[threading.Thread] = []
    for line in sys.stdin:
        if not line.strip():
            continue
        handler = threading.Thread(target=handle, args=(json.loads(line),), daemon=True)
        handler.start()
        handlers.append(handler)
    for handler in handlers:  # answer what was asked before the client hung up
        handler.join(timeout=10)


if __name__ == "__main__":
    main()
