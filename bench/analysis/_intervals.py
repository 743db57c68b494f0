"""Metrics with their direction, the one interval estimator for geometric means, and the two-gate verdict."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench._constants import MIN_SAMPLES_FOR_CI
from bench._errors import BenchError


@dataclass(frozen=True)
class Metric:
    """A compared metric and the direction that counts as better."""

    key: str
    label: str
    higher_is_better: bool
    kind: str


DECODE_SPEEDUP = Metric("decode_speedup", "decode speedup", True, "speedup")
LATENCY_SPEEDUP = Metric("latency_speedup", "latency speedup", True, "speedup")
ACCEPT_RATE = Metric("accept_rate", "accept rate", True, "rate")
DECODE_RATE = Metric("decode_rate", "decode t/s", True, "speed")
LATENCY = Metric("latency", "latency", False, "seconds")


NORMAL_ABOVE = 5000
"""Above this many samples the bootstrap distribution of the mean of logs is normal to within its own
Monte-Carlo error (central limit theorem), so the normal interval is used instead of resampling
(n * resamples gathers would dominate the analysis of large runs)."""


def bootstrap_geomean_ci(
    values: Sequence[float] | np.ndarray,
    *,
    resamples: int = 4000,
    confidence: float = 0.95,
    seed: int = 0,
    min_samples: int = MIN_SAMPLES_FOR_CI,
    normal_above: int = NORMAL_ABOVE,
) -> tuple[float, float, float]:
    """Geometric mean of positive ratios with a seeded percentile-bootstrap CI: (geomean, low, high)."""
    if resamples < 1:
        raise BenchError(f"resamples must be >= 1 (got {resamples})")
    logs = np.log(np.asarray(values, dtype=float))
    logs = logs[np.isfinite(logs)]
    if logs.size == 0:
        return (math.nan, math.nan, math.nan)
    point = float(np.exp(logs.mean()))
    if logs.size < max(2, min_samples):
        return (point, math.nan, math.nan)
    if logs.size > normal_above:
        half = statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0) * logs.std(ddof=1) / math.sqrt(logs.size)
        return (point, float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half)))
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    chunk = max(1, 2_000_000 // logs.size)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        index = rng.integers(0, logs.size, size=(stop - start, logs.size))
        means[start:stop] = logs[index].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return (point, float(np.exp(low)), float(np.exp(high)))


def resample_indices(n: int, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Seeded bootstrap resamples of `n` sample indices, in chunks of rows (bounded memory)."""
    rng = np.random.default_rng(seed)
    chunk = max(1, 2_000_000 // max(1, n))
    for start in range(0, resamples, chunk):
        yield rng.integers(0, n, size=(min(resamples, start + chunk) - start, n))


def bootstrap_ratio_of_sums(
    reference_numerator: np.ndarray,
    reference_denominator: np.ndarray,
    candidate_numerator: np.ndarray,
    candidate_denominator: np.ndarray,
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    min_samples: int = MIN_SAMPLES_FOR_CI,
) -> tuple[float, float, float]:
    """Ratio of two pooled rates (e.g. candidate/reference accept rate) over paired samples, with a percentile CI."""
    arrays = [np.asarray(values, dtype=float) for values in (
        reference_numerator, reference_denominator, candidate_numerator, candidate_denominator)]

    def ratio(ref_num: Any, ref_den: Any, new_num: Any, new_den: Any) -> Any:
        with np.errstate(divide="ignore", invalid="ignore"):
            return (new_num / new_den) / (ref_num / ref_den)

    point = float(ratio(*(values.sum() for values in arrays)))
    n = arrays[0].size
    if n < max(2, min_samples) or not math.isfinite(point):
        return (point, math.nan, math.nan)
    draws = np.concatenate([
        ratio(*(values[index].sum(axis=1) for values in arrays)) for index in resample_indices(n, resamples, seed)
    ])
    draws = draws[np.isfinite(draws)]
    if draws.size < resamples * 0.9:  # too many resamples drew no drafts: no trustworthy interval
        return (point, math.nan, math.nan)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(draws, [alpha, 1.0 - alpha])
    return (point, float(low), float(high))


def verdict(point: float, low: float, high: float, metric: Metric, threshold: float) -> str:
    """`better`/`worse` only when the CI excludes no-change and the change exceeds the threshold."""
    if any(math.isnan(x) for x in (point, low, high)):
        return "not enough data"
    improved = low > 1.0 and point > 1.0 + threshold
    degraded = high < 1.0 and point < 1.0 / (1.0 + threshold)
    if not metric.higher_is_better:
        improved, degraded = degraded, improved
    if improved:
        return "better"
    if degraded:
        return "worse"
    return "no significant change"


SPEED_VERDICT_WORDS = {"better": "faster", "worse": "slower"}
