"""Every transcript of the shared corpus reads like its normalised twin.

The corpus lives beside the repository (``../shared/corpus``) and is never copied into it; this
module is skipped when it is absent. ``raw/<path>`` holds each transcript as published and
``normalized/<path>.jsonl`` the same trajectory as loopwarden JSONL, one call per line: the
ground truth for what counts as a call, a result, an error and a run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from loopwarden.base.types import MISSING, ToolCall
from loopwarden.offline.transcripts import (
    ReadProblem,
    detect_format,
    iter_transcript_files,
    read_transcript,
)

CORPUS = (Path(__file__).resolve().parents[3] / ".." / "shared" / "corpus").resolve()
RAW = CORPUS / "raw"
NORMALIZED = CORPUS / "normalized"

if not RAW.is_dir() or not NORMALIZED.is_dir():
    pytest.skip("../shared/corpus is not present", allow_module_level=True)

pytestmark = pytest.mark.corpus

# raw/<folder>/... -> the format the file must be recognised as
EXPECTED_FORMAT = {
    "openclaw": "openclaw",
    "claude-code": "claude-code",
    "claude-code-md": "claude-code-md",
    "tau-bench": "openai-chat",
    "openai-chat": "openai-chat",
    "swe-agent": "swe-agent",
    "openhands": "openhands",
}


def _all_files(root: Path) -> list[Path]:
    """Every file, hidden folders included (OpenClaw backups keep sessions in .openclaw/)."""
    return sorted(Path(folder) / name for folder, _, names in os.walk(root) for name in names)


RAW_FILES = _all_files(RAW)


def _twin(path: Path) -> Path:
    return NORMALIZED / path.relative_to(RAW).parent / (path.name + ".jsonl")


def _twin_lines(path: Path) -> list[dict[str, Any]]:
    with _twin(path).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _read(path: Path) -> tuple[list[ToolCall], list[ReadProblem]]:
    problems: list[ReadProblem] = []
    calls = list(read_transcript(path, on_problem=problems.append))
    return calls, problems


def _run_starts(run_ids: list[Any]) -> list[int]:
    """Indices where a new run begins: run ids differ by format, boundaries must not."""
    return [i for i in range(1, len(run_ids)) if run_ids[i] != run_ids[i - 1]]


def test_corpus_is_not_empty() -> None:
    assert len(RAW_FILES) > 100


def test_folder_walk_finds_every_corpus_file() -> None:
    assert list(iter_transcript_files([RAW])) == RAW_FILES


@pytest.mark.parametrize("path", RAW_FILES, ids=lambda p: str(p.relative_to(RAW)))
def test_raw_transcript_matches_its_twin(path: Path) -> None:
    folder = path.relative_to(RAW).parts[0]
    detected = detect_format(path)
    assert detected is not None
    if folder in EXPECTED_FORMAT:
        assert detected == EXPECTED_FORMAT[folder]

    calls, problems = _read(path)
    twin = _twin_lines(path)

    assert problems == []
    assert len(calls) == len(twin)
    assert [c.tool_name for c in calls] == [t["tool"] for t in twin]
    assert [c.args for c in calls] == [t["args"] for t in twin]
    assert [c.error is not None for c in calls] == [t["error"] is not None for t in twin]
    assert [c.result is MISSING for c in calls] == [t["result"] is None for t in twin]
    assert _run_starts([c.run_id for c in calls]) == _run_starts([t["run_id"] for t in twin])


@pytest.mark.parametrize("path", RAW_FILES, ids=lambda p: str(p.relative_to(RAW)))
def test_normalized_twin_reads_as_loopwarden_jsonl(path: Path) -> None:
    twin = _twin(path)
    assert detect_format(twin) == "loopwarden"
    calls, problems = _read(twin)
    lines = _twin_lines(path)
    assert problems == []
    assert [(c.tool_name, c.args, c.run_id) for c in calls] == [
        (t["tool"], t["args"], t["run_id"]) for t in lines
    ]
