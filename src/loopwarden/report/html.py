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

import base64
import datetime as _dt
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

from .. import __version__
from ..findings import Finding
from ..scan import FileScan, covered_ranges
from ._text import printable
from .loops import LoopReport, loop_reports
from .plotter import Plotter
from .tokens import CharsEstimate, TokenEstimate

__all__ = ["MAX_FINDING_ROWS", "HtmlReport", "render_html"]

#: Findings listed per file; a long blocked loop adds one finding per call.
MAX_FINDING_ROWS = 100

_CSS = """
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
       color: #1d1d1f; background: #fff; }
main { max-width: 1240px; margin: 0 auto; padding: 18px 24px 48px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #e3e3e6; }
h3 { font-size: 15px; margin: 26px 0 4px; overflow-wrap: anywhere; }
h4 { font-size: 14px; margin: 0 0 4px; overflow-wrap: anywhere; }
p { margin: 6px 0; }
a { color: #0b57d0; text-decoration: none; } a:hover { text-decoration: underline; }
code { font: 12.5px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
.meta { color: #5f6368; font-size: 13px; overflow-wrap: anywhere; }
.headline { font-size: 15px; margin: 10px 0 0; }
table { border-collapse: collapse; margin: 8px 0 12px; width: 100%; }
th, td { border-bottom: 1px solid #e3e3e6; padding: 4px 8px; text-align: left; vertical-align: top;
         overflow-wrap: anywhere; }
th { background: #f3f3f5; font-size: 13px; font-weight: 600; }
td.call { white-space: nowrap; overflow-wrap: normal; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; overflow-wrap: normal; }
td.path { overflow-wrap: anywhere; min-width: 12em; }
tr.block td.lvl { color: #b3161a; font-weight: 600; } tr.warn td.lvl { color: #9a6400; font-weight: 600; }
.badge { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 12px; font-weight: 600;
         white-space: nowrap; }
.badge.block { background: #fde2e2; color: #b3161a; } .badge.warn { background: #fff1d6; color: #8a5a00; }
.badge.ok { background: #e3f5e6; color: #1b6e2a; }
.plot { overflow-x: auto; margin: 8px 0; }
img.timeline { display: block; width: 100%; max-width: 1100px; height: auto; border: 1px solid #eee; }
pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 15em; overflow-y: auto;
      font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
      background: #f6f7f9; padding: 4px 6px; border-radius: 4px; }
.loop { border-left: 3px solid #e3e3e6; padding: 2px 0 2px 14px; margin: 16px 0; }
.loop.critical { border-left-color: #f4a6a6; } .loop.warning { border-left-color: #f5c26b; }
blockquote.told { margin: 4px 0 8px; padding: 6px 10px; border-left: 4px solid #e69f00;
                  background: #fffaf0; overflow-wrap: anywhere; }
blockquote.told.block { border-left-color: #d62728; background: #fff5f5; }
.told .who { display: block; font-size: 12px; color: #5f6368; }
dl.glossary { margin: 4px 0; display: grid; grid-template-columns: minmax(10em, 17em) 1fr;
               gap: 6px 16px; }
dl.glossary dt { font-weight: 600; } dl.glossary dd { margin: 0; color: #333; }
details > summary { cursor: pointer; font-weight: 600; margin: 8px 0; }
.problems { color: #8a4b00; font-size: 12px; overflow-wrap: anywhere; }
table.calls td.args { width: 36%; } table.calls td.result { width: 50%; }
@media (max-width: 720px) {
  main { padding: 12px 12px 32px; }
  table.stack, table.stack tbody, table.stack tr, table.stack td { display: block; width: auto; }
  table.stack thead { display: none; }
  table.stack tr { border: 1px solid #e3e3e6; border-radius: 6px; margin: 0 0 10px; padding: 4px 0; }
  table.stack td { border: 0; padding: 2px 10px; text-align: left; white-space: normal; min-width: 0; }
  table.stack td[data-label]::before { content: attr(data-label) ": "; color: #5f6368; font-weight: 600; }
  table.calls td.args, table.calls td.result { width: auto; }
  /* Numbers and call references share lines in a card instead of one line each. */
  table.stack td.num, table.stack td.call { display: inline-block; padding-right: 4px; }
  dl.glossary { display: block; } dl.glossary dt { margin-top: 8px; }
  dl.glossary dd { margin: 2px 0 0 18px; }
  .plot img.timeline { width: 720px; max-width: none; }
}
"""

