"""Adversarial round 5 (data): each case a fault found by feeding speedbench hostile files, names and options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import BenchError
from bench.cli import main
from tests.test_history import SAMPLE, _history, synthetic_points


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _exit_code(args: list[str]) -> int:
    """main's exit code, whether it returns it or argparse exits with it."""
    try:
        return main(args)
    except SystemExit as exited:
        return int(exited.code or 0)


# ---------------------------------------------------------------- 6. gate thresholds


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-0.1", "0", "1", "5", "1e300"])
def test_a_gate_threshold_outside_0_1_is_one_usage_line(tmp_path: Path, capsys, value: str) -> None:
    history = _history(tmp_path, synthetic_points(30, step_at=15, seed=5))
    for args in (["history", "check", "--history", str(history), f"--threshold={value}"],
                 ["regress", "--reference", str(SAMPLE), "--candidate", str(SAMPLE), f"--threshold={value}"],
                 ["regress", "--reference", str(SAMPLE), "--candidate", str(SAMPLE), f"--threshold-decode={value}"]):
        assert _exit_code(args) == 2
        line = _one_line(capsys.readouterr().err)
        assert "threshold" in line and "between 0 and 1" in line, line


def test_a_threshold_inside_0_1_still_gates(tmp_path: Path, capsys) -> None:
    history = _history(tmp_path, synthetic_points(30, step_at=15, seed=5))
    assert main(["history", "check", "--history", str(history), "--threshold", "0.05"]) == 1
    assert main(["history", "check", "--history", str(history), "--threshold", "0.5"]) == 0


# ---------------------------------------------------------------- 11. secrets inside JSON options


def test_secret_named_keys_of_json_options_are_masked_at_every_depth(tmp_path: Path, capsys) -> None:
    from bench import forget_secrets
    from tests.test_adversarial import _dataset, _fake, _main

    long_secret, short_secret, nested_secret = "sk-extra-" + "3" * 20, "pw1", "tok-" + "9" * 16
    extra = {"temperature": 0, "metadata": {"api_key": long_secret, "Password": short_secret,
                                            "inner": [{"auth": {"value": nested_secret}}]}}
    kwargs = {"enable_thinking": False, "x_token": "kw-" + "8" * 16}
    try:
        with _fake() as server:
            code, out, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 2)),
                                   "--osl", "8", "--extra-inputs", json.dumps(extra), "--chat-template-kwargs",
                                   json.dumps(kwargs), "--output", str(tmp_path / "r.json"), "--quiet")
            sent = server.state.requests[0]
        assert code == 0, err
        assert sent["metadata"]["api_key"] == long_secret  # the server is sent the values as given
        assert sent["chat_template_kwargs"]["x_token"] == kwargs["x_token"]
        code, out2, err2 = _main(capsys, "report", "--baseline", str(tmp_path / "r.json"), "--speculative",
                                 str(tmp_path / "r.json"), "--out", str(tmp_path / "rep"), "--allow-mismatch")
        assert code == 0, err2
        texts = [out + err + out2 + err2] + [path.read_text(encoding="utf-8") for path in (
            tmp_path / "r.json", tmp_path / "r.json.jsonl", tmp_path / "rep" / "report.md")]
        for text in texts:
            for secret in (long_secret, nested_secret, kwargs["x_token"], '"pw1"'):
                assert secret not in text
        config = json.loads((tmp_path / "r.json").read_text())["config"]
        assert config["extra_inputs"]["metadata"]["Password"] == "***"
        assert config["extra_inputs"]["metadata"]["inner"][0]["auth"] == "***"
        assert config["extra_inputs"]["temperature"] == 0 and config["chat_template_kwargs"]["enable_thinking"] is False
    finally:
        forget_secrets()


# ---------------------------------------------------------------- 14. server-state snapshots


@pytest.mark.parametrize(("accepted", "drafted"), [("900", "477"), ("-5", "477"), ("301", "-1")])
def test_a_start_snapshot_that_contradicts_itself_is_withheld_like_live_counters(accepted: str, drafted: str) -> None:
    from bench.engines import engine_by_name
    from tests.test_server_start import LLAMACPP_WARM

    engine = engine_by_name("llamacpp")
    metrics = LLAMACPP_WARM.replace(" 301", " " + accepted).replace(" 477", " " + drafted)
    assert engine.start_state(metrics, now_s=0.0) is None
    assert engine.counters_contradicted
    assert any("contradict" in note and "start" in note for note in engine.notes), engine.notes
    assert engine_by_name("llamacpp").start_state(LLAMACPP_WARM, now_s=0.0) is not None  # a consistent one is kept


