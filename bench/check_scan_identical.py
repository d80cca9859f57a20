"""Check that a change leaves `loopwarden scan --json` byte-identical over the shared corpora.

A refactor that claims "no change in behaviour" is measured here: every corpus folder is
scanned with both presets, and the outputs are written to (or compared with) a folder of
reference files.

    python bench/check_scan_identical.py --write /tmp/scan-before   # on the old code
    python bench/check_scan_identical.py --compare /tmp/scan-before # on the new code
    python bench/check_scan_identical.py --compare /tmp/scan-before --config bench/extensions-off.json
                                    # new detection rules switched off: the old verdicts

Exits 1 when any output differs, naming the first differing file entry. An output that only
adds keys (at the top level or in a file entry) and leaves every existing key's value and
order as it was is reported as "additive" with the keys it adds, and passes: the documented
JSON shape allows added keys.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def _shared() -> Path:
    """The shared folder next to the checkout: ``/work/shared`` for ``/work/main`` and for a
    worktree ``/work/wt/NAME`` alike (a fixed parent count found it for one of them only)."""
    for parent in Path(__file__).resolve().parents:
        if (parent / "shared").is_dir():
            return parent / "shared"
    return Path(__file__).resolve().parents[2] / "shared"


SHARED = _shared()
FOLDERS = ("corpus/raw", "corpus/normalized", "corpus2/normalized")
PRESETS = ("openclaw", "early")


CONFIG: list[str] = []  # ["--config", PATH] with --config


def scan(folder: str, preset: str) -> bytes:
    done = subprocess.run(
        # loopwarden.cli: ``python -m loopwarden`` is the demo, which ignores these arguments.
        [sys.executable, "-m", "loopwarden.cli", "scan", "--json", "--preset", preset, *CONFIG,
         folder],
        capture_output=True, check=False, cwd=SHARED, env=_absolute_pythonpath(),
    )
    if done.returncode not in (0, 1):
        sys.exit(f"scan {folder} --preset {preset} failed ({done.returncode}):\n"
                 f"{done.stderr.decode(errors='replace')}")
    return done.stdout


def _absolute_pythonpath() -> dict[str, str]:
    """The environment with PYTHONPATH made absolute: the scans run in SHARED, where a
    relative ``PYTHONPATH=src`` would silently fall back to the installed loopwarden."""
    env = dict(os.environ)
    entries = env.get("PYTHONPATH", "").split(os.pathsep)
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(e) for e in entries if e)
    return env


def first_difference(old: bytes, new: bytes) -> str:
    try:
        old_files = {f["path"]: f for f in json.loads(old)["files"]}
        new_files = {f["path"]: f for f in json.loads(new)["files"]}
    except (ValueError, KeyError):
        return "output is not the scan JSON shape"
    for path in sorted(old_files.keys() | new_files.keys()):
        if old_files.get(path) != new_files.get(path):
            return f"{path}: {old_files.get(path)!r:.300} -> {new_files.get(path)!r:.300}"
    return "same entries, different bytes (key order or formatting)"


def added_keys(old: bytes, new: bytes) -> list[str] | None:
    """The keys ``new`` adds to ``old`` ("nudge_efficacy", "files[].nudges"), when that is
    all that differs: every key of ``old`` keeps its value and its place. None otherwise."""
    try:
        before, after = json.loads(old), json.loads(new)
    except ValueError:
        return None
    added = _added(before, after, "")
    if added is None:
        return None
    files_before, files_after = before.get("files", []), after.get("files", [])
    if len(files_before) != len(files_after):
        return None
    for one, other in zip(files_before, files_after, strict=True):
        extra = _added(one, other, "files[].")
        if extra is None:
            return None
        added.extend(key for key in extra if key not in added)
    return added


def _added(before: dict[str, Any], after: dict[str, Any], prefix: str) -> list[str] | None:
    if [key for key in after if key in before] != list(before):
        return None  # a key lost or moved
    if any(before[key] != after[key] for key in before if key != "files"):
        return None
    return [prefix + key for key in after if key not in before]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", type=Path, metavar="DIR", help="write reference outputs here")
    mode.add_argument("--compare", type=Path, metavar="DIR", help="compare with outputs here")
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="scan with this OpenClaw config (e.g. bench/extensions-off.json, "
                             "the issue-21 extensions switched off)")
    options = parser.parse_args()
    if options.config is not None:
        CONFIG[:] = ["--config", str(options.config.resolve())]
    differing = 0
    scanned = 0
    for folder in FOLDERS:
        if not (SHARED / folder).is_dir():
            print(f"skip {folder}: not present")
            continue
        for preset in PRESETS:
            name = f"{folder.replace('/', '_')}.{preset}.json"
            out = scan(folder, preset)
            scanned += 1
            digest = hashlib.sha256(out).hexdigest()[:16]
            if options.write:
                options.write.mkdir(parents=True, exist_ok=True)
                (options.write / name).write_bytes(out)
                print(f"wrote {name} ({len(out)} bytes, sha256 {digest})")
                continue
            reference = (options.compare / name).read_bytes()
            added = None if reference == out else added_keys(reference, out)
            if reference == out:
                print(f"identical  {name} ({len(out)} bytes, sha256 {digest})")
            elif added:
                print(f"additive   {name}: existing keys identical; adds {', '.join(added)}")
            else:
                differing += 1
                print(f"DIFFERENT  {name}: {first_difference(reference, out)}")
    if not scanned:
        print(f"no corpus folder found under {SHARED}: nothing was checked")
        return 1
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
