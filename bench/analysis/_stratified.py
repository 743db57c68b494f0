"""The overall row as the design makes it: categories are fixed strata, so their differences are not noise.

Every run has the same categories with a set number of prompts each. The overall mean log speedup is the weighted
mean of the category means, sum_c w_c m_c; its variance sum_c w_c^2 s_c^2 / n_c counts only the spread within each
category; degrees of freedom by Welch-Satterthwaite in Welch's 1947 form, (sum_c a_c)^2 / sum_c a_c^2 / (n_c + 1) -
2 with a_c = w_c^2 s_c^2 / n_c (`DF_RULES`), bounded to [1, N - K]. The weights are per prompt (w_c = n_c / N), so
the point is the pooled geometric mean the tables always printed (with equal n per category it is also the mean of
category means, as the SpeedBench table's overall is); only the interval changes.

A category with one sample has no within spread of its own. `ONE_SAMPLE_RULE` says what then: its variance is the
within-category variance pooled over the categories that have two or more samples (with their degrees of freedom);
when no category has two, the pooled interval over every sample (between-category spread counted as noise, which
can only widen it). The rule was chosen by the coverage measured in docs/statistics.md (benchmarks/coverage.py
--section mixed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from bench._errors import BenchError
from bench.analysis._intervals import LogMean, log_mean

STRATIFIED_METHOD = "stratified by category"
"""The overall estimator's name, as outputs print it."""

WEIGHTS = ("prompt", "category")
"""Per prompt (w_c = n_c / N, the default) or equal per category (w_c = 1 / K)."""

DEFAULT_WEIGHTS = "prompt"

ONE_SAMPLE_RULES = ("pool-within", "pooled")
"""For categories with one sample: borrow the pooled within-category variance of the others (`pool-within`), or
fall back to the pooled interval over every sample (`pooled`)."""

ONE_SAMPLE_RULE = "pool-within"
"""The measured choice (docs/statistics.md, "Stratified overall rows")."""

POOLED_FALLBACK = "pooled over every sample (one sample a category: no within-category spread to estimate)"


DF_RULES = ("welch-1947", "satterthwaite")
"""Degrees of freedom: Welch's (1947) form of the Welch-Satterthwaite approximation, (sum a_c)^2 /
sum a_c^2 / (n_c + 1) - 2 (the default: the classic form's estimate is biased low when some n_c are 2, so its
intervals over-cover there, 97-98% measured), or the classic (sum a_c)^2 / sum a_c^2 / (n_c - 1)."""

DF_RULE = "welch-1947"


def stratified_log_mean(
    strata: Sequence[Sequence[float] | np.ndarray], *, weights: str = DEFAULT_WEIGHTS,
    one_sample_rule: str = ONE_SAMPLE_RULE, df_rule: str = DF_RULE,
) -> LogMean | None:
    """The stratified estimate over per-category arrays of logs (non-finite values dropped, empty strata skipped).

    One stratum is today's t estimate; every stratum with two or more values gives the Welch-Satterthwaite
    estimate; strata of one value follow `one_sample_rule`. None when there is no value at all."""
    if weights not in WEIGHTS:
        raise BenchError(f"unknown stratum weights {weights!r}; available: {', '.join(WEIGHTS)}")
    if df_rule not in DF_RULES:
        raise BenchError(f"unknown df rule {df_rule!r}; available: {', '.join(DF_RULES)}")
    if one_sample_rule not in ONE_SAMPLE_RULES:
        raise BenchError(f"unknown one-sample rule {one_sample_rule!r}; available: {', '.join(ONE_SAMPLE_RULES)}")
    groups = [values[np.isfinite(values)] for values in (np.asarray(s, dtype=float) for s in strata)]
    groups = [values for values in groups if values.size]
    if not groups:
        return None
    everything = np.concatenate(groups)
    if len(groups) == 1:
        return log_mean(everything)
    sizes = np.array([values.size for values in groups], dtype=float)
    total = int(sizes.sum())
    w = sizes / sizes.sum() if weights == "prompt" else np.full(len(groups), 1.0 / len(groups))
    means = np.array([values.mean() for values in groups])
    mean = float((w * means).sum())
    several = sizes >= 2
    if not several.any():
        pooled = log_mean(everything)
        assert pooled is not None
        if weights == "category":
            raise BenchError("equal category weights need two samples in some category")
        return LogMean(mean, pooled.se, pooled.df, total, POOLED_FALLBACK) if total >= 2 else pooled
    variances = np.array([values.var(ddof=1) if values.size >= 2 else math.nan for values in groups])
    parts = np.where(several, w**2 * np.nan_to_num(variances) / sizes, 0.0)
    shift = 1.0 if df_rule == "welch-1947" else -1.0  # a_c^2 / (n_c + 1) or a_c^2 / (n_c - 1)
    denominator = float((parts[several] ** 2 / (sizes[several] + shift)).sum())
    method = f"{STRATIFIED_METHOD} (weights per {weights}, " + (
        "Welch 1947 df)" if df_rule == "welch-1947" else "Welch-Satterthwaite df)")
    if not several.all():
        if one_sample_rule == "pooled":
            pooled = log_mean(everything)
            assert pooled is not None
            return LogMean(mean, pooled.se, pooled.df, total, POOLED_FALLBACK)
        within_df = float((sizes[several] - 1.0).sum())
        within = float(((sizes[several] - 1.0) * variances[several]).sum()) / within_df
        single = float((w[~several] ** 2).sum()) * within  # each one-sample stratum: w^2 s_pooled^2 / 1
        parts = np.where(several, parts, 0.0)
        denominator += single**2 / (within_df + 1.0 + shift)
        variance = float(parts.sum()) + single
        method += f"; {int((~several).sum())} one-sample categories take the pooled within-category variance"
    else:
        variance = float(parts.sum())
    se = math.sqrt(variance)
    df = variance**2 / denominator - (2.0 if df_rule == "welch-1947" else 0.0) if denominator > 0 else math.inf
    df = min(max(df, 1.0), float(max(total - len(groups), 1)))
    return LogMean(mean, se, df, total, method)


