"""Timeline plot of one scanned transcript (matplotlib, Agg; no pyplot global state).

One row per tool, one dot per call in transcript order, loop spans shaded. Each loop's first
warning and first block are marked and labelled with their call number; the loop's later
findings are small ticks, so that a blocked loop of hundreds of calls stays readable.

A long transcript is shown as a window around its loops (:data:`WINDOW_CONTEXT` calls either
side), and a window still wider than :data:`MAX_POINTS` calls is binned: a dot then stands for
the calls of its tool within one bin. The title says which calls are shown. Title, legend and
labels stay inside the figure. Needs the scan's per-call trace (``FileScan.trace``).
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib import colormaps, rc_context
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from ..findings import Finding
from ..scan import CallTrace, FileScan, loop_groups
from ._text import printable

#: Tools beyond this many (least used first) share one "other tools" row.
MAX_TOOL_ROWS = 12
#: Call positions drawn across the width at most; a wider window is binned.
MAX_POINTS = 300
#: Calls shown before the first and after the last loop of a long transcript.
WINDOW_CONTEXT = 30
# Below this many calls a transcript is always shown whole.
_WINDOW_MIN_CALLS = 200
# A window covering most of the transcript is not worth the "calls a–b of n" caveat.
_WINDOW_MAX_SHARE = 0.75
_OTHER = "(other tools)"
_WARN_COLOUR = "#e69f00"
_BLOCK_COLOUR = "#d62728"
_SPAN_COLOURS = {"warning": "#f5c26b", "critical": "#f4a6a6"}
_WIDTH = 11.0  # inches
_DPI = 96
_LABEL_CHARS = 28  # a tool row label is cut in the middle beyond this
_RUN_LINE_LIMIT = 60  # more run boundaries than this would only add noise
_FONT = 8


@dataclass(frozen=True, slots=True)
class TimelineView:
    """Which calls a timeline shows: ``start..end`` (inclusive), ``bin`` calls per dot."""

    start: int
    end: int
    calls: int  # of the whole transcript
    bin: int

    @property
    def windowed(self) -> bool:
        """Whether the view shows part of the transcript only."""
        return self.start > 0 or self.end < self.calls - 1

    def describe(self) -> str:
        """What the view shows, for its caption: ``"calls 40–90 of 300"``, ``"300 calls"``."""
        parts = []
        if self.windowed:
            parts.append(f"calls {self.start + 1}–{self.end + 1} of {self.calls}")
        else:
            parts.append(f"{self.calls} calls")
        if self.bin > 1:
            parts.append(f"one dot per tool per {self.bin} calls")
        return ", ".join(parts)


def timeline_view(scan: FileScan) -> TimelineView:
    """The calls :func:`timeline_figure` shows for ``scan`` (see the module doc)."""
    calls = scan.calls if scan.trace is None else len(scan.trace)
    start, end = 0, max(calls - 1, 0)
    spans = [s for s in scan.spans if s.start < calls]
    if calls >= _WINDOW_MIN_CALLS and spans:
        low = max(0, min(s.start for s in spans) - WINDOW_CONTEXT)
        high = min(calls - 1, max(s.end for s in spans) + WINDOW_CONTEXT)
        if high - low + 1 <= _WINDOW_MAX_SHARE * calls:
            start, end = low, high
    width = end - start + 1
    return TimelineView(start, end, calls, -(-width // MAX_POINTS))


def timeline_figure(scan: FileScan, *, title: str | None = None) -> Figure:
    """A figure for ``scan``; raises ValueError when the scan carries no trace."""
    trace = scan.trace
    if trace is None:
        raise ValueError("the scan has no per-call trace (it was dropped); rescan the file")
    view = timeline_view(scan)
    rows = _tool_rows(trace.tools[view.start:view.end + 1])
    run_starts = _run_starts(trace.runs, view)
    handles = _legend_handles(scan, runs=bool(run_starts))
    left = _left_margin(rows)
    columns, legend_rows = _legend_layout(handles, (1 - left) * _WIDTH * 72)
    legend_height = 0.22 * legend_rows + (0.08 if legend_rows else 0.0)
    figure = Figure(figsize=(_WIDTH, 1.25 + 0.3 * len(rows) + legend_height), dpi=_DPI)
    FigureCanvasAgg(figure)
    height = figure.get_figheight()
    figure.subplots_adjust(left=left, right=1 - 0.2 / _WIDTH,
                           bottom=(0.45 + legend_height) / height, top=1 - 0.32 / height)
    axes = figure.add_subplot()
    # Limits first: labels are placed in points, from the scale these set. The head room
    # above the top row holds two levels of labels.
    axes.set_ylim(-0.7, len(rows) + 0.35)
    pad = 0.01 * (view.end - view.start + 1)
    axes.set_xlim(view.start - 0.5 - pad, view.end + 0.5 + pad)
    for span in scan.spans:
        low, high = max(span.start, view.start), min(span.end, view.end)
        if low <= high:
            axes.axvspan(low - 0.5, high + 0.5, color=_SPAN_COLOURS.get(span.level, "#ddd"),
                         alpha=0.45, linewidth=0, zorder=0)
    for index in run_starts:
        axes.axvline(index - 0.5, color="#999", linewidth=0.6, linestyle=":", zorder=1)
    row_of = {tool: index for index, tool in enumerate(rows)}
    _draw_calls(axes, trace, row_of, view)
    _draw_findings(axes, scan, trace, row_of, view)
    axes.set_yticks(range(len(rows)), labels=[_label(_cut(row, _LABEL_CHARS)) for row in rows],
                    fontsize=_FONT)
    axes.set_xlabel("call # (transcript order, from 1)", fontsize=_FONT)
    # Drawn at the 0-based index, labelled with the call's number as a person counts it.
    axes.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x + 1:g}"))
    axes.tick_params(axis="x", labelsize=_FONT)
    axes.grid(axis="x", alpha=0.25)
    name = title if title is not None else _short_name(scan.path)
    heading = f"{name} · {view.describe()}"
    title_chars = int((1 - left - 0.02) * _WIDTH * 72 / (0.6 * 9))
    axes.set_title(_label(_cut(heading, title_chars)), fontsize=9, loc="left")
    if handles:
        figure.legend(handles=handles, loc="lower left", ncol=columns, fontsize=_FONT,
                      frameon=False, bbox_to_anchor=(left, 0.0), borderaxespad=0.3,
                      handletextpad=0.4, columnspacing=1.4)
    return figure


def _legend_layout(handles: Sequence[Line2D | Patch], width_pt: float) -> tuple[int, int]:
    """(columns, rows) of a legend that fits ``width_pt`` below the plot."""
    if not handles:
        return 1, 0
    widths = [len(str(h.get_label())) * 0.6 * _FONT + 34 for h in handles]
    for rows in range(1, len(handles) + 1):
        columns = -(-len(handles) // rows)
        # Columns are as wide as their widest entry.
        total = sum(max(widths[c::columns]) for c in range(columns))
        if total <= width_pt:
            return columns, rows
    return 1, len(handles)


def _short_name(path: str) -> str:
    """The file name with its folder, the part that tells transcripts apart in a title."""
    parts = path.replace("\\", "/").rstrip("/").split("/")
    return "/".join(parts[-2:])


def _cut(text: str, limit: int) -> str:
    """``text`` cut in the middle to ``limit`` characters (both ends tell names apart)."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return f"{text[:head]}…{text[len(text) - (limit - 1 - head):]}"


