"""The HTML report: self-contained, one timeline per transcript, renders in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

import typer
from typer.testing import CliRunner

from loopwarden import LoopDetectionConfig
from loopwarden.cli.scan import register
from loopwarden.offline.report.html import HtmlReport, render_html
from loopwarden.offline.report.timeline import timeline_figure, timeline_png, timeline_svg
from loopwarden.offline.scan import FileScan, scan_file
from loopwarden.offline.transcripts import iter_transcript_files

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "transcripts"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class _Links(HTMLParser):
    """Every URL-valued attribute and every <script>/<link> element of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.images: list[str] = []
        self.external_tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href", "srcset", "action", "data", "poster") and value:
                self.urls.append(value)
        if tag == "img":
            self.images.append(dict(attrs).get("src") or "")
        if tag in ("script", "link", "iframe", "object", "embed"):
            self.external_tags.append(tag)


def _scans() -> list[FileScan]:
    config = LoopDetectionConfig(enabled=True)
    return [scan_file(path, config) for path in iter_transcript_files([EXAMPLES])]


@pytest.fixture(scope="module")
def report_html() -> str:
    return render_html(_scans(), settings={"preset": "openclaw"})


def test_report_is_self_contained(report_html: str) -> None:
    links = _Links()
    links.feed(report_html)
    assert not [url for url in links.urls if re.match(r"(?i)\s*(https?:)?//", url)]
    assert links.external_tags == []
    assert not re.search(r"(?i)@import|url\(\s*['\"]?(https?:)?//", report_html)
    assert all(src.startswith("data:image/svg+xml;base64,") for src in links.images)


def test_report_has_a_timeline_and_findings_per_transcript(report_html: str) -> None:
    links = _Links()
    links.feed(report_html)
    assert len(links.images) == 3  # one timeline per example transcript with findings
    for name in ("poll-loop.openclaw.jsonl", "ping-pong.jsonl", "unknown-tool.openai.json",
                 "healthy.jsonl"):
        assert name in report_html
    assert "known_poll_no_progress" in report_html and "unknown_tool_repeat" in report_html
    assert report_html.count("<article") == 3  # healthy.jsonl is in the folded clean list


def test_report_escapes_transcript_text(tmp_path: Path) -> None:
    path = tmp_path / "<b>evil.jsonl"
    path.write_text('{"tool": "<script>alert(1)</script>", "args": {}, "result": "x"}\n' * 12)
    html = render_html([scan_file(path, LoopDetectionConfig(enabled=True))], plots=False)
    assert "<script>" not in html and "<b>evil" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # in the findings table
    assert "&lt;b&gt;evil.jsonl" in html


def test_report_keeps_only_summaries_after_adding() -> None:
    report = HtmlReport(plots=False)
    scan = _scans()[0]
    report.add(scan)
    assert scan.trace is None  # the per-call trace is released once plotted
    assert "<img" not in report.render()


def test_timeline_renders_png_and_svg_and_needs_the_trace() -> None:
    scan = scan_file(EXAMPLES / "poll-loop.openclaw.jsonl", LoopDetectionConfig(enabled=True))
    assert timeline_png(scan).startswith(PNG_MAGIC)
    assert "<svg" in timeline_svg(scan)
    figure = timeline_figure(scan)
    labels = [tick.get_text() for tick in figure.axes[0].get_yticklabels()]
    assert set(labels) == {"process", "read", "exec"}
    with pytest.raises(ValueError, match="trace"):
        timeline_figure(scan.without_trace())


# On an idle machine the report draws its timelines in a forked worker (report/plotter.py).
@pytest.mark.integration
def test_scan_cli_writes_the_html_report(tmp_path: Path) -> None:
    app = typer.Typer()
    app.callback()(lambda: None)
    register(app)
    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["scan", str(EXAMPLES), "--html", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert out.is_file() and out.read_text().count("data:image/svg+xml;base64,") == 3
    assert '"files"' in result.stdout  # --json still prints the JSON on stdout


def _chromium() -> str | None:
    return next((found for name in ("chromium", "chromium-browser", "google-chrome")
                 if (found := shutil.which(name))), None)


@pytest.mark.chromium
def test_report_renders_in_headless_chromium(tmp_path: Path, report_html: str) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium binary")
    page = tmp_path / "report.html"
    page.write_text(report_html, encoding="utf-8")
    shot = tmp_path / "shot.png"
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
        "--window-size=1280,2000", page.as_uri(),
    ]
    subprocess.run(command, capture_output=True, timeout=180, check=False)
    assert shot.is_file() and shot.read_bytes().startswith(PNG_MAGIC)

    import matplotlib.image
    import numpy as np

    pixels = matplotlib.image.imread(str(shot))
    assert pixels.shape[0] >= 1000 and pixels.shape[1] >= 1000
    colours = np.unique((pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 50  # text, tables and plots, not a blank page
    not_white = (pixels[..., :3] < 0.95).any(axis=-1).mean()
    assert not_white > 0.02
