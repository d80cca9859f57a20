"""Scan one transcript: stream its calls through :func:`~loopwarden.offline.findings.replay` and
measure what the loops cost.

Loop spans (what "calls and characters spent inside loops" counts):

- A span opens at a finding, i.e. at the first call the guard would have warned about or
  blocked, not where the repetition began: it measures what acting on the guard would save.
- Its *pattern* is the looping call's identity: the (tool, args hash) of the flagged call;
  for ``ping_pong`` also that of the call before it (the other side of the alternation); for
  ``unknown_tool_repeat`` and ``argument_churn``, whose arguments vary, just the tool name.
- The span runs on, within the same run, to the last call that still matches the pattern,
  tolerating up to :data:`MAX_GAP` other calls in a row between matches (a poll loop often
  interleaves a ``sleep``). Later findings on calls of an open span extend it, never start
  a second one.
- Overlapping spans are merged; every call inside a span counts, with the characters of its
  output (result text, or error text when there is no result).
"""

from __future__ import annotations

import functools
import signal
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.types import MISSING, ToolCall
from ..config import LoopDetectionConfig
from ..fingerprint import args_hash, json_bytes
from .efficacy import (
    DEFAULT_WITHIN,
    NUDGE_ACTIONS,
    SEEN_MARKERS_BYTES,
    CallKey,
    NudgeOutcome,
    RunIndex,
    judge,
    seen_nudge,
)
from .findings import Finding, replay
from .transcripts import ReadProblem, detect_format, read_transcript
from .transcripts._common import not_regular_reason
from .transcripts._formats import BY_NAME

__all__ = ["FileScan", "scanning"]

#: Other calls tolerated in a row between two calls of one loop pattern.
MAX_GAP = 3

# Detectors whose looping calls share a tool but not their arguments.
_TOOL_PATTERN_DETECTORS = frozenset({"unknown_tool_repeat", "argument_churn"})


def output_chars(result: Any, error: Any = None) -> int:
    """Characters of tool output a call fed back to the model (0 when unknown)."""
    if result is MISSING or result is None:
        return 0 if error is None or error is MISSING else len(str(error))
    if isinstance(result, str):
        return len(result)
    if isinstance(result, Mapping):
        content = result.get("content")
        if isinstance(content, list):
            return sum(len(part.get("text") or "") for part in content
                       if isinstance(part, Mapping) and isinstance(part.get("text"), str))
    # (orjson's JSON for plain values; canonical JSON for the rest, which orjson could be
    # crashed by, and which str() could recurse too deep on.)
    return len(json_bytes(result))


def output_text(result: Any, error: Any = None) -> str:
    """The tool output a call fed back to the model, as text (what :func:`output_chars`
    counts; MCP-style content parts are joined by newlines)."""
    if result is MISSING or result is None:
        return "" if error is None or error is MISSING else str(error)
    if isinstance(result, str):
        return result
    if isinstance(result, Mapping):
        content = result.get("content")
        if isinstance(content, list):
            return "\n".join(part["text"] for part in content
                             if isinstance(part, Mapping) and isinstance(part.get("text"), str))
    return json_bytes(result).decode("utf-8", "replace")  # (as output_chars: never crashes)


def _measure(result: Any, error: Any) -> tuple[int, str | bytes | None]:
    """One call's output: its characters (as :func:`output_chars` counts them) and the text a
    model read (searched for the loop messages it was shown)."""
    if result is MISSING or result is None:
        if error is None or error is MISSING:
            return 0, None
        text = str(error)
        return len(text), text
    if isinstance(result, str):
        return len(result), result
    if isinstance(result, Mapping):
        content = result.get("content")
        if isinstance(content, list):
            parts = [part["text"] for part in content
                     if isinstance(part, Mapping) and isinstance(part.get("text"), str)]
            return sum(len(part) for part in parts), "\n".join(parts)
    data = json_bytes(result)
    return len(data), data


