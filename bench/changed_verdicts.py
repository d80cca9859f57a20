"""List the verdicts that loopwarden's extensions change on the shared corpora.

Every corpus folder is scanned with both presets twice: as configured (the extensions on) and
with ``bench/extensions-off.json`` (OpenClaw's verdicts). For each transcript whose verdicts
differ it prints the new blocks and new warnings (count, first call, the detectors that made
them: the reason), and the verdicts the extensions took away.

    python bench/changed_verdicts.py                 # scans (a few minutes per folder)
    python bench/changed_verdicts.py --from ON OFF   # reuse `check_scan_identical.py --write`
                                                     # folders, written with and without
                                                     # --config bench/extensions-off.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from check_scan_identical import SHARED, _absolute_pythonpath  # noqa: E402

FOLDERS = ("corpus/normalized", "corpus2/normalized")
PRESETS = ("openclaw", "early")
EXTENSIONS_OFF = HERE / "extensions-off.json"

Finding = tuple[int, str, str]  # (call index, action, reason)


def scan(folder: str, preset: str, extensions: bool) -> dict[str, Any]:
    """``loopwarden scan --json`` of one folder, the extensions on or off."""
    config = [] if extensions else ["--config", str(EXTENSIONS_OFF)]
    done = subprocess.run(
        [sys.executable, "-m", "loopwarden.cli", "scan", "--json", "--preset", preset, *config,
         folder],
        capture_output=True, check=False, cwd=SHARED, env=_absolute_pythonpath(),
    )
    if done.returncode not in (0, 1):
        sys.exit(f"scan {folder} --preset {preset} failed ({done.returncode}):\n"
                 f"{done.stderr.decode(errors='replace')}")
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def stored(directory: Path, folder: str, preset: str) -> dict[str, Any]:
    """A scan written by ``check_scan_identical.py --write``."""
    data: dict[str, Any] = json.loads(
        (directory / f"{folder.replace('/', '_')}.{preset}.json").read_text())
    return data


def reason(finding: dict[str, Any]) -> str:
    """The detector that made a verdict, and which extension when its name does not say."""
    detector = str(finding["detector"])
    message = str(finding.get("message") or "")
    if "equivalent arguments" in message:
        return f"{detector} (equivalent argument forms)"
    if detector == "cycle" and "different arguments" in message:
        return "cycle (one tool)"
    return detector


def verdicts(file: dict[str, Any]) -> set[Finding]:
    """A transcript's blocks and warnings: (call, action, reason)."""
    return {(int(f["index"]), str(f["action"]), reason(f)) for f in file["findings"]
            if f["action"] in ("block", "warn")}


def changes(on: dict[str, Any], off: dict[str, Any]) -> list[str]:
    """One line per transcript whose verdicts differ."""
    before = {f["path"]: verdicts(f) for f in off["files"]}
    lines = []
    for file in on["files"]:
        now = verdicts(file)
        old = before.get(file["path"], set())
        if now == old:
            continue
        new, lost = now - old, old - now
        parts = []
        for action, label in (("block", "new blocks"), ("warn", "new warnings")):
            found = sorted(f for f in new if f[1] == action)
            if found:
                why = Counter(f[2] for f in found)
                parts.append(f"{label} {len(found)} from call {found[0][0]} ("
                             + ", ".join(f"{r} x{n}" for r, n in why.most_common()) + ")")
        if lost:
            why = Counter(f"{f[1]} {f[2]}" for f in lost)
            parts.append(f"gone {len(lost)} ("
                         + ", ".join(f"{r} x{n}" for r, n in why.most_common()) + ")")
        lines.append(f"  {_short(file['path'])} [{file['calls']} calls]: " + "; ".join(parts))
    return lines


def _short(path: str) -> str:
    parts = path.split("/")
    source = next((p for p in parts if "+" in p), parts[0])
    return f"{source}/…/{parts[-1][:24]}"


def main() -> None:
    """Print the listing, per folder and preset."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="stored", nargs=2, type=Path, metavar=("ON", "OFF"))
    args = parser.parse_args()
    for folder in FOLDERS:
        for preset in PRESETS:
            if args.stored:
                on, off = (stored(d, folder, preset) for d in args.stored)
            else:
                on, off = scan(folder, preset, True), scan(folder, preset, False)
            lines = changes(on, off)
            files = sum(1 for line in lines if "new blocks" in line)
            print(f"{folder}, {preset}: {len(lines)} transcripts changed, {files} with new blocks")
            print("\n".join(lines) if lines else "  none")


if __name__ == "__main__":
    main()
