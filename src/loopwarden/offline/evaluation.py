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
own row. :func:`group_by` splits the outcomes per source or per repository (the second path
component, ``openclaw/<owner>+<repo>/...``), and :func:`leave_one_out` checks that no group
does clearly worse than the others would predict. Everything here except :func:`evaluate` is a
pure function.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..base.errors import LabelError
from ..config import LoopDetectionConfig
from .findings import Finding
from .scan import FileScan, scan_file
from .transcripts._common import not_regular_reason

__all__ = [
    "GROUPINGS",
    "EvalReport",
    "GroupMetrics",
    "LabelError",
    "evaluate",
    "fraction",
    "group_by",
    "groups_table",
    "held_out_table",
    "leave_one_out",
    "load_labels",
    "markdown_table",
]


@dataclass(frozen=True, slots=True)
class Label:
    """One labelled transcript of a labels file (see the module docs for the fields)."""

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
    """Validate labels parsed from JSON (:class:`LabelError` names ``source`` and the entry)."""
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
        """The outcome as plain JSON data (detectors as a list)."""
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
        """Count one transcript's outcome in the group."""
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
        """Looping transcripts with a finding inside the loop span, as a fraction."""
        return _rate(self.detected, self.loops)

    @property
    def timely_recall(self) -> float | None:
        """Looping transcripts with a finding by ``warn_by``, as a fraction."""
        return _rate(self.timely, self.loops)

    @property
    def block_recall(self) -> float | None:
        """Looping transcripts with a block inside the loop span, as a fraction."""
        return _rate(self.blocked, self.loops)

    @property
    def false_warning_rate(self) -> float | None:
        """Healthy transcripts with any finding, as a fraction."""
        return _rate(self.false_warnings, self.healthy)

    @property
    def false_block_rate(self) -> float | None:
        """Healthy transcripts with any block, as a fraction."""
        return _rate(self.false_blocks, self.healthy)

    def to_json(self) -> dict[str, Any]:
        """The counts and the rates as plain JSON data."""
        data: dict[str, Any] = asdict(self)
        for name in ("recall", "timely_recall", "block_recall", "false_warning_rate",
                     "false_block_rate"):
            data[name] = getattr(self, name)
        return data


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass(slots=True)
class EvalSummary:
    """The metrics overall, per source, per loop type and for the hard negatives."""

    overall: GroupMetrics = field(default_factory=GroupMetrics)
    by_source: dict[str, GroupMetrics] = field(default_factory=dict)
    by_type: dict[str, GroupMetrics] = field(default_factory=dict)
    hard_negatives: GroupMetrics = field(default_factory=GroupMetrics)

    def to_json(self) -> dict[str, Any]:
        """The summary as plain JSON data (groups sorted by name)."""
        return {
            "overall": self.overall.to_json(),
            "by_source": {k: v.to_json() for k, v in sorted(self.by_source.items())},
            "by_type": {k: v.to_json() for k, v in sorted(self.by_type.items())},
            "hard_negatives": self.hard_negatives.to_json(),
        }


def summarize(outcomes: Iterable[TranscriptOutcome]) -> EvalSummary:
    """Sum the outcomes into :class:`EvalSummary`'s groups."""
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


# -- per source / per repository, and leave one out --------------------------------------------


def repository_of(file: str) -> str:
    """The repository a labelled file came from: ``openclaw/<owner>+<repo>/...`` → ``<owner>+<repo>``
    (the file's first folder when it has no second one)."""
    parts = file.split("/")
    return parts[1] if len(parts) > 2 else parts[0]


GROUPINGS: dict[str, Callable[[TranscriptOutcome], str]] = {
    "source": lambda outcome: outcome.source,
    "repository": lambda outcome: repository_of(outcome.file),
}


