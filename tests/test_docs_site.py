"""The README stays a short tour and the docs/ site holds the rest: README.md within 400 lines,
every docs page in the MkDocs nav, the site building with ``mkdocs build --strict``, and no page
(nor ``--help``) citing files a clone of the repository does not contain."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
MKDOCS = REPO / "mkdocs.yml"
PAGES = sorted(DOCS.rglob("*.md"))

# What a clone lacks: the shared folder beside the development checkout (corpora, the design
# notes, OpenClaw's behaviour spec), and the design notes' section numbers.
NOT_IN_A_CLONE = re.compile(r"\.\./shared|\bshared/corpus|DESIGN|openclaw-loop-detection-spec|"
                            r"\bspec §|§\s*[a-z]?\d")


def test_the_readme_is_at_most_400_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 400, f"README.md has {len(lines)} lines; move sections into docs/"


def test_the_readme_has_the_quick_start_the_doors_presets_exit_behavior_and_links() -> None:
    text = README.read_text(encoding="utf-8")
    for needed in ("## Quick start", "loopwarden scan examples/transcripts", "python -m pytest",
                   "## Doors", "## Presets", "exit_behavior", "**warn**", "**block**",
                   "**terminal stop**", "docs/index.md"):
        assert needed in text, needed
    for link in re.findall(r"\]\((docs/[^)#]+)", text):  # every link to a page resolves
        assert (REPO / link).exists(), link


def test_every_page_is_in_the_nav() -> None:
    nav = set(re.findall(r":\s*(\S+\.md)\s*$", MKDOCS.read_text(encoding="utf-8"), re.M))
    pages = {page.relative_to(DOCS).as_posix() for page in PAGES}
    assert pages == nav, (sorted(pages - nav), sorted(nav - pages))


@pytest.mark.parametrize("document", [README, *PAGES], ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_page_cites_what_a_clone_lacks(document: Path) -> None:
    hits = [f"{n}: {line}" for n, line in enumerate(document.read_text().splitlines(), 1)
            if NOT_IN_A_CLONE.search(line)]
    assert hits == []


def test_help_cites_nothing_a_clone_lacks() -> None:
    from typer.testing import CliRunner

    from loopwarden.cli import app

    runner = CliRunner()
    for command in (["scan"], ["eval"], ["calibrate"], ["config", "check"], ["runs"],
                    ["install", "claude-code"]):
        done = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
        assert done.exit_code == 0, (command, done.output)
        assert not NOT_IN_A_CLONE.search(done.output), (command, done.output)


@pytest.mark.integration
@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                    reason="mkdocs is not installed (pip install -e '.[docs]')")
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=REPO, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "doors" / "langchain" / "index.html").exists()