def _label(text: str) -> str:
    """Text matplotlib draws as is: no lone surrogates (the font renderer refuses them) and
    no ``$`` (which would start mathtext, and fail on a name like ``$\\x``)."""
    return printable(text).replace("$", r"\$")


def _left_margin(rows: Sequence[str]) -> float:
    # Fixed margins in inches: constrained layout would triple the rendering time.
    longest = max((len(_cut(row, _LABEL_CHARS)) for row in rows), default=4)
    return (0.25 + 0.072 * longest) / _WIDTH  # DejaVu Sans at 8 pt: about 0.07 in a character


def timeline_png(scan: FileScan, *, title: str | None = None) -> bytes:
    """The timeline as PNG bytes."""
    return _render(timeline_figure(scan, title=title), "png")


def timeline_svg(scan: FileScan, *, title: str | None = None) -> str:
    """The timeline as SVG with its text kept as text (DejaVu Sans, falling back to the
    viewer's sans-serif): a third faster to make than the PNG, and sharp at any zoom."""
    return _render(timeline_figure(scan, title=title), "svg").decode("utf-8")


# Text as <text> rather than glyph outlines; fixed ids and no date, so that the same scan
# gives the same bytes.
_SVG_RC: dict[Any, Any] = {"svg.fonttype": "none", "svg.hashsalt": "loopwarden"}


