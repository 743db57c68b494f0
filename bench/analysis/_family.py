"""Verdicts over a table as one family: Holm's step-down levels, minimum detectable effects and robust outliers.

A table of category verdicts is one family of tests (category x metric). Holm (1979) keeps the chance of any false
verdict in the family at `alpha`: sort the rows' p-values, test the i-th smallest at alpha / (m - i + 1), stop at
the first that fails. Each row's printed interval is drawn at the level its step uses (the level of the step where
the procedure stopped, for the rows after it), so "the interval excludes 1.00x" is exactly Holm's rejection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from bench._types import JsonObject
from bench.analysis._compared import paired_metrics
from bench.analysis._intervals import LogMean, t_quantile

if TYPE_CHECKING:
    import pandas as pd

FAMILY_ALPHA = 0.05
"""Family-wise false-alarm rate of a table's category rows (and the level of the primary overall row)."""

POWER = 0.8
"""Power at which the minimum detectable effect (`mde`) is stated."""

DEFAULT_TARGET_EFFECT = 0.10
"""The effect (10%) whose needed sample count rows with too few samples state."""

HOLM_METHOD = "Holm step-down over category x metric"

OUTLIER_DISTANCE = 3.5
"""A sample is flagged when its paired log ratio lies more than this many robust standard deviations (1.4826 x the
median absolute deviation) from its category's median (the modified z-score rule of Iglewicz & Hoaglin, 1993)."""


def holm_levels(p_values: Sequence[float], alpha: float = FAMILY_ALPHA) -> list[float]:
    """Per test, the two-sided level at which its interval is drawn under Holm's step-down (NaN p: NaN level).

    Rows rejected by Holm get interval levels whose intervals exclude the null; all others get levels whose
    intervals include it, so reading the interval gives Holm's decision.
    """
    indexed = sorted((p, index) for index, p in enumerate(p_values) if math.isfinite(p))
    m = len(indexed)
    levels = [math.nan] * len(p_values)
    stop = m  # 0-based rank of the first test Holm does not reject (m: all rejected)
    for rank, (p, _) in enumerate(indexed):
        if p > alpha / (m - rank):
            stop = rank
            break
    for rank, (_, index) in enumerate(indexed):
        levels[index] = alpha / (m - min(rank, stop))
    return levels


def weighted_holm_levels(p_values: Sequence[float], weights: Sequence[float],
                         alpha: float = FAMILY_ALPHA) -> list[float]:
    """Holm's step-down with weights (Holm 1979, the weighted form): test i is rejected when p_i <= alpha w_i / W,
    W the summed weight of the tests not yet rejected, repeated until none is; NaN p: NaN level.

    Each test's level is the one it was rejected at, or, for the rest, alpha w_i / W at the step where the procedure
    stopped, so an interval drawn at that level excludes the null exactly when the test is rejected. Equal weights
    give `holm_levels`. The family-wise error stays at `alpha` whatever the weights (a closed test of weighted
    Bonferroni intersections)."""
    levels = [math.nan] * len(p_values)
    open_tests = {index for index, p in enumerate(p_values) if math.isfinite(p)}
    if any(weights[index] <= 0 for index in open_tests):
        raise ValueError("weighted Holm needs positive weights")
    while open_tests:
        total = sum(weights[index] for index in open_tests)
        rejected = {index for index in open_tests if p_values[index] <= alpha * weights[index] / total}
        if not rejected:
            for index in open_tests:
                levels[index] = alpha * weights[index] / total
            break
        for index in rejected:
            levels[index] = alpha * weights[index] / total
        open_tests -= rejected
    return levels


def detectable_log_effect(estimate: LogMean, alpha: float, threshold: float, power: float = POWER) -> float:
    """Smallest true |mean log| detected with `power`: significant at two-sided `alpha` and past the threshold."""
    if estimate.se <= 0 and estimate.drift_se <= 0:
        return math.log1p(threshold)
    beta = t_quantile(power, estimate.df) * math.hypot(estimate.se, estimate.drift_se)
    significant = estimate.half_width(1.0 - alpha) + beta
    return max(significant, math.log1p(threshold) + beta)


