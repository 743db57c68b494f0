"""A history of comparisons: its points read off each comparison, its series, their change points and the gates.

A point's rows come from the comparison's own rows (the overall row and each category row, as `compare` computed
them): decode and latency speedups with the precision their intervals imply, and the speculative arm's accept rate
and drafted share with delta-method standard errors over its samples. A series is one machine x workload x
category x metric in commit order; its change points come from `weighted_segmentation` with the family over every
candidate split of every series, so an unchanged history shows a false change point at most `alpha` of the time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from bench._constants import DEFAULT_GATE_THRESHOLD, OVERALL
from bench.analysis._change_points import (
    DEFAULT_MIN_SIZE,
    between_commit_variance,
    candidate_splits,
    normal_quantile,
    point_variances,
    weighted_segmentation,
)
from bench.analysis._family import FAMILY_ALPHA, holm_levels
from bench.analysis._intervals import t_quantile
from bench.analysis._metrics import ACCEPT_RATE, DECODE_SPEEDUP, DRAFTED, LATENCY_SPEEDUP, Metric
from bench.records import HISTORY_METRICS, HistoryPoint, Machine, PointRow, Run

if TYPE_CHECKING:
    from bench.analysis._compare import Comparison
    from bench.analysis._estimate import Estimate
    from bench.analysis._regress import Gate

HISTORY_METRIC: dict[str, Metric] = {
    "decode": DECODE_SPEEDUP, "latency": LATENCY_SPEEDUP, "accept_rate": ACCEPT_RATE, "drafted_share": DRAFTED,
}
"""Each history metric's declaration (label, direction), by the name a point file uses."""

HISTORY_METHOD = ("change points: binary segmentation, precision-weighted z at every split, Bonferroni over every "
                  "candidate split of every series (family-wise false-alarm rate {alpha:.0%} over the whole history)")

DEFAULT_TREND_WINDOW = 20
"""The recent window `report --history` and `regress --history` read: the last 20 commits of a series."""

REGRESSION, IMPROVEMENT = "regression", "improvement"


def history_rows(comparison: Comparison) -> tuple[PointRow, ...]:
    """The rows a history point records of one comparison: every category row and the overall row, each metric."""
    rows: list[PointRow] = []
    counts = _per_sample_counts(comparison.speculative)
    for row in comparison.stats:
        for name, estimate in (("decode", row.decode), ("latency", row.latency)):
            rows.append(_speedup_row(row.category, name, estimate, row.n))
        for name, numerator, denominator in (("accept_rate", "accepted", "drafted"),
                                             ("drafted_share", "accepted", "output")):
            own = counts.get(row.category) if row.category != OVERALL else _all(counts)
            if own is not None:
                rows.append(_ratio_row(row.category, name, own[numerator], own[denominator]))
    return tuple(rows)


def _speedup_row(category: str, name: str, estimate: Estimate, n: int) -> PointRow:
    """A speedup row: the estimate and the log standard error its interval and level imply."""
    point, low, high = estimate.point, estimate.low, estimate.high
    confidence, df = estimate.confidence, estimate.df
    if not (math.isfinite(low) and math.isfinite(high) and low > 0 and point > 0):
        return PointRow(category, name, point, math.nan, math.nan, math.nan, math.nan, n)
    degrees = df if math.isfinite(df) and df > 0 else max(n - 1.0, 1.0)
    se = (math.log(high) - math.log(low)) / (2.0 * t_quantile(0.5 + confidence / 2.0, degrees))
    half = t_quantile(0.975, degrees) * se
    return PointRow(category, name, point, point * math.exp(-half), point * math.exp(half), se, degrees, n)


def _per_sample_counts(run: Run) -> dict[str, dict[str, np.ndarray]]:
    """Per category: each successful sample's accepted, drafted and output tokens (summed over its repeats)."""
    found: dict[str, dict[str, list[float]]] = {}
    for result in run.latest:
        if not result.ok:
            continue
        own = found.setdefault(result.category, {"accepted": [], "drafted": [], "output": []})
        own["accepted"].append(float(result.draft_n_accepted))
        own["drafted"].append(float(result.draft_n))
        own["output"].append(float(result.completion_tokens))
    return {category: {key: np.asarray(values) for key, values in own.items()} for category, own in found.items()}


