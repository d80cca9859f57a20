"""The HTML report as a triage page: loops first and ranked by waste, each loop's first warning
and block, the looping calls (masked, cut) and what the model would have been told; clean
files folded; timelines only with findings, windowed or binned when long, with titles and
legends inside the figure; token estimates; the size budget; loops-first and no-overflow
layouts in headless Chromium at 1400 px and 390 px."""

from __future__ import annotations

import html as html_lib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import types
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib")

import typer
from typer.testing import CliRunner

from loopwarden import LoopDetectionConfig
from loopwarden.base.redact import MASK, mask_secrets
from loopwarden.cli.scan import register
from loopwarden.offline.report import plotter
from loopwarden.offline.report.html import HtmlReport, render_html
from loopwarden.offline.report.loops import RESULT_LIMIT, excerpt, loop_reports
from loopwarden.offline.report.timeline import MAX_POINTS, timeline_figure, timeline_view
from loopwarden.offline.report.tokens import (
    CharsEstimate,
    TokenizerError,
    token_estimator,
)
from loopwarden.offline.scan import scan_file
from loopwarden.offline.transcripts import iter_transcript_files

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "transcripts"
ENABLED = LoopDetectionConfig(enabled=True)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# Where the shared corpus sits: beside a clone (CI), or beside the worktrees' folder.
CORPUS_RAW = next((path for path in (REPO.parent / "shared" / "corpus" / "raw",
                                     REPO.parents[1] / "shared" / "corpus" / "raw")
                   if path.is_dir()), None)
SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
PASSWORD = "hunter2-correct-horse"


# -- helpers -------------------------------------------------------------------------------------


def _jsonl(path: Path, calls: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(call) + "\n" for call in calls), encoding="utf-8")
    return path


def _repeat(tool: str, args: dict[str, Any], result: str, n: int,
            run: str = "r1") -> list[dict[str, Any]]:
    return [{"tool": tool, "args": args, "result": result, "run_id": run} for _ in range(n)]


def _varied(n: int, run: str = "r1", start: int = 0) -> list[dict[str, Any]]:
    """``n`` healthy calls: every one different, over a few tools."""
    tools = ("read", "edit", "exec", "search")
    return [{"tool": tools[i % 4], "args": {"path": f"src/file{start + i}.py"},
             "result": f"ok {start + i}", "run_id": run} for i in range(n)]


class _Page(HTMLParser):
    """Headings, tables (class, and the text of each row), images and details of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[tuple[str, str]] = []
        self.tables: list[dict[str, Any]] = []
        self.images: list[str] = []
        self.details_text: list[str] = []
        self.order: list[str] = []  # "h2:<text>" and "table:<class>" in document order
        self.tags: list[str] = []
        self._heading: list[str] | None = None
        self._row: list[str] | None = None
        self._details = 0
        self._table_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        values = dict(attrs)
        if tag in ("h1", "h2", "h3", "h4"):
            self._heading = [tag]
        elif tag == "table":
            self.tables.append({"class": values.get("class") or "", "rows": []})
            self.order.append(f"table:{values.get('class') or ''}")
        elif tag == "tr" and self.tables:
            self._row = []
        elif tag == "img":
            self.images.append(values.get("src") or "")
        elif tag == "details":
            self._details += 1
            self.details_text.append("")

    def handle_endtag(self, tag: str) -> None:
        if self._heading is not None and tag == self._heading[0]:
            text = " ".join("".join(self._heading[1:]).split())
            self.headings.append((tag, text))
            if tag == "h2":
                self.order.append(f"h2:{text}")
            self._heading = None
        elif tag == "tr" and self._row is not None:
            self.tables[-1]["rows"].append(" ".join(" ".join(self._row).split()))
            self._row = None
        elif tag == "details":
            self._details -= 1

    def handle_data(self, data: str) -> None:
        if self._heading is not None:
            self._heading.append(data)
        if self._row is not None:
            self._row.append(data)
        if self._details:
            self.details_text[-1] += data


def _parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    return parser


@pytest.fixture(scope="module")
def triage_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three transcripts: a big blocked poll loop, a small warned loop, and a clean one."""
    root = tmp_path_factory.mktemp("triage")
    big_result = "<status>running</status> " + "log line of a build that never ends " * 40
    _jsonl(root / "agents" / "big-poll.jsonl",
           _varied(5) + _repeat("process", {"action": "poll", "token": SECRET},
                                big_result, 40) + _varied(5, start=5))
    _jsonl(root / "agents" / "small-loop.jsonl",
           _varied(3) + _repeat("read", {"path": "README.md"}, "same", 12) + _varied(3, start=3))
    _jsonl(root / "agents" / "clean.jsonl", _varied(30))
    return root


