"""The ``scan`` table, readable at 80 columns and when piped.

- A transcript is named relative to the argument it was found under: one folder argument, its
  files by their path inside it (the folder is in the title); several arguments, each file
  prefixed by its argument's label (see :class:`ShownNames`). Absolute arguments never turn
  into ``../../`` chains.
- A name never wraps: too long for its column, it loses its middle (``a/very/lo…/file.jsonl``).
- Columns are sized here rather than by rich, so that no line is wider than the console.
  When the detectors do not fit as a last column, each row's detectors go on the lines under
  its name (``known_poll_no_progress``), and the name column takes the width the numbers
  leave. The format column always stays; only a console too narrow to leave a name 12 cells
  (about 60 columns) loses the findings count, then the loop characters.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich import box
from rich.cells import cell_len, get_character_cell_size
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..findings import Finding
from ..scan import FileScan
from ._text import printable

__all__ = [
    "CLEAN_LIST_LIMIT",
    "SORTS",
    "STDIN",
    "Row",
    "ShownNames",
    "fit_widths",
    "middle_ellipsis",
    "one_line",
    "print_scan_table",
    "sort_rows",
    "unique_ellipses",
    "wrap_names",
]

#: The path argument that means "read one transcript from standard input".
STDIN = "-"
_STDIN_LABEL = "<stdin>"

#: More clean files than this are summarised as one line unless ``--all``.
CLEAN_LIST_LIMIT = 20

#: ``--sort`` orders: name (arguments in the order given, each folder's files by path: the
#: order files are scanned in), waste (calls inside loops, then characters of their output),
#: calls (tool calls in the transcript). Ties keep the name order.
SORTS = ("name", "waste", "calls")

_ELLIPSIS = "…"
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_CONTROL_NAMES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


# -- text that stays on one line ---------------------------------------------------------------


def one_line(text: str) -> str:
    """``text`` printable and on one line: control characters (a newline in a file name) are
    spelled as escapes, like the lone surrogates :func:`printable` escapes."""
    text = printable(text)
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(lambda m: _CONTROL_NAMES.get(m.group(), f"\\x{ord(m.group()):02x}"), text)


def _start(text: str, cells: int) -> str:
    """The longest start of ``text`` at most ``cells`` terminal cells wide."""
    used = 0
    for index, char in enumerate(text):
        used += get_character_cell_size(char)
        if used > cells:
            return text[:index]
    return text


def _end(text: str, cells: int) -> str:
    """The longest end of ``text`` at most ``cells`` terminal cells wide."""
    return _start(text[::-1], cells)[::-1]


def middle_ellipsis(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells by dropping its middle: ``a/very/lo…/file.jsonl``.

    The file name (from the last ``/``) is kept whole while it takes at most two thirds of the
    room, so the folder loses letters first; otherwise both ends keep half the room.
    """
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return _ELLIPSIS[:max(width, 0)]
    room = width - 1
    slash = text.rfind("/")
    tail_cells = cell_len(text[slash:]) if slash > 0 else room + 1
    tail = room - room // 2 if tail_cells * 3 > room * 2 else tail_cells
    return _start(text, room - tail) + _ELLIPSIS + _end(text, tail)


def unique_ellipses(names: Sequence[str], width: int) -> list[str]:
    """Each name cut to ``width`` cells like :func:`middle_ellipsis`, except that names which
    would then read alike keep the part that tells them apart: five
    ``…/agent-1d88af81-untitled-full.md`` files never all show as ``claude-code-…tled-full.md``.
    Equal names stay equal."""
    shown = [middle_ellipsis(name, width) for name in names]
    groups: dict[str, set[str]] = {}
    for name, cut in zip(names, shown, strict=True):
        groups.setdefault(cut, set()).add(name)
    for cut, group in groups.items():
        if len(group) < 2:
            continue
        others = sorted(group)
        better = {name: _distinct_ellipsis(name, width, [o for o in others if o != name])
                  for name in others}
        if len(set(better.values())) == len(better):
            shown = [better.get(name, cut) if s == cut else s for name, s in zip(names, shown,
                                                                               strict=True)]
    return shown