def _all(counts: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, np.ndarray] | None:
    if not counts:
        return None
    return {key: np.concatenate([own[key] for own in counts.values()]) for key in ("accepted", "drafted", "output")}


def _ratio_row(category: str, name: str, numerator: np.ndarray, denominator: np.ndarray) -> PointRow:
    """A pooled ratio (sum / sum) with the delta-method standard error of its log over the samples."""
    n = int(numerator.size)
    top, bottom = float(numerator.sum()), float(denominator.sum())
    if n == 0 or top <= 0 or bottom <= 0:
        return PointRow(category, name, top / bottom if bottom > 0 else math.nan, math.nan, math.nan, math.nan,
                        math.nan, n)
    ratio = top / bottom
    if n < 2:
        return PointRow(category, name, ratio, math.nan, math.nan, math.nan, math.nan, n)
    influence = numerator / top - denominator / bottom
    se = math.sqrt(n * float(influence.var(ddof=1)))
    half = t_quantile(0.975, n - 1.0) * se
    # a share never exceeds 1: the interval drawn on the log scale is cut there
    return PointRow(category, name, ratio, ratio * math.exp(-half), min(1.0, ratio * math.exp(half)), se, n - 1.0, n)


class SeriesPoint(NamedTuple):
    """One commit of a series: the (combined) estimate with its 95% interval and precision."""

    commit: str
    time: str
    branch: str | None
    estimate: float
    low: float
    high: float
    log_se: float
    n: int
    points: int = 1


@dataclass(frozen=True, slots=True)
class ChangePoint:
    """A proven change in a series: `commit` is the first commit after it, `previous` the last one before.

    `before` and `after` are the levels of the segments either side (weighted geometric means), `change` their
    ratio minus one with `low`/`high` its interval at the family's per-split level."""

    commit: str
    previous: str
    index: int
    before: float
    after: float
    low: float
    high: float
    z: float
    p_value: float
    direction: str

    @property
    def change(self) -> float:
        """after / before - 1."""
        return self.after / self.before - 1.0


@dataclass(frozen=True, slots=True, eq=False)
class Series:
    """One machine x workload x category x metric of the history, in commit order, with its change points.

    The values are arrays, one entry per commit (reruns of a commit combined); `points` gives them as rows."""

    machine: Machine
    workload: str
    category: str
    metric: Metric
    name: str
    commits: tuple[str, ...]
    times: tuple[str, ...]
    branches: tuple[str | None, ...]
    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    log_se: np.ndarray
    n: np.ndarray
    reruns: np.ndarray
    change_points: tuple[ChangePoint, ...] = ()
    tau: float = 0.0

    def __len__(self) -> int:
        """The number of commits in the series."""
        return len(self.commits)

    @property
    def points(self) -> tuple[SeriesPoint, ...]:
        """The series as one row per commit."""
        columns = (self.commits, self.times, self.branches, self.estimate.tolist(), self.low.tolist(),
                   self.high.tolist(), self.log_se.tolist(), self.n.tolist(), self.reruns.tolist())
        return tuple(map(SeriesPoint._make, zip(*columns, strict=True)))

    @property
    def primary(self) -> bool:
        """Whether this is an overall series (the workload's primary result)."""
        return self.category == OVERALL

    @property
    def label(self) -> str:
        """`workload / category / metric`."""
        return f"{self.workload} / {self.category} / {self.name}"

    def variances(self) -> np.ndarray:
        """Each commit's sampling variance on the log scale as the change points weigh it (tau^2 not included)."""
        return point_variances(self.log_se, self.n)

    def level(self, start: int, end: int) -> tuple[float, float]:
        """The weighted mean log of commits [start, end) and its standard error (tau included)."""
        values = np.log(self.estimate[start:end])
        weights = 1.0 / (self.variances()[start:end] + self.tau**2)
        return float(np.sum(weights * values) / np.sum(weights)), float(1.0 / math.sqrt(float(np.sum(weights))))