def samples_needed(sd: float, effect: float, alpha: float, threshold: float, power: float = POWER,
                   limit: int = 100_000) -> int | None:
    """Samples whose t-test detects a true `effect` (relative, e.g. 0.10) with `power` at `alpha`, given the
    per-sample sd of the logs; None when the effect is not above the threshold or sd is unknown."""
    if not (math.isfinite(sd) and sd > 0) or effect <= threshold:
        return None
    target = math.log1p(effect)
    z = 1.959963984540054 if alpha == 0.05 else t_quantile(1.0 - alpha / 2.0, 1e6)
    start = max(2, int(((z + 0.8416212335729143) * sd / target) ** 2))
    n = start
    while n <= limit:
        se = sd / math.sqrt(n)
        probe = LogMean(0.0, se, n - 1.0, n)
        if detectable_log_effect(probe, alpha, threshold, power) <= target:
            return n
        n += max(1, n // 50)
    return None


@dataclass(frozen=True, slots=True)
class Outlier:
    """A sample whose paired log ratio lies far from its category's median, and the arm that most likely did it."""

    id: str
    metric: str
    arm: str
    ratio: float
    distance: float

    def as_cells(self) -> JsonObject:
        """JSON-ready fields."""
        return {"id": self.id, "metric": self.metric, "arm": self.arm, "ratio": self.ratio, "distance": self.distance}


def robust_distances(logs: np.ndarray) -> np.ndarray:
    """Each value's distance from the median in robust standard deviations (1.4826 MAD); zeros when MAD is 0."""
    median = float(np.median(logs))
    scale = 1.4826 * float(np.median(np.abs(logs - median)))
    if scale <= 0:
        return np.zeros_like(logs)
    return (logs - median) / scale


def flag_outliers(ids: Sequence[str], logs: np.ndarray, base_logs: np.ndarray, spec_logs: np.ndarray, *,
                  metric: str, min_samples: int = 5) -> list[Outlier]:
    """Samples past `OUTLIER_DISTANCE`, each attributed to the arm whose own value strays further in the direction
    that explains the ratio (a low ratio: the speculative arm slow, or the baseline fast)."""
    if logs.size < min_samples:
        return []
    distances = robust_distances(logs)
    base_dev = base_logs - np.median(base_logs)
    spec_dev = spec_logs - np.median(spec_logs)
    flagged = []
    for index in (int(found) for found in np.flatnonzero(np.abs(distances) > OUTLIER_DISTANCE)):
        low = distances[index] < 0  # candidate/speculative worse than usual, or baseline better than usual
        spec_part = -spec_dev[index] if low else spec_dev[index]
        base_part = base_dev[index] if low else -base_dev[index]
        arm = "speculative" if spec_part >= base_part else "baseline"
        flagged.append(Outlier(str(ids[index]), metric, arm, float(math.exp(logs[index])), float(distances[index])))
    return flagged


def category_outliers(group: pd.DataFrame) -> tuple[Outlier, ...]:
    """Samples of one category whose log ratio of a compared metric lies far from the category's median, per arm."""
    frame = group.copy()
    found: list[Outlier] = []
    for paired_metric in paired_metrics():
        column, sign = paired_metric.key, paired_metric.arm_sign
        base_column, spec_column = f"{paired_metric.arm_column}_base", f"{paired_metric.arm_column}_spec"
        keep = frame[(frame[column] > 0) & (frame[base_column] > 0) & (frame[spec_column] > 0)]
        if keep.empty:
            continue
        per_sample = keep.assign(
            ratio=np.log(keep[column].astype(float)),
            base=sign * np.log(keep[base_column].astype(float)),
            spec=sign * np.log(keep[spec_column].astype(float)),
        ).groupby("id", sort=False)[["ratio", "base", "spec"]].mean()
        found += flag_outliers(list(per_sample.index), per_sample["ratio"].to_numpy(), per_sample["base"].to_numpy(),
                               per_sample["spec"].to_numpy(), metric=paired_metric.name)
    return tuple(found)


GATE_OVERALL_SHARE = 0.5
"""With category rows gated, the share of the family's weight the overall rows keep (split equally among them);
the category rows share the rest. Plain Holm over 36 rows would test the primary overall rows at 5%/36 first; with
half the weight they start at 5%/6, and a proven overall regression passes its weight on to the categories."""


def family_weights(overall: Sequence[bool], testable: Sequence[bool], overall_share: float) -> list[float]:
    """Weighted Holm's weights of the testable rows: `overall_share` split among overall rows, the rest among
    category rows (all weight to one kind when the other has no testable row)."""
    overall_count = sum(o and t for o, t in zip(overall, testable, strict=True))
    category_count = sum(not o and t for o, t in zip(overall, testable, strict=True))
    share = overall_share if overall_count and category_count else (1.0 if overall_count else 0.0)
    return [share / overall_count if o else (1.0 - share) / category_count
            for o, t in zip(overall, testable, strict=True) if t]
