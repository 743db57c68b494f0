"""The compared metrics, the one interval estimator for geometric means, and the two-gate verdict."""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from bench._constants import MIN_SAMPLES_FOR_CI
from bench._errors import BenchError
from bench.analysis._metrics import Metric

NORMAL_ABOVE = 5000
"""Kept for callers of the old percentile bootstrap: above this many samples `method="bootstrap"` uses the
normal interval it converges to (the default t-interval needs no resampling at any size)."""

INTERVAL_METHOD = "t"
"""The default interval: Student's t on the logs of the ratios (exact for lognormal noise; measured coverage in
the README's "Interval coverage" table; the percentile bootstrap under-covers at small n)."""


@functools.lru_cache(maxsize=256)
def t_quantile(probability: float, df: float) -> float:
    """Student t quantile for a (possibly fractional) number of degrees of freedom, to ~1e-9 (no scipy needed)."""
    if not 0.5 <= probability < 1.0 or df <= 0:
        raise BenchError(f"t_quantile needs 0.5 <= probability < 1 and df > 0 (got {probability}, {df})")
    low, high = 0.0, 1.0
    while t_cdf(high, df) < probability:
        low, high = high, high * 2
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if t_cdf(middle, df) < probability else (low, middle)
        if high - low < 1e-12 * max(1.0, high):
            break
    return (low + high) / 2


def _t_quantile(confidence: float, df: float) -> float:
    return t_quantile(round(0.5 + confidence / 2.0, 12), round(float(df), 2))  # cached: df to 0.01 is plenty


