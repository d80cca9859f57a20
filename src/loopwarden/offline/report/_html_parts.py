"""The HTML report's small pieces: table cells, badges, what the model would have been told,
a loop's calls, a transcript's findings and read problems, the folded list of clean transcripts,
and the short file names rows show.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from html import escape
from typing import Any

from ..efficacy import efficacy, rate_text
from ..findings import Finding
from ..scan import FileScan
from .loops import LoopReport

#: Findings listed per file; a long blocked loop adds one finding per call.
MAX_FINDING_ROWS = 100


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
    return "—" if finding is None else f"call #{finding.call_number}"


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
    action, index = finding.action, finding.call_number
    if action == "block" and finding.terminal:
        who = (f"terminal stop at call #{index}: a second critical loop in the run; the call "
               "does not run and the run ends here")
    elif action == "block":
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
        repeats = f"×{call.repeats:,}, first at #{call.index + 1}"
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
        + _td("call #", "num", str(f.call_number)) + _td("run", "", escape(f.run_id or ""))
        + _td("tool", "", escape(f.tool)) + _td("level", "lvl", escape(f.level))
        + _td("action", "", escape("stop" if f.terminal else f.action)) + _td("detector", "", escape(f.detector))
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



_NUDGE_SOURCES = (
    ("seen", "Loop messages the transcripts showed their model",
     "Warnings and blocks in the tool results (OpenClaw's <code>[System note: Tool-loop "
     "warning …]</code>, loopwarden's and OpenClaw's loop messages): did the model change "
     "course after reading them?"),
    ("replay", "loopwarden's replayed findings",
     "The model never saw these: how often it changed course on its own at the points "
     "loopwarden would have warned or blocked, the baseline a real warning has to beat."),
)


def _nudge_rows(cells: Sequence[tuple[str, dict[str, Any]]]) -> str:
    return "".join(
        "<tr>" + _td("stage / detector", "", f"<code>{escape(name)}</code>")
        + "".join(_td(key, "num", f"{cell[key]:,}")
                  for key in ("nudges", "heeded", "ignored", "ended"))
        + _td("heeded", "", escape(rate_text(cell))) + "</tr>"
        for name, cell in cells)


def _nudges_section(scans: Sequence[FileScan], within: int) -> str:
    """Did the nudges work: heeded / ignored per stage and detector, for the loop messages the
    transcripts showed their model and for the replayed findings."""
    nudges = [nudge for scan in scans for nudge in scan.nudges]
    if not nudges:
        return ""
    head = ("<tr><th>stage / detector</th><th class=num>nudges</th><th class=num>heeded</th>"
            "<th class=num>ignored</th><th class=num>run ended</th><th>rate</th></tr>")
    parts = ['<section id="nudges"><h2>Did the nudges work?</h2>',
             f"<p>A nudge is <em>heeded</em> when within the next {within} calls of its run "
             "the model makes a different call, or the same call gets a different result; "
             "<em>ignored</em> when it repeats the pattern; a run that ends right after it "
             "counts neither way.</p>"]
    for source, title, text in _NUDGE_SOURCES:
        figures = efficacy([n for n in nudges if n.source == source], within)
        if not figures["all"]["nudges"]:
            continue
        cells = [*figures["by_stage"].items(), *figures["by_detector"].items()]
        parts.append(f"<h3>{title}: {escape(rate_text(figures['all']))}</h3><p>{text}</p>"
                     f'<table class="stack"><thead>{head}</thead>'
                     f"<tbody>{_nudge_rows(cells)}</tbody></table>")
    parts.append("</section>")
    return "".join(parts)