# What each detector means, in plain words (only those in the report are listed).
_DETECTORS = {
    "known_poll_no_progress": "a polling tool (a process or job status, BashOutput, …) called "
                              "with the same arguments again and again, getting the same answer",
    "generic_repeat": "the same call, with the same arguments and the same result, again and again",
    "ping_pong": "two calls alternating back and forth without progress",
    "unknown_tool_repeat": "the model keeps calling a tool that does not exist",
    "unknown_tool_streak": "the model keeps calling tools that do not exist",
    "argument_churn": "one tool called with arguments cycling through the same few patterns, "
                      "without progress",
    "error_repeat": "the same call failing with the same error again and again",
    "global_circuit_breaker": "any call repeating the same no-progress result past the global "
                              "limit (30 by default): the last line of defence",
    "compaction_loop_persisted": "a loop that went on after the conversation was compacted",
}


@dataclass(frozen=True, slots=True)
class _Flagged:
    """A transcript with findings, reduced to what the page shows."""

    scan: FileScan
    loops: list[LoopReport]
    tokens: int | None
    plot: int | None  # the Plotter's ticket for the timeline

    @property
    def waste(self) -> tuple[int, int, int]:
        return (self.tokens or 0, self.scan.loop_chars, self.scan.loop_calls)


class HtmlReport:
    """Collects scanned files (plotting those with findings as they arrive) into one page.

    ``tokens`` estimates the tokens of tool output inside loops (default: characters / 4);
    ``price_per_mtok`` (money per million tokens) adds a cost column. ``background`` draws
    the timelines in a worker process while the caller goes on scanning (the page is the
    same; see :mod:`loopwarden.report.plotter`).
    """

    def __init__(self, *, title: str = "loopwarden scan",
                 settings: Mapping[str, object] | None = None, plots: bool = True,
                 tokens: TokenEstimate | None = None,
                 price_per_mtok: float | None = None, background: bool = False) -> None:
        self.title = title
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
        svgs = {f.plot: self._plotter.svg(f.plot) for f in self._flagged if f.plot is not None}
        self._plotter.close()
        page = _Page(self, svgs)
        # Transcripts and file names may carry lone surrogates, which UTF-8 cannot encode.
        return printable(page.render())

    def write(self, path: str | Path) -> None:
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


