"""``python -m loopwarden``: a scripted agent polls a job that never finishes; watch the guard
warn at the 11th poll and block at the 21st. No LLM, no network.

With arguments it is the ``loopwarden`` command line (``python -m loopwarden scan .``). A closed
stdout (``| head``) ends either quietly, with exit code 141.
"""

from __future__ import annotations

import sys
from typing import Any

from .cli._entry import main as cli_main
from .cli._exits import quiet_on_broken_pipe


def check_job(job_id: str) -> dict[str, Any]:
    """A poll tool whose job is stuck: the answer never changes."""
    return {"content": [{"type": "text", "text": f"job {job_id}: running (0% done)"}],
            "details": {"status": "running"}}


def demo() -> int:
    """Run the scripted polling demo, printing each call's verdict; returns the exit code."""
    from . import LoopDetectionConfig, LoopGuard

    guard = LoopGuard(LoopDetectionConfig(enabled=True))
    guard.sinks.clear()  # the demo prints its own lines instead of log records
    for turn in range(1, 31):
        args = {"job_id": "build-42"}
        verdict = guard.before_tool_call("check_job", args, session="demo", run_id="run-1",
                                         call_id=f"call-{turn}")
        if verdict.action == "block":
            print(f"call {turn:2}: BLOCKED  {verdict.message}")
            print(f"\nThe tool ran {turn - 1} times; loopwarden stopped the loop at call {turn}.")
            return 0
        result = check_job(**args)
        guard.after_tool_call("check_job", args, session="demo", run_id="run-1",
                              call_id=f"call-{turn}", result=result)
        shown = verdict.annotate(result)
        if verdict.action == "warn":
            print(f"call {turn:2}: warned   {shown['content'][-1]['text']}")
        else:
            print(f"call {turn:2}: ran      {result['content'][0]['text']}")
    return 1


def main() -> int:
    """The demo without arguments, else the command line."""
    if len(sys.argv) > 1:
        return cli_main(sys.argv[1:])
    return quiet_on_broken_pipe(demo)


if __name__ == "__main__":
    raise SystemExit(main())
