"""`bench --until-decided`: interleaved rounds on two servers until the overall decode verdict is decided."""

from __future__ import annotations

from pathlib import Path

from bench.cli import main
from bench.records import load_run
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


def test_until_decided_refuses_resume(tmp_path: Path, capsys) -> None:
    assert main(["bench", "--base-url", "http://127.0.0.1:9", "--spec-url", "http://127.0.0.1:9", "--until-decided",
                 "--resume", str(tmp_path), "--quiet"]) == 2
    assert "--until-decided runs interleaved rounds in a new folder" in capsys.readouterr().err