def geomean_t_intervals(logs: np.ndarray, *, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised t-interval of the geometric mean for each row of a 2-D array of logs: (point, low, high)."""
    logs = np.atleast_2d(np.asarray(logs, dtype=float))
    n = logs.shape[1]
    if n < 2:
        raise BenchError("a t-interval needs at least 2 values per row")
    mean = logs.mean(axis=1)
    half = _t_quantile(confidence, n - 1) * logs.std(axis=1, ddof=1) / math.sqrt(n)
    return np.exp(mean), np.exp(mean - half), np.exp(mean + half)


def crossed_t_interval(
    matrix: np.ndarray, *, confidence: float = 0.95
) -> tuple[float, float, float]:
    """Geometric-mean interval over a samples x repeats matrix of logs with random sample and repeat effects.

    The variance of the grand mean is (MS_samples + MS_repeats - MS_residual) / (n R) (two-way crossed random
    effects, the analytic equivalent of resampling both repeats and samples), never less than the per-sample
    interval's MS_samples / (n R); degrees of freedom by Satterthwaite.
    """
    return crossed_log_mean(matrix).interval(confidence)


def bootstrap_geomean_ci(
    values: Sequence[float] | np.ndarray,
    *,
    resamples: int = 4000,
    confidence: float = 0.95,
    seed: int = 0,
    min_samples: int = MIN_SAMPLES_FOR_CI,
    normal_above: int = NORMAL_ABOVE,
    method: str = INTERVAL_METHOD,
    groups: Sequence[Hashable] | np.ndarray | None = None,
    ids: Sequence[Hashable] | np.ndarray | None = None,
) -> tuple[float, float, float]:
    """Geometric mean of positive ratios with a 95% interval: (geomean, low, high); NaN bounds below min_samples.

    `method="t"` (default): Student's t on the logs. `method="bootstrap"`: the seeded percentile bootstrap
    (kept for comparison; under-covers at small n). With `groups` (the repeat of each value) and `ids` (its
    sample), values form a samples x repeats matrix and the interval accounts for between-repeat variation
    (`crossed_t_interval`); the point is then the geometric mean over samples that have every repeat.
    """
    if resamples < 1:
        raise BenchError(f"resamples must be >= 1 (got {resamples})")
    if method not in ("t", "bootstrap"):
        raise BenchError(f"unknown interval method {method!r}; available: t, bootstrap")
    logs = np.log(np.asarray(values, dtype=float))
    if groups is not None and ids is not None:
        return _grouped_interval(logs, groups, ids, confidence=confidence, min_samples=min_samples)
    logs = logs[np.isfinite(logs)]
    if logs.size == 0:
        return (math.nan, math.nan, math.nan)
    point = float(np.exp(logs.mean()))
    if logs.size < max(2, min_samples):
        return (point, math.nan, math.nan)
    if method == "t":
        _, low, high = geomean_t_intervals(logs[None, :], confidence=confidence)
        return (point, float(low[0]), float(high[0]))
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

    def ratio(ref_num: np.ndarray, ref_den: np.ndarray, new_num: np.ndarray, new_den: np.ndarray) -> np.ndarray:
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
def _grouped_interval(
    logs: np.ndarray, groups: Sequence[Hashable] | np.ndarray, ids: Sequence[Hashable] | np.ndarray, *,
    confidence: float, min_samples: int,
) -> tuple[float, float, float]:
    """The crossed samples x repeats interval; one repeat (or too few complete samples) falls back to per-sample t."""
    import pandas as pd

    frame = pd.DataFrame({"id": list(ids), "group": list(groups), "log": logs})
    frame = frame[np.isfinite(frame["log"])]
    if frame.empty:
        return (math.nan, math.nan, math.nan)
    matrix = frame.pivot_table(index="id", columns="group", values="log", aggfunc="mean", sort=False).dropna()
    if matrix.shape[1] < 2 or matrix.shape[0] < max(2, min_samples):
        per_sample = frame.groupby("id", sort=False)["log"].mean().to_numpy()
        return bootstrap_geomean_ci(np.exp(per_sample), confidence=confidence, min_samples=min_samples)
    return crossed_t_interval(matrix.to_numpy(), confidence=confidence)


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


def t_cdf(x: float, df: float) -> float:
    """Student t distribution function P(T <= x) for a (possibly fractional) df (no scipy needed)."""
    if df <= 0:
        raise BenchError(f"t_cdf needs df > 0 (got {df})")
    if not math.isfinite(x):
        return 0.0 if x < 0 else 1.0
    # P(|T| > |x|) = I_{df/(df+x^2)}(df/2, 1/2): the regularized incomplete beta by its continued fraction
    tail = _incomplete_beta(df / 2.0, 0.5, df / (df + x * x))
    return 1.0 - tail / 2.0 if x >= 0 else tail / 2.0


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) (Lentz's continued fraction, Numerical Recipes 6.4)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _incomplete_beta(b, a, 1.0 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 400):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-14:
            break
    return front * result / a


@dataclass(frozen=True, slots=True)
class LogMean:
    """The mean of log ratios with its standard error and degrees of freedom: every interval and test derives from it.

    `method` names the estimator (`t`, `crossed`, `yuen`); `n` counts samples, `sd` is the per-sample spread the
    standard error implies (se * sqrt(n)), used to plan how many samples an effect needs.
    """

    mean: float
    se: float
    df: float
    n: int
    method: str = "t"
    drift_se: float = 0.0
    drift_df: float = math.inf
    withheld: str | None = None

    @property
    def sd(self) -> float:
        """The per-sample standard deviation implied by the standard error."""
        return self.se * math.sqrt(self.n)

    def half_width(self, confidence: float) -> float:
        """Half the two-sided interval on the log scale; with a drift term, the modified large-sample combination
        sqrt(t_df^2 se^2 + t_drift_df^2 drift_se^2) (Graybill & Wang 1980)."""
        half = _t_quantile(confidence, self.df) * self.se
        if self.drift_se > 0:
            drift = _t_quantile(confidence, self.drift_df) * self.drift_se
            half = math.sqrt(half * half + drift * drift)
        return half

    def interval(self, confidence: float = 0.95) -> tuple[float, float, float]:
        """(geometric mean, low, high) at `confidence`, two-sided."""
        half = self.half_width(confidence)
        return (math.exp(self.mean), math.exp(self.mean - half), math.exp(self.mean + half))

    def p_value(self, null: float = 0.0) -> float:
        """Two-sided p-value of the hypothesis that the mean log equals `null` (1.00x by default)."""
        if self.se <= 0 and self.drift_se <= 0:
            return 0.0 if self.mean != null else 1.0
        if self.drift_se > 0:
            return self._inverted_p(abs(self.mean - null))
        return 2.0 * t_cdf(-abs(self.mean - null) / self.se, self.df)

    def _inverted_p(self, distance: float) -> float:
        """The two-sided level at which the interval's half-width equals `distance` (bisection on the level)."""
        low, high = 1e-12, 1.0 - 1e-12
        if self.half_width(1.0 - low) < distance:
            return low
        for _ in range(60):
            middle = math.sqrt(low * high)
            low, high = (middle, high) if self.half_width(1.0 - middle) > distance else (low, middle)
        return high

    def one_sided_p(self, bound: float, *, above: bool) -> float:
        """p-value of "the mean log lies above `bound`" (above=True) or below it, one-sided."""
        if self.se <= 0 and self.drift_se <= 0:
            return 0.0 if (self.mean > bound if above else self.mean < bound) else 1.0
        statistic = (self.mean - bound) / self.se if self.drift_se <= 0 else math.nan
        if self.drift_se > 0:
            two_sided = self._inverted_p(abs(self.mean - bound)) / 2.0
            toward = self.mean > bound if above else self.mean < bound
            return two_sided if toward else 1.0 - two_sided
        return t_cdf(-statistic if above else statistic, self.df)


def log_mean(logs: Sequence[float] | np.ndarray) -> LogMean | None:
    """Student's t estimate of the mean of finite logs; one value gives the point alone (no spread); none, None."""
    values = np.asarray(logs, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    if values.size == 1:
        return LogMean(float(values[0]), math.nan, math.nan, 1)
    return LogMean(float(values.mean()), float(values.std(ddof=1)) / math.sqrt(values.size), values.size - 1.0,
                   int(values.size))


YUEN_TRIM = 0.2
"""Share trimmed from each end by the robust (Yuen) interval."""


def yuen_log_mean(logs: Sequence[float] | np.ndarray, trim: float = YUEN_TRIM) -> LogMean | None:
    """Yuen's trimmed-mean estimate of a location of logs (20% trimmed, winsorized variance); None below 5 values."""
    values = np.sort(np.asarray(logs, dtype=float)[np.isfinite(np.asarray(logs, dtype=float))])
    n = values.size
    cut = math.floor(trim * n)
    if n < 5 or n - 2 * cut < 2:
        return None
    trimmed = values[cut:n - cut]
    winsorized = np.clip(values, values[cut], values[n - cut - 1])
    se = float(winsorized.std(ddof=1)) / ((1.0 - 2.0 * cut / n) * math.sqrt(n))
    return LogMean(float(trimmed.mean()), se, float(n - 2 * cut - 1), int(n), "yuen")


DRIFT_PRETEST_LEVEL = 0.25
"""Three or more repeats whose means differ with p below this (F test of repeats against residual) are taken to
drift (the drift-aware interval is valid either way; the pretest only buys power when the repeats agree)."""

TWO_REPEAT_PRETEST_LEVEL = 0.005
"""Two repeats are taken to drift (and the interval withheld) below this p. Only clear disagreement withholds: the
mean of two drifts is independent of their difference, so no test on two repeats makes the intervals it lets
through cover under drift the arms do not share; withholding more would only cost power where drift is shared."""


def crossed_log_mean(matrix: np.ndarray) -> LogMean:
    """The samples x repeats estimate with random sample and repeat effects (see `crossed_t_interval`)."""
    n, repeats = matrix.shape
    grand, ms_sample, ms_repeat, ms_resid = _mean_squares(matrix)
    combined = max(ms_sample + ms_repeat - ms_resid, ms_sample)
    denominator = ms_sample**2 / (n - 1) + ms_repeat**2 / (repeats - 1) + ms_resid**2 / ((n - 1) * (repeats - 1))
    df = combined**2 / denominator if denominator > 0 else float(n - 1)
    df = min(max(df, 1.0), float(n * repeats - 1))
    return LogMean(grand, math.sqrt(combined / (n * repeats)), df, int(n), "crossed")


def _mean_squares(matrix: np.ndarray) -> tuple[float, float, float, float]:
    n, repeats = matrix.shape
    grand = float(matrix.mean())
    by_sample = matrix.mean(axis=1)
    by_repeat = matrix.mean(axis=0)
    ms_sample = repeats * float(((by_sample - grand) ** 2).sum()) / (n - 1)
    ms_repeat = n * float(((by_repeat - grand) ** 2).sum()) / (repeats - 1)
    residual = matrix - by_sample[:, None] - by_repeat[None, :] + grand
    ms_resid = float((residual**2).sum()) / ((n - 1) * (repeats - 1))
    return grand, ms_sample, ms_repeat, ms_resid


def _drift_p(ms_repeat: float, ms_resid: float, repeats: int, n: int) -> float:
    """p-value of "the repeats do not drift apart": F = MS_repeats / MS_residual on (R-1, (n-1)(R-1)) df (exact
    through t at R = 2; the Wilson-Hilferty normal approximation to (R-1) F as chi-square above)."""
    if ms_resid <= 0:
        return 0.0 if ms_repeat > 0 else 1.0
    ratio = ms_repeat / ms_resid
    if repeats == 2:
        return 2.0 * t_cdf(-math.sqrt(ratio), float(n - 1))
    k = repeats - 1
    z = (ratio ** (1.0 / 3.0) - (1.0 - 2.0 / (9.0 * k))) / math.sqrt(2.0 / (9.0 * k))
    return 1.0 - statistics.NormalDist().cdf(z)


def repeat_log_mean(matrix: np.ndarray) -> LogMean:
    """The estimate over a samples x repeats matrix of logs that keeps its coverage when repeats drift.

    When the repeats agree within their residual noise (F test, p > `DRIFT_PRETEST_LEVEL`; 0.005 for two repeats),
    drift is taken as shared
    by the arms and the per-sample t over repeat-averaged values is used (more repeats, more power). Otherwise, with
    three or more repeats, the variance splits into a sample part MS_samples / (n R) with n - 1 df and a drift part
    MS_repeats / (n R) with R - 1 df, combined by the modified large-sample method (Graybill & Wang 1980); with two
    repeats one degree of freedom cannot bound the drift, and the interval is withheld, saying so.
    """
    n, repeats = matrix.shape
    grand, ms_sample, ms_repeat, ms_resid = _mean_squares(matrix)
    per_sample = matrix.mean(axis=1)
    simple = log_mean(per_sample)
    assert simple is not None
    if _drift_p(ms_repeat, ms_resid, repeats, n) > (TWO_REPEAT_PRETEST_LEVEL if repeats == 2 else DRIFT_PRETEST_LEVEL):
        return LogMean(simple.mean, simple.se, simple.df, n, "t over repeat means (repeats agree)")
    if repeats == 2:
        return LogMean(grand, simple.se, simple.df, n, "withheld", withheld=(
            "the two repeats disagree beyond their within-run noise: one degree of freedom cannot bound drift "
            "between repeats, so no interval; run 3 or more repeats"))
    return LogMean(grand, math.sqrt(ms_sample / (n * repeats)), float(n - 1), n, "t + repeat drift (MLS)",
                   drift_se=math.sqrt(ms_repeat / (n * repeats)), drift_df=float(repeats - 1))


def accept_rate_log_mean(reference_accepted: np.ndarray, reference_drafted: np.ndarray,
                         candidate_accepted: np.ndarray, candidate_drafted: np.ndarray) -> LogMean | None:
    """Delta-method estimate of log(candidate pooled accept rate / reference pooled accept rate) over paired samples.

    Each sample's influence on the log ratio of sums is a/A - d/D (per arm, signs by side); the variance is the
    sample variance of the influences times n, with n - 1 degrees of freedom. None below two samples or no drafts.
    """
    columns = [np.asarray(values, dtype=float) for values in (reference_accepted, reference_drafted,
                                                                candidate_accepted, candidate_drafted)]
    sums = [values.sum() for values in columns]
    n = columns[0].size
    if n < 2 or min(sums) <= 0:
        return None
    mean = math.log(sums[2] / sums[3]) - math.log(sums[0] / sums[1])
    influence = (columns[2] / sums[2] - columns[3] / sums[3]) - (columns[0] / sums[0] - columns[1] / sums[1])
    se = math.sqrt(n * float(influence.var(ddof=1))) if n > 1 else math.nan
    return LogMean(mean, se, n - 1.0, n, "delta")