@pytest.fixture(scope="module")
def triage_html(triage_dir: Path) -> str:
    report = HtmlReport(settings={"preset": "openclaw"}, price_per_mtok=3.0)
    for path in iter_transcript_files([triage_dir]):
        report.add(scan_file(path, ENABLED, keep_outputs=True))
    return report.render()


# -- masking -------------------------------------------------------------------------------------

_SECRETS = [
    ('{"token": "abcdef0123456789abcd"}', "abcdef0123456789abcd", '"token": '),
    ('{"apiKey": "zz-0123456789abcdef"}', "zz-0123456789abcdef", '"apiKey": '),
    ('"{\\"appSecret\\": \\"s3cr3t-value-0123\\"}"', "s3cr3t-value-0123", 'appSecret'),
    ("export OPENAI_API_KEY=sk-proj-abcdefghijklmnop1234", "abcdefghijklmnop1234",
     "OPENAI_API_KEY="),
    ("curl -H 'Authorization: Bearer abcdefghijklmnopqrstu12'", "abcdefghijklmnopqrstu12",
     "Bearer "),
    (f"mysql --password {PASSWORD} -u root", PASSWORD, "--password "),
    (f"PASSWORD={PASSWORD} ./run", PASSWORD, "PASSWORD="),
    (f"password: {PASSWORD}", PASSWORD, "password: "),
    ("key ghp_abcdefghijklmnopqrstuvwxyz0123 here", "ghp_abcdefghij", "key "),
    ("aws AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP", "aws "),
    ("g AIzaSyA1234567890abcdefghijklmnopqrstu", "AIzaSyA1234567890", "g "),
    ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890", "slack "),
    ("bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq ok", "AAHdqTcvCH1vGWJx", "bot "),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
     "MIIEowIBAAKCAQEA", ""),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
     "dozjgNryP4J3jVmNHl0w5N", "jwt "),
    (SECRET, SECRET, ""),
]


@pytest.mark.parametrize(("text", "secret", "kept"), _SECRETS)
def test_mask_secrets_masks_the_corpus_patterns(text: str, secret: str, kept: str) -> None:
    masked = mask_secrets(text)
    assert secret not in masked and MASK in masked
    assert kept in masked  # the key still says what was there


@pytest.mark.parametrize("text", [
    "the token expired yesterday, so the password changed",
    '{"max_tokens": 4096, "input_tokens": 123456789, "mode": "token"}',
    '{"password": "short"}',
    "token: required",
    "tokenizer: cl100k_base_long",
    f'{{"token": "{MASK}"}}',
    "sk-short",
])
def test_mask_secrets_keeps_ordinary_text(text: str) -> None:
    assert mask_secrets(text) == text


def test_an_excerpt_masks_before_it_cuts() -> None:
    """A key straddling the cut would lose the shape that gives it away."""
    text = "x" * (RESULT_LIMIT - 10) + SECRET + " tail" * 50
    shown = excerpt(text, RESULT_LIMIT)
    assert SECRET[:10] not in shown
    assert "more characters" in shown and len(shown) < RESULT_LIMIT + 40


# -- the page: loops first, ranked, clean files folded ---------------------------------------


