"""``loopwarden eval``: how well the guard's findings match hand-labelled transcripts.

Labels are a JSON list in the format of the shared corpus' ``labels-dev.json``::

    {"file": "openclaw/x/s.jsonl", "source": "openclaw", "n_calls": 31, "loop": true,
     "type": "generic_repeat", "loop_start": 11, "warn_by": 17, "loop_end": 17,
     "hard_negative": false, "notes": "..."}

Indices are 0-based call positions. Metrics (each a fraction of transcripts):

- recall: looping transcripts with a finding inside the loop span ``loop_start..loop_end``;
- timely recall: looping transcripts with a finding in ``loop_start..warn_by`` (the first
  finding of the loop came at or before ``warn_by``);
- block recall: looping transcripts with a block inside the loop span;
- false-warning rate: healthy transcripts with any finding at all;
- false-block rate: healthy transcripts with any block.

Each is given overall, per source and per loop type (healthy transcripts have no type, so the
per-type rows carry only the recall figures); hard negatives (healthy but loop-like) get their
own row. Everything here except :func:`evaluate` is a pure function.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .config import LoopDetectionConfig
from .findings import Finding
from .report.scan import FileScan, scan_file
from .transcripts._common import not_regular_reason

__all__ = [
    "EvalReport",
    "EvalSummary",
    "GroupMetrics",
    "Label",
    "LabelError",
    "TranscriptOutcome",
    "evaluate",
    "fraction",
    "judge",
    "load_labels",
    "markdown_table",
    "parse_labels",
    "resolve_transcript",
    "summarize",
    "summary_rows",
]


class LabelError(ValueError):
    """A labels file that cannot be used; the message names the entry and the field."""


@dataclass(frozen=True, slots=True)
class Label:
    file: str
    source: str
    loop: bool
    type: str | None = None
    loop_start: int | None = None
    warn_by: int | None = None
    loop_end: int | None = None
    hard_negative: bool = False
    n_calls: int | None = None
    notes: str = ""


def load_labels(path: str | Path) -> list[Label]:
    """Read and validate a labels file (a FIFO or device is refused, never opened)."""
    reason = not_regular_reason(Path(path))
    if reason is not None:
        raise LabelError(f"{path}: cannot read labels ({reason})")
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelError(f"{path}: cannot read labels ({exc})") from None
    except json.JSONDecodeError as exc:
        raise LabelError(f"{path}: invalid JSON ({exc})") from None
    return parse_labels(data, source=str(path))


def parse_labels(data: object, *, source: str = "labels") -> list[Label]:
    if not isinstance(data, list):
        raise LabelError(f"{source}: expected a JSON list of labels")
    return [_label(entry, f"{source}[{number}]") for number, entry in enumerate(data)]


def _label(entry: object, where: str) -> Label:
    if not isinstance(entry, Mapping):
        raise LabelError(f"{where}: expected an object")
    file = entry.get("file")
    if not isinstance(file, str) or not file:
        raise LabelError(f"{where}.file: expected a non-empty string")
    loop = entry.get("loop")
    if not isinstance(loop, bool):
        raise LabelError(f"{where}.loop: expected true or false")
    start, end = _index(entry, "loop_start", where), _index(entry, "loop_end", where)
    warn_by = _index(entry, "warn_by", where)
    if loop and (start is None or end is None or end < start):
        raise LabelError(f"{where}: a loop needs loop_start <= loop_end")
    source = entry.get("source")
    return Label(
        file=file,
        source=source if isinstance(source, str) and source else file.split("/", 1)[0],
        loop=loop,
        type=_text(entry.get("type")) or ("other" if loop else None),
        loop_start=start,
        warn_by=end if loop and warn_by is None else warn_by,
        loop_end=end,
        hard_negative=entry.get("hard_negative") is True,
        n_calls=_index(entry, "n_calls", where),
        notes=_text(entry.get("notes")) or "",
    )


def _index(entry: Mapping[str, object], key: str, where: str) -> int | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LabelError(f"{where}.{key}: expected a call index (integer >= 0), got {value!r}")
    return value


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def resolve_transcript(root: Path, label: Label) -> Path | None:
    """The labelled file under ``root``: as named, or its normalised ``.jsonl`` twin."""
    for candidate in (root / label.file, root / f"{label.file}.jsonl"):
        if candidate.is_file():
            return candidate
    return None


@dataclass(frozen=True, slots=True)
class TranscriptOutcome:
    """One labelled transcript judged against the guard's findings."""

    file: str
    source: str
    loop: bool
    type: str | None
    loop_start: int | None
    warn_by: int | None
    loop_end: int | None
    hard_negative: bool
    calls: int
    findings: int
    first_finding: int | None
    first_in_loop: int | None  # first finding inside the labelled loop span
    detected: bool  # loop: a finding inside the span; healthy: always False
    timely: bool
    blocked_in_loop: bool
    false_warning: bool  # healthy: any finding; loop: always False
    false_block: bool
    detectors: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["detectors"] = list(self.detectors)
        return data


