"""Sweeps: arms across concurrency on fake servers whose speculative speedup falls with load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import BenchError
from bench.analysis import DECODE_SPEEDUP, Estimate, crossover
from bench.cli import main
from bench.pipeline import parse_embedded_arms, parse_levels, parse_url_arms
from tests.fakeserver import DriftSchedule, FakeServer, FakeState


def _load_curve(in_flight: int) -> float:
    """Speculation's speed factor with n requests in flight: 1.8x alone, ~1.1x at 4, below 1.0x at 8."""
    return {1: 1.8, 2: 1.45, 3: 1.2, 4: 1.1}.get(in_flight, 0.8)


@pytest.fixture
def servers() -> tuple[str, str]:
    base = FakeServer(FakeState(schedule=DriftSchedule(token_delay_s=0.002, jitter=0.04, seed=1)))
    fast = FakeServer(FakeState(drafting=True, load_speed=_load_curve,
                                schedule=DriftSchedule(token_delay_s=0.002, jitter=0.04, seed=2)))
    base.start()
    fast.start()
    try:
        yield base.url, fast.url
    finally:
        base.stop()
        fast.stop()


def test_sweep_finds_where_speculation_stops_paying(servers: tuple[str, str], tmp_path: Path, capsys) -> None:
    base, fast = servers
    code = main(["sweep", "--base-url", base, "--spec-url", f"fast={fast}", "--concurrency", "1,2,4,8",
                 "--category", "coding,qa,rag,summarization", "--limit", "4", "--osl", "16",
                 "--results-dir", str(tmp_path), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    (folder,) = tmp_path.iterdir()
    assert {path.name for path in folder.iterdir()} >= {"c1", "c2", "c4", "c8", "sweep.md", "sweep.json", "plots"}
    lines = out.splitlines()
    crossover_row = lines[lines.index("Crossover (speculation stops paying)") + 3]
    # per-request decode: faster at low load; at 8 (true 0.8x) either shown to stop paying or left undetermined,
    # never a crossover placed where an interval merely reaches 1.00x
    assert crossover_row.startswith("fast  ") and "faster up to" in crossover_row
    assert "stops paying at 8" in crossover_row or "undetermined above" in crossover_row
    found = json.loads((folder / "sweep.json").read_text())["crossover"]["fast"]
    assert found["decode"] in (8, None) and found["throughput"] in (8, None)
    table = [line for line in lines if line.startswith("fast  ") and "[" in line and "up to" not in line]
    assert len(table) == 4 and all(line.count("[") >= 2 for line in table)  # decode and latency intervals everywhere
    assert "faster" in table[0] and "slower" in table[3]
    # throughput is paired by lock-step batch: 16 samples at concurrency 8 are 2 batches, too few for an interval
    assert "not enough data" in table[3]
    # every level shows the load each arm achieved beside the one asked for
    load = json.loads((folder / "sweep.json").read_text())["load"]
    assert sorted(load, key=int) == ["1", "2", "4", "8"]
    assert all(set(level["in_flight_mean"]) == {"baseline", "fast"} for level in load.values())
    assert load["1"]["in_flight_mean"]["baseline"] == pytest.approx(1.0)
    assert all(value <= 8 + 1e-9 for value in load["8"]["in_flight_mean"].values())
    assert "concurrency 8: in flight: baseline " in out and "### Load achieved" in (folder / "sweep.md").read_text()
    assert (folder / "plots" / "sweep_speedup.png").stat().st_size > 10_000
    # every cell's files are ordinary run files: compare reads them as they are
    assert main(["compare", "--baseline", str(folder / "c8" / "baseline.json"),
                 "--speculative", str(folder / "c8" / "fast.json")]) == 0
    assert capsys.readouterr().out.startswith("Comparison: baseline=")
    # report and gate accept the sweep folder
    assert main(["report", "--sweep", str(folder)]) == 0
    report = (folder / "report.md").read_text()
    assert "## Sweep" in report and "### fast at concurrency 8" in report
    assert report.count("```mermaid") == 2 and 'line "fast" [' in report  # throughput and decode per arm
    assert "![" not in report and "- `plots/sweep_speedup.png`" in report  # attachments, not broken links
    assert main(["regress", "--reference", str(folder), "--candidate", str(folder), "--allow-mismatch"]) == 0
    gate = capsys.readouterr().out
    assert "c8/fast: overall" in gate and "REGRESSED" not in gate.splitlines()[0]


def test_resume_keeps_complete_levels(servers: tuple[str, str], tmp_path: Path, capsys) -> None:
    base, fast = servers
    args = ["sweep", "--base-url", base, "--spec-url", f"fast={fast}", "--concurrency", "1,2",
            "--category", "qa", "--limit", "2", "--osl", "8", "--results-dir", str(tmp_path), "--quiet"]
    assert main(args) == 0
    (folder,) = tmp_path.iterdir()
    capsys.readouterr()
    assert main([*args, "--resume", str(folder)]) == 0
    assert "concurrency 1 already complete" in capsys.readouterr().out


def _estimate(point: float, low: float, high: float) -> Estimate:
    return Estimate(DECODE_SPEEDUP, point, low, high, "")


def test_crossover_rules() -> None:
    levels = [1, 2, 4, 8]
    above = [_estimate(1.5, 1.3, 1.7)] * 4
    assert crossover(levels, above).text == "faster at every level up to 8"
    assert crossover(levels, above).stops_at is None
    falling = [_estimate(1.5, 1.3, 1.7), _estimate(1.2, 1.1, 1.3), _estimate(1.02, 0.97, 1.07),
               _estimate(0.8, 0.7, 0.9)]
    # at 4 the interval reaches 1.00x but also 1.07x: not evidence that speculation stopped paying
    assert crossover(levels, falling).text == "faster up to 2; undetermined above ([0.97, 1.07] at 4)"
    assert not crossover(levels, falling).established
    stops = [*falling[:2], _estimate(0.95, 0.9, 1.01), falling[3]]
    assert crossover(levels, stops).text == "stops paying at 4 ([0.90, 1.01] at or below 1.02x); faster up to 2"
    assert crossover(levels, stops).stops_at == 4
    unknown = [falling[0], _estimate(1.2, float("nan"), float("nan")), falling[2], falling[3]]
    assert crossover(levels, unknown).text == "faster up to 1; undetermined above (no interval at 2)"
    assert crossover(levels, [_estimate(0.9, 0.8, 0.99), *above[1:]]).stops_at == 1


def test_arm_and_level_parsing() -> None:
    arms = parse_embedded_arms("ngram-mod:draft_max=4,ngram-mod:draft_max=16,ngram-simple")
    assert [(arm.mode, arm.draft_max) for arm in arms] == [("ngram-mod", 4), ("ngram-mod", 16), ("ngram-simple", None)]
    assert len({arm.name for arm in arms}) == 3
    assert parse_levels("8,1,2,4") == (1, 2, 4, 8)
    assert [arm.name for arm in parse_url_arms(["a=http://x", "b=http://y"])] == ["a", "b"]
    for bad in ("nope", "ngram-mod:n_max=4", "ngram-mod:draft_max=0"):
        with pytest.raises(BenchError):
            parse_embedded_arms(bad)
    for bad in ("", "0,1", "a,b"):
        with pytest.raises(BenchError):
            parse_levels(bad)
    with pytest.raises(BenchError):
        parse_url_arms(["baseline=http://x"])


def test_sweep_cell_table_is_one_holm_family() -> None:
    from bench.analysis import THROUGHPUT_SPEEDUP, cell_family

    class _Comparison:
        threshold = 0.02
        stats = ()

    class _Cell:
        def __init__(self, arm: str, level: int, p: float) -> None:
            self.arm, self.concurrency, self.comparison = arm, level, _Comparison()
            self.throughput = Estimate(THROUGHPUT_SPEEDUP, 1.1, 1.01, 1.2, "better", p_value=p, df=9.0)

    cells = [_Cell("a", 1, 0.001), _Cell("a", 2, 0.04), _Cell("b", 1, 0.3)]
    table = cell_family(cells)
    first, second = table[("a", 1, "throughput_speedup")], table[("a", 2, "throughput_speedup")]
    assert first.confidence == pytest.approx(1 - 0.05 / 3) and first.low < 1.01
    assert second.confidence == pytest.approx(1 - 0.05 / 2) and second.verdict == "no significant change"


def test_resume_with_another_osl_is_refused_before_anything_runs(servers: tuple[str, str], tmp_path: Path,
                                                                  capsys) -> None:
    base, fast = servers
    args = ["sweep", "--base-url", base, "--spec-url", f"fast={fast}", "--concurrency", "1",
            "--category", "qa", "--limit", "1", "--results-dir", str(tmp_path), "--quiet"]
    assert main([*args, "--osl", "16"]) == 0
    (folder,) = tmp_path.iterdir()
    before = sorted(path.name for path in folder.rglob("*"))
    capsys.readouterr()
    assert main([*args, "--osl", "32", "--resume", str(folder), "--concurrency", "1,2"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "cannot resume the sweep: osl was 16, now 32" in error[0]
    assert sorted(path.name for path in folder.rglob("*")) == before  # no new level at the new osl


def test_no_arm_slower_than_the_baseline_is_named_best() -> None:
    from bench.analysis import THROUGHPUT_SPEEDUP, best_arms

    class _Cell:
        def __init__(self, arm: str, level: int, point: float) -> None:
            self.arm, self.concurrency = arm, level
            self.throughput = Estimate(THROUGHPUT_SPEEDUP, point, point - 0.05, point + 0.05, "no significant change")

    cells = [_Cell("k8", 1, 0.97), _Cell("k16", 1, 0.95), _Cell("k8", 2, 1.10), _Cell("k16", 2, 0.99)]
    first, second = best_arms(cells, [1, 2])
    assert (first.arm, first.speedup, first.runner_up) == ("baseline", 1.0, "k8")
    assert first.margin == pytest.approx(1 / 0.97 - 1)
    assert (second.arm, second.runner_up) == ("k8", "k16")


def test_make_report_after_make_sweep_reports_the_sweep_with_its_decision(servers: tuple[str, str], tmp_path: Path,
                                                                          capsys) -> None:
    base, fast = servers
    assert main(["sweep", "--base-url", base, "--spec-url", f"fast={fast}", "--concurrency", "1,2",
                 "--category", "qa,coding", "--limit", "3", "--osl", "8", "--results-dir", str(tmp_path),
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert printed.strip().splitlines()[-1].startswith("speedbench: decision: c=1: ")
    assert main(["report", "--latest", str(tmp_path)]) == 0  # what `make report` runs
    (folder,) = tmp_path.iterdir()
    lines = (folder / "report.md").read_text().splitlines()
    assert lines[0].startswith("# ") and lines[2].startswith("**sweep decision: c=1: ")
    axes = [line for line in lines if line.strip().startswith('y-axis "speedup (x)"')]
    assert axes and all(not line.split('"')[2].strip().startswith("0 ") for line in axes)  # not from 0: around 1.0x


def test_the_sweep_plot_titles_fit_over_their_axes(servers: tuple[str, str], tmp_path: Path, monkeypatch) -> None:
    import matplotlib.pyplot as plt

    from bench.pipeline import load_sweep
    from bench.render import plot_sweep

    base, fast = servers
    assert main(["sweep", "--base-url", base, "--spec-url", f"fast={fast}", "--concurrency", "1,2",
                 "--category", "qa", "--limit", "2", "--osl", "8", "--results-dir", str(tmp_path), "--quiet"]) == 0
    (folder,) = tmp_path.iterdir()
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figures plot_sweep would close
    plot_sweep(load_sweep(folder), tmp_path / "plots")
    speedup = figures[0]
    speedup.canvas.draw()
    renderer = speedup.canvas.get_renderer()
    for axis in speedup.axes[:2]:
        title, box = axis.title.get_window_extent(renderer), axis.get_window_extent(renderer)
        assert box.x0 - 1 <= title.x0 and title.x1 <= box.x1 + 1, axis.get_title()  # never cut at the edge
        assert "stops paying" in axis.get_title()
    for figure in figures:
        figure.clf()