def _render(figure: Figure, kind: str) -> bytes:
    buffer = io.BytesIO()
    if kind == "png":
        figure.savefig(buffer, format=kind, metadata={"Software": None})
    else:
        with rc_context(_SVG_RC):
            figure.savefig(buffer, format=kind, metadata={"Date": None})
    return buffer.getvalue()


def _tool_rows(tools: Sequence[str]) -> list[str]:
    """Row labels, most used tool at the top (matplotlib counts rows upwards)."""
    counts = Counter(tools)
    kept = [tool for tool, _ in counts.most_common(MAX_TOOL_ROWS)]
    if len(counts) > MAX_TOOL_ROWS:
        kept[-1] = _OTHER
    return list(reversed(kept))


def _y(tool: str, row_of: dict[str, int]) -> int:
    return row_of.get(tool, row_of.get(_OTHER, 0))


def _x(index: int, view: TimelineView) -> float:
    """Where call ``index`` is drawn: itself, or the middle of its bin."""
    if view.bin == 1:
        return float(index)
    first = view.start + (index - view.start) // view.bin * view.bin
    return first + (min(first + view.bin, view.end + 1) - first - 1) / 2


def _draw_calls(axes: Axes, trace: CallTrace, row_of: dict[str, int], view: TimelineView) -> None:
    palette = _palette(len(row_of))
    points = {(_x(i, view), _y(trace.tools[i], row_of)) for i in range(view.start, view.end + 1)}
    size = 4.5 if len(points) < 150 else 3.0  # marker diameter, points
    # One line of markers per row, in the row's colour: drawn and written as one SVG style
    # and path, where a scatter of per-point colours costs a style per dot.
    for row in sorted({y for _, y in points}):
        xs = sorted(x for x, y in points if y == row)
        axes.plot(xs, [row] * len(xs), linestyle="none", marker="o", markersize=size,
                  markeredgewidth=0, color=palette[row], zorder=2)


def _draw_findings(axes: Axes, scan: FileScan, trace: CallTrace, row_of: dict[str, int],
                   view: TimelineView) -> None:
    firsts: list[Finding] = []
    for group in loop_groups(trace, scan.findings):
        for action in ("warn", "block"):
            found = next((f for f in group.findings if f.action == action), None)
            if found is not None:
                firsts.append(found)
    first_ids = {id(f) for f in firsts}
    for action, colour in (("warn", _WARN_COLOUR), ("block", _BLOCK_COLOUR)):
        ticks = sorted({(_x(f.index, view), _y(trace.tools[f.index], row_of))
                        for f in scan.findings
                        if f.action == action and id(f) not in first_ids
                        and view.start <= f.index <= view.end})
        if ticks:
            axes.plot([x for x, _ in ticks], [y + 0.3 for _, y in ticks], linestyle="none",
                      marker="|", markersize=5.5, color=colour, markeredgewidth=0.9, zorder=3)
    _label_firsts(axes, firsts, trace, row_of, view)


# Label text is about this many points wide per character at the label font size.
_LABEL_CHAR_PT = 0.62 * (_FONT - 0.5)
_LABEL_LEVEL_PT = 10  # vertical step between stacked labels
_LABEL_LEVELS = 2


