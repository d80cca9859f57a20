from __future__ import annotations

import os
from pathlib import Path

import pytest

# The hooks these tests start answer in their own process: a resident server left behind by
# each would outlive its test (tests/test_claude_hook_resident.py switches it on, in a private
# runtime directory, and stops what it started).
os.environ.setdefault("LOOPWARDEN_HOOK_SERVER", "0")

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is not present")
    return CORPUS
