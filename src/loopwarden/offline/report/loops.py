"""What a report says about each loop: its waste, its first warning and block, what the
guard would have told the model, and the looping calls themselves (arguments and a result
excerpt, cut and with credentials masked).

Built from a scan that still carries its trace (``FileScan.trace``); excerpts of results need
``scan_file(..., keep_outputs=True)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from ...base.redact import mask_secrets
from ..findings import Finding
from ..scan import CallTrace, FileScan, LoopSpan, loop_groups
from ._text import printable
from .tokens import TokenEstimate

#: Characters of a looping call's arguments shown (masked first, then cut).
ARGS_LIMIT = 400
#: Characters of a looping call's result shown.
RESULT_LIMIT = 600
#: Distinct argument sets shown per loop (a churn loop may have one per call).
MAX_SHOWN_CALLS = 3
# Masking looks a little past the cut, so that a secret straddling it is still recognised
# whole (a private key block is a few thousand characters).
_MASK_LOOKAHEAD = 4096


@dataclass(frozen=True, slots=True)
class LoopCall:
    """One argument set of a loop: its first call, and how many calls of the loop used it."""

    index: int
    tool: str
    args: str
    result: str | None  # None when the scan kept no outputs
    repeats: int


@dataclass(frozen=True, slots=True)
class LoopReport:
    """One loop span as a report shows it. ``chars``/``tokens`` are None without a trace."""

    span: LoopSpan
    chars: int | None
    tokens: int | None
    findings: tuple[Finding, ...]
    calls: tuple[LoopCall, ...]
    distinct_args: int

    @property
    def first_warning(self) -> Finding | None:
        """The span's first warning, or None."""
        return next((f for f in self.findings if f.action == "warn"), None)

    @property
    def first_block(self) -> Finding | None:
        """The span's first block, or None."""
        return next((f for f in self.findings if f.action == "block"), None)

    @property
    def stop(self) -> Finding | None:
        """The span's terminal stop (the block that would have ended the run), or None."""
        return next((f for f in self.findings if f.terminal), None)

    def count(self, action: str) -> int:
        """How many of the span's findings have ``action`` ("warn" or "block")."""
        return sum(1 for f in self.findings if f.action == action)

    @property
    def waste(self) -> tuple[int, int, int]:
        """Sort key, largest first: tokens, then characters, then calls."""
        return (self.tokens or 0, self.chars or 0, self.span.calls)


def loop_reports(scan: FileScan, estimate: TokenEstimate) -> list[LoopReport]:
    """The loops of ``scan``, in call order."""
    trace = scan.trace
    if trace is None:
        return [_without_trace(scan, span) for span in scan.spans]
    reports = []
    for group in loop_groups(trace, scan.findings):
        span = group.span
        reports.append(LoopReport(
            span=span,
            chars=sum(trace.chars[span.start:span.end + 1]),
            tokens=estimate.tokens(trace, [(span.start, span.end)]),
            findings=group.findings,
            calls=tuple(_shown_calls(trace, group.members)),
            distinct_args=len({trace.key(i) for i in group.members}),
        ))
    return reports


def _without_trace(scan: FileScan, span: LoopSpan) -> LoopReport:
    owned = tuple(f for f in scan.findings if span.start <= f.index <= span.end)
    return LoopReport(span, None, None, owned, (), 0)


def _shown_calls(trace: CallTrace, members: tuple[int, ...]) -> list[LoopCall]:
    first: dict[str, int] = {}
    repeats: dict[str, int] = {}
    for index in members:
        key = trace.key(index)
        first.setdefault(key, index)
        repeats[key] = repeats.get(key, 0) + 1
    shown = list(first.items())[:MAX_SHOWN_CALLS]
    return [LoopCall(index, trace.tools[index], excerpt(_args_text(trace.args[index]), ARGS_LIMIT),
                     _result_excerpt(trace, index), repeats[key])
            for key, index in shown]


def _result_excerpt(trace: CallTrace, index: int) -> str | None:
    text = trace.output(index)
    return None if text is None else excerpt(text, RESULT_LIMIT)


def _args_text(args: Any) -> str:
    try:
        return orjson.dumps(args, default=str).decode("utf-8")
    except (TypeError, orjson.JSONEncodeError):
        return str(args)


def excerpt(text: str, limit: int) -> str:
    """``text`` with credentials masked, cut to ``limit`` characters with a note of the rest."""
    masked = mask_secrets(text[:limit + _MASK_LOOKAHEAD])
    rest = len(text) - len(text[:limit + _MASK_LOOKAHEAD]) + len(masked) - limit
    if rest <= 0:
        return printable(masked)
    return printable(f"{masked[:limit]} … ({rest:,} more characters)")