def test_a_stored_start_snapshot_that_contradicts_itself_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    data = json.loads((SAMPLE / "speculative.json").read_text())
    data["server_start"] = {"state": "drafter warm", "draft_tokens": 10, "accepted": 50, "drafts": 3}
    edited = tmp_path / "speculative.json"
    edited.write_text(json.dumps(data))
    assert main(["compare", "--baseline", str(SAMPLE / "baseline.json"), "--speculative", str(edited)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "server_start" in line and "accepted" in line, line


# ---------------------------------------------------------------- 8. inputs that are not regular files


def _speedbench(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    """speedbench in a child process: a reader that blocks fails the test by its timeout instead of hanging it."""
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=Path(__file__).resolve().parents[1])


def _planted(tmp_path: Path, kind: str, name: str) -> Path:
    path = tmp_path / name
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    return path


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_endless_device_as_a_run_file_is_one_line(tmp_path: Path, kind: str) -> None:
    bad = _planted(tmp_path, kind, "speculative.json")
    good = str(SAMPLE / "baseline.json")
    for args in (["compare", "--baseline", good, "--speculative", str(bad)],
                 ["regress", "--reference", good, "--candidate", str(bad)],
                 ["merge", good, str(bad), "--output", str(tmp_path / "merged.json")]):
        done = _speedbench(*args)
        assert done.returncode == 2, done.stderr
        line = _one_line(done.stderr)
        assert "not a regular file" in line and str(bad) in line, line


def test_a_fifo_as_a_journal_history_point_or_dataset_is_one_line(tmp_path: Path) -> None:
    history = _history(tmp_path, synthetic_points(3))
    point = next(history.rglob("*.json"))
    point.unlink()
    os.mkfifo(point)
    dataset = _planted(tmp_path, "fifo", "prompts.jsonl")
    journal = _planted(tmp_path, "fifo", "r.json.jsonl")
    for args in (["history", "show", "--history", str(history)],
                 ["compare", "--baseline", str(journal), "--speculative", str(journal)],
                 ["run", "--url", "http://127.0.0.1:9", "--dataset", str(dataset), "--output",
                  str(tmp_path / "out.json")]):
        done = _speedbench(*args)
        assert done.returncode == 2, done.stderr
        assert "not a regular file" in _one_line(done.stderr), done.stderr


def test_an_oversized_input_is_refused_before_it_is_read(tmp_path: Path) -> None:
    from bench import read_input

    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048)
    with pytest.raises(BenchError) as caught:
        read_input(big, limit=1024)
    assert "2,048 bytes" in str(caught.value)
    assert read_input(big, limit=4096) == b" " * 2048


# ---------------------------------------------------------------- 4. terminal output of names from data

FORGED = "\x1b]0;pwned\x07\u202eevil\nhistory check: no unrecovered regression over 5%"


def _raw_control(text: str) -> list[str]:
    """Control characters and bidi overrides other than line breaks (which a forged line needs) in printed text."""
    return [char for char in text if (ord(char) < 0x20 and char != "\n") or 0x7f <= ord(char) <= 0x9f
            or char in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"]


def _no_forged_line(text: str, verdicts: int = 0) -> None:
    """No raw control character, and no line that reads as a verdict beyond the `verdicts` the command prints."""
    assert not _raw_control(text), repr(text)
    assert sum(line.startswith("history check:") for line in text.splitlines()) == verdicts, text


def test_names_from_a_history_never_drive_the_terminal_or_forge_a_line(tmp_path: Path, capsys) -> None:
    history = tmp_path / "h"
    folder = tmp_path / "bench"
    folder.mkdir()
    for name in ("baseline.json", "speculative.json"):
        data = json.loads((SAMPLE / name).read_text())
        data["config"]["bench"] = "qualitative" + FORGED
        (folder / name).write_text(json.dumps(data))
    assert main(["history", "add", str(folder), "--history", str(history), "--commit", "abcd0001",
                 "--machine", "box" + FORGED, "--time", "2026-12-01T00:00:00Z"]) == 0
    captured = capsys.readouterr()
    _no_forged_line(captured.out + captured.err)
    assert "\\x1b" in captured.out
    for command in (["show"], ["check"], ["show", "--format", "markdown"]):
        code = main(["history", *command, "--history", str(history)])
        captured = capsys.readouterr()
        assert code in (0, 1), captured.err
        _no_forged_line(captured.out + captured.err, verdicts=command == ["check"])
    assert main(["history", "show", "--history", str(history)]) == 0
    assert "box\\x1b]0;pwned\\x07\\u202eevil\\x0ahistory check" in capsys.readouterr().out


def test_a_category_name_never_drives_the_terminal_from_tunes_pick_lines() -> None:
    from bench import OVERALL
    from bench.analysis import Tune, decide, tune_rows
    from bench.render import tune_text
    from tests.test_tune_analysis import _measured

    category = "qa" + FORGED
    picks = decide({(OVERALL, 1): [_measured(2, 1.2), _measured(4, 1.5)],
                    (category, 1): [_measured(2, 1.2, seed=3), _measured(4, 1.5, seed=3)]})
    tune = Tune(grid=(2, 4), levels=(1,), categories=(category,), picks=picks, predictions={},
                rows=tune_rows(picks, {}, (2, 4)), mode="ngram-mod")
    text = tune_text(tune)
    _no_forged_line(text)
    assert "category qa\\x1b]0;pwned" in text


# ---------------------------------------------------------------- 7. the stored summary and the run file's contents


def _edited_speculative(tmp_path: Path, edit) -> Path:
    data = json.loads((SAMPLE / "speculative.json").read_text())
    edit(data)
    path = tmp_path / "speculative.json"
    path.write_text(json.dumps(data))
    return path


def _refused(tmp_path: Path, capsys, edit, *words: str) -> None:
    edited = _edited_speculative(tmp_path, edit)
    for args in (["compare", "--baseline", str(SAMPLE / "baseline.json"), "--speculative", str(edited)],
                 ["regress", "--reference", str(SAMPLE / "baseline.json"), "--candidate", str(edited)]):
        assert main(args) == 2
        line = _one_line(capsys.readouterr().err)
        assert str(edited) in line and all(word in line for word in words), line


def _scale_summary(data: dict) -> None:
    for row in data["summary"]:
        if row["avg_pred_t_s"]:
            row["avg_pred_t_s"] *= 1.5  # a faster speculative table than its samples show


def _drop_summary_row(data: dict) -> None:
    data["summary"] = [row for row in data["summary"] if row["category"] != data["results"][0]["category"]]


@pytest.mark.parametrize("edit", [_scale_summary, _drop_summary_row])
def test_the_summary_is_recomputed_from_the_samples_and_an_edited_one_said(tmp_path: Path, capsys, edit) -> None:
    from bench.analysis import compare_runs
    from bench.records import load_run, summarize

    edited = load_run(_edited_speculative(tmp_path, edit))
    honest = load_run(SAMPLE / "speculative.json")
    def by_category(rows) -> dict:
        return {row["category"]: dict(row) for row in rows}

    assert by_category(edited.summary) == by_category(summarize(honest.latest))
    baseline = load_run(SAMPLE / "baseline.json")
    assert by_category(compare_runs(baseline, edited)) == by_category(compare_runs(baseline, honest))
    assert any("stored summary did not match" in warning for warning in edited.info.warnings)
    assert not any("summary" in warning for warning in honest.info.warnings)


def _duplicate(data: dict) -> None:
    data["results"].append(dict(data["results"][0]))


def _negative(data: dict) -> None:
    data["results"][0]["completion_tokens"] = -40


def _over_accepted(data: dict) -> None:
    drafted = next(result for result in data["results"] if result["ok"] and result.get("draft_n"))
    drafted["draft_n_accepted"] = drafted["draft_n"] + 5


@pytest.mark.parametrize(("edit", "words"), [
    (_duplicate, ("twice",)), (_negative, ("completion_tokens", "negative")), (_over_accepted, ("accepted",)),
])
def test_impossible_run_file_contents_are_refused_in_one_line(tmp_path: Path, capsys, edit, words) -> None:
    _refused(tmp_path, capsys, edit, *words)


def test_the_sample_run_files_and_a_summary_left_unedited_load() -> None:
    from bench.records import load_run

    for name in ("baseline.json", "speculative.json"):
        assert load_run(SAMPLE / name).results


# ---------------------------------------------------------------- 5. history files read as run files are


def _added_history(tmp_path: Path, commits: int = 3) -> Path:
    history = tmp_path / "h"
    for index in range(commits):
        assert main(["history", "add", str(SAMPLE), "--history", str(history), "--commit", f"abcd{index:04d}",
                     "--time", f"2026-12-0{index + 1}T00:00:00Z"]) == 0
    return history


def _readers(history: Path, tmp_path: Path) -> list[list[str]]:
    return [["history", "show", "--history", str(history)], ["history", "check", "--history", str(history)],
            ["history", "html", "--history", str(history), "--out", str(tmp_path / "page.html")],
            ["regress", "--history", str(history), "--candidate", str(SAMPLE)]]


def _set_estimate(value: str):
    def edit(text: str) -> str:
        data = json.loads(text)
        data["rows"]["estimate"][0] = "@@"
        return json.dumps(data).replace('"@@"', value)
    return edit


def _nested(text: str) -> str:
    data = json.loads(text)
    data["rows"]["category"][0] = "@@"
    return json.dumps(data).replace('"@@"', "[" * 100_000 + "]" * 100_000)


def _field(name: str, value: object, column: bool = False):
    def edit(text: str) -> str:
        data = json.loads(text)
        if column:
            data["rows"][name][0] = value
        else:
            data[name] = value
        return json.dumps(data)
    return edit


def _narrow_interval(text: str) -> str:
    data = json.loads(text)
    rows = data["rows"]
    index = next(i for i, se in enumerate(rows["log_se"]) if se)
    rows["low"][index] = rows["estimate"][index] * 0.999  # an interval far narrower than its precision says
    return json.dumps(data)


@pytest.mark.parametrize(("edit", "words"), [
    (_set_estimate("Infinity"), ("Infinity",)), (_set_estimate("1e300"), ("estimate",)),
    (_set_estimate("-1.5"), ("estimate",)), (_field("n", 10**400, column=True), ("n",)),
    (_field("df", -3, column=True), ("df",)), (_nested, ("nested",)), (_field("time", "zzzz"), ("time",)),
    (_field("time", "2026-02-30T00:00:00Z"), ("time",)), (_narrow_interval, ("interval",)),
])
def test_an_edited_history_point_is_refused_in_one_line_by_every_reader(tmp_path: Path, capsys, edit, words) -> None:
    history = _added_history(tmp_path)
    target = sorted(history.rglob("*.json"))[1]
    target.write_text(edit(target.read_text()))
    capsys.readouterr()
    for args in _readers(history, tmp_path):
        assert _exit_code(args) == 2, args
        line = _one_line(capsys.readouterr().err)
        assert target.name in line and all(word in line for word in words), line


def test_a_points_time_is_read_as_utc_so_an_offset_cannot_reorder_the_commits(tmp_path: Path) -> None:
    from bench.records import load_history

    history = _added_history(tmp_path, commits=2)
    target = sorted(history.rglob("*.json"))[0]
    target.write_text(_field("time", "2026-12-01T09:00:00+09:00")(target.read_text()))
    times = {point.commit: point.time for point in load_history(history)}
    assert times["abcd0000"] == "2026-12-01T00:00:00+00:00"


@pytest.mark.parametrize("level", ["machine", "workload"])
def test_a_history_folder_replaced_by_a_link_is_never_written_through(tmp_path: Path, capsys, level: str) -> None:
    history = _added_history(tmp_path, commits=1)
    point = next(history.rglob("*.json"))
    folder = point.parent if level == "workload" else point.parent.parent
    elsewhere = tmp_path / "elsewhere"
    folder.rename(elsewhere)
    folder.symlink_to(elsewhere)
    before = sorted(path.name for path in elsewhere.rglob("*"))
    assert main(["history", "add", str(SAMPLE), "--history", str(history), "--commit", "abcd9999",
                 "--time", "2026-12-09T00:00:00Z"]) == 2
    assert "symbolic link" in _one_line(capsys.readouterr().err)
    assert sorted(path.name for path in elsewhere.rglob("*")) == before
    assert main(["history", "show", "--history", str(history)]) == 2
    assert "symbolic link" in _one_line(capsys.readouterr().err)


# ---------------------------------------------------------------- 9. the notebook


def test_the_notebook_shows_names_as_text_never_as_html(tmp_path: Path, monkeypatch) -> None:
    from tests.test_notebook import _execute

    folder = tmp_path / "<img src=x onerror=alert(1)>"
    folder.mkdir()
    for name in ("baseline.json", "speculative.json"):
        (folder / name).write_bytes((SAMPLE / name).read_bytes())
    outputs, failed = _execute(monkeypatch, results=str(folder))
    assert not failed
    from markdown_it import MarkdownIt

    shown = [output["data"]["text/markdown"] for output in outputs if "text/markdown" in output.get("data", {})]
    rendered = [MarkdownIt("commonmark").render(text) for text in shown]  # raw HTML on, as Jupyter renders it
    assert rendered and not any("<img" in text for text in rendered), rendered
    html = [output["data"]["text/html"] for output in outputs if "text/html" in output.get("data", {})]
    assert not any("<img" in text for text in html)


def test_the_notebook_says_an_osl_mismatch_in_one_line(tmp_path: Path, monkeypatch) -> None:
    from tests.test_notebook import _execute

    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "baseline.json").write_bytes((SAMPLE / "baseline.json").read_bytes())
    data = json.loads((SAMPLE / "speculative.json").read_text())
    data["config"]["osl"] = 17
    (folder / "speculative.json").write_text(json.dumps(data))
    outputs, failed = _execute(monkeypatch, results=str(folder))
    (error,) = [output for output in outputs if output.get("output_type") == "error"]
    assert failed and error["ename"] == "BenchError"
    assert len(error["traceback"]) == 1 and "osl" in error["traceback"][0], error["traceback"]


# ---------------------------------------------------------------- 10. Mermaid: long names and bidi overrides

LONG = "a category named at length by a dataset that never expected a chart " * 2


def _axis_labels(chart: str) -> list[str]:
    import re

    axis = next(line for line in chart.splitlines() if line.strip().startswith("x-axis"))
    return re.findall(r'"([^"]*)"', axis)[1:]


@pytest.mark.parametrize("latency", [True, False])
def test_long_category_names_keep_every_chart_label_short_and_distinct(latency: bool) -> None:
    from bench.render import MAX_AXIS_LABEL, speedup_chart

    names = ["coding", LONG + "one", LONG + "two", "math"]
    chart = speedup_chart("t", names, [1.2, 1.3, 1.1, 1.0], [1.1, 1.2, 1.0, 0.9] if latency else [None] * 4)
    labels = _axis_labels(chart)
    assert len(labels) == 4 * (1 + latency) and len(set(labels)) == len(labels), labels
    assert all(len(label) <= MAX_AXIS_LABEL for label in labels), labels
    assert labels[0].startswith("coding") and labels[-1].startswith("math")
    assert "cut to" in chart  # the legend says names were shortened


def test_bidi_overrides_never_reach_a_chart_or_the_history_page(tmp_path: Path) -> None:
    from bench.analysis import analyse_history
    from bench.records import HistoryPoint, point_table
    from bench.render import history_html, speedup_chart

    bidi = "qa\u202egnidoc\u2066x\u2069\u200f"
    chart = speedup_chart(bidi, [bidi, "b"], [1.2, 1.3], [1.1, 1.2])
    assert not _raw_control(chart), repr(chart)
    points = synthetic_points(6)
    points = [HistoryPoint(point.commit, point.branch, point.time, point.added_at, point.workload + bidi,
                           point.machine, "", point.source_digest, "", point_table(
                               [row._replace(category=bidi) if row.category == "math" else row
                                for row in point.rows])) for point in points]
    page = history_html(analyse_history(points), title="t" + bidi)
    assert not [char for char in _raw_control(page) if char not in "\t\r"], repr(_raw_control(page))
    assert "\\u202e" in page


def test_the_real_mermaid_parser_reads_charts_of_long_and_bidi_names() -> None:
    from bench.render import speedup_chart
    from tests.test_mermaid import _bodies, real_parse

    charts = [speedup_chart("t", ["coding", LONG + "one", LONG + "two"], [1.2, 1.3, 1.1], [1.1, 1.2, 1.0]),
              speedup_chart("q\u202eb", ["qa\u202egnidoc", LONG], [1.2, 1.3], [None, None])]
    bodies = [body for chart in charts for body in _bodies(chart)]
    assert len(bodies) == 2
    assert all(not kind.startswith("error") for kind in real_parse(bodies)), real_parse(bodies)
