"""`speedbench tune` on servers whose truth is known (tests/fake_truth.py started by --base-cmd/--spec-cmd)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench.cli import main
from tests.fake_truth import DEFAULT_TRUTH, true_speedup

FAKE = Path(__file__).with_name("fake_truth.py")
GRID = (1, 2, 4, 8)
COUNTS = {"code": 16, "math": 16, "chat": 8}


def _dataset(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.jsonl"
    rows = [{"question_id": f"{category}-{index}", "category": category,
             "turns": [f"[cat={category}] question number {index} about {category}"]}
            for category, count in COUNTS.items() for index in range(count)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _best(categories: dict[str, int], concurrency: int) -> int:
    """The grid's true best (0 when no K beats the baseline) for a mix of categories (geometric mean)."""
    import math

    def overall(k: int) -> float:
        logs = sum(n * math.log(true_speedup(DEFAULT_TRUTH, category, k, concurrency))
                   for category, n in categories.items())
        return math.exp(logs / sum(categories.values()))

    best = max(GRID, key=overall)
    return best if overall(best) > 1.02 else 0


def _commands() -> list[str]:
    base = f"{sys.executable} {FAKE} --port {{port}} --concurrency {{concurrency}}"
    return ["--base-cmd", base, "--spec-cmd", base + " --draft-max {draft_max}"]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("tune")
    code = main(["tune", *_commands(), "--draft-max", ",".join(map(str, GRID)), "--concurrency", "1,8",
                 "--dataset", str(_dataset(tmp_path)), "--limit", "16", "--osl", "512",
                 "--results-dir", str(tmp_path), "--quiet"])
    assert code == 0
    return next(tmp_path.glob("*-tune-ngram-mod"))


def test_tune_picks_the_true_best_overall_per_category_and_per_concurrency(tuned: Path) -> None:
    data = json.loads((tuned / "tune.json").read_text())
    assert set(data) == {"recommendation", "picks", "configs", "load"}
    for level in ("1", "8"):  # every level shows the load each arm ran at, beside the one asked for
        load = data["load"][level]
        assert load["asked"] == int(level) and load["in_flight_mean"]["baseline"] > 0
        assert all(0 < value <= int(level) + 1e-9 for value in load["in_flight_mean"].values())
    text = (tuned / "tune.md").read_text()
    assert "concurrency 8 (in flight: baseline " in text
    recommendation = data["recommendation"]
    assert recommendation["overall"] == _best(COUNTS, 1) == 4
    assert recommendation["per_category"] == {category: _best({category: 1}, 1) for category in COUNTS}
    assert recommendation["per_category"]["chat"] == 0  # no K pays in chat
    assert recommendation["per_concurrency"] == {"1": _best(COUNTS, 1), "8": _best(COUNTS, 8)}
    assert recommendation["per_concurrency"]["8"] == 0  # no K pays at concurrency 8


def test_the_model_guided_budget_measures_part_of_the_grid_and_its_predictions_match(tuned: Path) -> None:
    measured = sorted(int(path.name.split("-")[1]) for path in (tuned / "c1").iterdir())
    # the extremes, then the predicted best (the budget of 3 ends there), then the best's neighbour 2 beyond the
    # budget: every reported pick is proven over configurations measured for it, and tune.md says what was spent
    assert measured == [1, 2, 4, 8]
    rows = [row for row in json.loads((tuned / "tune.json").read_text())["configs"]
            if row["category"] == "overall" and row["concurrency"] == 1]
    assert {row["draft_max"] for row in rows} == set(GRID)
    assert "beyond the budget" in (tuned / "tune.md").read_text()
    picks = json.loads((tuned / "tune.json").read_text())["picks"]
    assert all(pick["proven"] for pick in picks)
    for row in rows:
        if row["measured"] is not None:
            assert row["predicted"] == pytest.approx(row["measured"], rel=0.05)
            assert row["low"] < row["measured"] < row["high"]
    text = (tuned / "tune.md").read_text()
    assert text.startswith("## Which draft length to ship")
    assert "predicted before they were measured" in text and "cost(K) = " in text


def test_every_configuration_keeps_its_run_files_and_server_output(tuned: Path) -> None:
    folder = tuned / "c1" / "draft_max-4"
    assert {"baseline.json", "draft_max-4.json", "baseline.log", "spec.log"} <= {p.name for p in folder.iterdir()}
    assert (tuned / "plots" / "tune.png").stat().st_size > 5_000
    assert main(["compare", "--baseline", str(folder / "baseline.json"),
                 "--speculative", str(folder / "draft_max-4.json"), "--stats"]) == 0