def test_loops_table_is_the_first_section_and_ranked_by_waste(triage_html: str) -> None:
    page = _parse(triage_html)
    assert page.order[0] == "h2:Loops, most wasteful first"
    assert page.order[1].startswith("table:loops")
    loops = page.tables[0]
    assert "loops" in loops["class"]
    rows = loops["rows"][1:]  # after the header row
    assert len(rows) == 2
    assert "big-poll.jsonl" in rows[0] and "small-loop.jsonl" in rows[1]
    numbers = [int(n.replace(",", "")) for n in re.findall(r"\b[\d,]{2,}\b", rows[0])]
    assert numbers  # calls, chars, tokens are shown
    assert "clean.jsonl" not in " ".join(loops["rows"])


def test_clean_transcripts_are_one_folded_counted_list(triage_html: str) -> None:
    page = _parse(triage_html)
    assert page.headings[-1] == ("h2", "Clean transcripts")
    assert len(page.details_text) >= 1
    folded = page.details_text[-1]
    assert "1 transcript (30 calls) with no warning or block" in folded
    assert "clean.jsonl" in folded
    assert triage_html.count("clean.jsonl") == 1  # listed once, in the folded list only


def test_timelines_only_for_transcripts_with_findings(triage_html: str) -> None:
    page = _parse(triage_html)
    assert len(page.images) == 2
    assert all(src.startswith("data:image/svg+xml;base64,") for src in page.images)
    assert "script" not in page.tags  # a static page


def test_each_loop_shows_its_first_warning_block_calls_and_messages(triage_html: str) -> None:
    page = _parse(triage_html)
    loop_headings = [text for tag, text in page.headings if tag == "h4"]
    assert loop_headings[0].startswith("Loop 1: known_poll_no_progress on process, calls 16–45")
    assert loop_headings[1].startswith("Loop 2: generic_repeat on read, calls 14–15")
    # A poll without progress: warned at its 10th repeat (call 16, counted from 1), blocked
    # at its 20th.
    assert "First warning at call #16 (repeat count 10)" in triage_html
    assert "First block at call #26 (repeat count 20), then 19 more blocks" in triage_html
    assert "What loopwarden would have told the model" in triage_html
    assert html_lib.escape("WARNING: You have called process 10 times with identical "
                           "arguments") in triage_html
    assert "CRITICAL: Called process with identical" in triage_html
    calls = next(t for t in page.tables if "calls" in t["class"].split())
    (row,) = calls["rows"][1:]
    assert "×30, first at #16" in row  # one argument set, used by all 30 calls of the loop
    assert '"action":"poll"' in row and MASK in row
    assert "&lt;status&gt;running&lt;/status&gt;" in triage_html  # the result excerpt
    assert "more characters" in row  # the long result is cut


def test_no_secret_reaches_the_page(triage_html: str) -> None:
    assert SECRET not in triage_html and SECRET[:12] not in triage_html


def test_tokens_default_to_chars_over_4_and_price_shows_money(triage_dir: Path) -> None:
    scan = scan_file(triage_dir / "agents" / "big-poll.jsonl", ENABLED, keep_outputs=True)
    (loop,) = loop_reports(scan, CharsEstimate())
    assert loop.chars is not None and loop.chars > 0
    assert loop.tokens == math.ceil(loop.chars / 4)
    page = render_html([scan], price_per_mtok=2.0)
    assert f"{loop.tokens:,}" in page
    assert "characters / 4" in page
    cost = loop.tokens * 2.0 / 1_000_000
    shown = [float(amount) for amount in re.findall(r"\$(\d+\.\d+)", page)]
    assert any(abs(amount - cost) <= 0.05 * cost for amount in shown), (cost, shown)
    tiny = render_html([scan_file(triage_dir / "agents" / "small-loop.jsonl", ENABLED)],
                       price_per_mtok=0.01)
    assert "under $0.0001" in tiny and not re.search(r"\$[\d.]+e-", tiny)  # no e-notation


def test_glossary_explains_levels_and_actions_in_plain_words(triage_html: str) -> None:
    page = _parse(triage_html)
    assert ("h2", "How to read this report") in page.headings
    assert "level critical with action warn" in triage_html
    assert "The call would not have run" in triage_html
    assert "The call would still have run" in triage_html
    assert "the same call, with the same arguments and the same result" in triage_html
    assert "a polling tool" in triage_html