def _distinct_ellipsis(text: str, width: int, others: Sequence[str]) -> str:
    """``text`` in ``width`` cells, showing the part between what it shares with ``others``
    at the start and at the end (its distinct part), with the end of the name after it."""
    prefix = max(_shared_start(text, o) for o in others)
    suffix = max(_shared_start(text[::-1], o[::-1]) for o in others)
    suffix = min(suffix, len(text) - prefix)
    tail = text[prefix:]
    if cell_len(tail) + 1 <= width:  # the start, then everything from the distinct part on
        room = width - 1 - cell_len(tail)
        return _start(text, room) + _ELLIPSIS + tail if room else _ELLIPSIS + tail
    distinct = text[prefix:len(text) - suffix]
    if cell_len(distinct) + 2 > width:  # too long to show whole: its start, at least
        return _ELLIPSIS + _start(distinct, max(width - 1, 0))
    room = width - 2 - cell_len(distinct)
    end = _end(text[len(text) - suffix:], room - room // 2)
    lead = _end(text[:prefix], room - cell_len(end))
    return _ELLIPSIS + lead + distinct + _ELLIPSIS + end


def _shared_start(a: str, b: str) -> int:
    """How many characters ``a`` and ``b`` share at their start."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))


def wrap_names(text: str, width: int) -> str:
    """Space-separated names packed into lines of ``width`` cells; a name too long for a line
    breaks after an underscore (``known_poll_`` / ``no_progress``), or anywhere at last."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        joined = f"{line} {word}" if line else word
        if cell_len(joined) <= width:
            line = joined
            continue
        if line:
            lines.append(line)
        line = ""
        for part in re.findall(r"[^_]*_|[^_]+", word):
            while cell_len(line + part) > width and (line or cell_len(part) > width):
                if line:
                    lines.append(line)
                    line = ""
                else:  # one piece wider than a line: fold it
                    piece = _start(part, max(width, 1)) or part[0]
                    lines.append(piece)
                    part = part[len(piece):]
            line += part
    if line or not lines:
        lines.append(line)
    return "\n".join(lines)


def fit_widths(natural: Sequence[int], room: int,
               give_way: Sequence[tuple[int, int]]) -> list[int]:
    """Column widths, ``natural`` where they fit in ``room``; else the columns of ``give_way``
    (``(column, minimum)`` pairs) shrink in that order, each down to its minimum, until the
    sum fits or none can shrink further."""
    widths = list(natural)
    for column, minimum in give_way:
        excess = sum(widths) - room
        if excess <= 0:
            break
        widths[column] = max(widths[column] - excess, min(minimum, widths[column]))
    return widths


# -- rows --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    """One scanned transcript and the name the table shows for it."""

    name: str
    scan: FileScan


class ShownNames:
    """The names the table shows, from the command-line arguments the files were found under.

    One argument: a file found in the folder by its path inside it; the file argument by its
    own name. Several arguments: ``label/path inside``, where an argument's label is its last
    component (``/data/corpus2/normalized`` is ``normalized``), lengthened by parent folders
    only while two arguments would share it (``corpus/normalized``, ``corpus2/normalized``).
    Standard input (``-``) is ``<stdin>``.
    """

    def __init__(self, arguments: Sequence[str]) -> None:
        self._roots = [a if a == STDIN else os.path.normpath(os.path.expanduser(a))
                       for a in arguments]
        self._labels = _labels(self._roots)

    def name(self, path: str, argument: int) -> str:
        """The shown name of ``path``, found under ``arguments[argument]``."""
        root, label = self._roots[argument], self._labels[argument]
        if path == STDIN or os.path.normpath(path) == root:
            return label
        inside = os.path.relpath(path, root)
        return inside if len(self._roots) == 1 else f"{label.rstrip('/')}/{inside}"


def _labels(roots: Sequence[str]) -> list[str]:
    """The shortest distinct trailing parts of ``roots`` (see :class:`ShownNames`)."""
    parts = [[] if root == STDIN else
             [part for part in Path(os.path.abspath(root)).parts if part != os.sep]
             for root in roots]
    depth = [1] * len(roots)

    def label(index: int) -> str:
        if roots[index] == STDIN:
            return _STDIN_LABEL
        return "/".join(parts[index][-depth[index]:]) or roots[index]

    labels = [label(i) for i in range(len(roots))]
    while True:
        clashing = [i for i, text in enumerate(labels) if labels.count(text) > 1
                    and depth[i] < len(parts[i]) and roots.count(roots[i]) == 1]
        if not clashing:
            return labels
        for i in clashing:
            depth[i] += 1
            labels[i] = label(i)


def sort_rows(rows: Sequence[Row], sort: str) -> list[Row]:
    """``rows`` in a :data:`SORTS` order; the sort is stable, so ties keep the scan order."""
    if sort == "waste":
        return sorted(rows, key=lambda row: (-row.scan.loop_calls, -row.scan.loop_chars))
    if sort == "calls":
        return sorted(rows, key=lambda row: -row.scan.calls)
    if sort != "name":
        raise ValueError(f"unknown sort {sort!r}; expected one of {SORTS}")
    return list(rows)


# -- the table ---------------------------------------------------------------------------------

_HEADERS = ("transcript", "format", "calls", "findings", "first\nwarn", "first\nblock",
            "run\nstop", "loop\ncalls", "loop\nchars", "detectors")
_NAME, _FORMAT, _FINDINGS, _STOP, _LOOP_CHARS, _DETECTORS = 0, 1, 3, 6, 8, 9
#: The name column gives way down to this many cells; on a console too narrow even for that,
#: the findings count and then the loop characters are left out (``--json`` has them).
_NAME_MIN = 12
_OPTIONAL = (_FINDINGS, _LOOP_CHARS)
_UNDER = "  "  # indent of the detectors line under a name
_CAPTION = ("first warn/block: call # (from 1).{stop} loop calls/chars: calls, and characters "
            "of tool output, from a loop's first finding to its end.")
_STOP_CAPTION = (" run stop: the call where a second critical loop in the run would have ended "
                 "it (the terminal stop).")


def print_scan_table(console: Console, title: str, rows: Sequence[Row], *,
                     list_clean: bool = False) -> None:
    """The title line, the rows (clean ones summarised past :data:`CLEAN_LIST_LIMIT` unless
    ``list_clean``) and, under a table, the caption."""
    console.print(Text(middle_ellipsis(one_line(title), console.width)), no_wrap=True,
                  overflow="ellipsis")
    clean = [row for row in rows if not row.scan.findings]
    folded = not list_clean and len(clean) > CLEAN_LIST_LIMIT
    shown = [row for row in rows if row.scan.findings] if folded else list(rows)
    if shown:
        console.print(_table(shown, console.width))
    if folded:
        lead = "… and " if shown else ""
        console.print(Text(f"{lead}{len(clean)} clean files (no findings); --all to list them"))
    if shown:
        stop = _STOP_CAPTION if any(row.scan.stop for row in shown) else ""
        console.print(Text(_CAPTION.format(stop=stop), style="dim"))


def _cells(row: Row) -> list[str]:
    scan = row.scan
    return [one_line(row.name), scan.format or "?", str(scan.calls), str(len(scan.findings)),
            _call_number(scan.first("warn")), _call_number(scan.first("block")),
            _call_number(scan.stop), str(scan.loop_calls),
            f"{scan.loop_chars:,}", _detectors(scan)]


def _detectors(scan: FileScan) -> str:
    return one_line(" ".join(sorted({f.detector for f in scan.findings})))


def _call_number(finding: Finding | None) -> str:
    return "" if finding is None else f"#{finding.call_number}"


def _table(rows: Sequence[Row], width: int) -> Table:
    cells = [_cells(row) for row in rows]
    columns = list(range(len(_HEADERS)))
    if not any(values[_STOP] for values in cells):
        columns.remove(_STOP)  # no run would have been stopped: no column for it
    if _total(_natural(columns, cells, under=False), 1) <= width:
        return _build(rows, cells, columns, width, under=False)
    # Too narrow for a detectors column: each row's detectors go on the lines under its name,
    # and the name column takes whatever width the numbers leave.
    columns.remove(_DETECTORS)
    for optional in _OPTIONAL:
        natural = _natural(columns, cells, under=True)
        if width - (_total(natural, 1) - natural[0]) >= min(natural[0], _NAME_MIN):
            break
        columns.remove(optional)
    return _build(rows, cells, columns, width, under=True)


def _header(column: int, under: bool) -> str:
    return f"transcript\n{_UNDER}detectors" if column == _NAME and under else _HEADERS[column]


def _natural(columns: Sequence[int], cells: Sequence[Sequence[str]], *,
             under: bool) -> list[int]:
    """Each column's width without cutting: its widest header line or cell."""
    return [max([cell_len(line) for line in _header(column, under).split("\n")]
                + [cell_len(row[column]) for row in cells])
            for column in columns]


def _total(widths: Sequence[int], gap: int) -> int:
    return sum(widths) + gap * (len(widths) - 1)


def _build(rows: Sequence[Row], cells: list[list[str]], columns: list[int], width: int, *,
           under: bool) -> Table:
    natural = _natural(columns, cells, under=under)
    gap = 2 if _total(natural, 2) <= width else 1
    room = width - gap * (len(natural) - 1)
    widths = fit_widths(natural, room, [(0, _NAME_MIN), (0, 1)])  # the name is column 0
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  padding=(0, gap - 1), collapse_padding=True)
    for column, cell_width in zip(columns, widths, strict=True):
        text = column in (_NAME, _FORMAT, _DETECTORS)
        table.add_column(_header(column, under), justify="left" if text else "right",
                         width=cell_width, no_wrap=True, overflow="crop")
    names = unique_ellipses([values[_NAME] for values in cells], widths[0])
    for row, values, shown in zip(rows, cells, names, strict=True):
        scan = row.scan
        style = "red" if scan.first("block") else ("yellow" if scan.findings else "")
        name = Text(shown)
        if under and values[_DETECTORS]:
            lines = wrap_names(values[_DETECTORS], max(widths[0] - len(_UNDER), 1)).split("\n")
            name.append("".join(f"\n{_UNDER}{line}" for line in lines), style="dim")
        table.add_row(name, *(Text(values[column]) for column in columns[1:]), style=style)
    return table