class _Page:
    """One rendering of a report: ranks files and loops, numbers their anchors."""

    def __init__(self, report: HtmlReport, svgs: Mapping[int, str]) -> None:
        self.report = report
        self.svgs = svgs
        self.flagged = sorted(report._flagged, key=lambda f: f.waste, reverse=True)
        self.clean = report._clean
        ranked = [(file, loop) for file in self.flagged for loop in file.loops]
        ranked.sort(key=lambda pair: pair[1].waste, reverse=True)
        self.ranked = ranked
        self.rank = {id(loop): number for number, (_, loop) in enumerate(ranked, 1)}
        self.file_number = {id(file): number for number, file in enumerate(self.flagged, 1)}
        self.root = _common_root([f.scan.path for f in self.flagged]
                                 + [s.path for s in self.clean])
        self.priced = report.price_per_mtok is not None

    def render(self) -> str:
        title = escape(self.report.title)
        return "\n".join([
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{title}</title><style>{_CSS}</style></head><body><main>",
            f"<header><h1>{title}</h1>",
            f'<p class="meta">{escape(self._meta_line())}</p>',
            f'<p class="headline">{self._headline()}</p></header>',
            self._loops_section(),
            self._glossary(),
            self._files_section(),
            _clean_section(self.clean, self.root),
            "</main></body></html>",
        ])

    # -- numbers -----------------------------------------------------------------------------

    def _tokens(self, tokens: int | None) -> str:
        return "?" if tokens is None else f"{tokens:,}"

    def _cost(self, tokens: int | None) -> str:
        price = self.report.price_per_mtok
        if price is None or tokens is None:
            return "?"
        return _money(tokens * price / 1_000_000)

    def _path(self, path: str) -> str:
        return escape(_display_path(path, self.root))

    # -- header ------------------------------------------------------------------------------

    def _meta_line(self) -> str:
        scans = [f.scan for f in self.flagged] + self.clean
        calls = sum(scan.calls for scan in scans)
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        parts = [f"{len(scans)} transcripts, {calls:,} calls"]
        if self.root:
            parts.append(f"under {self.root}")
        parts += [f"loopwarden {__version__}", stamp]
        config = ", ".join(f"{key}={value}" for key, value in self.report.settings.items())
        if config:
            parts.append(config)
        return " · ".join(parts)

    def _headline(self) -> str:
        if not self.flagged:
            return (f"No loops: loopwarden would not have warned about or blocked any call in "
                    f"these {len(self.clean)} transcripts.")
        blocked = sum(1 for f in self.flagged if f.scan.first("block") is not None)
        calls = sum(f.scan.loop_calls for f in self.flagged)
        chars = sum(f.scan.loop_chars for f in self.flagged)
        known = [f.tokens for f in self.flagged if f.tokens is not None]
        text = (f"<strong>{len(self.ranked)} loop{_s(len(self.ranked))}</strong> in "
                f"{len(self.flagged)} transcript{_s(len(self.flagged))} ({blocked} blocked): "
                f"{calls:,} calls and {chars:,} characters of tool output inside loops")
        if known:
            tokens = sum(known)
            text += f", ≈ {tokens:,} tokens ({escape(self.report.tokens.label)})"
            if self.priced:
                text += (f", ≈ {self._cost(tokens)} at "
                         f"{_money(self.report.price_per_mtok or 0.0)} per million tokens")
        return text + "."

    # -- the loops table ---------------------------------------------------------------------

    def _loops_section(self) -> str:
        parts = ['<section id="loops"><h2>Loops, most wasteful first</h2>']
        if not self.ranked:
            parts.append(f"<p>None found in {len(self.clean)} transcripts.</p></section>")
            return "\n".join(parts)
        heads = ["loop #", "transcript", "loop", "calls", "output chars", "≈ tokens"]
        if self.priced:
            heads.append("≈ cost")
        heads += ["first warning", "first block"]
        numeric = {"loop #", "calls", "output chars", "≈ tokens", "≈ cost"}
        head = "".join(f'<th{" class=num" if h in numeric else ""}>{escape(h)}</th>'
                       for h in heads)
        rows = [self._loop_row(file, loop) for file, loop in self.ranked]
        parts.append(f'<table class="loops stack"><thead><tr>{head}</tr></thead>'
                     f"<tbody>{''.join(rows)}</tbody></table>")
        parts.append('<p class="meta">A loop runs from its first warning or block to its last '
                     "call of the same pattern. Click a loop for its calls and what the model "
                     "would have been told.</p></section>")
        return "\n".join(parts)

    def _loop_row(self, file: _Flagged, loop: LoopReport) -> str:
        rank = self.rank[id(loop)]
        span = loop.span
        cells = [
            ("loop #", "num", str(rank)),
            ("transcript", "path",
             f'<a href="#file-{self.file_number[id(file)]}">{self._path(file.scan.path)}</a>'),
            ("loop", "",
             f'<a href="#loop-{rank}"><code>{escape(span.detector)}</code> on '
             f"<code>{escape(span.tool)}</code></a>, calls {span.start}–{span.end} "
             f"{_level_badge(span.level)}"),
            ("calls", "num", f"{span.calls:,}"),
            ("output chars", "num", "?" if loop.chars is None else f"{loop.chars:,}"),
            ("≈ tokens", "num", self._tokens(loop.tokens)),
        ]
        if self.priced:
            cells.append(("≈ cost", "num", self._cost(loop.tokens)))
        cells += [("first warning", "call", _call_ref(loop.first_warning)),
                  ("first block", "call", _call_ref(loop.first_block))]
        return "<tr>" + "".join(_td(label, cls, html) for label, cls, html in cells) + "</tr>"

    # -- glossary ----------------------------------------------------------------------------

    def _glossary(self) -> str:
        detectors = sorted({loop.span.detector for _, loop in self.ranked})
        price = self.report.price_per_mtok
        entries = [
            ("warning <small>(action warn)</small>",
             "The call would still have run. loopwarden would have added its note to the "
             "tool's result, so that the model reads that it is repeating itself."),
            ("block <small>(action block)</small>",
             "The call would not have run: the model would have received loopwarden's message "
             "instead of the tool's result. After a first block the model gets one more turn to "
             "change course; a second block in the same run asks the host to end the run."),
            ("level warning / level critical",
             "How far the loop has gone: <em>warning</em> once the pattern reaches the warning "
             "threshold (10 repeats by default), <em>critical</em> at the critical threshold "
             "(20). A critical call is blocked."),
            ("level critical with action warn",
             "A warning on a result rather than before a call: the call ran, and the same call "
             "made again would be blocked, so the model is told in advance."),
            ("calls, output chars",
             "Counted from the loop's first warning or block to its last call of the same "
             "pattern (up to 3 other calls in a row may come between): what stopping at the "
             "first warning would have saved. Output characters are the tool results those "
             "calls fed back to the model."),
            ("≈ tokens" + (" and ≈ cost" if price is not None else ""),
             f"Tokens of that output, estimated as {escape(self.report.tokens.label)}"
             + (f", priced at {_money(price)} per million tokens" if price is not None else "")
             + ". Only the tool output is counted; each model turn also re-reads the whole "
             "conversation, so a loop's real cost is higher."),
        ]
        entries += [(f"<code>{escape(name)}</code>", escape(_DETECTORS.get(name, "a loop detector")))
                    for name in detectors]
        items = "".join(f"<dt>{term}</dt><dd>{text}</dd>" for term, text in entries)
        return (f'<section id="glossary"><h2>How to read this report</h2>'
                f'<dl class="glossary">{items}</dl></section>')

    # -- transcripts with findings -----------------------------------------------------------

    def _files_section(self) -> str:
        if not self.flagged:
            return ""
        parts = ['<section id="transcripts"><h2>Transcripts with loops</h2>']
        parts += [self._file(file) for file in self.flagged]
        parts.append("</section>")
        return "\n".join(parts)

    def _file(self, file: _Flagged) -> str:
        scan = file.scan
        number = self.file_number[id(file)]
        parts = [f'<article class="file" id="file-{number}">'
                 f'<h3 title="{escape(scan.path)}">{self._path(scan.path)} '
                 f"{_status_badge(scan)}</h3>",
                 f'<p class="meta">{self._file_meta(file)}</p>']
        if file.plot is not None:
            # An <img>, not inline SVG: the figure's ids and styles stay out of the page.
            data = base64.b64encode(self.svgs[file.plot].encode("utf-8")).decode("ascii")
            alt = f"timeline of {scan.path}"
            # On a phone the plot keeps a legible width and scrolls inside its box.
            parts.append(f'<div class="plot"><img class="timeline" alt="{escape(alt)}" '
                         f'src="data:image/svg+xml;base64,{data}"></div>')
        if scan.problems:
            parts.append(_problems(scan))
        parts += [self._loop(loop) for loop in file.loops]
        parts.append(_findings_details(scan))
        parts.append("</article>")
        return "\n".join(parts)

    def _file_meta(self, file: _Flagged) -> str:
        scan = file.scan
        text = (f"format {escape(scan.format or 'unrecognised')} · {scan.calls:,} calls · "
                f"{len(scan.findings):,} findings · {scan.loop_calls:,} calls and "
                f"{scan.loop_chars:,} of {scan.output_chars:,} output characters inside loops")
        if file.tokens is not None:
            text += f" ≈ {file.tokens:,} tokens"
            if self.priced:
                text += f" ≈ {self._cost(file.tokens)}"
        return text

    def _loop(self, loop: LoopReport) -> str:
        rank = self.rank[id(loop)]
        span = loop.span
        parts = [f'<div class="loop {escape(span.level)}" id="loop-{rank}">',
                 f"<h4>Loop {rank}: <code>{escape(span.detector)}</code> on "
                 f"<code>{escape(span.tool)}</code>, calls {span.start}–{span.end} "
                 f"{_level_badge(span.level)}</h4>",
                 f"<p>{self._loop_facts(loop)}</p>"]
        told = [_told(finding) for finding in (loop.first_warning, loop.first_block)
                if finding is not None]
        if told:
            parts.append("<p><strong>What loopwarden would have told the model</strong></p>")
            parts += told
        if loop.calls:
            parts.append(_calls_table(loop))
        parts.append("</div>")
        return "\n".join(parts)

    def _loop_facts(self, loop: LoopReport) -> str:
        span = loop.span
        text = f"{span.calls:,} calls"
        if loop.chars is not None:
            text += f", {loop.chars:,} characters of tool output"
        if loop.tokens is not None:
            text += f" ≈ {loop.tokens:,} tokens"
            if self.priced:
                text += f" ≈ {self._cost(loop.tokens)}"
        text += ". "
        warning, block = loop.first_warning, loop.first_block
        if warning is not None:
            text += f"First warning at call #{warning.index} (repeat count {warning.count}). "
        if block is not None:
            more = loop.count("block") - 1
            text += f"First block at call #{block.index} (repeat count {block.count})"
            text += f", then {more:,} more block{_s(more)}. " if more else ". "
        else:
            text += "Never blocked. "
        return text.strip()


