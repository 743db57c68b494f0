"""`speedbench history`: the store (append-only, idempotent, refused input writes nothing), series and change points
with a family over the history, show/check/html on the command line, `regress --history` and `report --history`."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from bench.analysis import analyse_history, open_regressions, recent_trend, t_quantile
from bench.cli import main
from bench.records import HistoryPoint, Machine, PointRow, load_history, point_table, write_points
from bench.render import history_html, history_json, trend_line

SAMPLE = Path(__file__).resolve().parents[1] / "results" / "sample"
MACHINE = Machine("test box", "feedfacecafe", "test CPU", 2, "engine 1", "model.gguf", "0123456789ab")
CATEGORIES = ("coding", "math", "qa", "writing")


def synthetic_points(commits: int, *, step_at: int | None = None, step: float = 0.85, seed: int = 0,
                     category: str = "math") -> list[HistoryPoint]:
    """A history of `commits` points (4 categories and overall, decode only); from `step_at` on, `category`'s
    decode speedup (and so the overall row) is multiplied by `step`."""
    rng = np.random.default_rng(seed)
    points = []
    for index in range(commits):
        rows, logs, ses = [], [], []
        for name in CATEGORIES:
            shift = math.log(step) if step_at is not None and index >= step_at and name == category else 0.0
            samples = rng.normal(math.log(1.3) + shift, 0.08, 4)
            mean, se = float(samples.mean()), float(samples.std(ddof=1) / 2.0)
            logs.append(mean)
            ses.append(se)
            half = t_quantile(0.975, 3.0) * se  # the interval a point file's precision implies
            rows.append(PointRow(name, "decode", math.exp(mean), math.exp(mean - half), math.exp(mean + half), se,
                                 3.0, 4))
        mean, se = float(np.mean(logs)), math.sqrt(sum(value * value for value in ses)) / len(ses)
        half = t_quantile(0.975, 15.0) * se
        rows.append(PointRow("overall", "decode", math.exp(mean), math.exp(mean - half), math.exp(mean + half),
                             se, 15.0, 16))
        when = f"2026-11-{1 + index // 24:02d}T{index % 24:02d}:00:00+00:00"
        points.append(HistoryPoint(f"c{index:04d}aa", "main", when, when, "qualitative:ngram-mod", MACHINE, "",
                                   f"{index:012d}", "speedbench test", point_table(rows)))
    return points


def _history(tmp_path: Path, points: list[HistoryPoint]) -> Path:
    folder = tmp_path / "history"
    write_points(folder, points)
    return folder


def test_a_step_in_one_category_is_found_where_it_happened_and_an_unchanged_history_shows_none() -> None:
    stepped = analyse_history(synthetic_points(40, step_at=25, seed=1))
    changes = [(series.category, change) for series, change in stepped.change_points]
    assert [category for category, _ in changes if category == "math"] == ["math"]
    math_change = next(change for category, change in changes if category == "math")
    assert abs(math_change.index - 25) <= 2
    assert math_change.direction == "regression"
    assert math_change.commit == "c0025aa" or abs(int(math_change.commit[1:5]) - 25) <= 2
    assert -0.22 < math_change.change < -0.08
    unchanged = analyse_history(synthetic_points(40, seed=2))
    assert unchanged.change_points == []
    assert unchanged.splits == 5 * (40 - 3)  # every candidate split of every series is one family


def test_the_family_holds_over_many_unchanged_histories() -> None:
    false = sum(bool(analyse_history(synthetic_points(30, seed=100 + seed)).change_points) for seed in range(40))
    assert false <= 4  # 5% of 40 is 2; 4 allows for chance while a per-test 5% would flag almost every history


def test_reruns_of_one_commit_are_one_point_of_the_series() -> None:
    points = synthetic_points(6, seed=3)
    rerun = HistoryPoint(points[2].commit, "main", points[2].time, points[2].time + "x", points[2].workload, MACHINE,
                         "", "rerun-digest", "", points[3].table)
    series = analyse_history([*points, rerun]).series[0]
    assert [point.commit for point in series.points] == [point.commit for point in points]
    assert series.points[2].points == 2
    assert series.points[2].log_se < points[2].rows[-1].log_se


def test_points_round_trip_and_a_newer_file_is_refused(tmp_path: Path) -> None:
    folder = _history(tmp_path, synthetic_points(3))
    loaded = load_history(folder)
    assert [point.commit for point in loaded] == ["c0000aa", "c0001aa", "c0002aa"]
    assert loaded[0].rows[0].log_se == pytest.approx(synthetic_points(3)[0].rows[0].log_se)
    again = write_points(folder, synthetic_points(3))
    assert [written for _, written in again] == [False, False, False]
    newest = next(folder.rglob("*.json"))
    data = json.loads(newest.read_text())
    data["schema_version"] = 99
    newest.write_text(json.dumps(data))
    with pytest.raises(Exception, match="newer speedbench"):
        load_history(folder)


def test_history_add_records_a_comparison_once_per_commit(tmp_path: Path, capsys) -> None:
    history = tmp_path / "h"
    args = ["history", "add", str(SAMPLE), "--history", str(history), "--commit", "0123abcd", "--branch", "main",
            "--time", "2026-12-01T10:00:00Z"]
    assert main(args) == 0
    assert main(args) == 0
    assert "already there" in capsys.readouterr().out
    files = list(history.rglob("*.json"))
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert data["schema_version"] == 1 and data["commit"] == "0123abcd" and data["branch"] == "main"
    assert data["time"] == "2026-12-01T10:00:00+00:00"
    assert data["machine"]["model"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    columns = data["rows"]
    rows = [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]
    overall = {row["metric"]: row for row in rows if row["category"] == "overall"}
    assert set(overall) == {"decode", "latency", "accept_rate", "drafted_share"}
    assert overall["decode"]["low"] < overall["decode"]["estimate"] < overall["decode"]["high"]
    assert overall["decode"]["log_se"] > 0
    assert "verdict" not in json.dumps(data)  # a point holds estimates and precision, never a decision


def test_a_make_bench_folder_adds_one_point_per_workload_with_one_machine_fingerprint(tmp_path: Path) -> None:
    bench = tmp_path / "20261201-100000"
    for name in ("grounded", "qualitative"):
        (bench / name).mkdir(parents=True)
        for arm in ("baseline", "speculative"):
            data = json.loads((SAMPLE / f"{arm}.json").read_text())
            data["config"]["bench"] = name
            (bench / name / f"{arm}.json").write_text(json.dumps(data))
    history = tmp_path / "h"
    assert main(["history", "add", str(bench), "--history", str(history), "--commit", "feed1234"]) == 0
    points = load_history(history)
    assert sorted(point.workload for point in points) == ["grounded:ngram-mod", "qualitative:ngram-mod"]
    assert len({point.machine.fingerprint for point in points}) == 1


def test_the_commit_and_branch_come_from_github_actions_variables(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GITHUB_SHA", "9f8e7d6c5b4a")
    monkeypatch.setenv("GITHUB_REF_NAME", "feature-x")
    history = tmp_path / "h"
    assert main(["history", "add", str(SAMPLE), "--history", str(history)]) == 0
    point = load_history(history)[0]
    assert (point.commit, point.branch) == ("9f8e7d6c5b4a", "feature-x")


@pytest.mark.parametrize("extra", [["--time", "yesterday"], ["--commit", "not a sha!"]])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path: Path, capsys, extra) -> None:
    history = tmp_path / "h"
    args = ["history", "add", str(SAMPLE), "--history", str(history), "--commit", "0123abcd", *extra]
    assert main(args) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "error" in error
    assert not history.exists()


def test_a_bad_folder_among_good_ones_writes_nothing(tmp_path: Path, capsys) -> None:
    history = tmp_path / "h"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["history", "add", str(SAMPLE), str(empty), "--history", str(history), "--commit", "0123abcd"]) == 2
    assert "neither a comparison folder" in capsys.readouterr().err
    assert not history.exists()


@pytest.mark.parametrize("command", [["show"], ["check"], ["html", "--out", "page.html"]])
def test_a_missing_history_folder_is_bad_input_for_every_reader(tmp_path: Path, capsys, command, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["history", command[0], "--history", str(tmp_path / "nowhere"), *command[1:]]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "no history folder" in error
    assert not (tmp_path / "page.html").exists() and not (tmp_path / "nowhere").exists()
    (tmp_path / "empty").mkdir()
    assert main(["history", "show", "--history", str(tmp_path / "empty")]) == 0  # a history with no points yet
    assert "no points yet" in capsys.readouterr().out


def test_show_json_has_the_issue_shape(tmp_path: Path, capsys) -> None:
    history = _history(tmp_path, synthetic_points(30, step_at=15, seed=4))
    assert main(["history", "show", "--history", str(history), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    math_series = next(item for item in data["series"] if item["category"] == "math")
    assert set(math_series) >= {"workload", "category", "metric", "points", "change_points"}
    assert set(math_series["points"][0]) >= {"commit", "estimate", "low", "high"}
    change = math_series["change_points"][0]
    assert change["direction"] == "regression"
    assert abs(int(change["commit"][1:5]) - 15) <= 2  # the first commit after the change
    assert change["after"] < change["before"]
    for fmt in ("text", "markdown"):
        assert main(["history", "show", "--history", str(history), "--format", fmt]) == 0
        assert "regression" in capsys.readouterr().out


def test_check_fails_on_an_unrecovered_regression_and_writes_the_step_summary(tmp_path: Path, capsys,
                                                                                monkeypatch) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    regressed = _history(tmp_path / "a", synthetic_points(30, step_at=15, seed=5))
    assert main(["history", "check", "--history", str(regressed)]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "math" in out and ".." in out
    assert "| math |" in summary.read_text()
    recovered = synthetic_points(30, step_at=10, seed=6)
    recovered[20:] = synthetic_points(30, seed=7)[20:]  # back to the old level for the last 10 commits
    assert main(["history", "check", "--history", str(_history(tmp_path / "b", recovered))]) == 0
    assert main(["history", "check", "--history", str(_history(tmp_path / "c", synthetic_points(30, seed=8)))]) == 0
    assert "passed" in summary.read_text()


def test_open_regressions_name_the_size_against_the_level_before() -> None:
    found = open_regressions(analyse_history(synthetic_points(30, step_at=15, seed=9, step=0.8)))
    math_found = [item for item in found if item.series.category == "math"]
    assert len(math_found) == 1
    assert -0.3 < math_found[0].size < -0.1


def test_the_trend_line_says_the_level_then_and_now(tmp_path: Path) -> None:
    line = trend_line(recent_trend(analyse_history(synthetic_points(30, seed=10)), "qualitative:ngram-mod"))
    assert line.startswith("decode 1.")
    assert "over the last 20 commits" in line and "no change point" in line
    stepped = trend_line(recent_trend(analyse_history(synthetic_points(30, step_at=22, seed=11, category="coding",
                                                                       step=0.6))))
    assert "regression" in stepped


def test_the_page_is_self_contained(tmp_path: Path) -> None:
    page = history_html(analyse_history(synthetic_points(30, step_at=15, seed=12)))
    assert "<script" not in page and "<link" not in page and "@import" not in page and "url(" not in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in page
    assert page.count("<svg") == 1 + len(CATEGORIES)  # the overall trend and one small multiple per category
    assert "regression" in page and "test box" in page and "model.gguf" in page
    assert main(["history", "html", "--history", str(_history(tmp_path, synthetic_points(5))), "--out",
                 str(tmp_path / "page.html")]) == 0
    assert (tmp_path / "page.html").read_text().startswith("<!DOCTYPE html>")


def test_history_json_is_strict_json_for_rows_without_interval() -> None:
    points = synthetic_points(3)
    rows = (*points[0].rows, PointRow("overall", "latency", 1.0, math.nan, math.nan, math.nan, math.nan, 1))
    points[0] = HistoryPoint(points[0].commit, "main", points[0].time, points[0].time, points[0].workload, MACHINE,
                             "", "d", "", point_table(rows))
    json.dumps(history_json(analyse_history(points)), allow_nan=False)


def _slowed_folder(path: Path, factor: float) -> Path:
    path.mkdir(parents=True)
    shutil.copy(SAMPLE / "baseline.json", path / "baseline.json")
    data = json.loads((SAMPLE / "speculative.json").read_text())
    for result in data["results"]:
        if result.get("predicted_per_second"):
            result["predicted_per_second"] *= factor
            result["predicted_ms"] = result.get("predicted_ms", 0) / factor if result.get("predicted_ms") else None
        result["latency_s"] = result["latency_s"] / factor
    (path / "speculative.json").write_text(json.dumps(data))
    return path


def test_regress_gates_a_candidate_against_the_recent_window_of_the_history(tmp_path: Path, capsys) -> None:
    history = tmp_path / "h"
    for index in range(4):
        assert main(["history", "add", str(SAMPLE), "--history", str(history), "--commit", f"abcd{index:04d}",
                     "--time", f"2026-12-0{index + 1}T00:00:00Z"]) == 0
    capsys.readouterr()
    assert main(["regress", "--history", str(history), "--candidate", str(SAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "0 regression(s)" in out and "the last 4 commits of the history" in out
    slowed = _slowed_folder(tmp_path / "slow", 0.6)
    assert main(["regress", "--history", str(history), "--candidate", str(slowed)]) == 1
    out = capsys.readouterr().out
    assert "0 regression(s)" not in out
    assert any(line.startswith("overall") and "REGRESSED" in line for line in out.splitlines())
    assert main(["regress", "--history", str(tmp_path / "none"), "--candidate", str(SAMPLE)]) == 2


def test_report_gains_a_trend_line_from_the_history(tmp_path: Path) -> None:
    history = tmp_path / "h"
    for index in range(3):
        assert main(["history", "add", str(SAMPLE), "--history", str(history), "--commit", f"beef{index:04d}",
                     "--time", f"2026-12-0{index + 1}T00:00:00Z"]) == 0
    out = tmp_path / "report"
    assert main(["report", "--baseline", str(SAMPLE / "baseline.json"), "--speculative",
                 str(SAMPLE / "speculative.json"), "--out", str(out), "--history", str(history)]) == 0
    text = (out / "report.md").read_text()
    assert "History: decode 1." in text and "over the last 3 commits" in text


def test_a_malformed_point_file_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    history = _history(tmp_path, synthetic_points(3))
    target = next(history.rglob("*.json"))
    data = json.loads(target.read_text())
    data["rows"]["estimate"] = ["fast"] * len(data["rows"]["estimate"])
    target.write_text(json.dumps(data))
    assert main(["history", "show", "--history", str(history)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "malformed history point" in error


def test_points_of_another_machine_are_another_series() -> None:
    points = synthetic_points(10, seed=13)
    other = Machine("other box", "0ther0ther00", "other CPU", 8, "engine 1", "model.gguf", "0123456789ab")
    moved = [HistoryPoint(point.commit, point.branch, point.time, point.added_at, point.workload, other, "",
                          point.source_digest, "", point.table) for point in synthetic_points(10, seed=14)]
    analysis = analyse_history([*points, *moved])
    overall = [series for series in analysis.series if series.primary]
    assert sorted(series.machine.fingerprint for series in overall) == ["0ther0ther00", "feedfacecafe"]
    assert all(len(series) == 10 for series in overall)