def test_report_without_findings_says_so(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "ok.jsonl", _varied(12))
    page = render_html([scan_file(path, ENABLED)])
    assert "No loops" in page and "<img" not in page
    assert _parse(page).order[0] == "h2:Loops, most wasteful first"


# -- tokenizers ------------------------------------------------------------------------------


def _stub_tiktoken(monkeypatch: pytest.MonkeyPatch, get_encoding: Any) -> None:
    module = types.ModuleType("tiktoken")
    module.get_encoding = get_encoding  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", module)


def test_unknown_tokenizer_is_refused() -> None:
    with pytest.raises(TokenizerError, match="unknown tokenizer"):
        token_estimator("words")


def test_tiktoken_not_installed_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import now raises ImportError
    with pytest.raises(TokenizerError, match=r"needs the tiktoken package.*tokenizer"):
        token_estimator("tiktoken")


def test_tiktoken_encoding_that_cannot_load_is_a_clear_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(name: str) -> Any:
        raise ConnectionError("Failed to resolve 'openaipublic.blob.core.windows.net'")

    _stub_tiktoken(monkeypatch, offline)
    with pytest.raises(TokenizerError, match="cannot load the tiktoken encoding 'cl100k_base'") as info:
        token_estimator("tiktoken:cl100k_base")
    assert "TIKTOKEN_CACHE_DIR" in str(info.value)