BLOCKED_METHOD = "stratified by category, blocks as units"
"""The ABBA overall estimator's name: category means as fixed strata, the variance over blocks (cluster-robust)."""


def _block_variance(residuals: np.ndarray, blocks: np.ndarray, categories: int) -> tuple[float, int]:
    """Cluster-robust (CR1) variance of the sum of `residuals` over `blocks`, with the number of blocks."""
    names, index = np.unique(blocks, return_inverse=True)
    totals = np.bincount(index, weights=residuals, minlength=names.size)
    count, n = int(names.size), int(residuals.size)
    correction = count / (count - 1) * (n - 1) / max(n - categories, 1)
    return correction * float((totals**2).sum()), count


def stratified_block_mean(values: Sequence[float], categories: Sequence[str],
                          blocks: Sequence[int]) -> LogMean | None:
    """The overall mean of per-sample values (logs, differences) of an ABBA run, stratified by category.

    The point is sum_c w_c m_c with per-prompt weights (the pooled mean); its variance is the cluster-robust one over
    blocks of the residuals around each category's mean, so the spread between categories is not noise while a
    block's drift or shared queue stays in (blocks are the design's unit); B - 1 degrees of freedom. None under two
    blocks."""
    data = np.asarray(values, dtype=float)
    keep = np.isfinite(data)
    data = data[keep]
    labels = np.asarray(categories, dtype=object)[keep]
    block_ids = np.asarray(blocks)[keep]
    if data.size < 2 or np.unique(block_ids).size < 2:
        return None
    names, index = np.unique(labels.astype(str), return_inverse=True)
    means = np.bincount(index, weights=data) / np.bincount(index)
    variance, count = _block_variance(data - means[index], block_ids, names.size)
    se = math.sqrt(variance) / data.size
    method = f"{BLOCKED_METHOD} (weights per prompt; cluster-robust variance over {count} blocks, {count - 1} df)"
    return LogMean(float(data.mean()), se, float(count - 1), int(data.size), method)


def stratified_block_ratio(baseline: Sequence[float], candidate: Sequence[float], categories: Sequence[str],
                           blocks: Sequence[int]) -> tuple[float, float, float, str] | None:
    """sum(candidate) / sum(baseline) over paired samples of an ABBA run, with its stratified block standard error.

    Returns (ratio, se, df, method): the delta-method residuals u = c - R b are centred on each category's mean
    (categories are fixed strata) and summed per block (the unit); None under two blocks or with no baseline."""
    base = np.asarray(baseline, dtype=float)
    cand = np.asarray(candidate, dtype=float)
    if base.size < 2 or base.sum() <= 0 or np.unique(np.asarray(blocks)).size < 2:
        return None
    names, index = np.unique(np.asarray(categories, dtype=object).astype(str), return_inverse=True)
    ratio = float(cand.sum() / base.sum())
    residuals = cand - ratio * base
    residuals = residuals - (np.bincount(index, weights=residuals) / np.bincount(index))[index]
    variance, count = _block_variance(residuals, np.asarray(blocks), names.size)
    method = f"{BLOCKED_METHOD} (weights per prompt; cluster-robust variance over {count} blocks, {count - 1} df)"
    return ratio, math.sqrt(variance) / float(base.sum()), float(count - 1), method
