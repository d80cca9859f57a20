"""One rendering of the HTML report (:class:`_Page`): the header, the loops table, the
glossary, and each transcript with findings, its timeline and its loops.
"""

from __future__ import annotations

import base64
import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING

from ... import __version__
from ..scan import FileScan
from ._html_parts import (
    _call_ref,
    _calls_table,
    _clean_section,
    _common_root,
    _display_path,
    _findings_details,
    _level_badge,
    _money,
    _nudges_section,
    _problems,
    _s,
    _status_badge,
    _td,
    _told,
)
from ._html_style import _CSS
from .loops import LoopReport

if TYPE_CHECKING:
    from typing import Protocol

    from .tokens import TokenEstimate

    class _Report(Protocol):
        """What the page reads of an :class:`~loopwarden.offline.report.html.HtmlReport`
        (named by what it reads, so the page imports nothing of the report that builds it)."""

        @property
        def title(self) -> str: ...
        @property
        def settings(self) -> Mapping[str, object]: ...
        @property
        def tokens(self) -> TokenEstimate: ...
        @property
        def price_per_mtok(self) -> float | None: ...
        @property
        def nudge_within(self) -> int: ...
        @property
        def _flagged(self) -> list[_Flagged]: ...
        @property
        def _clean(self) -> list[FileScan]: ...

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
        """The sort key of the transcripts, most wasteful first: tokens, characters, calls."""
        return (self.tokens or 0, self.scan.loop_chars, self.scan.loop_calls)


class _Page:
    """One rendering of a report: ranks files and loops, numbers their anchors."""

    def __init__(self, report: _Report, svgs: Mapping[int, str]) -> None:
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
        """The whole page's HTML."""
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
            _nudges_section([f.scan for f in self.flagged] + list(self.clean),
                            self.report.nudge_within),
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
        heads += ["first warning", "first block", "run stopped"]
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
             f"<code>{escape(span.tool)}</code></a>, calls {span.start + 1}–{span.end + 1} "
             f"{_level_badge(span.level)}"),
            ("calls", "num", f"{span.calls:,}"),
            ("output chars", "num", "?" if loop.chars is None else f"{loop.chars:,}"),
            ("≈ tokens", "num", self._tokens(loop.tokens)),
        ]
        if self.priced:
            cells.append(("≈ cost", "num", self._cost(loop.tokens)))
        cells += [("first warning", "call", _call_ref(loop.first_warning)),
                  ("first block", "call", _call_ref(loop.first_block)),
                  ("run stopped", "call", _call_ref(loop.stop))]
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
                 f"<code>{escape(span.tool)}</code>, calls {span.start + 1}–{span.end + 1} "
                 f"{_level_badge(span.level)}</h4>",
                 f"<p>{self._loop_facts(loop)}</p>"]
        told = [_told(finding) for finding in (loop.first_warning, loop.first_block, loop.stop)
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
            text += f"First warning at call #{warning.call_number} (repeat count {warning.count}). "
        if block is not None:
            more = loop.count("block") - 1
            text += f"First block at call #{block.call_number} (repeat count {block.count})"
            text += f", then {more:,} more block{_s(more)}. " if more else ". "
            if loop.stop is not None:
                text += (f"The run would have been stopped at call #{loop.stop.call_number} "
                         "(a second critical loop in the run: the terminal stop). ")
        else:
            text += "Never blocked. "
        return text.strip()