def test_cli_fails_before_scanning_when_the_tokenizer_cannot_load(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def offline(name: str) -> Any:
        raise OSError("network is unreachable")

    _stub_tiktoken(monkeypatch, offline)
    out = tmp_path / "report.html"
    result = CliRunner().invoke(_app(), ["scan", str(EXAMPLES), "--html", str(out),
                                         "--tokenizer", "tiktoken"])
    assert result.exit_code == 2
    assert "cannot load the tiktoken encoding" in result.output
    assert not out.exists()
    assert "poll-loop" not in result.output  # nothing was scanned


def test_a_loaded_tokenizer_counts_the_output_text(monkeypatch: pytest.MonkeyPatch,
                                                   triage_dir: Path) -> None:
    """The real-tokenizer path encodes each looping call's output (a word-splitting stand-in
    for tiktoken's encoding here: the encoding files cannot be downloaded offline)."""

    class Words:
        def encode_ordinary(self, text: str) -> list[str]:
            return text.split()

    _stub_tiktoken(monkeypatch, lambda name: Words())
    estimate = token_estimator("tiktoken")
    assert estimate.label == "tiktoken o200k_base"
    scan = scan_file(triage_dir / "agents" / "small-loop.jsonl", ENABLED, keep_outputs=True)
    (loop,) = loop_reports(scan, estimate)
    assert loop.tokens == loop.span.calls  # each result is the one word "same"
    with pytest.raises(ValueError, match="keep_outputs"):
        loop_reports(scan_file(triage_dir / "agents" / "small-loop.jsonl", ENABLED), estimate)


# On an idle machine the report draws its timelines in a forked worker (report/plotter.py).
@pytest.mark.integration
def test_cli_price_and_tokenizer_reach_the_report(tmp_path: Path, triage_dir: Path) -> None:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(_app(), ["scan", str(triage_dir), "--html", str(out),
                                         "--price-per-mtok", "15", "--tokenizer", "chars"])
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert "≈ cost" in page and "$15.00 per million tokens" in page
    assert SECRET not in page


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Keeps scan a subcommand."""

    register(app)
    return app


# -- timelines -------------------------------------------------------------------------------


def _long_path(root: Path) -> Path:
    folder = root / ("a-very-long-folder-name-for-an-agent-workspace-" * 3).rstrip("-")
    return folder / ("session-" + "0123456789abcdef" * 6 + "-untitled-full.jsonl")


def test_a_long_transcript_is_windowed_around_its_loop(tmp_path: Path) -> None:
    calls = _varied(600) + _repeat("process", {"action": "poll"}, "running", 30) \
        + _varied(370, start=600)
    scan = scan_file(_jsonl(tmp_path / "long.jsonl", calls), ENABLED)
    view = timeline_view(scan)
    (span,) = scan.spans
    assert view.start <= span.start and span.end <= view.end
    assert view.end - view.start + 1 < 200  # not the 1000 calls
    figure = timeline_figure(scan)
    low, high = figure.axes[0].get_xlim()
    assert low >= view.start - 5 and high <= view.end + 5
    assert f"calls {view.start + 1}–{view.end + 1} of 1000" in figure.axes[0].get_title(loc="left")


def test_a_long_loop_is_binned_so_markers_stay_legible(tmp_path: Path) -> None:
    calls = _varied(10) + _repeat("process", {"action": "poll"}, "running", 880) + _varied(7)
    scan = scan_file(_jsonl(tmp_path / "long-loop.jsonl", calls), ENABLED)
    view = timeline_view(scan)
    assert view.bin == math.ceil(897 / MAX_POINTS)
    figure = timeline_figure(scan)
    axes = figure.axes[0]
    points = (sum(len(c.get_offsets()) for c in axes.collections)
              + sum(len(line.get_xdata()) for line in axes.lines))
    # Dots per bin and tool, the later-blocks ticks and two marked findings: a few hundred,
    # not the 870 overlapping block markers of one dot per finding.
    assert points <= 4 * MAX_POINTS
    labels = [t.get_text() for t in axes.texts]
    warn, block = scan.first("warn"), scan.first("block")
    assert warn is not None and block is not None
    assert labels == [f"warn #{warn.call_number}", f"block #{block.call_number}"]


def _inside(inner: Any, outer: Any) -> bool:
    return (inner.x0 >= outer.x0 - 0.5 and inner.y0 >= outer.y0 - 0.5
            and inner.x1 <= outer.x1 + 0.5 and inner.y1 <= outer.y1 + 0.5)


def test_title_legend_and_labels_stay_inside_the_figure(tmp_path: Path) -> None:
    """The 897-call case: a long path, a long tool name, a loop over most of the file."""
    long_tool = "mcp__workspace_server__read_the_build_status_of_a_job"
    calls = (_varied(10) + _repeat(long_tool, {"job": 7}, "running", 870)
             + [{"tool": "other", "args": {}, "result": "", "run_id": "r2"}]
             + _varied(16, run="r2"))
    scan = scan_file(_jsonl(_long_path(tmp_path), calls), ENABLED)
    figure = timeline_figure(scan)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    box = figure.bbox
    axes = figure.axes[0]
    texts = [axes.title, axes._left_title, *axes.texts, *axes.get_yticklabels()]
    texts += [text for legend in figure.legends for text in legend.get_texts()]
    for text in texts:
        if text.get_text():
            assert _inside(text.get_window_extent(renderer), box), text.get_text()
    for legend in figure.legends:
        assert _inside(legend.get_window_extent(renderer), box)
    extents = [t.get_window_extent(renderer) for t in axes.texts]
    for i, first in enumerate(extents):
        for second in extents[i + 1:]:
            assert not first.overlaps(second)  # "warn #N" and "block #M" are both readable


# -- plots drawn in a worker while the scan goes on ------------------------------------------


def _images(page: str) -> list[str]:
    return _parse(page).images


@pytest.mark.integration
@pytest.mark.skipif(sys.platform != "linux", reason="the plot worker is forked on Linux only")
def test_background_plots_are_the_same_as_foreground_plots(
        triage_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plotter, "_spare_core", lambda: True)  # however busy this machine is
    pages = []
    for background in (False, True):
        report = HtmlReport(background=background)
        if background and threading.active_count() == 1:
            assert report._plotter._pool is not None  # a worker really drew these
        for path in iter_transcript_files([triage_dir]):
            report.add(scan_file(path, ENABLED, keep_outputs=True))
        pages.append(report.render())
    assert _images(pages[0]) == _images(pages[1]) and len(_images(pages[0])) == 2


_KILLED_WORKER = """
import os, signal, sys
from pathlib import Path
from loopwarden import LoopDetectionConfig
from loopwarden.offline.scan import scan_file
from loopwarden.offline.report import plotter as module
from loopwarden.offline.report.plotter import Plotter
module._spare_core = lambda: True
plotter = Plotter(background=True)
pool = plotter._pool
assert pool is not None, "no worker"
pool.submit(int).result()  # the worker is up
for pid in list(pool._processes):
    os.kill(pid, signal.SIGKILL)
scan = scan_file(Path(sys.argv[1]), LoopDetectionConfig(enabled=True))
svg = plotter.svg(plotter.submit(scan))
plotter.close()
print("svg" if svg.lstrip().startswith("<?xml") and "<svg" in svg else "no svg")
"""


@pytest.mark.integration
@pytest.mark.skipif(sys.platform != "linux", reason="the plot worker is forked on Linux only")
def test_a_killed_plot_worker_falls_back_to_drawing_here(triage_dir: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _KILLED_WORKER,
                           str(triage_dir / "agents" / "small-loop.jsonl")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "svg"


# -- budget on the corpus --------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.corpus
def test_report_on_the_corpus_fits_the_size_budget(tmp_path: Path) -> None:
    if CORPUS_RAW is None:
        pytest.skip("../shared/corpus/raw is not present")
    out = tmp_path / "corpus.html"
    command = [sys.executable, "-m", "loopwarden.cli", "scan", "--json", "--html", str(out),
               str(CORPUS_RAW)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    size = out.stat().st_size
    assert size <= 2 * 1024 * 1024, f"{size:,} bytes"
    flagged = sum(1 for entry in json.loads(done.stdout)["files"] if entry["findings"])
    page = _parse(out.read_text(encoding="utf-8"))
    assert len(page.images) == flagged
    assert page.order[0] == "h2:Loops, most wasteful first"


# -- headless Chromium -------------------------------------------------------------------------


def _chromium() -> str | None:
    return next((found for name in ("chromium", "chromium-browser", "google-chrome")
                 if (found := shutil.which(name))), None)


# Runs in the harness page, after the report (in an iframe of the tested width) has loaded:
# opens every <details>, then writes what it measured into the DOM for --dump-dom.
_MEASURE = """
addEventListener("load", () => {
  const doc = document.getElementById("report").contentDocument;
  if (%(open)s) doc.querySelectorAll("details").forEach(d => { d.open = true; });
  const width = doc.documentElement.clientWidth;
  const over = [];
  const check = (rect, what) => { if (rect.right > width + 0.5) over.push(what + " " + Math.round(rect.right)); };
  doc.querySelectorAll("body *").forEach(e => {
    if (!e.closest(".plot")) check(e.getBoundingClientRect(), e.tagName + "." + e.className);
  });
  // Text can run out of a box that itself fits: measure every text node too.
  const walker = doc.createTreeWalker(doc.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const range = doc.createRange();
    range.selectNodeContents(node);
    check(range.getBoundingClientRect(), "text in " + node.parentElement.tagName + ": " + node.textContent.slice(0, 40));
  }
  const first = doc.querySelector("h2");
  const loops = doc.querySelector("table.loops");
  const others = [...doc.querySelectorAll("table, img, article")].filter(e => e !== loops);
  const result = {
    width, scrollWidth: doc.documentElement.scrollWidth, over: over.slice(0, 20),
    firstHeading: first ? first.textContent : null,
    loopsTop: loops ? loops.getBoundingClientRect().top : null,
    loopsRight: loops ? loops.getBoundingClientRect().right : null,
    loopsScroll: loops ? loops.scrollWidth - loops.clientWidth : null,
    othersTop: Math.min(...others.map(e => e.getBoundingClientRect().top)),
  };
  const out = document.createElement("pre");
  out.id = "measure";
  out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
});
"""


def _harness(report: str, width: int, height: int, *, open_details: bool) -> str:
    script = _MEASURE % {"open": "true" if open_details else "false"}
    return ('<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:0">'
            f'<iframe id="report" style="width:{width}px;height:{height}px;border:0;'
            f'display:block" srcdoc="{html_lib.escape(report, quote=True)}"></iframe>'
            f"<script>{script}</script></body></html>")


def _browser(tmp_path: Path, page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium binary")
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={profile}", "--hide-scrollbars",
        "--virtual-time-budget=10000", *args, page.as_uri(),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def _measure(tmp_path: Path, report: str, width: int, *, open_details: bool) -> dict[str, Any]:
    page = tmp_path / f"measure-{width}.html"
    page.write_text(_harness(report, width, 900, open_details=open_details), encoding="utf-8")
    # Headless windows are at least 500 px wide: the report gets its width from the iframe.
    done = _browser(tmp_path, page, f"--window-size={max(width, 500) + 20},900", "--dump-dom")
    found = re.search(r'<pre id="measure">(.*?)</pre>', done.stdout, re.DOTALL)
    assert found, done.stderr[-2000:]
    data: dict[str, Any] = json.loads(html_lib.unescape(found.group(1)))
    return data


def _screenshot(tmp_path: Path, report: str, width: int, height: int) -> Path:
    page = tmp_path / f"shot-{width}.html"
    page.write_text(_harness(report, width, height, open_details=False), encoding="utf-8")
    shot = tmp_path / f"report-{width}.png"
    _browser(tmp_path, page, f"--window-size={max(width, 500)},{height}", f"--screenshot={shot}")
    assert shot.is_file() and shot.read_bytes().startswith(PNG_MAGIC)
    keep = os.environ.get("LOOPWARDEN_SCREENSHOTS")  # a folder to keep them in, to look at
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
    return shot


@pytest.fixture(scope="module")
def stress_html(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The examples plus what used to break the layout: a long path, a long loop, unbroken
    long arguments and results, a long tool name."""
    root = tmp_path_factory.mktemp("stress")
    for path in iter_transcript_files([EXAMPLES]):
        shutil.copy(path, root / path.name)
    unbroken = "x" * 300
    long_tool = "mcp__workspace_server__read_the_build_status_of_a_job"
    _jsonl(_long_path(root), _varied(10) + _repeat(long_tool, {"job": unbroken}, unbroken, 870)
           + _varied(17, start=10))
    report = HtmlReport(settings={"preset": "openclaw"}, price_per_mtok=3.0)
    for path in iter_transcript_files([root]):
        report.add(scan_file(path, ENABLED, keep_outputs=True))
    return report.render()


@pytest.mark.chromium
def test_chromium_1400_shows_the_loops_table_first(tmp_path: Path, stress_html: str) -> None:
    data = _measure(tmp_path, stress_html, 1400, open_details=False)
    assert data["firstHeading"] == "Loops, most wasteful first"
    assert data["loopsTop"] is not None and data["loopsTop"] <= data["othersTop"]
    assert data["loopsTop"] < 400  # above the fold, under a short header
    assert data["loopsRight"] <= data["width"] and data["loopsScroll"] <= 0  # not clipped
    assert data["scrollWidth"] <= data["width"] and data["over"] == []
    shot = _screenshot(tmp_path, stress_html, 1400, 1600)

    import matplotlib.image
    import numpy as np

    pixels = matplotlib.image.imread(str(shot))
    assert pixels.shape[1] >= 1400
    not_white = (pixels[..., :3] < 0.95).any(axis=-1).mean()
    assert not_white > 0.02  # text, tables and plots, not a blank page
    assert len(np.unique((pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 50


@pytest.mark.chromium
def test_chromium_390_phone_nothing_overflows(tmp_path: Path, stress_html: str) -> None:
    data = _measure(tmp_path, stress_html, 390, open_details=True)
    assert data["width"] <= 390
    assert data["scrollWidth"] <= data["width"], data
    assert data["over"] == [], data["over"]
    assert data["firstHeading"] == "Loops, most wasteful first"
    _screenshot(tmp_path, stress_html, 390, 2400)
