"""Change points in a series of estimates with known precision, and two peers' methods for comparison.

speedbench's method (`weighted_segmentation`): binary segmentation with the precision-weighted two-sample z at
every split. Each point's variance is its own squared standard error (floored at the series' pooled per-sample
spread over its sample count, so a point whose few samples happened to agree does not dominate) plus a
between-commit variance tau^2 estimated from successive differences (what interleaving did not cancel). A split
is a change point when its two-sided normal p-value is at most `alpha / splits`, `splits` counting every
candidate split of every series of the history: a Bonferroni family over all series and commits, so an
unchanged history shows a false change point with probability at most `alpha`, whatever its length.

For comparison, from their published descriptions (asv's step_detect.py docstring and code; Apache Otava's
docs): `asv_change_points`, a weighted L1 Potts fit with weights 2 / |99% CI width|, the penalty chosen on a log
scale by the criterion beta k + ln(sigma_0 + sigma(rho)) with beta = 4 ln(n) / n and AR(1) residuals, and
`otava_change_points`, E-divisive splits in windows of 50 points tested by Welch's t (p 0.001, weak points at
10x that p, merged by re-testing each against its neighbours). Neither uses a family over the history.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_MIN_SIZE = 2
"""Points a segment needs on each side of a change point: one point alone never proves a change."""


@dataclass(frozen=True, slots=True)
class Split:
    """One change point of a series: the first index after it, the segment levels either side, its test."""

    index: int
    before: float
    after: float
    z: float
    p_value: float
    log_se: float
    start: int
    end: int

    @property
    def log_change(self) -> float:
        """log(after / before)."""
        return self.after - self.before


def normal_two_sided_p(z: float) -> float:
    """Two-sided p-value of a standard normal statistic."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def normal_quantile(probability: float) -> float:
    """The standard normal quantile (Acklam's rational approximation refined by one Halley step)."""
    if not 0.0 < probability < 1.0:
        raise ValueError(f"probability {probability} outside (0, 1)")
    tail = min(probability, 1.0 - probability)
    t = math.sqrt(-2.0 * math.log(tail))
    x = t - (2.515517 + 0.802853 * t + 0.010328 * t * t) / (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t**3)
    for _ in range(3):  # Newton on the tail probability
        error = 0.5 * math.erfc(x / math.sqrt(2.0)) - tail
        x += error / (math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi))
    return x if probability > 0.5 else -x


