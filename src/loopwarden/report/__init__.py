"""Reports over replayed transcripts: per-file scans (``scan``), timelines and HTML.

Only :mod:`loopwarden.report.scan` is imported here. ``html`` (the page), ``loops`` (what it
says per loop), ``tokens`` (token estimates) and ``plotter`` import no matplotlib; ``timeline``
needs it (the ``report`` extra) and is imported only when a plot is drawn.
"""

from __future__ import annotations

from .scan import (
    MAX_GAP,
    CallTrace,
    FileScan,
    LoopGroup,
    LoopSpan,
    loop_groups,
    loop_spans,
    output_chars,
    output_text,
    scan_file,
)

__all__ = ["MAX_GAP", "CallTrace", "FileScan", "LoopGroup", "LoopSpan", "loop_groups",
           "loop_spans", "output_chars", "output_text", "scan_file"]