def judge(label: Label, findings: Sequence[Finding], calls: int) -> TranscriptOutcome:
    """Compare one transcript's findings with its label."""
    detected = timely = blocked = false_warning = false_block = False
    first_in_loop = None
    if label.loop:
        start = label.loop_start or 0
        end = label.loop_end if label.loop_end is not None else calls
        warn_by = label.warn_by if label.warn_by is not None else end
        inside = [f for f in findings if start <= f.index <= end]
        detected = bool(inside)
        first_in_loop = min((f.index for f in inside), default=None)
        timely = any(f.index <= warn_by for f in inside)
        blocked = any(f.action == "block" for f in inside)
    else:
        false_warning = bool(findings)
        false_block = any(f.action == "block" for f in findings)
    return TranscriptOutcome(
        file=label.file, source=label.source, loop=label.loop, type=label.type,
        loop_start=label.loop_start, warn_by=label.warn_by, loop_end=label.loop_end,
        hard_negative=label.hard_negative, calls=calls, findings=len(findings),
        first_finding=min((f.index for f in findings), default=None),
        first_in_loop=first_in_loop,
        detected=detected, timely=timely, blocked_in_loop=blocked,
        false_warning=false_warning, false_block=false_block,
        detectors=tuple(sorted({f.detector for f in findings})),
    )


@dataclass(slots=True)
class GroupMetrics:
    """Counts for one group of transcripts; rates are None when their denominator is 0."""

    transcripts: int = 0
    loops: int = 0
    detected: int = 0
    timely: int = 0
    blocked: int = 0
    healthy: int = 0
    false_warnings: int = 0
    false_blocks: int = 0

    def add(self, outcome: TranscriptOutcome) -> None:
        self.transcripts += 1
        if outcome.loop:
            self.loops += 1
            self.detected += outcome.detected
            self.timely += outcome.timely
            self.blocked += outcome.blocked_in_loop
        else:
            self.healthy += 1
            self.false_warnings += outcome.false_warning
            self.false_blocks += outcome.false_block

    @property
    def recall(self) -> float | None:
        return _rate(self.detected, self.loops)

    @property
    def timely_recall(self) -> float | None:
        return _rate(self.timely, self.loops)

    @property
    def block_recall(self) -> float | None:
        return _rate(self.blocked, self.loops)

    @property
    def false_warning_rate(self) -> float | None:
        return _rate(self.false_warnings, self.healthy)

    @property
    def false_block_rate(self) -> float | None:
        return _rate(self.false_blocks, self.healthy)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = asdict(self)
        for name in ("recall", "timely_recall", "block_recall", "false_warning_rate",
                     "false_block_rate"):
            data[name] = getattr(self, name)
        return data


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass(slots=True)
class EvalSummary:
    overall: GroupMetrics = field(default_factory=GroupMetrics)
    by_source: dict[str, GroupMetrics] = field(default_factory=dict)
    by_type: dict[str, GroupMetrics] = field(default_factory=dict)
    hard_negatives: GroupMetrics = field(default_factory=GroupMetrics)

    def to_json(self) -> dict[str, Any]:
        return {
            "overall": self.overall.to_json(),
            "by_source": {k: v.to_json() for k, v in sorted(self.by_source.items())},
            "by_type": {k: v.to_json() for k, v in sorted(self.by_type.items())},
            "hard_negatives": self.hard_negatives.to_json(),
        }


def summarize(outcomes: Iterable[TranscriptOutcome]) -> EvalSummary:
    summary = EvalSummary()
    for outcome in outcomes:
        summary.overall.add(outcome)
        summary.by_source.setdefault(outcome.source, GroupMetrics()).add(outcome)
        if outcome.loop:
            summary.by_type.setdefault(outcome.type or "other", GroupMetrics()).add(outcome)
        if outcome.hard_negative:
            summary.hard_negatives.add(outcome)
    return summary


def fraction(part: int, whole: int) -> str:
    """``"3/4 (75%)"``, or ``"–"`` when there is nothing to divide by."""
    return "–" if whole == 0 else f"{part}/{whole} ({part / whole:.0%})"


def summary_rows(summary: EvalSummary) -> list[tuple[str, GroupMetrics]]:
    """Every group in display order: all, each source, hard negatives, each loop type."""
    return [
        ("all", summary.overall),
        *sorted(summary.by_source.items()),
        ("hard negatives", summary.hard_negatives),
        *((f"loop type {name}", metrics) for name, metrics in sorted(summary.by_type.items())),
    ]


def markdown_table(summary: EvalSummary) -> str:
    """The metrics as one Markdown table (for READMEs)."""
    lines = ["| group | transcripts | recall | timely recall | block recall | false warnings "
             "| false blocks |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, m in summary_rows(summary):
        cells = (name, str(m.transcripts), fraction(m.detected, m.loops),
                 fraction(m.timely, m.loops), fraction(m.blocked, m.loops),
                 fraction(m.false_warnings, m.healthy), fraction(m.false_blocks, m.healthy))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dataclass(slots=True)
class EvalReport:
    outcomes: list[TranscriptOutcome]
    summary: EvalSummary
    missing: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            **self.summary.to_json(),
            "transcripts": [outcome.to_json() for outcome in self.outcomes],
            "missing": list(self.missing),
        }


def evaluate(
    labels: Sequence[Label],
    root: str | Path,
    config: LoopDetectionConfig | None = None,
    *,
    profiles: object = None,
    on_scanned: Callable[[Label, FileScan | None], None] | None = None,
) -> EvalReport:
    """Replay every labelled transcript found under ``root`` and judge it.

    Labels whose file is not under ``root`` are listed in ``missing`` and left out of the
    metrics. ``on_scanned`` is told about each label as it is done (for progress display).
    """
    base = Path(root)
    outcomes: list[TranscriptOutcome] = []
    missing: list[str] = []
    for label in labels:
        path = resolve_transcript(base, label)
        scan = None if path is None else scan_file(path, config, profiles=profiles)
        if scan is None:
            missing.append(label.file)
        else:
            outcomes.append(judge(label, scan.findings, scan.calls))
        if on_scanned is not None:
            on_scanned(label, scan)
    return EvalReport(outcomes, summarize(outcomes), missing)