def group_by(outcomes: Iterable[TranscriptOutcome], by: str) -> dict[str, GroupMetrics]:
    """Metrics per ``source`` or per ``repository``."""
    key = GROUPINGS[by]
    groups: dict[str, GroupMetrics] = {}
    for outcome in outcomes:
        groups.setdefault(key(outcome), GroupMetrics()).add(outcome)
    return dict(sorted(groups.items()))


@dataclass(frozen=True, slots=True)
class HeldOut:
    """One group scored as if unseen, against the rates the *other* groups reach.

    Thresholds and learning settings are fixed and every transcript is replayed from a fresh
    guard, so a group scored alone gets exactly its pooled per-group result; what can show a gain
    that does not generalise is a group doing worse than the rest predicts. ``loops_lost`` is
    the other groups' timely-recall rate times this group's loops, minus its timely loops (0 when
    it does at least as well); ``excess_false_warnings`` the same for false warnings."""

    group: str
    loops: int
    timely: int
    expected_timely: float
    loops_lost: float
    healthy: int
    false_warnings: int
    expected_false_warnings: float
    excess_false_warnings: float
    false_blocks: int

    def to_json(self) -> dict[str, Any]:
        """The row as plain JSON data."""
        return asdict(self)


def leave_one_out(outcomes: Sequence[TranscriptOutcome], by: str = "source") -> list[HeldOut]:
    """Each group (``source`` or ``repository``) held out against the pool of the others."""
    groups = group_by(outcomes, by)
    total = GroupMetrics()
    for outcome in outcomes:
        total.add(outcome)
    held: list[HeldOut] = []
    for name, m in groups.items():
        rest_loops, rest_healthy = total.loops - m.loops, total.healthy - m.healthy
        timely_rate = (total.timely - m.timely) / rest_loops if rest_loops else 1.0
        warn_rate = (total.false_warnings - m.false_warnings) / rest_healthy if rest_healthy else 0.0
        expected_timely = timely_rate * m.loops
        expected_warnings = warn_rate * m.healthy
        held.append(HeldOut(
            group=name, loops=m.loops, timely=m.timely, expected_timely=round(expected_timely, 2),
            loops_lost=round(max(0.0, expected_timely - m.timely), 2), healthy=m.healthy,
            false_warnings=m.false_warnings, expected_false_warnings=round(expected_warnings, 2),
            excess_false_warnings=round(max(0.0, m.false_warnings - expected_warnings), 2),
            false_blocks=m.false_blocks,
        ))
    return held


def held_out_table(held: Sequence[HeldOut], by: str = "source") -> str:
    """The leave-one-out check as one Markdown table."""
    lines = [f"| held-out {by} | loops | timely | expected from the others | loops lost "
             "| healthy | false warnings | expected | false blocks |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for h in held:
        lines.append(f"| {h.group} | {h.loops} | {h.timely} | {h.expected_timely:g} | "
                     f"{h.loops_lost:g} | {h.healthy} | {h.false_warnings} | "
                     f"{h.expected_false_warnings:g} | {h.false_blocks} |")
    return "\n".join(lines)


def groups_table(groups: Mapping[str, GroupMetrics], by: str) -> str:
    """Per-group metrics as one Markdown table."""
    summary = EvalSummary()
    lines = markdown_table(summary).splitlines()[:2]
    lines[0] = lines[0].replace("| group |", f"| {by} |", 1)
    for name, m in groups.items():
        cells = (name, str(m.transcripts), fraction(m.detected, m.loops),
                 fraction(m.timely, m.loops), fraction(m.blocked, m.loops),
                 fraction(m.false_warnings, m.healthy), fraction(m.false_blocks, m.healthy))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dataclass(slots=True)
class EvalReport:
    """What :func:`evaluate` found: each transcript's outcome, their summary, and the labelled
    files it did not find."""

    outcomes: list[TranscriptOutcome]
    summary: EvalSummary
    missing: list[str]

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON data (for ``loopwarden eval --json``): the summary's groups,
        every outcome and the files not found."""
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
