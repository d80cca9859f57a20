"""``loopwarden scan`` and ``loopwarden eval``: replay saved transcripts through the guard.

``scan``'s table is laid out by :mod:`loopwarden.offline.report.table`; ``--only-findings`` and
``--sort`` apply to the table and to the ``--json`` file list alike (its totals always count
every scanned transcript), while the clean-file count line (``--all``) is the table's only.

matplotlib is imported only for ``scan --html``, so this package loads without the ``report``
extra.

The parts: ``_scan`` (the ``scan`` command and its HTML report), ``_files`` (the arguments
turned into transcript files and scanned, ``--jobs``), ``_output`` (the ``--json`` document,
the totals and notes, ``--fail-on``), ``_eval`` (the ``eval`` command) and ``_options`` (what
the two commands share).
"""

from __future__ import annotations

import typer

# ``as``: the parts' public names, importable from here as before the split; the module's
# own interface stays ``register``.
from ._eval import eval_ as eval_
from ._files import PARALLEL_MIN_BYTES as PARALLEL_MIN_BYTES
from ._files import ScanOutcome as ScanOutcome
from ._files import Skipped as Skipped
from ._options import PROGRESS_MIN_FILES as PROGRESS_MIN_FILES
from ._scan import scan as scan

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``scan`` and ``eval`` to the ``loopwarden`` app."""
    app.command("scan")(scan)
    app.command("eval")(eval_)
