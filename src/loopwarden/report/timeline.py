"""Timeline plot of one scanned transcript (matplotlib, Agg; no pyplot global state).

One row per tool, one dot per call in transcript order, loop spans shaded, warnings and
blocks marked on their calls. Needs the scan's per-call trace (``FileScan.trace``).
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ._text import printable
from .scan import CallTrace, FileScan

__all__ = ["MAX_TOOL_ROWS", "timeline_figure", "timeline_png", "timeline_svg"]

#: Tools beyond this many (least used first) share one "other tools" row.
MAX_TOOL_ROWS = 12
_OTHER = "(other tools)"
_WARN_COLOUR = "#e69f00"
_BLOCK_COLOUR = "#d62728"
_SPAN_COLOURS = {"warning": "#f5c26b", "critical": "#f4a6a6"}
_WIDTH = 11.0  # inches
_RUN_LINE_LIMIT = 60  # more run boundaries than this would only add noise


def timeline_figure(scan: FileScan, *, title: str | None = None) -> Figure:
    """A figure for ``scan``; raises ValueError when the scan carries no trace."""
    trace = scan.trace
    if trace is None:
        raise ValueError("the scan has no per-call trace (it was dropped); rescan the file")
    rows = _tool_rows(trace.tools)
    figure = Figure(figsize=(_WIDTH, 1.6 + 0.32 * len(rows)), dpi=96)
    FigureCanvasAgg(figure)
    _set_margins(figure, rows)
    axes = figure.add_subplot()
    for span in scan.spans:
        axes.axvspan(span.start - 0.5, span.end + 0.5, color=_SPAN_COLOURS.get(span.level, "#ddd"),
                     alpha=0.45, linewidth=0, zorder=0)
    _draw_run_boundaries(axes, trace.runs)
    _draw_calls(axes, trace, rows)
    _draw_findings(axes, scan, trace, rows)
    axes.set_yticks(range(len(rows)), labels=[_label(row) for row in rows], fontsize=8)
    axes.set_ylim(-0.8, len(rows) - 0.2)
    axes.set_xlim(-1, max(len(trace), 1))
    axes.set_xlabel("call # (transcript order)", fontsize=8)
    axes.tick_params(axis="x", labelsize=8)
    axes.grid(axis="x", alpha=0.25)
    axes.set_title(_label(title if title is not None else scan.path), fontsize=9, loc="left")
    _legend(axes, scan)
    return figure


def _label(text: str) -> str:
    """Text matplotlib draws as is: no lone surrogates (the font renderer refuses them) and
    no ``$`` (which would start mathtext, and fail on a name like ``$\\x``)."""
    return printable(text).replace("$", r"\$")


def _set_margins(figure: Figure, rows: Sequence[str]) -> None:
    # Fixed margins in inches: constrained layout would triple the rendering time.
    height = figure.get_figheight()
    left = 0.25 + 0.065 * max((len(row) for row in rows), default=4)
    figure.subplots_adjust(left=left / _WIDTH, right=1 - 1.55 / _WIDTH,
                           bottom=0.5 / height, top=1 - 0.3 / height)


def timeline_png(scan: FileScan, *, title: str | None = None) -> bytes:
    return _render(timeline_figure(scan, title=title), "png")


def timeline_svg(scan: FileScan, *, title: str | None = None) -> str:
    return _render(timeline_figure(scan, title=title), "svg").decode("utf-8")


def _render(figure: Figure, kind: str) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format=kind, metadata={"Software": None} if kind == "png" else None)
    return buffer.getvalue()


def _tool_rows(tools: Sequence[str]) -> list[str]:
    """Row labels, most used tool at the top (matplotlib counts rows upwards)."""
    counts = Counter(tools)
    kept = [tool for tool, _ in counts.most_common(MAX_TOOL_ROWS)]
    if len(counts) > MAX_TOOL_ROWS:
        kept[-1] = _OTHER
    return list(reversed(kept))


def _row_of(rows: Sequence[str]) -> dict[str, int]:
    return {tool: index for index, tool in enumerate(rows)}


def _y(tool: str, row_of: dict[str, int]) -> int:
    return row_of.get(tool, row_of.get(_OTHER, 0))


def _draw_calls(axes: Axes, trace: CallTrace, rows: Sequence[str]) -> None:
    row_of = _row_of(rows)
    palette = _palette(len(rows))
    ys = [_y(name, row_of) for name in trace.tools]
    axes.scatter(range(len(ys)), ys, s=22 if len(ys) < 300 else 8,
                 c=[palette[y] for y in ys], zorder=2, linewidths=0)


def _draw_findings(axes: Axes, scan: FileScan, trace: CallTrace, rows: Sequence[str]) -> None:
    row_of = _row_of(rows)
    for action, marker, colour in (("warn", "v", _WARN_COLOUR), ("block", "X", _BLOCK_COLOUR)):
        points = sorted({(f.index, _y(trace.tools[f.index], row_of)) for f in scan.findings
                         if f.action == action and f.index < len(trace)})
        if points:
            axes.scatter([x for x, _ in points], [y + 0.35 for _, y in points],
                         marker=marker, s=46, color=colour, edgecolors="black", linewidths=0.4,
                         zorder=3)


def _draw_run_boundaries(axes: Axes, runs: Sequence[str | None]) -> None:
    starts = [i for i in range(1, len(runs)) if runs[i] != runs[i - 1]]
    if len(starts) > _RUN_LINE_LIMIT:
        return
    for index in starts:
        axes.axvline(index - 0.5, color="#999", linewidth=0.6, linestyle=":", zorder=1)


def _legend(axes: Axes, scan: FileScan) -> None:
    handles: list[Line2D | Patch] = []
    if scan.first("warn") is not None:
        handles.append(Line2D([], [], marker="v", linestyle="", color=_WARN_COLOUR,
                              markeredgecolor="black", label="warning"))
    if scan.first("block") is not None:
        handles.append(Line2D([], [], marker="X", linestyle="", color=_BLOCK_COLOUR,
                              markeredgecolor="black", label="block"))
    for level in sorted({span.level for span in scan.spans}, reverse=True):
        label = "loop span (blocked)" if level == "critical" else "loop span (warned)"
        handles.append(Patch(color=_SPAN_COLOURS[level], alpha=0.45, label=label))
    if handles:
        axes.legend(handles=handles, loc="upper left", fontsize=7, framealpha=0.8,
                    bbox_to_anchor=(1.0, 1.0))


def _palette(count: int) -> list[tuple[float, float, float, float]]:
    # tab10/tab20 without their oranges and reds, which mean "warning" and "block" here.
    dark, light = colormaps["tab10"], colormaps["tab20"]
    hues = (0, 2, 4, 5, 6, 7, 8, 9)
    colours = [dark(i) for i in hues] + [light(2 * i + 1) for i in hues]
    return [colours[i % len(colours)] for i in range(count)]
