"""Reports over replayed transcripts: per-file scans (``scan``), timelines and HTML.

Only :mod:`loopwarden.report.scan` is imported here; ``timeline`` and ``html`` need matplotlib
(the ``report`` extra) and are imported on demand.
"""

from __future__ import annotations

from .scan import MAX_GAP, CallTrace, FileScan, LoopSpan, loop_spans, output_chars, scan_file

__all__ = ["MAX_GAP", "CallTrace", "FileScan", "LoopSpan", "loop_spans", "output_chars", "scan_file"]
