"""Self-contained HTML report of a scan, for deciding what to fix: inline CSS, timelines as
SVG images in data URLs, no scripts and no external URLs.

The page leads with the loops, most wasteful first (calls, characters of tool output and
estimated tokens inside each loop, with money when a price is given), then explains its terms,
then shows each transcript with findings: its timeline, and per loop the first warning and
block, what loopwarden would have told the model, and the looping calls' arguments and a
result excerpt (cut, credentials masked). Clean transcripts are one counted, folded list.

Build it while scanning so that only one transcript's per-call data is alive at a time::

    report = HtmlReport(settings={"preset": "openclaw"})
    for path in files:
        report.add(scan_file(path, config, keep_outputs=True))  # then drops the trace
    report.write("report.html")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from ..efficacy import DEFAULT_WITHIN
from ..scan import FileScan, covered_ranges
from ._html_page import _Flagged, _Page
from ._text import printable
from .loops import loop_reports
from .plotter import Plotter
from .tokens import CharsEstimate, TokenEstimate

__all__ = ["HtmlReport"]


class HtmlReport:
    """Collects scanned files (plotting those with findings as they arrive) into one page.

    ``tokens`` estimates the tokens of tool output inside loops (default: characters / 4);
    ``price_per_mtok`` (money per million tokens) adds a cost column. ``background`` draws
    the timelines in a worker process while the caller goes on scanning (the page is the
    same; see :mod:`loopwarden.offline.report.plotter`).
    """

    def __init__(self, *, title: str = "loopwarden scan",
                 settings: Mapping[str, object] | None = None, plots: bool = True,
                 tokens: TokenEstimate | None = None,
                 price_per_mtok: float | None = None, background: bool = False,
                 nudge_within: int = DEFAULT_WITHIN) -> None:
        self.title = title
        self.nudge_within = nudge_within  # what the scans' nudge outcomes were judged with
        self.settings = dict(settings or {})
        self.plots = plots
        self.tokens: TokenEstimate = tokens if tokens is not None else CharsEstimate()
        self.price_per_mtok = price_per_mtok
        self._plotter = Plotter(background=background)
        self._flagged: list[_Flagged] = []
        self._clean: list[FileScan] = []

    def add(self, scan: FileScan) -> None:
        """Take in one scan; its per-call trace is dropped once used."""
        if not scan.findings:
            self._clean.append(scan.without_trace())
            return
        trace = scan.trace
        tokens = None if trace is None else self.tokens.tokens(trace, covered_ranges(scan.spans))
        loops = loop_reports(scan, self.tokens)
        plot = None
        if self.plots and trace is not None and scan.calls:
            plot = self._plotter.submit(scan)
        self._flagged.append(_Flagged(scan.without_trace(), loops, tokens, plot))

    def render(self) -> str:
        """The page, as text (waits for the timelines still being drawn)."""
        svgs = {f.plot: self._plotter.svg(f.plot) for f in self._flagged if f.plot is not None}
        self._plotter.close()
        page = _Page(self, svgs)
        # Transcripts and file names may carry lone surrogates, which UTF-8 cannot encode.
        return printable(page.render())

    def write(self, path: str | Path) -> None:
        """Write the page to ``path`` (UTF-8)."""
        Path(path).write_text(self.render(), encoding="utf-8")


def render_html(scans: Iterable[FileScan], *, title: str = "loopwarden scan",
                settings: Mapping[str, object] | None = None, plots: bool = True,
                tokens: TokenEstimate | None = None,
                price_per_mtok: float | None = None) -> str:
    """The report for already scanned files (those still carrying a trace get a timeline
    and their looping calls quoted)."""
    report = HtmlReport(title=title, settings=settings, plots=plots, tokens=tokens,
                        price_per_mtok=price_per_mtok)
    for scan in scans:
        report.add(scan)
    return report.render()
