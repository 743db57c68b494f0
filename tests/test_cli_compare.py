"""`speedbench compare` prints what the reference compare prints, byte for byte."""

from __future__ import annotations

import json
import random
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
    lines = markdown.splitlines()
    table = lines.index("### SpeedBench comparison")
    assert lines[table + 4].startswith("| coding | 17.31 | 41.28 | 2.38x |")
    if table:  # what the reader must know comes first, under its own heading
        assert lines[0] == "### Before reading the tables"
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


def _summary_file(path: Path, rows: list[dict]) -> None:
    path.write_text(json.dumps({"config": {}, "summary": rows, "results": []}, indent=2, sort_keys=True))


def _edge_case_pairs(rng: random.Random) -> list[tuple[list[dict], list[dict]]]:
    """Summaries with zeros, missing values, dropped and reordered categories, long names, tiny and huge values."""
    names = ["coding", "math", "qa", "rag", "a-very-long-category-name", "x", "overall"]
    values = [None, 0, 0.0, 1e-9, 0.004999, 0.005, 1.0, 12.345, 99999.9949, 1e7, 3]
    pairs = []
    for _ in range(25):
        def rows(count: int) -> list[dict]:
            chosen = rng.sample(names, count)
            return [{"category": name, "avg_pred_t_s": rng.choice(values), "avg_latency": rng.choice(values),
                     "accept_rate": rng.choice(values)} for name in chosen]
        pairs.append((rows(rng.randint(0, 7)), rows(rng.randint(0, 7))))
    return pairs


def test_byte_identical_to_the_reference_compare(tmp_path: Path, reference_compare, monkeypatch, capsys) -> None:
    """Run llama.cpp's own compare on reference-written, speedbench-written and edge-case files."""
    for name in ("reference_baseline.json", "reference_speculative.json"):
        shutil.copy(DATA / name, tmp_path / name)
    pairs = [("reference_baseline.json", "reference_speculative.json"),
             ("reference_speculative.json", "reference_baseline.json")]
    for index, (base_rows, spec_rows) in enumerate(_edge_case_pairs(random.Random(11))):
        _summary_file(tmp_path / f"b{index}.json", base_rows)
        _summary_file(tmp_path / f"s{index}.json", spec_rows)
        pairs.append((f"b{index}.json", f"s{index}.json"))
    for baseline, speculative in pairs:
        args = ["--baseline", baseline, "--speculative", speculative]
        theirs = reference_compare(args, tmp_path)
        assert theirs.returncode == 0, theirs.stderr
        monkeypatch.chdir(tmp_path)
        capsys.readouterr()
        assert main(["compare", *args]) == 0
        assert capsys.readouterr().out == theirs.stdout, (baseline, speculative)


def test_compare_markdown_stats_carries_every_report_table(capsys) -> None:
    args = ["compare", "--baseline", str(DATA / "reference_baseline.json"),
            "--speculative", str(DATA / "reference_speculative.json"), "--stats"]
    assert main([*args, "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    headings = [line for line in markdown.splitlines() if line.startswith("### ")]
    start = headings.index("### SpeedBench comparison")
    assert headings[start:start + 3] == ["### SpeedBench comparison", "### Paired statistics", "### Lossless check"]
    overall_row = next(line for line in markdown.splitlines() if line.startswith("| overall (primary) |"))
    assert overall_row.count("<br>") == 2  # the decode and latency cells each carry their verdict under the interval
    assert "| decode_<wbr>speedup | latency_<wbr>speedup |" in markdown and "decode_mde" in markdown  # rest: 2nd table
    assert main([*args, "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    overall = payload["stats"][-1]
    assert overall["category"] == "overall"
    assert {"decode_verdict", "latency_verdict", "latency_speedup_low"} <= set(overall)
    assert payload["lossless"][-1]["category"] == "overall"


def _shifted(tmp_path: Path, name: str, **config: object) -> Path:
    """A copy of the reference speculative run with some config keys changed."""
    data = json.loads((DATA / "reference_speculative.json").read_text())
    data["config"].update(config)
    target = tmp_path / name
    target.write_text(json.dumps(data))
    return target


def test_compare_refuses_runs_that_measured_different_things(tmp_path: Path, capsys) -> None:
    other = _shifted(tmp_path, "osl16.json", osl=16, concurrency=2)
    args = ["compare", "--baseline", str(DATA / "reference_baseline.json"), "--speculative", str(other)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "osl differs" in err and "concurrency differs" in err
    assert "--allow-mismatch" in err
    assert main([*args, "--allow-mismatch"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("mismatch: osl differs") and "\nComparison: baseline=" in out


def test_compare_refuses_a_file_against_itself(capsys) -> None:
    same = str(DATA / "reference_speculative.json")
    assert main(["compare", "--baseline", same, "--speculative", same]) == 2
    assert "same" in capsys.readouterr().err


def test_compare_refuses_a_run_where_every_sample_failed(tmp_path: Path, capsys) -> None:
    data = json.loads((DATA / "reference_speculative.json").read_text())
    for result in data["results"]:
        result["ok"] = False
    dead = tmp_path / "dead.json"
    dead.write_text(json.dumps(data))
    assert main(["compare", "--baseline", str(DATA / "reference_baseline.json"), "--speculative", str(dead)]) == 2
    assert "successful samples" in capsys.readouterr().err


def test_a_lesser_difference_is_a_warning_and_the_table_keeps_parity(tmp_path: Path, capsys) -> None:
    other = _shifted(tmp_path, "t07.json", extra_inputs={"temperature": 0.7})
    assert main(["compare", "--baseline", str(DATA / "reference_baseline.json"), "--speculative", str(other)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("Comparison: baseline=")
    assert "warning: extra_inputs differs" in captured.err
