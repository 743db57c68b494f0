"""The stratified overall estimate: weighted category means, within-category variance, Welch-Satterthwaite df."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bench import OVERALL
from bench.analysis import (
    BLOCKED_METHOD,
    STRATIFIED_METHOD,
    compare,
    log_mean,
    stratified_block_mean,
    stratified_block_ratio,
    stratified_log_mean,
    t_quantile,
)
from bench.records import Run, SampleResult, summarize
from bench.render import render_json, render_text


def _by_hand(strata: list[np.ndarray]) -> tuple[float, float, float]:
    """Mean, se and df written out from the formulas with per-prompt weights (all strata of two or more)."""
    total = sum(len(s) for s in strata)
    parts = [(len(s) / total) ** 2 * np.var(s, ddof=1) / len(s) for s in strata]
    mean = sum(len(s) / total * np.mean(s) for s in strata)
    df = sum(parts) ** 2 / sum(part**2 / (len(s) - 1) for part, s in zip(parts, strata, strict=True))
    return float(mean), math.sqrt(sum(parts)), float(df)


def test_ten_a_category_follows_the_formulas_and_ignores_the_spread_between_categories() -> None:
    rng = np.random.default_rng(3)
    strata = [math.log(truth) + rng.normal(0.0, sigma, 10) for truth, sigma in ((4.6, 0.10), (1.9, 0.05), (1.1, 0.2))]
    found = stratified_log_mean(strata, df_rule="satterthwaite")
    assert found is not None and found.method.startswith(STRATIFIED_METHOD)
    mean, se, df = _by_hand(strata)
    assert found.mean == pytest.approx(mean) and found.se == pytest.approx(se) and found.df == pytest.approx(df)
    assert found.n == 30
    pooled = log_mean(np.concatenate(strata))
    assert pooled is not None
    assert found.mean == pytest.approx(pooled.mean)  # per-prompt weights: the pooled point the tables printed
    assert found.se < pooled.se / 4  # the between-category spread (4.6x vs 1.1x) is no longer noise


def test_two_a_category_uses_one_degree_of_freedom_each() -> None:
    strata = [np.array([0.0, 0.2]), np.array([1.0, 1.1]), np.array([0.5, 0.9])]
    classic = stratified_log_mean(strata, df_rule="satterthwaite")
    assert classic is not None
    mean, se, df = _by_hand(strata)
    assert (classic.mean, classic.se, classic.df) == pytest.approx((mean, se, df))
    assert 1.0 <= classic.df <= 3.0
    shipped = stratified_log_mean(strata)  # Welch's 1947 form: (sum a)^2 / sum a^2 / (n + 1) - 2, within [1, N - K]
    assert shipped is not None and "Welch 1947" in shipped.method
    parts = [(2 / 6) ** 2 * np.var(s, ddof=1) / 2 for s in strata]
    welch = sum(parts) ** 2 / sum(part**2 / 3 for part in parts) - 2
    assert shipped.df == pytest.approx(min(max(welch, 1.0), 3.0)) and shipped.se == pytest.approx(se)


def test_equal_weights_agree_with_per_prompt_weights_at_equal_n() -> None:
    rng = np.random.default_rng(4)
    strata = [rng.normal(m, 0.1, 6) for m in (0.0, 0.5, 1.0)]
    prompt, category = stratified_log_mean(strata), stratified_log_mean(strata, weights="category")
    assert prompt is not None and category is not None
    assert (prompt.mean, prompt.se, prompt.df) == pytest.approx((category.mean, category.se, category.df))
    uneven = [strata[0][:2], strata[1], strata[2]]
    assert stratified_log_mean(uneven).mean != pytest.approx(stratified_log_mean(uneven, weights="category").mean)


def test_one_a_category_falls_back_to_the_pooled_interval_and_says_so() -> None:
    strata = [np.array([0.1]), np.array([0.9]), np.array([0.4]), np.array([0.6])]
    found = stratified_log_mean(strata)
    pooled = log_mean(np.concatenate(strata))
    assert found is not None and pooled is not None
    assert (found.mean, found.se, found.df) == pytest.approx((pooled.mean, pooled.se, pooled.df))
    assert found.method.startswith("pooled")


def test_a_one_sample_category_borrows_the_pooled_within_variance() -> None:
    strata = [np.array([0.0, 0.2, 0.1]), np.array([1.0, 1.2]), np.array([0.5])]
    found = stratified_log_mean(strata)
    assert found is not None and "one-sample" in found.method
    within = (2 * np.var(strata[0], ddof=1) + np.var(strata[1], ddof=1)) / 3
    parts = [(3 / 6) ** 2 * np.var(strata[0], ddof=1) / 3, (2 / 6) ** 2 * np.var(strata[1], ddof=1) / 2,
             (1 / 6) ** 2 * within]
    assert found.se == pytest.approx(math.sqrt(sum(parts)))
    assert found.df <= 3.0  # never more than the within-category degrees of freedom
    fallback = stratified_log_mean(strata, one_sample_rule="pooled")
    assert fallback is not None and fallback.method.startswith("pooled")


def test_one_stratum_and_nothing() -> None:
    assert stratified_log_mean([]) is None
    assert stratified_log_mean([np.array([np.nan])]) is None
    one = stratified_log_mean([np.array([0.1, 0.3, 0.2])])
    assert one is not None and one.method == "t"


def _runs(per_category: int, truths: dict[str, float], seed: int = 1) -> tuple[Run, Run]:
    rng = np.random.default_rng(seed)
    base, spec = [], []
    for category, truth in truths.items():
        for index in range(per_category):
            rate = 20.0 * math.exp(rng.normal(0.0, 0.3))
            fast = rate * truth * math.exp(rng.normal(0.0, 0.08))
            for results, value in ((base, rate), (spec, fast)):
                results.append(SampleResult(id=f"{category}-{index}", category=category, ok=True, turns=1,
                                            latency_s=64.0 / value, predicted_per_second=value, outputs=("x",)))
    return tuple(Run(config={}, selected_samples=len(r), results=tuple(r), summary=tuple(summarize(r)))
                 for r in (base, spec))


@pytest.mark.parametrize("per_category", [1, 2, 10])
def test_the_overall_row_of_compare_is_stratified_and_named(per_category: int) -> None:
    truths = {"coding": 4.59, "qa": 1.87, "math": 2.5, "rag": 1.4, "summarization": 1.1}
    baseline, speculative = _runs(per_category, truths)
    comparison = compare(baseline, speculative)
    overall = next(row for row in comparison.stats if row.category == OVERALL)
    assert overall.n == per_category * len(truths)
    method = overall.decode.estimator
    assert method is not None
    assert method.startswith("pooled") if per_category == 1 else method.startswith(STRATIFIED_METHOD)
    assert comparison.family is not None and comparison.family.overall_estimator == method
    payload = json.loads(render_json(comparison))
    assert payload["family"]["overall_estimator"] == method and payload["family"]["overall_weights"] == "prompt"
    assert "stratified by category" in render_text(comparison) or per_category == 1
    if per_category == 10:  # the case: the interval ignores the spread between categories
        width = math.log(overall.decode.high / overall.decode.low) / 2
        assert width < 0.05
        pooled = log_mean(np.log([r.predicted_per_second for r in speculative.results])
                          - np.log([r.predicted_per_second for r in baseline.results]))
        assert pooled is not None
        assert width < t_quantile(0.975, pooled.df) * pooled.se / 5


def _abba_logs(rng: np.random.Generator, blocks: int, truths: tuple[float, ...], *, drift: float = 0.05,
               noise: float = 0.15) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Per-request log ratios of an ABBA run: 8 a block, categories shuffled over blocks, a drift shared by a block;
    with the true overall log speedup at the per-prompt weights of this draw."""
    n = 8 * blocks
    categories = rng.permutation(np.arange(n) % len(truths))
    block = np.arange(n) // 8
    logs = np.log(np.asarray(truths))[categories] + rng.normal(0.0, drift, blocks)[block] + rng.normal(0.0, noise, n)
    return logs, categories.astype(str), block, float(np.log(np.asarray(truths))[categories].mean())


