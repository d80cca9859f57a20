"""What ``scan`` prints: the ``--json`` document, the totals line under the table, the read
problems and skipped paths, and the ``--fail-on`` exit decision."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from ...config import LoopDetectionConfig
from ...offline.efficacy import DEFAULT_WITHIN, efficacy, rate_text
from ...offline.report._text import printable
from ...offline.report.table import Row, print_scan_table
from ...offline.scan import FileScan
from .._common import note, stderr
from ._files import ScanOutcome, Skipped
from ._options import _settings

# Reasons a file found in a folder is passed over without a note of its own: folders hold
# READMEs and configs next to transcripts.
_QUIET_REASONS = frozenset({"not a recognised transcript format", "empty file"})


def _failed(scans: Sequence[FileScan], fail_on: str) -> bool:
    if fail_on == "block":
        return any(scan.first("block") is not None for scan in scans)
    return fail_on == "warn" and any(scan.findings for scan in scans)


def _scan_json(outcome: ScanOutcome, listed: Sequence[FileScan],
               config: LoopDetectionConfig, nudge_within: int = DEFAULT_WITHIN) -> dict[str, Any]:
    """``listed`` are the files to show (``--only-findings``, ``--sort``); totals count all."""
    skipped = outcome.skipped
    return {
        "files": [scan.to_json() for scan in listed],
        "skipped": [skip.path for skip in skipped],
        "skip_reasons": [{"path": skip.path, "reason": skip.reason, "explicit": skip.explicit,
                          "error": skip.error} for skip in skipped],
        "config": _settings(config),
        "totals": _totals(outcome.scans),
        "nudge_efficacy": nudge_efficacy(outcome.scans, nudge_within),
    }


def nudge_efficacy(scans: Sequence[FileScan], within: int) -> dict[str, Any]:
    """Did the nudges work, over every scanned file: for the loop messages the transcripts
    showed their models (``seen``), and for the replayed findings, which the models never
    saw (``replay``: how often a model changes course on its own)."""
    nudges = [nudge for scan in scans for nudge in scan.nudges]
    return {source: efficacy([n for n in nudges if n.source == source], within)
            for source in ("seen", "replay")}


def _totals(scans: Sequence[FileScan]) -> dict[str, int]:
    return {
        "files": len(scans),
        "calls": sum(scan.calls for scan in scans),
        "files_with_findings": sum(1 for scan in scans if scan.findings),
        "files_blocked": sum(1 for scan in scans if scan.first("block") is not None),
        "findings": sum(len(scan.findings) for scan in scans),
        "loop_calls": sum(scan.loop_calls for scan in scans),
        "loop_chars": sum(scan.loop_chars for scan in scans),
    }


def _print_scan(paths: Sequence[Path], outcome: ScanOutcome, rows: Sequence[Row],
                list_all: bool, nudge_within: int = DEFAULT_WITHIN) -> None:
    console = Console()
    title = "loopwarden scan: " + ", ".join(str(path) for path in paths)
    print_scan_table(console, title, rows, list_clean=list_all)
    totals = _totals(outcome.scans)
    console.print(Text(
        f"{totals['files']} transcripts, {totals['calls']} calls: "
        f"{totals['files_with_findings']} with findings ({totals['files_blocked']} blocked); "
        f"{totals['loop_calls']} calls and {totals['loop_chars']:,} characters of tool output "
        "inside loops."))
    line = _nudge_line(nudge_efficacy(outcome.scans, nudge_within))
    if line:
        console.print(Text(line))
    _print_problems(outcome.scans, outcome.skipped)


def _nudge_line(figures: dict[str, Any]) -> str:
    """One sentence on whether the models changed course after the nudges (empty: none)."""
    seen, replay = figures["seen"], figures["replay"]
    parts = []
    if seen["all"]["nudges"]:
        parts.append(f"loop messages the transcripts showed their model: {seen['all']['nudges']}, "
                     f"{rate_text(seen['all'])}")
    if replay["all"]["nudges"]:
        parts.append("replayed findings (never shown to the model): "
                     f"{rate_text(replay['all'], 'changed course on their own')}")
    if not parts:
        return ""
    return f"Nudges (within {seen['within']} calls): " + "; ".join(parts) + "."


def _print_problems(scans: Sequence[FileScan], skipped: Sequence[Skipped]) -> None:
    problems = [problem for scan in scans for problem in scan.problems]
    for problem in problems[:10]:
        note(str(problem))
    if len(problems) > 10:
        note(f"{len(problems) - 10} more read problems (see --json)")
    _print_skipped(skipped)


def _loud(skip: Skipped) -> bool:
    """Worth a note of its own: named on the command line, or a special or unreadable file."""
    return skip.explicit or skip.reason not in _QUIET_REASONS


def _print_skipped(skipped: Sequence[Skipped], *, summary: bool = True) -> None:
    """One line per file that did not parse as the forced --format (every one: they make the
    exit code 2); one note per other skipped path that deserves one; a count for the ordinary
    non-transcripts."""
    for skip in skipped:
        if skip.error:
            stderr().print(Text(f"error: {printable(skip.path)}: {printable(skip.reason)}",
                                style="red"), soft_wrap=True)
    loud = [skip for skip in skipped if _loud(skip) and not skip.error]
    for skip in loud[:10]:
        note(f"skipped {skip.path}: {skip.reason}")
    if len(loud) > 10:
        note(f"skipped {len(loud) - 10} more files" + (" (see --json)" if summary else ""))
    quiet = sum(not _loud(skip) for skip in skipped)
    if quiet and summary:
        note(f"skipped {quiet} files that are not recognised transcripts")
