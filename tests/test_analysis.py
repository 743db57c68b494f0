"""Analysis: reference aggregation, paired statistics proven on synthetic truth, lossless check, CV."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench import BenchError
from bench.analysis import (
    DECODE_SPEEDUP,
    LATENCY,
    bootstrap_geomean_ci,
    first_difference,
    lossless_check,
    paired_stats,
    repeat_cv,
    stream_latency_stats,
    verdict,
)
from bench.records import Run, SampleResult, summarize

TRIALS = 1000
SAMPLES = 80


def _result(sample: str, category: str, tps: float, latency: float, *, repeat: int = 0, ok: bool = True,
            output: str = "same", drafted: int = 0, accepted: int = 0) -> SampleResult:
    return SampleResult(id=sample, category=category, ok=ok, turns=1, latency_s=latency,
                        predicted_per_second=tps, prompt_per_second=100.0, repeat=repeat, outputs=(output,),
                        draft_n=drafted, draft_n_accepted=accepted)


def _run(results: list[SampleResult], config: dict | None = None) -> Run:
    return Run(config=config or {}, selected_samples=len(results), results=tuple(results),
               summary=tuple(summarize(results)))


def _synthetic_pair(rng: np.random.Generator, truth: float, n: int, effect_sigma: float, noise_sigma: float):
    """Per-sample decode rates with a true geometric-mean speedup `truth` and realistic noise."""
    base = 20.0 * np.exp(rng.normal(0.0, 0.3, n))  # prompts differ a lot; pairing removes it
    spec = base * truth * np.exp(rng.normal(0.0, effect_sigma, n)) * np.exp(rng.normal(0.0, noise_sigma, n))
    return base, spec


def test_summarize_follows_the_reference() -> None:
    results = [
        _result("a", "x", 10.0, 1.0, drafted=10, accepted=5),
        _result("b", "x", 20.0, 3.0, drafted=30, accepted=5),
        _result("c", "y", 99.0, 9.0, ok=False),
    ]
    rows = summarize(results)
    assert [row["category"] for row in rows] == ["x", "y", "overall"]
    assert rows[0]["avg_pred_t_s"] == 15.0 and rows[0]["avg_latency"] == 2.0
    assert rows[0]["accept_rate"] == 0.25
    assert rows[1]["requests"] == 0 and rows[1]["failed"] == 1 and rows[1]["avg_pred_t_s"] is None
    assert rows[1]["accept_rate"] is None
    assert rows[2]["requests"] == 2 and rows[2]["failed"] == 1


@pytest.mark.parametrize("truth", [1.00, 1.05, 1.20])
def test_bootstrap_ci_covers_the_truth_93_to_97_percent(truth: float) -> None:
    rng = np.random.default_rng(1234)
    covered = 0
    for trial in range(TRIALS):
        base, spec = _synthetic_pair(rng, truth, SAMPLES, effect_sigma=0.15, noise_sigma=0.05)
        _, low, high = bootstrap_geomean_ci(spec / base, resamples=2000, seed=trial)
        covered += low <= truth <= high
    assert 0.93 <= covered / TRIALS <= 0.97


def test_a_a_is_no_significant_change_at_least_95_percent() -> None:
    rng = np.random.default_rng(99)
    calls = []
    for trial in range(TRIALS):
        base, spec = _synthetic_pair(rng, 1.0, SAMPLES, effect_sigma=0.0, noise_sigma=0.05)
        calls.append(verdict(*bootstrap_geomean_ci(spec / base, resamples=2000, seed=trial), DECODE_SPEEDUP, 0.02))
    assert calls.count("no significant change") / TRIALS >= 0.95


def test_true_1_20_is_called_faster_at_least_95_percent() -> None:
    rng = np.random.default_rng(7)
    calls = []
    for trial in range(TRIALS):
        base, spec = _synthetic_pair(rng, 1.2, SAMPLES, effect_sigma=0.15, noise_sigma=0.05)
        calls.append(verdict(*bootstrap_geomean_ci(spec / base, resamples=2000, seed=trial), DECODE_SPEEDUP, 0.02))
    assert calls.count("better") / TRIALS >= 0.95


def test_verdict_needs_both_significance_and_size() -> None:
    assert verdict(1.01, 1.005, 1.015, DECODE_SPEEDUP, 0.02) == "no significant change"  # significant, too small
    assert verdict(1.10, 0.95, 1.30, DECODE_SPEEDUP, 0.02) == "no significant change"  # large, not significant
    assert verdict(1.10, 1.05, 1.15, DECODE_SPEEDUP, 0.02) == "better"
    assert verdict(0.80, 0.70, 0.90, DECODE_SPEEDUP, 0.02) == "worse"
    assert verdict(0.80, 0.70, 0.90, LATENCY, 0.02) == "better"  # lower latency is better
    assert verdict(1.0, math.nan, math.nan, DECODE_SPEEDUP, 0.02) == "not enough data"


def test_bootstrap_is_seeded() -> None:
    values = np.exp(np.random.default_rng(0).normal(0.1, 0.2, 50))
    assert bootstrap_geomean_ci(values, seed=3) == bootstrap_geomean_ci(values, seed=3)
    point, low, high = bootstrap_geomean_ci(values, seed=3)
    assert point == pytest.approx(float(np.exp(np.log(values).mean())))
    assert low < point < high


def test_paired_stats_end_to_end_on_runs() -> None:
    rng = np.random.default_rng(5)
    base_results, spec_results = [], []
    for category, truth in (("fast", 1.5), ("same", 1.0)):
        base, spec = _synthetic_pair(rng, truth, SAMPLES, effect_sigma=0.1, noise_sigma=0.03)
        for index, (b, s) in enumerate(zip(base, spec, strict=True)):
            sample = f"{category}-{index}"
            base_results.append(_result(sample, category, b, 100.0 / b))
            spec_results.append(_result(sample, category, s, 100.0 / s, output="same" if index % 4 else "diff",
                                        drafted=10, accepted=6))
    rows = {row["category"]: row for row in paired_stats(_run(base_results), _run(spec_results))}
    assert rows["fast"]["verdict"] == "faster"
    assert rows["fast"]["decode_speedup_low"] > 1.4
    assert rows["same"]["verdict"] == "no significant change"
    assert rows["fast"]["latency_speedup"] == pytest.approx(rows["fast"]["decode_speedup"])
    assert rows["fast"]["identical"] == 60 and rows["fast"]["compared_outputs"] == 80
    assert rows["overall"]["n"] == 160 and rows["overall"]["accept_rate"] == pytest.approx(0.6)


def test_paired_stats_refuses_runs_that_share_too_few_samples() -> None:
    base = _run([_result("a", "x", 10, 1), _result("b", "x", 10, 1)])
    spec = _run([_result("a", "x", 10, 1), _result("z", "x", 10, 1)])
    with pytest.raises(BenchError, match="only 1 successful samples match"):
        paired_stats(base, spec, min_pairs=2)


def test_lossless_check_reports_first_difference() -> None:
    base = _run([_result("a", "x", 10, 1, output="hello world"), _result("b", "x", 10, 1, output="same")])
    spec = _run([_result("a", "x", 12, 1, output="hello there"), _result("b", "x", 12, 1, output="same")])
    rows = [row.as_cells() for row in lossless_check(base, spec)]
    assert {key: rows[0][key] for key in ("category", "compared", "identical", "first_diff")} == {
        "category": "x", "compared": 2, "identical": 1, "first_diff": "a@6"}
    assert rows[0]["unclassified"] == 1 and rows[0]["near_tie"] == rows[0]["real"] == 0  # no logprobs recorded
    assert first_difference("abc", "abcd") == 3 and first_difference("x", "x") is None


def test_repeat_cv() -> None:
    results = [_result(f"s{i}", "x", 10.0 + repeat, 1.0, repeat=repeat) for repeat in range(3) for i in range(4)]
    row, _ = (row.as_cells() for row in repeat_cv(_run(results)))
    assert row["repeats"] == 3
    assert row["pred_t_s_cv"] == pytest.approx(float(np.std([10, 11, 12], ddof=1) / 11))
    assert row["latency_cv"] == 0.0
    assert repeat_cv(_run(results[:4])) == []


def test_too_few_samples_get_no_interval_and_no_verdict() -> None:
    point, low, high = bootstrap_geomean_ci([1.5, 1.6, 1.4, 1.5])
    assert point == pytest.approx(float(np.exp(np.log([1.5, 1.6, 1.4, 1.5]).mean())))
    assert math.isnan(low) and math.isnan(high)
    assert verdict(point, low, high, DECODE_SPEEDUP, 0.02) == "not enough data"
    assert not math.isnan(bootstrap_geomean_ci([1.5, 1.6, 1.4, 1.5, 1.55])[1])


def test_acceptance_length_from_per_sample_counters() -> None:
    spec = [SampleResult(id=f"s{i}", category="x", ok=True, turns=1, latency_s=1.0, predicted_per_second=10.0,
                         outputs=("o",), draft_n=40, draft_n_accepted=30, spec={"drafts": 10.0, "accepted": 30.0})
            for i in range(5)]
    base = [_result(f"s{i}", "x", 8.0, 1.2) for i in range(5)]
    rows = {row["category"]: row for row in paired_stats(_run(base), _run(spec))}
    assert rows["x"]["acceptance_length"] == pytest.approx(4.0)
    assert rows["overall"]["acceptance_length"] == pytest.approx(4.0)


def test_stream_latency_percentiles() -> None:
    results = [
        SampleResult(id=f"s{i}", category="x", ok=True, turns=1, latency_s=1.0 + i, completion_tokens=11,
                     ttft_s=0.1 * (i + 1), itl_s=(0.01, 0.02), client_decode_t_s=50.0)
        for i in range(5)
    ]
    rows = [row.as_cells() for row in stream_latency_stats(_run(results))]
    assert [row["category"] for row in rows] == ["x", "overall"]
    assert rows[0]["ttft_p50"] == pytest.approx(0.3) and rows[0]["e2e_p50"] == pytest.approx(3.0)
    assert rows[0]["itl_p50"] == pytest.approx(0.015) and rows[0]["client_decode_t_s"] == 50.0
    assert rows[0]["tpot_p50"] == pytest.approx((3.0 - 0.3) / 10)
    assert stream_latency_stats(_run([_result("a", "x", 1.0, 1.0)])) == []


def test_large_samples_use_the_normal_interval_the_bootstrap_converges_to() -> None:
    values = np.exp(np.random.default_rng(3).normal(0.1, 0.3, 6000))
    normal = bootstrap_geomean_ci(values)
    resampled = bootstrap_geomean_ci(values, normal_above=10**9)
    assert normal[0] == resampled[0]
    assert normal[1] == pytest.approx(resampled[1], rel=2e-3) and normal[2] == pytest.approx(resampled[2], rel=2e-3)
