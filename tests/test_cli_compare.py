"""`speedbench compare` prints what the reference compare prints, byte for byte."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from bench.cli import main
from tests.conftest import DATA


def test_compare_matches_reference_stdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    for name in ("reference_baseline.json", "reference_speculative.json"):
        shutil.copy(DATA / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    code = main(["compare", "--baseline", "reference_baseline.json", "--speculative", "reference_speculative.json"])
    assert code == 0
    assert capsys.readouterr().out == (DATA / "reference_compare_stdout.txt").read_text(encoding="utf-8")


def test_compare_markdown_and_json(capsys) -> None:
    args = ["compare", "--baseline", str(DATA / "reference_baseline.json"),
            "--speculative", str(DATA / "reference_speculative.json")]
    assert main([*args, "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    assert markdown.splitlines()[2].startswith("| coding | 17.31 | 41.28 | 2.38x |")
    assert main([*args, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["comparison"]
    assert [row["category"] for row in rows] == ["coding", "math", "qa", "rag", "writing", "overall"]
    assert rows[-1]["accept_rate"] == pytest.approx(0.3902, abs=1e-4)


@pytest.mark.parametrize("content", ["", "{", '{"results": []}', "[]"])
def test_compare_bad_file_exits_2_with_one_line(tmp_path: Path, content: str, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code = main(["compare", "--baseline", str(bad), "--speculative", str(DATA / "reference_speculative.json")])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "Traceback" not in captured.err


def test_reference_compare_parity_when_available(tmp_path: Path) -> None:
    """When the reference scripts are present ($SPEEDBENCH_REFERENCE_DIR), run them on our files too."""
    reference = os.environ.get("SPEEDBENCH_REFERENCE_DIR")
    if not reference or not Path(reference, "speed_bench_compare.py").exists():
        pytest.skip("set SPEEDBENCH_REFERENCE_DIR to llama.cpp's tools/server/bench/speed-bench to run")
    import subprocess
    import sys

    for name in ("reference_baseline.json", "reference_speculative.json"):
        shutil.copy(DATA / name, tmp_path / name)
    args = ["--baseline", "reference_baseline.json", "--speculative", "reference_speculative.json"]
    theirs = subprocess.run(
        [sys.executable, str(Path(reference, "speed_bench_compare.py")), *args],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout
    ours = subprocess.run(
        [sys.executable, "-m", "bench", "compare", *args], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert ours == theirs