def test_blocked_estimate_follows_the_formulas() -> None:
    logs = np.array([0.1, 0.3, 0.9, 1.1, 0.2, 1.0, 0.0, 1.4])
    categories = ["qa", "qa", "code", "code", "qa", "code", "qa", "code"]
    blocks = [0, 0, 0, 0, 1, 1, 2, 2]
    found = stratified_block_mean(logs, categories, blocks)
    assert found is not None and found.method.startswith(BLOCKED_METHOD) and "3 blocks, 2 df" in found.method
    residuals = logs - np.where(np.array(categories) == "qa", 0.15, 1.1)  # category means 0.15 and 1.1
    totals = np.array([residuals[:4].sum(), residuals[4:6].sum(), residuals[6:].sum()])
    variance = 3 / 2 * 7 / 6 * float((totals**2).sum()) / 8**2
    assert found.mean == pytest.approx(logs.mean()) and found.df == 2
    assert found.se == pytest.approx(math.sqrt(variance))
    assert stratified_block_mean(logs[:4], categories[:4], blocks[:4]) is None  # one block: no interval


def test_blocked_estimate_is_narrower_than_block_means_when_categories_differ() -> None:
    rng = np.random.default_rng(5)
    ratios = []
    for _ in range(50):
        logs, categories, block, _ = _abba_logs(rng, 12, (2.5, 1.8, 1.4, *(1.1,) * 8))
        found = stratified_block_mean(logs, categories, block)
        plain = log_mean(logs.reshape(12, 8).mean(axis=1))
        assert found is not None and plain is not None
        ratios.append(found.se / plain.se)
    assert np.mean(ratios) < 0.75 and np.mean(np.array(ratios) < 1.0) >= 0.9


@pytest.mark.parametrize("blocks", [6, 12])
@pytest.mark.parametrize("truths", [(2.5, 1.8, 1.4, *(1.1,) * 8), (1.2,) * 11])
def test_blocked_estimate_covers_truth_at_the_printed_sizes(blocks: int, truths: tuple[float, ...]) -> None:
    rng = np.random.default_rng(blocks)
    covered = 0
    for _ in range(1000):
        logs, categories, block, target = _abba_logs(rng, blocks, truths)
        found = stratified_block_mean(logs, categories, block)
        assert found is not None
        half = found.half_width(0.95)
        covered += found.mean - half <= target <= found.mean + half
    assert 0.93 <= covered / 1000 <= 0.975


def test_blocked_ratio_follows_the_formulas() -> None:
    base = np.array([1.0, 1, 0, 1, 1, 0, 1, 1])
    cand = np.array([1.0, 1, 1, 1, 0, 1, 1, 1])
    categories = ["a", "b"] * 4
    blocks = [0, 0, 1, 1, 2, 2, 3, 3]
    ratio, se, df, method = stratified_block_ratio(base, cand, categories, blocks)
    assert ratio == pytest.approx(7 / 6) and df == 3 and method.startswith(BLOCKED_METHOD)
    u = cand - 7 / 6 * base
    u[0::2] -= u[0::2].mean()
    u[1::2] -= u[1::2].mean()
    totals = u.reshape(4, 2).sum(axis=1)
    assert se == pytest.approx(math.sqrt(4 / 3 * 7 / 6 * float((totals**2).sum())) / 6)
    assert stratified_block_ratio(np.zeros(8), cand, categories, blocks) is None