def _running(marker: str) -> list[str]:
    """Command lines of live processes that mention `marker`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in text and "pytest" not in text:
            found.append(text)
    return found


def test_every_server_process_group_is_ended(tuned: Path) -> None:
    assert _running(str(FAKE)) == []


def test_resume_keeps_every_finished_configuration_and_decides_the_same(tuned: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    before = (tuned / "tune.json").read_text()
    (tuned / "tune.json").unlink()
    assert main(["tune", *_commands(), "--draft-max", ",".join(map(str, GRID)), "--concurrency", "1,8",
                 "--dataset", str(next(tuned.parent.glob("prompts.jsonl"))), "--limit", "16", "--osl", "512",
                 "--resume", str(tuned), "--quiet"]) == 0
    out = capsys.readouterr().out
    finished = len(list(tuned.glob("c*/draft_max-*")))
    assert "starting" not in out and out.count("already complete") == finished >= 6
    assert (tuned / "tune.json").read_text() == before


def test_until_decided_samples_rounds_per_configuration(tmp_path: Path) -> None:
    assert main(["tune", *_commands(), "--draft-max", "1,8", "--until-decided", "--category", "code",
                 "--dataset", str(_dataset(tmp_path)), "--limit", "8", "--osl", "512",
                 "--results-dir", str(tmp_path), "--quiet"]) == 0
    folder = next(tmp_path.glob("*-tune-ngram-mod")) / "c1" / "draft_max-8"
    run = json.loads((folder / "draft_max-8.json").read_text())
    assert run["sequential"]["looks"]  # the stopping rule's record
    assert (folder / "rounds" / "1" / "baseline.json").exists()
    assert len(run["results"]) < 8  # decided before the limit: code at K=8 is far faster


def test_a_server_that_never_got_its_draft_length_is_reported(tmp_path: Path) -> None:
    base = f"{sys.executable} {FAKE} --port {{port}}"
    assert main(["tune", "--base-cmd", base, "--spec-cmd", base + " --draft-max 8 --ignored {draft_max}",
                 "--draft-max", "1,2", "--category", "code", "--dataset", str(_dataset(tmp_path)), "--limit", "5",
                 "--osl", "512", "--results-dir", str(tmp_path), "--quiet"]) == 0
    text = (next(tmp_path.glob("*-tune-ngram-mod")) / "tune.txt").read_text()
    assert "the draft_max=1 server drafted 8.0 tokens per draft" in text


def test_the_schedule_and_flags_follow_the_picks(tuned: Path) -> None:
    text = (tuned / "tune.txt").read_text()
    assert "[[1, 7, 4], [8, 8, 0]]" in text
    assert "--spec-type ngram-mod --spec-ngram-mod-n-max 4" in text


@pytest.mark.parametrize(("argv", "message"), [
    (["--base-cmd", "x {port}"], "need --spec-cmd"),
    (["--spec-cmd", "x {port}"], "must contain {draft_max}"),
    (["--draft-max", "0,2"], "draft lengths >= 1"),
    (["--draft-max", "1-1000000000"], "at most 1024"),  # a range too long to build
    (["--draft-max", "2," + "9" * 5000], "at most 1024"),
    (["--spec", "eagle9"], "server knows"),
    (["--base-cmd", "x {port} {nope}", "--spec-cmd", "x {port} {draft_max}"], "placeholders"),
    (["--base-cmd", "x", "--spec-cmd", "x {port} {draft_max}"], "has no {port}"),
])
def test_bad_options_are_one_line_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    assert main(["tune", *argv, "--results-dir", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_a_secret_in_a_server_command_never_reaches_the_refusal(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    for flag in ("--api-key sk-abcdef1234567890", "--api-key=sk-abcdef1234567890"):
        assert main(["tune", "--base-cmd", f"srv {flag} {{port}} {{nope}}", "--spec-cmd", "x {port} {draft_max}",
                     "--results-dir", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert "placeholders" in err and "sk-abcdef1234567890" not in err, err


def test_a_server_command_that_never_answers_is_ended_and_reported(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    marker = f"never-answers-{tmp_path.name}"
    sleeper = f"{sys.executable} -c 'import time; time.sleep(60)' {{port}} {marker}"
    assert main(["tune", "--base-cmd", sleeper, "--spec-cmd", sleeper + " {draft_max}", "--draft-max", "2",
                 "--ready-timeout", "1", "--dataset", str(_dataset(tmp_path)), "--limit", "1",
                 "--results-dir", str(tmp_path), "--quiet"]) == 2
    assert "did not answer" in capsys.readouterr().err
    assert _running(marker) == []


def test_tune_md_fits_githubs_width(tuned: Path, tmp_path: Path) -> None:
    from tests.browser import chromium_or_skip
    from tests.test_report_width import _too_wide

    chromium_or_skip()
    assert _too_wide((tuned / "tune.md").read_text(), tmp_path / "tune.html") == []