@dataclass(slots=True)
class CallTrace:
    """The little a report needs per call, collected while the calls stream into replay."""

    tools: list[str] = field(default_factory=list)
    runs: list[str | None] = field(default_factory=list)
    chars: list[int] = field(default_factory=list)
    args: list[Any] = field(default_factory=list)
    #: Each call's (result, error) when kept (``scan_file(keep_outputs=True)``): a report
    #: quotes the looping calls' output and may tokenize it. Off by default, since it keeps a
    #: whole transcript's results alive.
    outputs: list[tuple[Any, Any]] | None = None
    #: Each call's outcome as the replaying guard recorded it (its result hash, volatile
    #: fields stripped; None: none recorded), filled by :func:`replay`.
    results: list[str | None] = field(default_factory=list)
    #: The loop messages the transcript itself shows its model: (call index, stage, detector).
    seen: list[tuple[int, str, str]] = field(default_factory=list)
    _keys: dict[int, str] = field(default_factory=dict)

    def observe(self, calls: Iterable[ToolCall]) -> Iterator[ToolCall]:
        """Pass ``calls`` through, noting each one's tool, run, output size and arguments."""
        outputs = self.outputs
        for call in calls:
            chars, text = _measure(call.result, call.error)
            if text:
                self._note_seen(len(self.tools), text)
            self.tools.append(call.tool_name)
            self.runs.append(call.run_id)
            self.chars.append(chars)
            self.args.append(call.args)
            if outputs is not None:
                outputs.append((call.result, call.error))
            yield call

    def _note_seen(self, index: int, text: str | bytes) -> None:
        if isinstance(text, bytes):
            if not any(marker in text for marker in SEEN_MARKERS_BYTES):
                return
            text = text.decode("utf-8", "replace")
        found = seen_nudge(text)
        if found is not None:
            self.seen.append((index, *found))

    def output(self, index: int) -> str | None:
        """Call ``index``'s output text, or None when outputs were not kept."""
        if self.outputs is None:
            return None
        return output_text(*self.outputs[index])

    def __len__(self) -> int:
        return len(self.tools)

    def call_key(self, index: int) -> CallKey:
        """Call ``index``'s identity for judging a nudge (its args hashed on demand)."""
        return CallKey(self.runs[index], self.tools[index], self.key(index),
                       self.results[index] if index < len(self.results) else None)

    def key(self, index: int) -> str:
        """The call's (tool, args hash) identity; hashed lazily, only near findings."""
        cached = self._keys.get(index)
        if cached is None:
            cached = self._keys[index] = args_hash(self.tools[index], self.args[index])
        return cached


@dataclass(frozen=True, slots=True)
class LoopSpan:
    """Calls ``start..end`` (inclusive, 0-based) spent in one loop pattern after a finding."""

    start: int
    end: int
    detector: str
    tool: str
    level: str  # "warning", or "critical" once any finding in the span blocked

    @property
    def calls(self) -> int:
        """How many calls the span holds."""
        return self.end - self.start + 1


@dataclass(frozen=True, slots=True)
class _Pattern:
    """What a call must share with the flagged call to continue its loop."""

    by_tool: bool
    values: frozenset[str]

    def matches(self, trace: CallTrace, index: int) -> bool:
        value = trace.tools[index] if self.by_tool else trace.key(index)
        return value in self.values


@dataclass(slots=True)
class _OpenSpan:
    start: int
    end: int
    detector: str
    tool: str
    level: str
    run: str | None
    pattern: _Pattern


@dataclass(frozen=True, slots=True)
class LoopGroup:
    """A loop span with what it is made of: the findings it owns (the one that opened it and
    those on its later calls) and the calls that match its pattern (``members``; the span may
    also hold up to :data:`MAX_GAP` other calls in a row between them)."""

    span: LoopSpan
    findings: tuple[Finding, ...]
    members: tuple[int, ...]


def loop_spans(trace: CallTrace, findings: Sequence[Finding]) -> list[LoopSpan]:
    """The loop spans of a replayed transcript (see the module doc for the definition)."""
    return [group.span for group in loop_groups(trace, findings)]


def loop_groups(trace: CallTrace, findings: Sequence[Finding]) -> list[LoopGroup]:
    """:func:`loop_spans`, each with its findings and pattern calls (for reports)."""
    spans: list[tuple[_OpenSpan, list[Finding]]] = []
    for finding in sorted(findings, key=lambda f: f.index):
        index = finding.index
        if index >= len(trace):
            continue
        owner = next((pair for pair in reversed(spans)
                      if pair[0].start <= index <= pair[0].end
                      and pair[0].pattern.matches(trace, index)), None)
        if owner is not None:
            if finding.level == "critical":
                owner[0].level = "critical"
            owner[1].append(finding)
            continue
        span = _open_span(trace, finding)
        span.end = _extend(trace, span)
        spans.append((span, [finding]))
    return [LoopGroup(LoopSpan(s.start, s.end, s.detector, s.tool, s.level), tuple(owned),
                      tuple(i for i in range(s.start, s.end + 1) if s.pattern.matches(trace, i)))
            for s, owned in spans]


def _open_span(trace: CallTrace, finding: Finding) -> _OpenSpan:
    index = finding.index
    run = trace.runs[index]
    if finding.detector in _TOOL_PATTERN_DETECTORS:
        pattern = _Pattern(True, frozenset({trace.tools[index]}))
    else:
        keys = {trace.key(index)}
        if finding.detector == "ping_pong" and index > 0 and trace.runs[index - 1] == run:
            keys.add(trace.key(index - 1))
        pattern = _Pattern(False, frozenset(keys))
    return _OpenSpan(index, index, finding.detector, trace.tools[index], finding.level, run,
                     pattern)