@dataclass(frozen=True, slots=True)
class HistoryAnalysis:
    """Every series of a history with its change points, and the family they were found in."""

    series: tuple[Series, ...]
    alpha: float
    splits: int
    level: float
    commits: tuple[str, ...] = ()
    skipped: tuple[str, ...] = field(default_factory=tuple)

    @property
    def method(self) -> str:
        """One line naming the method and the family."""
        return (HISTORY_METHOD.format(alpha=self.alpha) + f": {len(self.series)} series, {self.splits} candidate "
                f"splits, each tested at two-sided {self.level:.2g}")

    @property
    def change_points(self) -> list[tuple[Series, ChangePoint]]:
        """Every change point with its series."""
        return [(series, change) for series in self.series for change in series.change_points]


def _order(point: HistoryPoint) -> tuple[str, str, str]:
    """Commit order: by the commit's time, then by when the point was added."""
    return (point.time, point.added_at, point.commit)


def build_series(points: Iterable[HistoryPoint], *, branch: str | None = None) -> list[Series]:
    """The series of a history: points grouped by machine, workload, category and metric, in commit order
    (by time, then by when they were added); reruns of one commit combined (inverse-variance on the log scale).
    Rows without precision are left out."""
    ordered = sorted((point for point in points if branch is None or point.branch == branch), key=_order)
    order: dict[str, int] = {}
    first: list[HistoryPoint] = []
    for point in ordered:
        if point.commit not in order:
            order[point.commit] = len(first)
            first.append(point)
    labels = [np.array([getattr(point, name) for point in first], dtype=object) for name in ("commit", "time",
                                                                                              "branch")]
    layouts: dict[tuple[str, str, tuple[str, ...], tuple[str, ...]], list[HistoryPoint]] = {}
    machines: dict[str, Machine] = {}
    for point in ordered:
        machines[point.machine.fingerprint] = point.machine
        key = (point.machine.fingerprint, point.workload, point.table.category, point.table.metric)
        layouts.setdefault(key, []).append(point)
    parts: dict[tuple[str, str, str, str], list[tuple[np.ndarray, ...]]] = {}
    for (fingerprint, workload, categories, metrics), members in layouts.items():
        position = np.array([order[point.commit] for point in members])
        columns = [np.vstack([getattr(point.table, name) for point in members])
                   for name in ("estimate", "low", "high", "log_se", "n")]
        for index, (category, metric) in enumerate(zip(categories, metrics, strict=True)):
            if metric in HISTORY_METRIC:
                parts.setdefault((fingerprint, workload, category, metric), []).append(
                    (position, *(column[:, index] for column in columns)))
    series = []
    for (fingerprint, workload, category, metric), pieces in parts.items():
        position, estimate, low, high, log_se, n = (np.concatenate(column) for column in zip(*pieces, strict=True))
        keep = (log_se > 0) & (estimate > 0)  # NaN fails both: a row without precision is no point
        if not keep.any():
            continue
        position, estimate, low, high, log_se, n = (column[keep] for column in (position, estimate, low, high,
                                                                                log_se, n))
        sort = np.argsort(position, kind="stable")
        position, estimate, low, high, log_se, n = (column[sort] for column in (position, estimate, low, high,
                                                                                log_se, n))
        commits, inverse, reruns = np.unique(position, return_inverse=True, return_counts=True)
        if reruns.max() > 1:
            weights = 1.0 / log_se**2
            total = np.bincount(inverse, weights)
            mean = np.bincount(inverse, weights * np.log(estimate)) / total
            log_se = 1.0 / np.sqrt(total)
            estimate, low, high = np.exp(mean), np.exp(mean - 1.96 * log_se), np.exp(mean + 1.96 * log_se)
            n = np.bincount(inverse, n).astype(int)
        series.append(Series(machines[fingerprint], workload, category, HISTORY_METRIC[metric], metric,
                             tuple(labels[0][commits]), tuple(labels[1][commits]), tuple(labels[2][commits]),
                             estimate, low, high, log_se, n.astype(int), reruns))
    rank = {name: position for position, name in enumerate(HISTORY_METRICS)}
    series.sort(key=lambda item: (item.machine.name, item.workload, item.category != OVERALL, item.category,
                                  rank.get(item.name, 99)))
    return series


