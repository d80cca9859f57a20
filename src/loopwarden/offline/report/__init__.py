"""Reports over scanned transcripts: the scan table, timelines and the HTML triage page.

The scans themselves (:func:`loopwarden.offline.scan.scan_file`, loop spans, output sizes) live one
layer down in :mod:`loopwarden.offline.scan`, which ``loopwarden eval`` reads too. ``table`` (the
terminal table), ``html`` (the page, rendered by ``_html_page`` from ``_html_parts`` and
``_html_style``), ``loops`` (what it says per loop), ``tokens`` (token estimates) and
``plotter`` import no matplotlib; ``timeline`` needs it (the ``report`` extra) and is imported
only when a plot is drawn.
"""
