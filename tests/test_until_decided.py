"""`bench --until-decided`: interleaved rounds on two servers until the overall decode verdict is decided."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bench.analysis import Look, compare
from bench.cli import main
from bench.records import load_run
from bench.render import decision_text
from tests.fakeserver import DriftSchedule, FakeServer, FakeState


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
    (folder,) = tmp_path.iterdir()
    baseline = load_run(folder / "baseline.json")
    assert len(baseline.results) < 30  # stopped before the limit of 6 rounds x 5 categories
    assert (folder / "rounds" / "1" / "baseline.json").exists() and (folder / "comparison.txt").exists()
    decision = next(line for line in out.splitlines() if line.startswith("speedbench: decision: "))
    assert "faster (sequential test, " in decision  # the stopping look's verdict, not the fixed 95% row's

    # Under optional stopping the fixed 95% row is no verdict: an undecided look is what the decision says.
    comparison = compare(baseline, load_run(folder / "speculative.json"))
    undecided = Look(n=30, level=0.02, point=1.3, low=0.97, high=1.7, decision="undecided")
    text = decision_text([dataclasses.replace(comparison, sequential=undecided)])
    assert "decode 1.30x [0.97, 1.70] undecided at the limit (sequential test, 98.0% interval)" in text
    assert "decode 1.30x [0.97, 1.70] undecided" not in decision_text([comparison])


def test_until_decided_refuses_resume(tmp_path: Path, capsys) -> None:
    assert main(["bench", "--base-url", "http://127.0.0.1:9", "--spec-url", "http://127.0.0.1:9", "--until-decided",
                 "--resume", str(tmp_path), "--quiet"]) == 2
    assert "--until-decided runs interleaved rounds in a new folder" in capsys.readouterr().err