def point_variances(log_se: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Each point's sampling variance: its own se^2, floored at the pooled per-sample variance over its n."""
    se2 = np.asarray(log_se, dtype=float) ** 2
    counts = np.maximum(np.asarray(n, dtype=float), 1.0)
    df = np.maximum(counts - 1.0, 0.0)
    pooled = float(np.sum(df * se2 * counts) / np.sum(df)) if np.sum(df) > 0 else float(np.median(se2 * counts))
    return np.maximum(se2, pooled / counts)


def between_commit_variance(y: np.ndarray, variance: np.ndarray) -> float:
    """tau^2: the variance between commits beyond each point's own, from successive differences (>= 0)."""
    if y.size < 3:
        return 0.0
    excess = np.diff(y) ** 2 - variance[1:] - variance[:-1]
    return max(0.0, float(np.mean(excess)) / 2.0)


def candidate_splits(n: int, min_size: int = DEFAULT_MIN_SIZE) -> int:
    """How many split positions a series of n points offers (each a hypothesis of the history's family)."""
    return max(0, n - 2 * min_size + 1)


def weighted_segmentation(y: Sequence[float] | np.ndarray, log_se: Sequence[float] | np.ndarray,
                          n: Sequence[int] | np.ndarray, *, level: float,
                          min_size: int = DEFAULT_MIN_SIZE) -> tuple[Split, ...]:
    """Change points of one series (log estimates `y` with their standard errors), each split tested at `level`.

    `level` is the per-split two-sided level: the history's alpha over its candidate splits."""
    values = np.asarray(y, dtype=float)
    variance = point_variances(np.asarray(log_se, dtype=float), np.asarray(n, dtype=float))
    variance = variance + between_commit_variance(values, variance)
    weights = 1.0 / variance
    cw = np.concatenate(([0.0], np.cumsum(weights)))
    cwy = np.concatenate(([0.0], np.cumsum(weights * values)))
    critical = normal_quantile(1.0 - level / 2.0)
    found: list[Split] = []
    stack = [(0, values.size)]
    while stack:
        start, end = stack.pop()
        if end - start < 2 * min_size:
            continue
        splits = np.arange(start + min_size, end - min_size + 1)
        left_w, right_w = cw[splits] - cw[start], cw[end] - cw[splits]
        left = (cwy[splits] - cwy[start]) / left_w
        right = (cwy[end] - cwy[splits]) / right_w
        se = np.sqrt(1.0 / left_w + 1.0 / right_w)
        z = (right - left) / se
        best = int(np.argmax(np.abs(z)))
        if abs(z[best]) < critical:
            continue
        index = int(splits[best])
        found.append(Split(index, float(left[best]), float(right[best]), float(z[best]),
                           normal_two_sided_p(float(z[best])), float(se[best]), start, end))
        stack += [(start, index), (index, end)]
    return _with_neighbour_levels(sorted(found, key=lambda split: split.index), values, weights)


def _with_neighbour_levels(splits: list[Split], values: np.ndarray, weights: np.ndarray) -> tuple[Split, ...]:
    """Each change point's before/after as the weighted levels of the final segments either side of it."""
    edges = [0, *(split.index for split in splits), values.size]
    result = []
    for position, split in enumerate(splits):
        left = slice(edges[position], edges[position + 1])
        right = slice(edges[position + 1], edges[position + 2])
        before = float(np.sum(weights[left] * values[left]) / np.sum(weights[left]))
        after = float(np.sum(weights[right] * values[right]) / np.sum(weights[right]))
        se = math.sqrt(1.0 / float(np.sum(weights[left])) + 1.0 / float(np.sum(weights[right])))
        z = (after - before) / se
        result.append(Split(split.index, before, after, z, normal_two_sided_p(z), se, edges[position],
                            edges[position + 2]))
    return tuple(result)


# ---- asv: a weighted L1 Potts fit with the penalty chosen by an information criterion ----

ASV_MAX_SIZE = 20
"""asv's approximate solver: the exact fit over segments of at most this many points, then merged."""


def _window_l1(values: np.ndarray, weights: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Weighted medians and weighted L1 deviations of every window of `size` consecutive points."""
    windows = np.lib.stride_tricks.sliding_window_view(values, size)
    window_weights = np.lib.stride_tricks.sliding_window_view(weights, size)
    order = np.argsort(windows, axis=1)
    sorted_values = np.take_along_axis(windows, order, axis=1)
    sorted_weights = np.take_along_axis(window_weights, order, axis=1)
    cumulative = np.cumsum(sorted_weights, axis=1)
    middle = np.argmax(cumulative >= cumulative[:, -1:] / 2.0, axis=1)
    median = sorted_values[np.arange(len(windows)), middle]
    return median, np.sum(sorted_weights * np.abs(sorted_values - median[:, None]), axis=1)


def _range_l1(values: np.ndarray, weights: np.ndarray, start: int, end: int) -> tuple[float, float]:
    """The weighted median of points [start, end) and their weighted L1 deviation from it."""
    part, part_weights = values[start:end], weights[start:end]
    order = np.argsort(part)
    cumulative = np.cumsum(part_weights[order])
    median = float(part[order[int(np.searchsorted(cumulative, cumulative[-1] / 2.0))]])
    return median, float(np.dot(part_weights, np.abs(part - median)))


def _potts(values: np.ndarray, weights: np.ndarray, gamma: float, costs: np.ndarray) -> list[int]:
    """The exact penalised fit over segments of at most ASV_MAX_SIZE points: the right edges of its segments."""
    n = values.size
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    back = np.zeros(n + 1, dtype=int)
    for right in range(1, n + 1):
        sizes = np.arange(1, min(ASV_MAX_SIZE, right) + 1)
        lefts = right - sizes
        total = best[lefts] + gamma + costs[sizes - 1, lefts]
        choice = int(np.argmin(total))
        best[right], back[right] = total[choice], lefts[choice]
    edges = []
    right = n
    while right > 0:
        edges.append(right)
        right = int(back[right])
    edges.reverse()
    # merge neighbouring segments while that lowers gamma * segments + deviation (asv's merge_pieces)
    starts = [0, *edges[:-1]]
    own = [_range_l1(values, weights, start, end)[1] for start, end in zip(starts, edges, strict=True)]

    def merge_change(position: int) -> float:
        joined = _range_l1(values, weights, starts[position], edges[position + 1])[1]
        return joined - own[position] - own[position + 1] - gamma

    changes = [merge_change(position) for position in range(len(edges) - 1)]
    while changes:
        position = int(np.argmin(changes))
        if changes[position] > 0:
            break
        own[position] = _range_l1(values, weights, starts[position], edges[position + 1])[1]
        del edges[position], starts[position + 1], own[position + 1], changes[position]
        for neighbour in (position - 1, position):
            if 0 <= neighbour < len(changes):
                changes[neighbour] = merge_change(neighbour)
    return edges


def asv_change_points(y: Sequence[float], log_se: Sequence[float]) -> tuple[int, ...]:
    """The first index after each step of asv's weighted L1 Potts fit (penalty by its criterion, AR(1) noise)."""
    values = np.asarray(y, dtype=float)
    n = values.size
    if n < 3:
        return ()
    width = 2.0 * 2.5758 * np.asarray(log_se, dtype=float)
    weights = 2.0 / np.where(width > 0, width, np.nan)
    weights = np.nan_to_num(weights / np.nanmedian(weights), nan=1.0)
    costs = np.full((min(ASV_MAX_SIZE, n), n), np.inf)
    for size in range(1, min(ASV_MAX_SIZE, n) + 1):
        costs[size - 1, : n - size + 1] = _window_l1(values, weights, size)[1]
    total = _range_l1(values, weights, 0, n)[1] or 1e-12
    beta = 4.0 * math.log(n) / n
    best: tuple[float, list[int]] = (math.inf, [n])
    for log_gamma in np.linspace(math.log(0.1 / n), 0.0, 12):
        edges = _potts(values, weights, total * math.exp(log_gamma), costs)
        levels = _levels(values, weights, edges)
        objective = beta * len(edges) + math.log(_sigma_floor(levels) + _ar1_residual(values, weights, edges,
                                                                                       levels))
        if objective < best[0]:
            best = (objective, edges)
    return tuple(best[1][:-1])


def _levels(values: np.ndarray, weights: np.ndarray, edges: list[int]) -> list[float]:
    starts = [0, *edges[:-1]]
    return [_range_l1(values, weights, start, end)[0] for start, end in zip(starts, edges, strict=True)]


def _sigma_floor(levels: list[float]) -> float:
    """asv's measurement floor: 0.1 x the smallest jump between levels (0.001 x the level for one or two)."""
    if len(levels) > 2:
        return max(1e-300, 0.1 * float(np.min(np.abs(np.diff(levels)))))
    return max(1e-300, 0.001 * min(abs(level) for level in levels))


def _ar1_residual(values: np.ndarray, weights: np.ndarray, edges: list[int], levels: list[float]) -> float:
    """min over rho of the weighted L1 sum of AR(1) residuals e_i - rho e_(i-1) of the step fit."""
    fitted = np.repeat(levels, np.diff([0, *edges]))
    residual = values - fitted
    rho = np.linspace(-0.95, 0.95, 39)[:, None]
    innovation = np.abs(residual[None, 1:] - rho * residual[None, :-1]) @ weights[1:]
    return float(abs(residual[0]) * weights[0] + innovation.min())


# ---- Apache Otava: E-divisive in windows, each split tested by Welch's t ----

OTAVA_WINDOW = 50
OTAVA_P = 0.001


def welch_p(left: np.ndarray, right: np.ndarray) -> float:
    """Two-sided p-value of Welch's t-test between two samples (1.0 when either has fewer than two values)."""
    from bench.analysis._intervals import t_cdf

    if left.size < 2 or right.size < 2:
        return 1.0
    var_left, var_right = left.var(ddof=1) / left.size, right.var(ddof=1) / right.size
    se2 = var_left + var_right
    if se2 <= 0:
        return 0.0 if left.mean() != right.mean() else 1.0
    df = se2 * se2 / (var_left**2 / (left.size - 1) + var_right**2 / (right.size - 1))
    t = (right.mean() - left.mean()) / math.sqrt(se2)
    return 2.0 * t_cdf(-abs(t), max(df, 1e-6))


def _energy_split(segment: np.ndarray, min_size: int) -> int | None:
    """The split of a segment that maximises the E-divisive energy statistic (None when too short)."""
    n = segment.size
    if n < 2 * min_size:
        return None
    distance = np.abs(segment[:, None] - segment[None, :])
    prefix = np.zeros((n + 1, n + 1))
    prefix[1:, 1:] = np.cumsum(np.cumsum(distance, axis=0), axis=1)

    def block(a: int, b: int, c: int, d: int) -> float:
        return prefix[b, d] - prefix[a, d] - prefix[b, c] + prefix[a, c]

    best, where = -math.inf, None
    for split in range(min_size, n - min_size + 1):
        m, k = split, n - split
        between = block(0, split, split, n) / (m * k)
        within_left = block(0, split, 0, split) / (m * m)
        within_right = block(split, n, split, n) / (k * k)
        statistic = m * k / n * (2.0 * between - within_left - within_right)
        if statistic > best:
            best, where = statistic, split
    return where


def otava_change_points(y: Sequence[float], *, window: int = OTAVA_WINDOW, p_value: float = OTAVA_P,
                        min_size: int = DEFAULT_MIN_SIZE) -> tuple[int, ...]:
    """The first index after each change point Otava's method finds (unweighted: it knows no precision)."""
    values = np.asarray(y, dtype=float)
    weak_p = min(1.0, 10.0 * p_value)
    candidates: set[int] = set()
    for start in range(0, max(1, values.size - window // 2), max(1, window // 2)):
        end = min(values.size, start + window)
        stack = [(start, end)]
        while stack:
            low, high = stack.pop()
            split = _energy_split(values[low:high], min_size)
            if split is None:
                continue
            index = low + split
            if welch_p(values[low:index], values[index:high]) <= weak_p:
                candidates.add(index)
                stack += [(low, index), (index, high)]
    points = sorted(candidates)
    while points:  # merge: drop the weakest point while any fails the strict p against its neighbours
        edges = [0, *points, values.size]
        tested = [welch_p(values[edges[i]:edges[i + 1]], values[edges[i + 1]:edges[i + 2]])
                  for i in range(len(points))]
        weakest = int(np.argmax(tested))
        if tested[weakest] <= p_value:
            break
        del points[weakest]
    return tuple(points)
