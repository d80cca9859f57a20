"""Self-contained HTML report of a scan: inline CSS, plots as base64 PNG, no external URLs.

Build it while scanning so that only one transcript's per-call data is alive at a time::

    report = HtmlReport(settings={"preset": "openclaw"})
    for path in files:
        report.add(scan_file(path, config))  # plots now, then drops the per-call trace
    report.write("report.html")
"""

from __future__ import annotations

import base64
import datetime as _dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from html import escape
from pathlib import Path

from .. import __version__
from ._text import printable
from .scan import FileScan
from .timeline import timeline_png

__all__ = ["MAX_FINDING_ROWS", "HtmlReport", "render_html"]

#: Findings listed per file; a long blocked loop adds one finding per call.
MAX_FINDING_ROWS = 100

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px;
       color: #1d1d1f; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 6px; }
.meta { color: #666; margin-bottom: 16px; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f5; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.warn td.lvl { color: #9a6400; font-weight: 600; }
tr.block td.lvl { color: #b3161a; font-weight: 600; }
.badge { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 12px; }
.badge.block { background: #fde2e2; color: #b3161a; } .badge.warn { background: #fff1d6; color: #9a6400; }
.badge.ok { background: #e3f5e6; color: #1b6e2a; }
img.timeline { max-width: 100%; border: 1px solid #eee; }
.msg { max-width: 640px; font-size: 12px; color: #444; }
.problems { color: #8a4b00; font-size: 12px; }
section.file { border-top: 1px solid #e5e5e5; }
"""


@dataclass(frozen=True, slots=True)
class _Entry:
    scan: FileScan
    png: bytes | None


class HtmlReport:
    """Collects scanned files (plotting each as it arrives) and renders one HTML page."""

    def __init__(self, *, title: str = "loopwarden scan",
                 settings: Mapping[str, object] | None = None, plots: bool = True) -> None:
        self.title = title
        self.settings = dict(settings or {})
        self.plots = plots
        self._entries: list[_Entry] = []

    def add(self, scan: FileScan) -> None:
        png = timeline_png(scan) if self.plots and scan.trace is not None and scan.calls else None
        self._entries.append(_Entry(scan.without_trace(), png))

    def render(self) -> str:
        scans = [entry.scan for entry in self._entries]
        parts = [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(self.title)}</title><style>{_CSS}</style></head><body>",
            f"<h1>{escape(self.title)}</h1>",
            f'<div class="meta">{escape(_meta_line(scans, self.settings))}</div>',
            _summary_table(scans),
            *(_file_section(number, entry) for number, entry in enumerate(self._entries)),
            "</body></html>",
        ]
        # Transcripts and file names may carry lone surrogates, which UTF-8 cannot encode.
        return printable("\n".join(parts))

    def write(self, path: str | Path) -> None:
        Path(path).write_text(self.render(), encoding="utf-8")


def render_html(scans: Iterable[FileScan], *, title: str = "loopwarden scan",
                settings: Mapping[str, object] | None = None, plots: bool = True) -> str:
    """The report for already scanned files (those still carrying a trace get a timeline)."""
    report = HtmlReport(title=title, settings=settings, plots=plots)
    for scan in scans:
        report.add(scan)
    return report.render()


def _meta_line(scans: list[FileScan], settings: Mapping[str, object]) -> str:
    calls = sum(scan.calls for scan in scans)
    flagged = sum(1 for scan in scans if scan.findings)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    config = ", ".join(f"{key}={value}" for key, value in settings.items())
    text = (f"{len(scans)} transcripts, {calls} calls, {flagged} with findings · "
            f"loopwarden {__version__} · {stamp}")
    return f"{text} · {config}" if config else text


def _status_badge(scan: FileScan) -> str:
    if scan.first("block") is not None:
        return '<span class="badge block">blocked</span>'
    if scan.findings:
        return '<span class="badge warn">warned</span>'
    return '<span class="badge ok">clean</span>'


def _summary_table(scans: list[FileScan]) -> str:
    head = ("<tr><th>transcript</th><th>format</th><th>calls</th><th>findings</th>"
            "<th>first warning</th><th>first block</th><th>loop calls</th>"
            "<th>loop output chars</th><th></th></tr>")
    rows = [
        f'<tr><td><a href="#file-{number}">{escape(scan.path)}</a></td>'
        f"<td>{escape(scan.format or '?')}</td><td class=num>{scan.calls}</td>"
        f"<td class=num>{len(scan.findings)}</td><td>{escape(scan.first_label('warn'))}</td>"
        f"<td>{escape(scan.first_label('block'))}</td><td class=num>{scan.loop_calls}</td>"
        f"<td class=num>{scan.loop_chars:,}</td><td>{_status_badge(scan)}</td></tr>"
        for number, scan in enumerate(scans)
    ]
    return f"<table>{head}{''.join(rows)}</table>"


def _file_section(number: int, entry: _Entry) -> str:
    scan = entry.scan
    parts = [
        f'<section class="file" id="file-{number}"><h2>{escape(scan.path)} {_status_badge(scan)}</h2>',
        f'<div class="meta">{escape(_file_meta(scan))}</div>',
    ]
    if entry.png is not None:
        data = base64.b64encode(entry.png).decode("ascii")
        alt = f"timeline of {scan.path}"
        parts.append(f'<img class="timeline" alt="{escape(alt)}" src="data:image/png;base64,{data}">')
    if scan.problems:
        shown = "; ".join(str(problem) for problem in scan.problems[:5])
        parts.append(f'<div class="problems">read problems: {escape(shown)}</div>')
    if scan.findings:
        parts.append(_findings_table(scan))
    parts.append("</section>")
    return "\n".join(parts)


def _file_meta(scan: FileScan) -> str:
    spans = ", ".join(f"calls {s.start}–{s.end} ({s.detector}, {s.tool})" for s in scan.spans)
    text = (f"format {scan.format or 'unrecognised'} · {scan.calls} calls · "
            f"{len(scan.findings)} findings · {scan.loop_calls} calls and "
            f"{scan.loop_chars:,} of {scan.output_chars:,} output characters inside loops")
    return f"{text} · loop spans: {spans}" if spans else text


def _findings_table(scan: FileScan) -> str:
    head = ("<tr><th>call #</th><th>run</th><th>tool</th><th>level</th><th>action</th>"
            "<th>detector</th><th>count</th><th>message</th></tr>")
    rows = [
        f'<tr class="{escape(f.action)}"><td class=num>{f.index}</td>'
        f"<td>{escape(f.run_id or '')}</td><td>{escape(f.tool)}</td>"
        f"<td class=lvl>{escape(f.level)}</td><td>{escape(f.action)}</td>"
        f"<td>{escape(f.detector)}</td><td class=num>{f.count}</td>"
        f'<td class="msg">{escape(f.message)}</td></tr>'
        for f in scan.findings[:MAX_FINDING_ROWS]
    ]
    hidden = len(scan.findings) - MAX_FINDING_ROWS
    more = f'<div class="meta">… and {hidden} more findings</div>' if hidden > 0 else ""
    return f"<table>{head}{''.join(rows)}</table>{more}"