def analyse_history(points: Iterable[HistoryPoint], *, alpha: float = FAMILY_ALPHA, branch: str | None = None,
                    min_size: int = DEFAULT_MIN_SIZE, metrics: Sequence[str] | None = None) -> HistoryAnalysis:
    """Every series of the history and its change points, the family being every candidate split of every series."""
    chosen = [point for point in points if branch is None or point.branch == branch]
    series = [item for item in build_series(chosen) if metrics is None or item.name in metrics]
    splits = sum(candidate_splits(len(item), min_size) for item in series)
    level = alpha / max(splits, 1)
    found = []
    for item in series:
        values = np.log(item.estimate)
        tau2 = between_commit_variance(values, item.variances())
        splits_found = weighted_segmentation(values, item.log_se, item.n, level=level, min_size=min_size)
        critical = normal_quantile(1.0 - level / 2.0)
        changes = []
        for split in splits_found:
            if split.p_value > level:  # re-tested between its final neighbours, it no longer holds
                continue
            change = split.log_change
            worse = change < 0 if item.metric.higher_is_better else change > 0
            changes.append(ChangePoint(
                commit=item.commits[split.index], previous=item.commits[split.index - 1],
                index=split.index, before=math.exp(split.before), after=math.exp(split.after),
                low=math.expm1(change - critical * split.log_se), high=math.expm1(change + critical * split.log_se),
                z=split.z, p_value=split.p_value, direction=REGRESSION if worse else IMPROVEMENT))
        found.append(replace(item, change_points=tuple(changes), tau=math.sqrt(tau2)))
    with_rows = set().union(*(item.commits for item in found))
    commits = tuple(commit for commit in dict.fromkeys(point.commit for point in sorted(chosen, key=_order))
                    if commit in with_rows)
    return HistoryAnalysis(tuple(found), alpha, splits, level, commits)


@dataclass(frozen=True, slots=True)
class Regression:
    """A proven regression over the threshold that the newest commit has not recovered from."""

    series: Series
    change: ChangePoint
    newest: float

    @property
    def size(self) -> float:
        """The newest segment's level against the level before the regression, minus one."""
        return self.newest / self.change.before - 1.0


def open_regressions(analysis: HistoryAnalysis, *, threshold: float = DEFAULT_GATE_THRESHOLD) -> list[Regression]:
    """Regressions the newest commit of each series still lies after: proven (a change point of the family), over
    the threshold at the change, and the newest segment still worse than before it by more than the threshold."""
    found = []
    for series in analysis.series:
        if not series.change_points:
            continue
        last = series.change_points[-1]
        newest = math.exp(series.level(last.index, len(series))[0])
        for change in series.change_points:
            if change.direction != REGRESSION or abs(change.change) <= threshold:
                continue
            size = newest / change.before - 1.0
            worse = size < -threshold if series.metric.higher_is_better else size > threshold
            if worse:
                found.append(Regression(series, change, newest))
    return found


@dataclass(frozen=True, slots=True)
class Trend:
    """A series' recent trend: the level at the start and the end of the window and the change points inside."""

    series: Series
    newest: float
    start_level: float
    end_level: float
    window: int
    change_points: tuple[ChangePoint, ...]