def _extend(trace: CallTrace, span: _OpenSpan) -> int:
    last, gap = span.start, 0
    for index in range(span.start + 1, len(trace)):
        if trace.runs[index] != span.run:
            break
        if span.pattern.matches(trace, index):
            last, gap = index, 0
        else:
            gap += 1
            if gap > MAX_GAP:
                break
    return last


def covered_ranges(spans: Sequence[LoopSpan]) -> list[tuple[int, int]]:
    """Spans merged into disjoint inclusive ranges."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted((s.start, s.end) for s in spans):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


@dataclass(slots=True)
class FileScan:
    """What the guard would have said about one transcript, and what its loops cost."""

    path: str
    format: str | None
    calls: int
    findings: list[Finding]
    spans: list[LoopSpan]
    loop_calls: int
    loop_chars: int
    output_chars: int
    problems: list[ReadProblem]
    trace: CallTrace | None = None  # per-call data for plots; dropped once no longer needed
    #: Did the nudges work: one outcome per replayed warning/block and per loop message the
    #: transcript showed its model (see :mod:`loopwarden.offline.efficacy`).
    nudges: list[NudgeOutcome] = field(default_factory=list)
    #: Set when the file was read as a forced format it is not: why (its format is None).
    mismatch: str | None = None

    def first(self, action: str) -> Finding | None:
        """The first finding with ``action`` ("warn" or "block")."""
        return next((f for f in self.findings if f.action == action), None)

    def first_label(self, action: str) -> str:
        """``"#12 known_poll_no_progress"`` for the first finding with ``action``, else ``""``
        (the call's number counted from 1)."""
        finding = self.first(action)
        return "" if finding is None else f"#{finding.call_number} {finding.detector}"

    @property
    def stop(self) -> Finding | None:
        """The terminal stop: the first block that would have ended its run, if any."""
        return next((f for f in self.findings if f.terminal), None)

    def without_trace(self) -> FileScan:
        """The scan itself, its per-call trace dropped (it holds every call's data)."""
        self.trace = None
        return self

    def to_json(self) -> dict[str, Any]:
        """DESIGN §5's file entry, plus extra file-level keys (allowed by the contract)."""
        return {
            "path": self.path,
            "format": self.format,
            "calls": self.calls,
            "findings": [_finding_json(f) for f in self.findings],
            "loop_calls": self.loop_calls,
            "loop_chars": self.loop_chars,
            "output_chars": self.output_chars,
            "spans": [{"start": s.start, "end": s.end, "detector": s.detector, "tool": s.tool,
                       "level": s.level} for s in self.spans],
            "problems": [{"line": p.line, "message": p.message} for p in self.problems],
            "nudges": [outcome.to_json() for outcome in self.nudges],
        }


_FINDING_KEYS = ("index", "call_id", "tool", "level", "action", "detector", "count", "message")


def _finding_json(finding: Finding) -> dict[str, Any]:
    return {key: getattr(finding, key) for key in _FINDING_KEYS}


def nudge_outcomes(trace: CallTrace, findings: Sequence[Finding],
                   within: int = DEFAULT_WITHIN) -> list[NudgeOutcome]:
    """Whether the model changed course after each replayed warning or block (``replay``: it
    never saw them, so this is how often it turns on its own) and after each loop message the
    transcript shows it (``seen``), within ``within`` later calls of the run."""
    if not findings and not trace.seen:
        return []
    runs = RunIndex(trace.runs, trace.call_key)
    outcomes: list[NudgeOutcome] = []
    for finding in findings:
        if finding.action in NUDGE_ACTIONS and finding.index < len(trace):
            outcome, after = judge(runs, finding.index, finding.detector, within)
            outcomes.append(NudgeOutcome(finding.index, finding.action, finding.detector,
                                         finding.tool, outcome, after, "replay"))
    for index, stage, detector in trace.seen:
        outcome, after = judge(runs, index, detector, within, own_result=False)
        outcomes.append(NudgeOutcome(index, stage, detector, trace.tools[index], outcome, after,
                                     "seen"))
    return outcomes


def scan_file(
    path: str | Path,
    config: LoopDetectionConfig | None = None,
    *,
    profiles: object = None,
    format: str = "auto",
    keep_outputs: bool = False,
    nudge_within: int = DEFAULT_WITHIN,
) -> FileScan:
    """Replay one transcript through the guard, streaming; never raises for a bad file.

    Anything but a regular file (a FIFO, a device, a dangling link) is not opened: its scan
    has no format and one problem saying what it is. ``keep_outputs`` keeps every call's
    result in the trace, for a report that quotes them (see :attr:`CallTrace.outputs`).
    ``nudge_within`` is how many later calls a nudge has to show an effect
    (:attr:`FileScan.nudges`).
    """
    path = Path(path)
    problems: list[ReadProblem] = []
    reason = not_regular_reason(path)
    if reason is not None:
        problems.append(ReadProblem(str(path), None, reason))
        return FileScan(path=str(path), format=None, calls=0, findings=[], spans=[],
                        loop_calls=0, loop_chars=0, output_chars=0, problems=problems,
                        trace=CallTrace())
    name = detect_format(path) if format == "auto" else format
    trace = CallTrace(outputs=[] if keep_outputs else None)
    calls = read_transcript(path, name or "auto", on_problem=problems.append)
    findings = replay(trace.observe(calls), config, profiles, outcomes=trace.results)
    mismatch = _format_mismatch(path, format, len(trace), problems)
    if mismatch is not None:
        return FileScan(path=str(path), format=None, calls=0, findings=[], spans=[],
                        loop_calls=0, loop_chars=0, output_chars=0,
                        problems=[ReadProblem(str(path), None, mismatch), *problems],
                        trace=CallTrace(), mismatch=mismatch)
    spans = loop_spans(trace, findings)
    covered = covered_ranges(spans)
    return FileScan(
        path=str(path),
        format=name,
        calls=len(trace),
        findings=findings,
        spans=spans,
        loop_calls=sum(end - start + 1 for start, end in covered),
        loop_chars=sum(sum(trace.chars[start:end + 1]) for start, end in covered),
        output_chars=sum(trace.chars),
        problems=problems,
        trace=trace,
        nudges=nudge_outcomes(trace, findings, nudge_within),
    )


def _format_mismatch(path: Path, format: str, calls: int,
                     problems: Sequence[ReadProblem]) -> str | None:
    """Why a file read as the forced ``format`` does not parse as it (no tool call read, and
    the content is not that format), or None. A file of that format without tool calls, and
    an empty file, parse."""
    if format == "auto" or calls or path.stat().st_size == 0:
        return None
    detected = detect_format(path)
    if detected == format:
        return None
    expected = BY_NAME[format].shape
    found = (f"it reads as {detected} (--format auto or --format {detected} scans it)"
             if detected is not None else "it is no transcript format loopwarden knows"
             + (f"; {len(problems)} read problems" if problems else ""))
    return f"does not parse as --format {format}: no tool call read, {found}; expected {expected}"


def _scan_task(path: Path, config: LoopDetectionConfig | None, format: str,
               keep_trace: bool, nudge_within: int = DEFAULT_WITHIN) -> FileScan:
    result = scan_file(path, config, format=format, keep_outputs=keep_trace,
                       nudge_within=nudge_within)
    # A report draws and quotes only transcripts with findings: a clean one's trace (every
    # call's arguments and outputs) would be pickled back to the parent for nothing.
    return result if keep_trace and result.findings else result.without_trace()


def _ignore_interrupts() -> None:
    """Worker set-up: Ctrl-C is the parent's to handle, not every worker's to print."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _chunk_size(files: int, jobs: int) -> int:
    # About eight chunks per worker: few enough to keep the pickling overhead low, enough that
    # one long transcript in a chunk does not leave the other workers idle at the end.
    return max(1, min(16, files // (jobs * 8)))


@contextmanager
def scanning(paths: Sequence[Path], config: LoopDetectionConfig | None = None, *,
             format: str = "auto", jobs: int = 1,
             keep_traces: bool = True,
             nudge_within: int = DEFAULT_WITHIN) -> Iterator[Iterator[FileScan]]:
    """:func:`scan_file` over ``paths``: the scans, in the order of ``paths``.

    With ``jobs > 1`` (and two files or more) a pool of ``jobs`` worker processes scans the
    files in chunks; each scan is the same as a serial one, and they come back in the same
    order. The work is handed out on entry, before the caller starts threads of its own (a
    progress bar), so workers are never forked from a process running them. ``keep_traces``
    keeps the per-call trace and outputs of each scan with findings (for a report); False
    drops every trace in the worker, so none is sent back.
    """
    task = functools.partial(_scan_task, config=config, format=format, keep_trace=keep_traces,
                             nudge_within=nudge_within)
    if jobs <= 1 or len(paths) < 2:
        yield (task(path) for path in paths)
        return
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(paths)), initializer=_ignore_interrupts)
    try:
        yield pool.map(task, paths, chunksize=_chunk_size(len(paths), jobs))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
