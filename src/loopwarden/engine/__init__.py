"""``LoopDetector``: record calls and outcomes into a :class:`SessionState` and detect loops.

Pure and synchronous: the guard adds policy, stores and events on top. :meth:`LoopDetector.prepare`
turns a call into a :class:`PreparedCall` — fingerprinted once, its run id normalised — and
:meth:`~LoopDetector.record`, :meth:`~LoopDetector.record_outcome`, :meth:`~LoopDetector.detect`
and :meth:`~LoopDetector.observe` take it, so the guard does that work once per call. The
spec's raw-argument forms (DESIGN.md §3: ``record_call``, ``record_outcome``, ``detect`` with a
tool name and its arguments) prepare the call and go the same way.

- :mod:`.fingerprinter`: :class:`Fingerprinter`, the half of the detector that turns calls and
  outcomes into the hashes the detectors compare (per preset and profile registry), and
  :class:`PreparedCall`;
- :mod:`.detector`: :class:`LoopDetector`, which records them into the session's history and asks
  the detectors, and the detector's log lines;
- :mod:`.limits`: the thresholds a config gives the detectors, per tool.
"""

from __future__ import annotations

from .detector import LoopDetector, detector_log_line
from .fingerprinter import PreparedCall

__all__ = ["LoopDetector", "PreparedCall", "detector_log_line"]