# -- small pieces ----------------------------------------------------------------------------


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _money(amount: float) -> str:
    """Dollars, with two significant digits below one ($0.19, $0.00041), never in e-notation."""
    if amount == 0:
        return "$0"
    if amount < 0.0001:
        return "under $0.0001"
    if amount < 1:
        digits = 1 - math.floor(math.log10(amount))
        return f"${amount:.{digits}f}"
    return f"${amount:,.2f}"


def _td(label: str, cls: str, html: str) -> str:
    klass = f' class="{cls}"' if cls else ""
    return f'<td data-label="{escape(label)}"{klass}>{html}</td>'


def _call_ref(finding: Finding | None) -> str:
    return "—" if finding is None else f"call #{finding.index}"


def _level_badge(level: str) -> str:
    if level == "critical":
        return '<span class="badge block">blocked</span>'
    return '<span class="badge warn">warned</span>'


def _status_badge(scan: FileScan) -> str:
    if scan.first("block") is not None:
        return '<span class="badge block">blocked</span>'
    if scan.findings:
        return '<span class="badge warn">warned</span>'
    return '<span class="badge ok">clean</span>'


def _told(finding: Finding) -> str:
    action, index = finding.action, finding.index
    if action == "block":
        who = (f"block at call #{index}: the call does not run; the model receives this "
               "instead of the tool's result")
    elif finding.level == "critical":
        who = (f"warning at call #{index}, after its result: the same call made again "
               "would be blocked")
    else:
        who = f"warning at call #{index}: the call runs, and this note is added to its result"
    message = escape(finding.message)
    klass = "block" if action == "block" else "warn"
    return f'<blockquote class="told {klass}"><span class="who">{escape(who)}</span>{message}</blockquote>'


