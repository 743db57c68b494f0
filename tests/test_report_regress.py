"""Report, plots and the regression gate on synthetic runs with a known truth."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench.analysis import compare, regress
from bench.cli import main
from bench.records import Run, SampleResult, load_comparison_folder, load_run, save_run, summarize
from bench.render import write_report


def _run(rates: np.ndarray, category_of: list[str], *, accept: float | None, seed: int, path: Path) -> Run:
    rng = np.random.default_rng(seed)
    results = []
    for index, (rate, category) in enumerate(zip(rates, category_of, strict=True)):
        noisy = float(rate * np.exp(rng.normal(0, 0.02)))
        drafted = 100 if accept is not None else 0
        results.append(SampleResult(
            id=f"{category}-{index:03d}", category=category, ok=True, turns=1, latency_s=64.0 / noisy,
            predicted_per_second=noisy, prompt_per_second=500.0, outputs=(f"text {index} <b>",),
            draft_n=drafted, draft_n_accepted=int(drafted * (accept or 0.0)),
        ))
    run = Run(config={"osl": 64, "bench": "qualitative", "dataset": "categories", "url": "http://x",
                      "tags": {"mode": "ngram-mod" if accept is not None else "baseline"}},
              selected_samples=len(results), results=tuple(results), summary=tuple(summarize(results)),
              meta={"engine": "llamacpp", "harness": {"name": "speedbench", "version": "0.1.0"},
                    "acceptance": {"acceptance_length": 3.0, "per_position": [0.9, 0.7, 0.4], "server_wide": False}})
    save_run(run, path)
    return load_run(path)


@pytest.fixture
def comparison_pair(tmp_path: Path) -> tuple[Path, Path]:
    """Two comparison folders over the same 40 prompts: reference 1.5x, candidate 1.5x (A/A)."""
    rng = np.random.default_rng(0)
    categories = ["coding"] * 20 + ["qa"] * 20
    base_rates = 20 * np.exp(rng.normal(0, 0.3, 40))
    folders = []
    for name, seed in (("ref", 1), ("cand", 2)):
        folder = tmp_path / name
        folder.mkdir()
        _run(base_rates, categories, accept=None, seed=seed, path=folder / "baseline.json")
        _run(base_rates * 1.5, categories, accept=0.6, seed=seed + 10, path=folder / "speculative.json")
        folders.append(folder)
    return folders[0], folders[1]


def test_report_is_complete_and_reproducible(comparison_pair: tuple[Path, Path], tmp_path: Path) -> None:
    ref, _ = comparison_pair
    base, spec = load_run(ref / "baseline.json"), load_run(ref / "speculative.json")
    report = write_report(compare(base, spec), tmp_path / "out", title="My PR")
    text = report.read_text()
    first_line = text.splitlines()[2]  # under the title, the decision: overall decode and latency with intervals
    assert first_line.startswith("**ngram-mod vs baseline: decode 1.50x \\[1.4") and "faster" in first_line
    assert ", latency 1.50x \\[1.4" in first_line and "(40 prompts)" in first_line
    assert text.startswith("# My PR\n")
    assert "| speculative mode | baseline | ngram-mod |" in text
    assert "```\nComparison: baseline=baseline.json speculative=speculative.json\n" in text
    assert str(tmp_path) not in text  # file names only: no path of the machine it ran on
    assert "\nxychart-beta horizontal\n" in text and text.index("```mermaid") < text.index("## Paired statistics")
    assert "## Paired statistics" in text and "## Lossless check" in text
    assert "](plots/" not in text and "![" not in text  # no image link: it breaks in a pull request description
    assert "- `plots/speedup.png`: Decode and latency speedup per category" in text  # a file to attach
    for name in ("speedup", "accept_vs_speedup", "latency", "position_acceptance"):
        for suffix in ("png", "svg"):
            assert (tmp_path / "out" / "plots" / f"{name}.{suffix}").stat().st_size > 5_000
    first = {path.name: path.read_bytes() for path in (tmp_path / "out").rglob("*") if path.is_file()}
    write_report(compare(base, spec), tmp_path / "out", title="My PR")
    second = {path.name: path.read_bytes() for path in (tmp_path / "out").rglob("*") if path.is_file()}
    assert first == second


def test_report_tables_match_compare(comparison_pair: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    ref, _ = comparison_pair
    pair = ["--baseline", str(ref / "baseline.json"), "--speculative", str(ref / "speculative.json")]
    assert main(["compare", *pair]) == 0
    compare_out = capsys.readouterr().out
    assert main(["report", *pair, "--out", str(tmp_path / "r")]) == 0
    report = (tmp_path / "r" / "report.md").read_text()
    assert compare_out.replace(str(ref) + "/", "") in report


def test_regress_a_a_passes(comparison_pair: tuple[Path, Path], capsys) -> None:
    ref, cand = comparison_pair
    assert main(["regress", "--reference", str(ref), "--candidate", str(cand)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("speedbench regress: 0 regression(s)\n")
    rows = regress(load_comparison_folder(ref), load_comparison_folder(cand))
    assert "REGRESSED" not in {row.status for row in rows}
    assert {row.status for row in rows if row.category == "overall"} == {"non-inferior"}  # n=40, 2% noise


def test_regress_catches_a_planted_regression(comparison_pair: tuple[Path, Path], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    ref, cand = comparison_pair
    slow = tmp_path / "slow"
    slow.mkdir()
    shutil.copy(cand / "baseline.json", slow / "baseline.json")
    spec = load_run(cand / "speculative.json")
    results = [
        replace(result, predicted_per_second=result.predicted_per_second * 0.8, latency_s=result.latency_s / 0.8)
        if result.category == "coding" else result
        for result in spec.results
    ]
    save_run(Run(config=spec.config, selected_samples=spec.selected_samples, results=tuple(results),
                 summary=tuple(summarize(results)), meta=spec.meta), slow / "speculative.json")
    summary_file = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    assert main(["regress", "--reference", str(ref), "--candidate", str(slow)]) == 1
    out = capsys.readouterr().out
    head = out.splitlines()[0]
    assert "overall decode speedup" in head and "coding decode speedup" in head and "qa decode" not in head
    assert "in categories)" in head
    gate = regress(load_comparison_folder(ref), load_comparison_folder(slow))
    rows = {(row.category, row.metric.key): row for row in gate}
    assert rows[("coding", "decode_speedup")].ratio == pytest.approx(0.8, abs=0.02)
    assert rows[("coding", "decode_speedup")].status == "REGRESSED" and rows[("coding", "decode_speedup")].fails
    assert rows[("qa", "decode_speedup")].status == "non-inferior"
    assert rows[("coding", "accept_rate")].status == "non-inferior"  # identical counts: the exact rule
    assert "### speedbench regress: " in summary_file.read_text()
    # a looser threshold than the drop lets it pass
    assert main(["regress", "--reference", str(ref), "--candidate", str(slow), "--threshold", "0.3"]) == 0


def test_regress_on_two_runs_of_one_configuration(comparison_pair: tuple[Path, Path]) -> None:
    ref, cand = comparison_pair
    rows = regress(load_run(ref / "speculative.json"), load_run(cand / "speculative.json"))
    # one reference run cannot separate drift between runs from a change: the speed rows are withheld
    assert {row.status for row in rows if row.metric.key != "accept_rate"} == {"inconclusive"}
    assert all("reference runs" in (row.note or "") for row in rows if row.metric.key != "accept_rate")
    assert {row.metric.key for row in rows} == {"decode_rate", "latency", "accept_rate"}


@pytest.mark.parametrize("bad", ["nope", "file"])
def test_regress_bad_input_exits_2(comparison_pair: tuple[Path, Path], tmp_path: Path, bad: str, capsys) -> None:
    ref, _ = comparison_pair
    target = tmp_path / "missing" if bad == "nope" else ref / "baseline.json"
    assert main(["regress", "--reference", str(ref), "--candidate", str(target)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_report_latest_needs_results(tmp_path: Path, capsys) -> None:
    assert main(["report", "--latest", str(tmp_path)]) == 2
    assert "run 'make bench' (or 'make sweep') first" in capsys.readouterr().err


def test_hostile_category_names_cannot_break_the_report(tmp_path: Path) -> None:
    hostile = "qa\n```\n[click](https://evil.example) $\\frac$"
    results = [SampleResult(id=f"s{i}", category=hostile, ok=True, turns=1, latency_s=1.0 + i,
                            predicted_per_second=10.0 + i, outputs=("x",)) for i in range(5)]
    base = Run(config={}, selected_samples=5, results=tuple(results), summary=tuple(summarize(results)))
    report = write_report(compare(base, base), tmp_path / "out").read_text()
    fence = "````"
    assert f"{fence}\nComparison:" in report and report.count(fence) == 2
    assert "\\[click\\]" in report  # escaped in the Markdown tables
    assert (tmp_path / "out" / "plots" / "speedup.png").exists()


def test_pipeline_with_a_failing_speculative_server_exits_1_and_keeps_the_table(tmp_path: Path) -> None:
    from bench.pipeline import PipelineConfig, run_pipeline
    from bench.runner import SilentProgress
    from tests.fakeserver import FakeServer, FakeState

    good, bad = FakeServer(FakeState()), FakeServer(FakeState(fault=lambda index, body: "http_500"))
    good.start()
    bad.start()
    lines: list[str] = []
    try:
        config = PipelineConfig.build(limit=1, osl=4, category="qa,math", base_url=good.url, spec_url=bad.url,
                                      results_dir=str(tmp_path))
        code = run_pipeline(config, out=lines.append, progress=SilentProgress())
    finally:
        good.stop()
        bad.stop()
    assert code == 1
    (folder,) = tmp_path.iterdir()
    assert folder.name.endswith("-external")
    text = (folder / "comparison.txt").read_text()
    assert text.startswith("mismatch: successful samples differs")  # every speculative sample failed
    assert "\nComparison: baseline=" in text
    assert "2 samples failed" in "".join(lines)


def test_committed_sample_report_is_reproduced_byte_for_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys) -> None:
    sample = Path(__file__).resolve().parents[1] / "results" / "sample"
    for name in ("baseline.json", "speculative.json"):
        shutil.copy(sample / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    title = next(line[2:] for line in (sample / "report.md").read_text().splitlines() if line.startswith("# "))
    assert main(["report", "--baseline", "baseline.json", "--speculative", "speculative.json", "--out", "out",
                 "--title", title]) == 0
    assert (tmp_path / "out" / "report.md").read_text() == (sample / "report.md").read_text()
    capsys.readouterr()
    assert main(["compare", "--baseline", "baseline.json", "--speculative", "speculative.json"]) == 0
    assert capsys.readouterr().out in (sample / "report.md").read_text()


def test_report_refuses_a_partial_run_unless_allowed(comparison_pair: tuple[Path, Path], tmp_path: Path,
                                                      capsys) -> None:
    ref, _ = comparison_pair
    spec = load_run(ref / "speculative.json")
    partial = Run(config=spec.config, selected_samples=spec.selected_samples, results=spec.results[:30],
                  summary=tuple(summarize(spec.results[:30])), meta={**spec.meta, "interrupted": True})
    save_run(partial, tmp_path / "partial.json")
    args = ["report", "--baseline", str(ref / "baseline.json"), "--speculative", str(tmp_path / "partial.json"),
            "--out", str(tmp_path / "r")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "partial run" in err and "30 of 40 samples recorded" in err and "--allow-partial" in err
    assert not (tmp_path / "r" / "report.md").exists()
    assert main([*args, "--allow-partial"]) == 0
    report = (tmp_path / "r" / "report.md").read_text()
    assert "## Before reading the tables" in report and "interrupted, 30 of 40 samples recorded" in report


def test_regress_refuses_configurations_that_differ(comparison_pair: tuple[Path, Path], tmp_path: Path,
                                                    capsys) -> None:
    ref, cand = comparison_pair
    short = tmp_path / "short"
    short.mkdir()
    for name in ("baseline.json", "speculative.json"):
        run = load_run(cand / name)
        save_run(Run(config={**run.config, "osl": 16}, selected_samples=run.selected_samples, results=run.results,
                     summary=run.summary, meta=run.meta), short / name)
    args = ["regress", "--reference", str(ref), "--candidate", str(short)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "osl differs: reference=64 candidate=16" in err
    assert main([*args, "--allow-mismatch"]) == 0
    assert "osl differs" in capsys.readouterr().err
