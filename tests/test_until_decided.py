"""`bench --until-decided`: interleaved rounds on two servers until the overall decode verdict is decided."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bench import BenchError
from bench.analysis import compare, sample_until_decided, with_record
from bench.cli import main
from bench.records import SCHEMA_VERSION, load_run, save_run
from bench.render import decision_text, render_json, render_markdown, render_report, render_text
from tests.fakeserver import DriftSchedule, FakeServer, FakeState
from tests.test_sequential import _rounds


def _servers(spec_speed: float) -> tuple[FakeServer, FakeServer]:
    schedule = DriftSchedule(token_delay_s=0.002, jitter=0.03, seed=3)
    return (FakeServer(FakeState(schedule=schedule)),
            FakeServer(FakeState(schedule=schedule, speed=spec_speed, drafting=True)))


def test_until_decided_stops_early_on_a_clear_speedup_and_says_why(tmp_path: Path, capsys) -> None:
    base, spec = _servers(1.5)
    base.start()
    spec.start()
    try:
        code = main(["bench", "--base-url", base.url, "--spec-url", spec.url, "--until-decided", "--limit", "6",
                     "--category", "coding,qa,math,rag,writing", "--osl", "16", "--results-dir", str(tmp_path),
                     "--quiet"])
    finally:
        base.stop()
        spec.stop()
    out = capsys.readouterr().out
    assert code == 0, out
    assert "sampling until decided" in out and "speedbench: decided faster after " in out
    assert "alpha spending" in out
    assert out.count("speedbench: decided faster after ") == 1  # the stopping look once, with its method
    (folder,) = tmp_path.iterdir()
    baseline = load_run(folder / "baseline.json")
    assert len(baseline.results) < 30  # stopped before the limit of 6 rounds x 5 categories
    assert (folder / "rounds" / "1" / "baseline.json").exists() and (folder / "comparison.txt").exists()
    decision = next(line for line in out.splitlines() if line.startswith("speedbench: decision: "))
    assert "faster (sequential test, " in decision  # the stopping look's verdict, not the fixed 95% row's
    _every_output_reads_the_stopping_look(folder, tmp_path, capsys)


def _every_output_reads_the_stopping_look(folder: Path, tmp_path: Path, capsys) -> None:
    """The run files carry the look; comparison.txt/.md/.json, `compare` and `report` from the files and `regress`
    all show the same stopping look, and no fixed 95% verdict on the overall decode row."""
    recorded = json.loads((folder / "speculative.json").read_text())
    assert recorded["schema_version"] == SCHEMA_VERSION and recorded["sequential"]["looks"]
    assert json.loads((folder / "baseline.json").read_text())["sequential"] == recorded["sequential"]
    last = recorded["sequential"]["looks"][-1]
    assert last["decision"] == "faster"
    level = f"at {last['confidence']:.2%}".replace("0%", "%")
    written = json.loads((folder / "comparison.json").read_text())
    sequential = written["sequential"]
    assert sequential["verdict"] == "faster" and sequential["looks_used"] == len(recorded["sequential"]["looks"])
    assert (sequential["low"], sequential["high"], sequential["level"]) == (last["low"], last["high"], last["level"])
    assert sequential["samples"] == last["n"] and sequential["limit_samples"] == 30 and sequential["limit_rounds"] == 6
    overall = next(row for row in written["stats"] if row["primary"])
    assert overall["decode_speedup_confidence"] == pytest.approx(last["confidence"])
    assert overall["latency_speedup_confidence"] == pytest.approx(last["confidence"])
    text = (folder / "comparison.txt").read_text()
    row = next(line for line in text.splitlines() if line.startswith("overall (primary)"))
    assert "faster (sequential test)" in row and level in row
    assert "note: sequential: sampled until decided" in text
    assert "sequential: sampled until decided" in (folder / "comparison.md").read_text()

    files = ["--baseline", str(folder / "baseline.json"), "--speculative", str(folder / "speculative.json")]
    for fmt in ("text", "markdown", "json"):
        assert main(["compare", *files, "--stats", "--format", fmt]) == 0
        shown = capsys.readouterr().out
        if fmt == "json":
            assert json.loads(shown)["sequential"] == sequential  # the same look, re-read from the run files
        else:
            assert "faster (sequential test)" in shown and "sampled until decided" in shown
    assert main(["report", *files, "--out", str(tmp_path / "report")]) == 0
    report = (tmp_path / "report" / "report.md").read_text()
    assert report.splitlines()[2].startswith("**") and "faster (sequential test, " in report.splitlines()[2]
    assert "sequential-test intervals" in report.splitlines()[4] and "faster (sequential test)" in report
    assert "stopping look" in report.split("</details>", 1)[0]  # the long legend, in its details block
    capsys.readouterr()
    main(["regress", "--reference", str(folder), "--candidate", str(folder), "--allow-mismatch"])
    gated = capsys.readouterr().out
    assert "the reference was sampled until decided" in gated and "the candidate was sampled until decided" in gated


def test_the_rounds_are_one_run_that_started_from_the_first_rounds_server_state(tmp_path: Path, capsys) -> None:
    base, spec = _servers(1.0)  # no speedup: undecided after round 1, so round 2 runs on the kept servers
    base.start()
    spec.start()
    try:
        code = main(["bench", "--base-url", base.url, "--spec-url", spec.url, "--until-decided", "--limit", "2",
                     "--category", "coding,qa", "--osl", "8", "--results-dir", str(tmp_path), "--quiet"])
    finally:
        base.stop()
        spec.stop()
    assert code == 0, capsys.readouterr().out
    (folder,) = tmp_path.iterdir()
    later = load_run(folder / "rounds" / "2" / "speculative.json").info.server_start
    assert later is not None and later.state == "drafter warm"  # round 2 starts on what round 1 drafted
    start = load_run(folder / "speculative.json").info.server_start
    assert start is not None and start.state == "fresh"  # the rounds' run started from round 1's state


def test_the_decision_line_gives_an_undecided_stopping_look_and_its_level() -> None:
    decided = sample_until_decided(_rounds(1.0, 2), rounds=10, per_round=11)
    comparison = compare(decided.baseline, decided.speculative)
    look = decided.last
    text = decision_text([comparison])
    assert f"undecided at the limit (sequential test, {look.confidence:.1%} interval)" in text
    assert f"latency {comparison.stats[-1].latency.point:.2f}x" in text and f"({look.confidence:.1%} interval)" in text


def test_until_decided_refuses_resume(tmp_path: Path, capsys) -> None:
    assert main(["bench", "--base-url", "http://127.0.0.1:9", "--spec-url", "http://127.0.0.1:9", "--until-decided",
                 "--resume", str(tmp_path), "--quiet"]) == 2
    assert "--until-decided runs interleaved rounds in a new folder" in capsys.readouterr().err


def _without_record(run):
    """The run as a fixed-size run file would hold it (no sequential record)."""
    return dataclasses.replace(run, meta=dataclasses.replace(run.meta, sequential=None))


def test_a_fixed_95_faster_never_shows_beside_an_undecided_stopping_look(tmp_path: Path) -> None:
    """A true 1.05x sampled to the limit: a fixed 95% row would say faster [1.00, ...]; every output of the
    comparison, also re-read from saved run files, says what the stopping look says: undecided, at its level."""
    decided = sample_until_decided(_rounds(1.05, 1), rounds=10, per_round=11)
    assert decided.last.decision == "undecided"
    fixed = compare(_without_record(decided.baseline), _without_record(decided.speculative))
    assert fixed.stats[-1].decode.word == "faster"  # the contradiction this guards against
    for arm, run in (("baseline", decided.baseline), ("speculative", decided.speculative)):
        save_run(run, tmp_path / f"{arm}.json")
    comparison = compare(load_run(tmp_path / "baseline.json"), load_run(tmp_path / "speculative.json"))
    overall = comparison.stats[-1]
    assert overall.decode.word == "undecided" and overall.decode.confidence == pytest.approx(decided.last.confidence)
    assert (overall.decode.low, overall.decode.high) == pytest.approx((decided.last.low, decided.last.high))
    assert overall.latency.confidence == pytest.approx(decided.last.confidence)
    for text in (render_text(comparison), render_markdown(comparison), render_report(comparison)):
        row = next(line for line in text.splitlines() if "overall (primary)" in line)
        assert "undecided (sequential test)" in row and "faster" not in row
        assert "a fixed 95% interval would not" in text
    payload = json.loads(render_json(comparison))
    assert payload["sequential"]["verdict"] == "undecided" and payload["sequential"]["looks_used"] == 10
    assert payload["sequential"]["samples"] == 110 == payload["sequential"]["limit_samples"]
    assert payload["family"]["alpha"] == pytest.approx(decided.last.level)
    assert "decode 1.0" in decision_text([comparison]) and "undecided at the limit" in decision_text([comparison])


def test_an_interrupted_run_spends_what_is_left_of_the_budget_and_says_so() -> None:
    decided = sample_until_decided(_rounds(1.05, 1), rounds=10, per_round=11)
    cut = dataclasses.replace(decided.stop, looks=decided.stop.looks[:4])  # the run stopped during round 5
    comparison = compare(with_record(decided.baseline, cut), with_record(decided.speculative, cut))
    final = comparison.sequential.last
    assert len(comparison.sequential.looks) == 5 and final.decision != "continue"
    assert final.level == pytest.approx(0.05 - sum(look.level for look in cut.looks))
    assert any("interrupted after 4 look(s)" in note for note in comparison.sequential_notes)
    assert "interrupted after 4 look(s)" in render_text(comparison)


def test_runs_that_disagree_about_the_record_say_so() -> None:
    decided = sample_until_decided(_rounds(1.5, 1), rounds=10, per_round=11)
    comparison = compare(_without_record(decided.baseline), decided.speculative)
    assert comparison.sequential == decided.stop
    assert comparison.sequential_notes and "the baseline run has none" in comparison.sequential_notes[0]


def test_files_that_lost_samples_since_the_stopping_look_are_refused_naming_the_file(tmp_path: Path) -> None:
    decided = sample_until_decided(_rounds(1.5, 1), rounds=10, per_round=11)
    fewer = dataclasses.replace(decided.speculative, results=decided.speculative.results[:-3])
    save_run(decided.baseline, tmp_path / "baseline.json")
    save_run(fewer, tmp_path / "speculative.json")
    with pytest.raises(BenchError, match=r"speculative\.json: its sequential record disagrees with its samples"):
        compare(load_run(tmp_path / "baseline.json"), load_run(tmp_path / "speculative.json"), threshold=0.05)


def test_a_different_threshold_is_named_beside_the_stopping_look() -> None:
    decided = sample_until_decided(_rounds(1.5, 1), rounds=10, per_round=11)
    comparison = compare(decided.baseline, decided.speculative, threshold=0.05)
    overall = comparison.stats[-1]
    assert (overall.decode.low, overall.decode.high) == (decided.last.low, decided.last.high)
    assert "its own threshold (2%); the other rows use 5%" in " ".join(comparison.sequential_notes)


def _forged(stop, **changes):
    """The record with its last look changed (what an edited run file holds)."""
    return dataclasses.replace(stop, looks=(*stop.looks[:-1], dataclasses.replace(stop.looks[-1], **changes)))


def _save_pair(folder: Path, baseline, speculative, stop) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = (folder / "baseline.json", folder / "speculative.json")
    for path, run in zip(paths, (baseline, speculative), strict=True):
        save_run(with_record(run, stop), path)
    return paths


def test_a_forged_look_in_both_run_files_of_an_a_a_pair_is_refused(tmp_path: Path, capsys) -> None:
    decided = sample_until_decided(_rounds(1.0, 2), rounds=2, per_round=11)
    forged = _forged(decided.stop, point=2.5, low=2.2, high=2.8, decision="faster")
    base, spec = _save_pair(tmp_path, decided.baseline, decided.speculative, forged)
    with pytest.raises(BenchError, match=r"speculative\.json: its sequential record disagrees with its samples"):
        compare(load_run(base), load_run(spec))
    assert main(["compare", "--baseline", str(base), "--speculative", str(spec), "--stats"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("speedbench: error")]
    assert len(errors) == 1 and "speculative.json" in errors[0] and "2.5x" in errors[0]


def test_an_edited_last_look_of_an_undecided_run_is_refused(tmp_path: Path) -> None:
    decided = sample_until_decided(_rounds(1.0, 2), rounds=3, per_round=11)
    assert decided.last.decision in ("undecided", "equivalent")
    forged = _forged(decided.stop, point=3.0, low=2.5, high=3.5, decision="faster")
    base, spec = _save_pair(tmp_path, decided.baseline, decided.speculative, forged)
    with pytest.raises(BenchError, match="look 3 reads 3x"):
        compare(load_run(base), load_run(spec))


def test_a_forged_decision_or_level_is_not_trusted(tmp_path: Path) -> None:
    decided = sample_until_decided(_rounds(1.0, 2), rounds=3, per_round=11)
    last = decided.last
    said_faster = _forged(decided.stop, decision="faster")  # the point and interval kept: only the verdict edited
    comparison = compare(with_record(decided.baseline, said_faster), with_record(decided.speculative, said_faster))
    assert comparison.stats[-1].decode.word != "faster" and comparison.sequential.last.decision == last.decision
    assert any("the record said faster" in note for note in comparison.sequential_notes)
    spent = _forged(decided.stop, level=0.001)
    with pytest.raises(BenchError, match=r"look 3 spent 0\.1000%"):
        compare(with_record(decided.baseline, spent), with_record(decided.speculative, spent))
    fewer_rounds = dataclasses.replace(decided.stop, rounds=1, max_samples=11)
    with pytest.raises(BenchError, match="looks in a design of 1 rounds"):
        compare(with_record(decided.baseline, fewer_rounds), with_record(decided.speculative, fewer_rounds))