def _calls_table(loop: LoopReport) -> str:
    rows = []
    for call in loop.calls:
        result = ('<span class="meta">not kept (scan without keep_outputs)</span>'
                  if call.result is None else f"<pre>{escape(call.result)}</pre>")
        repeats = f"×{call.repeats:,}, first at #{call.index}"
        rows.append("<tr>" + _td("calls", "", f"<code>{escape(call.tool)}</code><br>"
                                              f'<span class="meta">{repeats}</span>')
                    + _td("arguments", "args", f"<pre>{escape(call.args)}</pre>")
                    + _td("result", "result", result) + "</tr>")
    more = loop.distinct_args - len(loop.calls)
    note = (f'<p class="meta">… and {more:,} more distinct argument set{_s(more)}.</p>'
            if more > 0 else "")
    return ('<table class="calls stack"><thead><tr><th>looping calls</th><th>arguments</th>'
            f"<th>result (excerpt, secrets masked)</th></tr></thead><tbody>{''.join(rows)}"
            f"</tbody></table>{note}")


def _problems(scan: FileScan) -> str:
    shown = "; ".join(str(problem) for problem in scan.problems[:5])
    more = len(scan.problems) - 5
    if more > 0:
        shown += f"; … {more} more"
    return f'<p class="problems">read problems: {escape(shown)}</p>'


