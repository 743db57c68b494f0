"""The report of a `bench --config` folder: title, one decision line per pair, the summary table, then each pair's
SpeedBench table as the reference compare prints it; `pairs.json` names the folders and is checked on read."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from bench import BenchError
from bench.analysis import compare
from bench.cli import main
from bench.pipeline import pair_comparisons
from bench.records import is_pairs_folder, load_run, read_pairs_file, write_pairs_file
from bench.render import render_pairs_report
from tests.conftest import DATA

REFERENCE = (DATA / "reference_compare_stdout.txt").read_text(encoding="utf-8")


def _comparison():
    baseline, speculative = (load_run(DATA / f"reference_{arm}.json") for arm in ("baseline", "speculative"))
    return compare(baseline, speculative)


def _tables(report: str) -> list[str]:
    return [table for _, table in re.findall(r"^(`{3,})\n(Comparison: baseline=.*?)^\1$", report,
                                             flags=re.MULTILINE | re.DOTALL)]


def test_a_pairs_report_has_a_decision_line_and_a_summary_row_per_pair_and_the_reference_tables() -> None:
    comparison = _comparison()
    report = render_pairs_report([("target-a", comparison), ("target-b", comparison)], title="Three | pairs")
    assert report.startswith("# Three \\| pairs\n")
    assert re.search(r"^- \*\*target-a\*\*: decode .*$", report, flags=re.MULTILINE)
    assert re.search(r"^- \*\*target-b\*\*: decode .*$", report, flags=re.MULTILINE)
    summary = report.split("## Summary\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert summary[0].startswith("| pair | decode speedup [95% CI] | latency speedup")
    assert [row.split(" | ")[0] for row in summary[2:]] == ["| target-a", "| target-b"]
    assert "## Pair: target-a" in report and "## Pair: target-b" in report
    assert _tables(report) == [REFERENCE, REFERENCE]
    assert render_pairs_report([("target-a", comparison)]) == render_pairs_report([("target-a", comparison)])
    with pytest.raises(ValueError):
        render_pairs_report([])


def test_report_latest_rewrites_a_pairs_folder_from_its_run_files(tmp_path: Path) -> None:
    folder = tmp_path / "20260101T000000Z-pairs"
    for name in ("one", "two"):
        (folder / name).mkdir(parents=True)
        for arm in ("baseline", "speculative"):
            shutil.copy(DATA / f"reference_{arm}.json", folder / name / f"{arm}.json")
    write_pairs_file(folder, ("two", "one"), title="Recorded title", threshold=0.02)
    assert is_pairs_folder(folder) and read_pairs_file(folder).names == ("two", "one")
    assert [name for name, _ in pair_comparisons(folder, ("two", "one"))] == ["two", "one"]
    assert main(["report", "--latest", str(tmp_path)]) == 0
    report = (folder / "report.md").read_text(encoding="utf-8")
    assert report.startswith("# Recorded title\n")
    assert report.index("## Pair: two") < report.index("## Pair: one")
    expected = REFERENCE.replace("reference_baseline.json", "baseline.json").replace(
        "reference_speculative.json", "speculative.json")
    assert _tables(report) == [expected, expected]


@pytest.mark.parametrize("payload", [
    {"kind": "speedbench-pairs", "pairs": ["../outside"], "title": None, "threshold": 0.02},
    {"kind": "speedbench-pairs", "pairs": [], "title": None, "threshold": 0.02},
    {"kind": "speedbench-pairs", "pairs": ["a"], "title": None, "threshold": float("nan")},
    {"kind": "other", "pairs": ["a"], "title": None, "threshold": 0.02},
    ["a"],
])
def test_an_edited_pairs_file_is_refused_in_one_line(tmp_path: Path, payload: object) -> None:
    (tmp_path / "pairs.json").write_text(json.dumps(payload))
    with pytest.raises(BenchError, match="not a bench --config record"):
        read_pairs_file(tmp_path)
