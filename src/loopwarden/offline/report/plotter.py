"""Timelines drawn while the scan goes on: in one worker process, or here.

Importing matplotlib and drawing the timelines costs about as much CPU as scanning a corpus,
so ``scan --html`` hands each plot to a worker process and keeps scanning: on a machine with
a second core the report then costs little more wall-clock time than the scan.

The worker is forked when the plotter is made, before the scan starts any thread (a fork of a
threaded process may deadlock) and before it holds any transcript; it imports matplotlib at
once, in parallel with the scan. Forking costs no second import of loopwarden, which spawning
would. So the worker runs only where fork is dependable (Linux), only if this process has no
other thread yet, and only when a core is free (the load average is below the number of cores
minus one: on a machine whose cores are all busy, a second process only splits our share of
them, and drawing here is quicker); anywhere else plots are drawn here. The worker
gets plain data (no live objects) and returns the SVG text; whenever it cannot be started or
fails, the plot is drawn here instead, so the page is the same either way.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import astuple
from typing import Any

from ..findings import Finding
from ..scan import CallTrace, FileScan, LoopSpan

# Plots waiting for the worker at most; beyond this the oldest is waited for, which bounds
# the memory held by payloads when many transcripts have findings.
_MAX_PENDING = 16

_Payload = tuple[str, int, list[str], list[Any], list[Any], list[tuple[Any, ...]],
                 list[tuple[Any, ...]]]


class Plotter:
    """``submit(scan)`` now, ``svg(ticket)`` later; ``background=False`` draws at once."""

    def __init__(self, *, background: bool = False) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._pending: dict[int, tuple[Future[str], _Payload]] = {}
        self._done: dict[int, str] = {}
        self._tickets = 0
        if background and _can_fork():
            self._start()

    def submit(self, scan: FileScan) -> int:
        """A ticket for the timeline of ``scan``, which must still carry its trace."""
        ticket = self._tickets
        self._tickets += 1
        payload = _payload(scan)
        pool = self._worker()
        if pool is None:
            self._done[ticket] = _draw(payload)
            return ticket
        try:
            future = pool.submit(_draw, payload)
        except Exception:  # the worker died (BrokenProcessPool) or the pool was shut down
            self._stop()
            self._done[ticket] = _draw(payload)
            return ticket
        self._pending[ticket] = (future, payload)
        if len(self._pending) > _MAX_PENDING:
            self._settle(next(iter(self._pending)))
        return ticket

    def svg(self, ticket: int) -> str:
        """The SVG of ``ticket``'s timeline, waiting for the worker if it is still drawing."""
        if ticket in self._pending:
            self._settle(ticket)
        return self._done[ticket]

    def close(self) -> None:
        """Wait for the plots still drawing, then stop the worker (plots after this are
        drawn here)."""
        for ticket in list(self._pending):
            self._settle(ticket)
        self._stop()

    def _stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _start(self) -> None:
        try:
            pool = ProcessPoolExecutor(max_workers=1,
                                       mp_context=multiprocessing.get_context("fork"))
            pool.submit(_warm)  # forks the worker now, and has it import matplotlib
        except Exception:  # no process support here (no semaphores, a sandbox)
            return
        self._pool = pool

    def _worker(self) -> ProcessPoolExecutor | None:
        return self._pool

    def _settle(self, ticket: int) -> None:
        future, payload = self._pending.pop(ticket)
        try:
            self._done[ticket] = future.result()
        except Exception:
            # The worker failed (killed, or could not take the payload): draw it here, where
            # a genuine plotting error is raised like in the foreground.
            self._stop()
            self._done[ticket] = _draw(payload)


def _can_fork() -> bool:
    return sys.platform == "linux" and threading.active_count() == 1 and _spare_core()


def _spare_core() -> bool:
    try:
        load = os.getloadavg()[0]
    except OSError:  # not known here
        return False
    return load < (os.cpu_count() or 1) - 1


def _warm() -> None:
    from . import timeline  # noqa: F401  (matplotlib, while the parent scans)


def _payload(scan: FileScan) -> _Payload:
    """What a timeline needs, as plain values (pickled to the worker as they are)."""
    trace = scan.trace
    if trace is None:
        raise ValueError("the scan has no per-call trace (it was dropped); rescan the file")
    return (scan.path, scan.calls, list(trace.tools), list(trace.runs), list(trace.args),
            [astuple(span) for span in scan.spans], [astuple(f) for f in scan.findings])


def _rebuild(payload: _Payload) -> FileScan:
    path, calls, tools, runs, args, spans, findings = payload
    trace = CallTrace(tools=tools, runs=runs, chars=[0] * len(tools), args=args)
    return FileScan(path=path, format=None, calls=calls,
                    findings=[_finding(values) for values in findings],
                    spans=[LoopSpan(*values) for values in spans], loop_calls=0,
                    loop_chars=0, output_chars=0, problems=[], trace=trace)


def _finding(values: Sequence[Any]) -> Finding:
    return Finding(*values)  # astuple kept ``learned`` a tuple


def _draw(payload: _Payload) -> str:
    from .timeline import timeline_svg  # matplotlib is imported in the process that draws

    return timeline_svg(_rebuild(payload))