def _label_firsts(axes: Axes, firsts: Sequence[Finding], trace: CallTrace,
                  row_of: dict[str, int], view: TimelineView) -> None:
    """Mark each loop's first warning and block, labelled with the call number; a label that
    would overlap the previous one in its row is lifted a level (warn #11 and block #21 are
    often a few pixels apart)."""
    shown = sorted((f for f in firsts if view.start <= f.index <= view.end),
                   key=lambda f: f.index)
    axes_pt = axes.get_position().width * _WIDTH * 72
    low, high = axes.get_xlim()
    pt_per_call = axes_pt / max(high - low, 1.0)
    ends: dict[tuple[int, int], float] = {}  # (row, level) -> right end of its last label, pt
    for finding in shown:
        warn = finding.action == "warn"
        row = _y(trace.tools[finding.index], row_of)
        x, y = _x(finding.index, view), row + 0.3
        axes.plot([x], [y], linestyle="none", marker="v" if warn else "X", markersize=7.7,
                  color=_WARN_COLOUR if warn else _BLOCK_COLOUR, markeredgecolor="black",
                  markeredgewidth=0.5, zorder=4)
        text = f"{'warn' if warn else 'block'} #{finding.call_number}"
        width = len(text) * _LABEL_CHAR_PT
        at = (x - low) * pt_per_call  # the marker, in points from the left
        # Labels run rightwards from their marker, unless that would leave the plot.
        start = at + 4 if at + 4 + width <= axes_pt else at - 4 - width
        level = next((n for n in range(_LABEL_LEVELS) if ends.get((row, n), -1e9) < start - 3),
                     _LABEL_LEVELS - 1)
        ends[(row, level)] = start + width
        axes.annotate(text, (x, y), xytext=(start - at, 5 + level * _LABEL_LEVEL_PT),
                      textcoords="offset points", ha="left", va="bottom",
                      fontsize=_FONT - 0.5, color="#7a4f00" if warn else "#9b1115", zorder=5,
                      annotation_clip=False)


def _run_starts(runs: Sequence[str | None], view: TimelineView) -> list[int]:
    """Calls in view that start a new run; none when so many that lines would be noise."""
    starts = [i for i in range(max(view.start, 1), view.end + 1) if runs[i] != runs[i - 1]]
    return [] if len(starts) > _RUN_LINE_LIMIT else starts


def _legend_handles(scan: FileScan, *, runs: bool) -> list[Line2D | Patch]:
    handles: list[Line2D | Patch] = []
    if scan.first("warn") is not None:
        handles.append(Line2D([], [], marker="v", linestyle="", color=_WARN_COLOUR,
                              markeredgecolor="black", label="first warning of a loop"))
    if scan.first("block") is not None:
        handles.append(Line2D([], [], marker="X", linestyle="", color=_BLOCK_COLOUR,
                              markeredgecolor="black", label="first block of a loop"))
    if len(scan.findings) > len(scan.spans):
        handles.append(Line2D([], [], marker="|", linestyle="", color="#555",
                              label="later warnings / blocks (ticks)"))
    for level in sorted({span.level for span in scan.spans}, reverse=True):
        label = "loop (blocked)" if level == "critical" else "loop (warned only)"
        handles.append(Patch(color=_SPAN_COLOURS[level], alpha=0.45, label=label))
    if runs:
        handles.append(Line2D([], [], color="#999", linewidth=0.8, linestyle=":",
                              label="new run (user turn)"))
    return handles


def _palette(count: int) -> list[tuple[float, float, float, float]]:
    # tab10/tab20 without their oranges and reds, which mean "warning" and "block" here.
    dark, light = colormaps["tab10"], colormaps["tab20"]
    hues = (0, 2, 4, 5, 6, 7, 8, 9)
    colours = [dark(i) for i in hues] + [light(2 * i + 1) for i in hues]
    return [colours[i % len(colours)] for i in range(count)]