def recent_trend(analysis: HistoryAnalysis, workload: str | None = None, *, metric: str = "decode",
                 window: int = DEFAULT_TREND_WINDOW) -> Trend | None:
    """The overall series' trend over its last `window` commits (of `workload`, or the first workload)."""
    for series in analysis.series:
        if series.primary and series.name == metric and (workload is None or series.workload == workload):
            count = len(series)
            start = max(0, count - window)
            half = max(1, min(5, (count - start) // 2))
            first = math.exp(series.level(start, start + half)[0])
            last = math.exp(series.level(count - half, count)[0])
            inside = tuple(change for change in series.change_points if change.index >= start)
            return Trend(series, float(series.estimate[-1]), first, last, count - start, inside)
    return None


@dataclass(frozen=True, slots=True)
class WindowReference:
    """A series' reference level for a gate: the weighted mean of its recent window (after its last change)."""

    series: Series
    log_level: float
    log_se: float
    commits: int


def window_references(analysis: HistoryAnalysis, workload: str, fingerprint: str | None = None, *,
                      window: int = DEFAULT_TREND_WINDOW) -> dict[tuple[str, str], WindowReference]:
    """Per (category, metric): the level of the last `window` commits since the last change point."""
    found = {}
    for series in analysis.series:
        if series.workload != workload or (fingerprint is not None and series.machine.fingerprint != fingerprint):
            continue
        count = len(series)
        start = max(count - window, series.change_points[-1].index if series.change_points else 0)
        if count - start < 2:
            continue
        level, se = series.level(start, count)
        found[(series.category, series.name)] = WindowReference(series, level, math.sqrt(se**2 + series.tau**2),
                                                                count - start)
    return found


def history_gate(analysis: HistoryAnalysis, candidate: Sequence[PointRow], workload: str,
                 fingerprint: str | None = None, *, thresholds: Mapping[str, float] | None = None,
                 window: int = DEFAULT_TREND_WINDOW, alpha: float = FAMILY_ALPHA) -> Gate:
    """The gate of a candidate's rows against the history's recent window: a `Gate` (overall rows gated, category
    rows reported), each row's ratio candidate / window level with the window's and the candidate's precision."""
    from bench.analysis._regress import INCONCLUSIVE, NON_INFERIOR, REGRESSED, Gate, GateRow

    references = window_references(analysis, workload, fingerprint, window=window)
    limits = {"decode": DEFAULT_GATE_THRESHOLD, "latency": DEFAULT_GATE_THRESHOLD,
              "accept_rate": DEFAULT_GATE_THRESHOLD}
    for name, key in (("decode", "decode_speedup"), ("latency", "latency_speedup"), ("accept_rate", "accept_rate")):
        if thresholds and key in thresholds:
            limits[name] = thresholds[key]
    pending = []
    for row in candidate:
        reference = references.get((row.category, row.metric))
        if row.metric not in limits or reference is None or not (row.log_se > 0 and row.estimate > 0):
            continue
        variance = float(point_variances(np.array([row.log_se]), np.array([row.n]))[0]) + reference.series.tau**2
        mean = math.log(row.estimate) - reference.log_level
        se = math.sqrt(variance + reference.log_se**2)
        pending.append((row, reference, mean, se, 0.5 * math.erfc(-mean / se / math.sqrt(2.0))))
    rows = []
    for gated in (False, True):
        group = [item for item in pending if (item[0].category == OVERALL) == gated]
        levels = holm_levels([item[4] for item in group], alpha)
        for (row, reference, mean, se, _), level in zip(group, levels, strict=True):
            bound = -math.log1p(limits[row.metric])
            half = normal_quantile(1.0 - level) * se
            low, high = mean - half, mean + half
            status = REGRESSED if high < 0.0 and mean < bound else NON_INFERIOR if low > bound else INCONCLUSIVE
            detectable = -math.expm1(-(normal_quantile(1.0 - level) + normal_quantile(0.8)) * se)
            rows.append(GateRow(row.category, HISTORY_METRIC[row.metric], row.n, math.exp(reference.log_level),
                                row.estimate, math.exp(mean), math.exp(low), math.exp(high), status, gated,
                                1.0 - 2.0 * level, detectable,
                                f"reference: the last {reference.commits} commits of the history"))
    notes = (f"reference: the history's recent window (up to {window} commits since the series' last change point), "
             "its level and precision with the between-commit variance",)
    return Gate(tuple(rows), notes=notes, threshold={key: value for key, value in limits.items()})
