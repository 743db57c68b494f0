"""Category tables as one family: Holm-adjusted verdicts, the primary overall row, mde and named outliers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bench import OVERALL
from bench.analysis import (
    FAMILY_ALPHA,
    compare,
    family_estimates,
    holm_levels,
    log_mean,
    samples_needed,
)
from bench.records import Run, SampleResult, summarize
from bench.render import render_json, render_markdown, render_text

CATEGORIES = tuple(f"cat{index:02d}" for index in range(11))


def synthetic_runs(rng: np.random.Generator, n: int, truth: float = 1.0, sigma: float = 0.2,
                   categories: tuple[str, ...] = CATEGORIES, accept: float | None = None) -> tuple[Run, Run]:
    """A baseline and a speculative run over `categories` x `n` prompts whose true speedup is `truth`; with
    `accept`, the speculative samples draft 100 tokens each and accept a binomial share."""
    base_results, spec_results = [], []
    for category in categories:
        for index in range(n):
            rate = 20.0 * math.exp(rng.normal(0.0, 0.3))
            spec_rate = rate * truth * math.exp(rng.normal(0.0, sigma))
            drafts = (0, 0) if accept is None else (100, int(rng.binomial(100, accept)))
            arms = ((base_results, rate, (0, 0)), (spec_results, spec_rate, drafts))
            for results, value, (drafted, accepted) in arms:
                results.append(SampleResult(id=f"{category}-{index:03d}", category=category, ok=True, turns=1,
                                            latency_s=64.0 / value, predicted_per_second=value,
                                            prompt_per_second=500.0, outputs=("same",), draft_n=drafted,
                                            draft_n_accepted=accepted))
    return tuple(Run(config={}, selected_samples=len(results), results=tuple(results),
                     summary=tuple(summarize(results))) for results in (base_results, spec_results))


def _table(rng: np.random.Generator, n: int, truth: float) -> dict:
    """The estimates of one synthetic table through the decision rule compare uses (decode and latency)."""
    logs = {}
    for category in (*CATEGORIES, OVERALL):
        size = n * len(CATEGORIES) if category == OVERALL else n
        values = np.log(truth) + rng.normal(0.0, 0.2, size)
        logs[(category, "decode_speedup")] = log_mean(values)
        logs[(category, "latency_speedup")] = log_mean(values + rng.normal(0.0, 0.05, size))
    return family_estimates(logs, threshold=0.02)


def test_holm_levels_reject_exactly_what_the_step_down_rejects() -> None:
    levels = holm_levels([0.001, 0.2, 0.01, math.nan, 0.04])
    assert levels[0] == pytest.approx(0.05 / 4) and levels[2] == pytest.approx(0.05 / 3)
    assert levels[4] == pytest.approx(0.05 / 2) and levels[1] == pytest.approx(0.05 / 2)  # stopped at 0.04
    assert math.isnan(levels[3])


def test_a_a_table_calls_any_category_in_at_most_5_percent() -> None:
    rng = np.random.default_rng(5)
    trials = 250
    false_tables = 0
    for _ in range(trials):
        table = _table(rng, 10, 1.0)
        false_tables += any(est.verdict in ("better", "worse") for (category, _), est in table.items()
                            if category != OVERALL)
    assert false_tables / trials <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / trials)


def test_a_true_1_3x_at_n_30_is_still_called_faster_in_most_category_rows() -> None:
    rng = np.random.default_rng(6)
    calls = [est.verdict == "better" for _ in range(40) for (category, key), est in _table(rng, 30, 1.3).items()
             if category != OVERALL and key == "decode_speedup"]
    assert sum(calls) / len(calls) >= 0.95


def test_compare_applies_the_family_rule_and_every_output_names_it() -> None:
    rng = np.random.default_rng(7)
    baseline, speculative = synthetic_runs(rng, 10)
    comparison = compare(baseline, speculative)
    category_rows = [row for row in comparison.stats if not row.primary]
    assert comparison.family is not None and comparison.family.size == 22
    assert all(row.decode.confidence > 0.99 for row in category_rows)  # drawn at Holm's levels, not 95%
    overall = comparison.stats[-1]
    assert overall.primary and overall.decode.confidence == pytest.approx(0.95)
    lowest = min(row.decode.p_value for row in category_rows)
    first = next(row for row in category_rows if row.decode.p_value == lowest)
    assert first.decode.confidence == pytest.approx(1 - FAMILY_ALPHA / 22)
    text, markdown = render_text(comparison), render_markdown(comparison)
    for output in (text, markdown):
        assert "Holm step-down over category x metric (22 tests" in output
        assert "overall (primary)" in output and "at 99.77%" in output
        assert "decode_mde" in output and "latency_mde" in output
    payload = json.loads(render_json(comparison))
    assert payload["family"]["size"] == 22 and payload["family"]["primary"] == "overall"
    row = payload["stats"][0]
    assert row["decode_speedup_confidence"] > 0.99 and row["decode_speedup_mde"] > 0
    assert payload["stats"][-1]["primary"] is True


def test_mde_and_needed_samples_follow_the_power_calculation() -> None:
    assert 30 <= samples_needed(0.2, 0.10, 0.05, 0.02) <= 45  # ~40 for 1.10x at sd 0.2 (two-sided 5%, 80%)
    assert 10 <= samples_needed(0.2, 0.20, 0.05, 0.02) <= 14
    assert samples_needed(0.2, 0.01, 0.05, 0.02) is None  # under the threshold: no sample count detects it
    rng = np.random.default_rng(8)
    baseline, speculative = synthetic_runs(rng, 4, categories=("a", "b"))
    comparison = compare(baseline, speculative)
    few = comparison.stats[0]
    assert few.decode.verdict == "not enough data" and few.decode.needed is not None  # from the overall row's sd
    assert f"n≈{few.decode.needed} for target" in render_text(comparison)


def test_mde_is_the_effect_detected_80_percent_of_the_time() -> None:
    rng = np.random.default_rng(9)
    n, sigma = 20, 0.2
    mde = family_estimates({(OVERALL, "decode_speedup"): log_mean(rng.normal(0, sigma, n))}, threshold=0.02)
    effect = mde[(OVERALL, "decode_speedup")].mde
    hits = 0
    for _ in range(600):
        est = family_estimates({(OVERALL, "decode_speedup"): log_mean(np.log1p(effect) + rng.normal(0, sigma, n))},
                               threshold=0.02)[(OVERALL, "decode_speedup")]
        hits += est.verdict == "better"
    assert 0.6 <= hits / 600 <= 0.95  # one sample's sd plans the power: 80% on average


def test_stalled_samples_are_named_with_their_arm() -> None:
    rng = np.random.default_rng(10)
    baseline, speculative = synthetic_runs(rng, 12, truth=1.2, sigma=0.05, categories=("qa", "math"))
    results = list(speculative.results)
    stalled = results[3]
    results[3] = SampleResult(id=stalled.id, category=stalled.category, ok=True, turns=1,
                              latency_s=stalled.latency_s * 6, predicted_per_second=stalled.predicted_per_second / 6,
                              prompt_per_second=500.0, outputs=("same",))
    speculative = Run(config={}, selected_samples=len(results), results=tuple(results),
                      summary=tuple(summarize(results)))
    comparison = compare(baseline, speculative)
    row = next(row for row in comparison.stats if row.category == stalled.category)
    assert {(o.id, o.arm) for o in row.outliers} == {(stalled.id, "speculative")}
    assert f"speculative: {stalled.id} (decode" in render_text(comparison)
    assert stalled.id in render_markdown(comparison)
    assert json.loads(render_json(comparison))["stats"][0]["outliers"][0]["id"] == stalled.id
    assert row.decode.robust is not None and row.decode.robust[0] > row.decode.point  # trimmed: the stall is out


def test_compare_cli_target_effect_sets_the_planned_change(tmp_path, capsys) -> None:
    from bench.cli import main
    from bench.records import save_run

    baseline, speculative = synthetic_runs(np.random.default_rng(20), 4, categories=("a", "b"))
    save_run(baseline, tmp_path / "b.json")
    save_run(speculative, tmp_path / "s.json")
    assert main(["compare", "--baseline", str(tmp_path / "b.json"), "--speculative", str(tmp_path / "s.json"),
                 "--stats", "--format", "json", "--target-effect", "0.3"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["family"]["target_effect"] == 0.3
    assert payload["stats"][0]["decode_speedup_needed_n"] < samples_needed(0.2, 0.1, 0.05 / 4, 0.02)


def test_a_row_of_one_sample_keeps_its_point() -> None:
    baseline, speculative = synthetic_runs(np.random.default_rng(21), 1, truth=1.5, categories=("a",))
    row = compare(baseline, speculative).stats[0]
    assert row.decode.verdict == "not enough data" and math.isfinite(row.decode.point)