def _findings_details(scan: FileScan) -> str:
    heads = ("call #", "run", "tool", "level", "action", "detector", "count", "message")
    head = "".join(f"<th>{h}</th>" for h in heads)
    rows = [
        f'<tr class="{escape(f.action)}">'
        + _td("call #", "num", str(f.index)) + _td("run", "", escape(f.run_id or ""))
        + _td("tool", "", escape(f.tool)) + _td("level", "lvl", escape(f.level))
        + _td("action", "", escape(f.action)) + _td("detector", "", escape(f.detector))
        + _td("count", "num", str(f.count)) + _td("message", "", escape(f.message)) + "</tr>"
        for f in scan.findings[:MAX_FINDING_ROWS]
    ]
    hidden = len(scan.findings) - MAX_FINDING_ROWS
    more = f'<p class="meta">… and {hidden:,} more findings</p>' if hidden > 0 else ""
    count = len(scan.findings)
    return (f"<details><summary>All {count:,} finding{_s(count)} of this transcript</summary>"
            f'<table class="findings stack"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>{more}</details>")


def _common_root(paths: Sequence[str]) -> str | None:
    """The folder all files share, so that rows can show short relative names."""
    if not paths:
        return None
    try:
        return os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths])
    except ValueError:  # paths on different drives
        return None


def _display_path(path: str, root: str | None) -> str:
    if root is None:
        return path
    return os.path.relpath(os.path.abspath(path), root)


def _clean_row(scan: FileScan, root: str | None) -> str:
    problems = "; ".join(str(p) for p in scan.problems[:2])
    if len(scan.problems) > 2:
        problems += f"; … {len(scan.problems) - 2} more"
    return ("<tr>" + _td("transcript", "path", escape(_display_path(scan.path, root)))
            + _td("format", "", escape(scan.format or "?"))
            + _td("calls", "num", f"{scan.calls:,}")
            + _td("read problems", "problems", escape(problems)) + "</tr>")


def _clean_table(scans: Sequence[FileScan], root: str | None) -> str:
    head = ("<tr><th>transcript</th><th>format</th><th class=num>calls</th>"
            "<th>read problems</th></tr>")
    rows = "".join(_clean_row(scan, root) for scan in sorted(scans, key=lambda s: s.path))
    return f'<table class="clean stack"><thead>{head}</thead><tbody>{rows}</tbody></table>'


def _clean_section(scans: Sequence[FileScan], root: str | None) -> str:
    count = len(scans)
    calls = sum(scan.calls for scan in scans)
    if not count:
        return ""
    return (f'<section id="clean"><h2>Clean transcripts</h2><details>'
            f"<summary>{count:,} transcript{_s(count)} ({calls:,} calls) with no warning "
            f"or block</summary>{_clean_table(scans, root)}</details></section>")

