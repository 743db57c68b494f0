"""Reports read at GitHub's width: rendered the GitHub way and drawn by headless Chromium at 1012 px, no report,
comparison, sweep report or job summary scrolls sideways, and no table hides columns behind a scroll bar.

The one block allowed to scroll inside itself is the SpeedBench reference table: it is kept byte for byte as
llama.cpp's compare script prints it, in a code block, as pull requests paste it."""

from __future__ import annotations

import os
from pathlib import Path

from bench.cli import main
from tests.browser import GITHUB_CONTENT_WIDTH, chromium_or_skip, load_page
from tests.fakeserver import FakeServer, FakeState
from tests.github_markdown import WIDE_ELEMENTS, write_github_page

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_TABLE = "Comparison: baseline="


def _too_wide(markdown: str, page: Path) -> list[dict]:
    """What scrolls sideways in `markdown` drawn at GitHub's width: the document, or any element but the reference
    table's code block."""
    view = load_page(write_github_page(markdown, page), width=GITHUB_CONTENT_WIDTH,
                     expressions={"wide": WIDE_ELEMENTS})
    assert view.console_errors == [] and view.external_requests == []
    wide = [item for item in view.values["wide"]
            if not (item["tag"] == "pre" and item["start"].startswith(REFERENCE_TABLE))]
    if view.scrolls_sideways:
        wide.append({"tag": "document", "scroll": view.scroll_width, "width": view.viewport_width})
    return wide


def test_the_bench_report_and_its_comparisons_fit_githubs_width(bench_folder: Path, tmp_path: Path, capsys) -> None:
    chromium_or_skip()
    assert main(["report", "--latest", str(bench_folder.parent)]) == 0
    report = (bench_folder / "report.md").read_text()
    assert "| category | n | decode_<wbr>speedup | latency_<wbr>speedup |" in report
    assert all(len(line.split(" | ")) <= 8 for line in report.splitlines() if line.startswith("| category | n |"))
    pages = {"report": report}
    for index, folder in enumerate(path for path in sorted(bench_folder.iterdir()) if path.is_dir()
                                   and (path / "comparison.md").exists()):
        pages[f"comparison{index}"] = (folder / "comparison.md").read_text()
        capsys.readouterr()
        assert main(["compare", "--baseline", str(folder / "baseline.json"), "--speculative",
                     str(folder / "speculative.json"), "--stats", "--format", "markdown"]) == 0
        pages[f"compare{index}"] = capsys.readouterr().out
    assert len(pages) == 5
    for name, markdown in pages.items():
        assert _too_wide(markdown, tmp_path / f"{name}.html") == [], name


def test_the_committed_sample_report_fits_githubs_width(tmp_path: Path) -> None:
    chromium_or_skip()
    assert _too_wide((ROOT / "results" / "sample" / "report.md").read_text(), tmp_path / "sample.html") == []


def test_the_gates_job_summary_fits_githubs_width(bench_folder: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    chromium_or_skip()
    workload = next(path for path in sorted(bench_folder.iterdir()) if (path / "baseline.json").exists())
    summary = tmp_path / "summary.md"
    monkeypatch.setitem(os.environ, "GITHUB_STEP_SUMMARY", str(summary))
    main(["regress", "--reference", str(workload), "--candidate", str(workload), "--allow-mismatch"])
    capsys.readouterr()
    assert "| overall |" in summary.read_text()
    assert _too_wide(summary.read_text(), tmp_path / "summary.html") == []


def test_the_sweep_report_fits_githubs_width(tmp_path: Path, capsys) -> None:
    chromium_or_skip()
    base, spec = FakeServer(FakeState()), FakeServer(FakeState(drafting=True))
    base.start()
    spec.start()
    try:
        assert main(["sweep", "--base-url", base.url, "--spec-url", f"ngram-mod_draft_max16={spec.url}",
                     "--spec-url", f"ngram-mod_draft_max8={spec.url}", "--concurrency", "1,2", "--category",
                     "qa,coding", "--limit", "3", "--osl", "8", "--results-dir", str(tmp_path / "r"), "--quiet"]) == 0
    finally:
        base.stop()
        spec.stop()
    (folder,) = (tmp_path / "r").iterdir()
    assert main(["report", "--sweep", str(folder)]) == 0
    capsys.readouterr()
    assert _too_wide((folder / "report.md").read_text(), tmp_path / "sweep.html") == []


def test_the_check_finds_a_table_too_wide_for_github(tmp_path: Path) -> None:
    chromium_or_skip()
    header = "| " + " | ".join(f"column_number_{index}" for index in range(12)) + " |"
    table = "\n".join([header, "| " + " | ".join("---" for _ in range(12)) + " |",
                       "| " + " | ".join("1.08x [1.01, 1.15] faster" for _ in range(12)) + " |"])
    (wide,) = _too_wide(f"# t\n\n{table}\n", tmp_path / "wide.html")
    assert wide["tag"] == "table" and wide["scroll"] > GITHUB_CONTENT_WIDTH
