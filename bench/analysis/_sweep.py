"""Sweeps: speculative arms against one baseline across concurrency levels, where speculation stops paying.

A sweep is a set of cells, one per (speculative arm, concurrency level), each an ordinary
comparison of that arm's run with the baseline's run at that level. From the cells this module
finds, per arm, the crossover as evidence (fixed-sequence: faster up to a level, then stops paying
only where an interval shows it) and, per level, the best arm with its margin over the runner-up.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bench._constants import DEFAULT_THRESHOLD, MIN_SAMPLES_FOR_CI
from bench.analysis._achieved import LevelLoad, level_load
from bench.analysis._compare import Comparison, compare
from bench.analysis._estimate import Estimate
from bench.analysis._family import FAMILY_ALPHA, holm_levels
from bench.analysis._intervals import bootstrap_geomean_ci, log_mean, t_quantile, verdict
from bench.analysis._metrics import THROUGHPUT_SPEEDUP
from bench.records import BASELINE, Load, Run, cell_name


@dataclass(frozen=True, slots=True)
class SweepCell:
    """One speculative arm at one concurrency level, compared with the baseline at that level."""

    arm: str
    concurrency: int
    comparison: Comparison
    throughput: Estimate
    base_tokens_per_s: float | None
    spec_tokens_per_s: float | None

    @property
    def decode(self) -> Estimate:
        """The per-request decode speedup (overall row of the paired statistics)."""
        return self.comparison.stats[-1].decode

    @property
    def latency(self) -> Estimate:
        """The per-request latency speedup (overall row)."""
        return self.comparison.stats[-1].latency


@dataclass(frozen=True, slots=True)
class Crossover:
    """Where an arm stops paying, as far as the evidence goes (fixed-sequence testing across ascending levels).

    `faster_up_to`: the highest level of the unbroken run, from the lowest level, whose interval lies above 1.00x.
    `stops_at`: the first level after it whose interval lies at or below 1 + `margin` (speculation proven not to pay
    more than the margin there); None when not established. `undetermined_from`: the first level that is neither.
    """

    faster_up_to: float | None
    stops_at: float | None
    highest: float
    unknown: tuple[float, ...] = ()
    undetermined_from: float | None = None
    margin: float = DEFAULT_THRESHOLD
    bounds: tuple[float, float] | None = None

    @property
    def established(self) -> bool:
        """Whether the evidence shows where speculation stops paying."""
        return self.stops_at is not None

    @property
    def text(self) -> str:
        """`stops paying at 8 (...); faster up to 4`, `faster up to 4; undetermined above (...)`, `faster at every
        level up to 8`."""
        faster = f"faster up to {self.faster_up_to}" if self.faster_up_to is not None else "not faster at any level"
        interval = f"[{self.bounds[0]:.2f}, {self.bounds[1]:.2f}]" if self.bounds else ""
        if self.stops_at is not None:
            text = (f"stops paying at {self.stops_at} ({interval} at or below {1 + self.margin:.2f}x); {faster}")
        elif self.undetermined_from is not None:
            where = self.undetermined_from
            reason = f"{interval} at {where}" if interval else f"no interval at {where}"
            text = f"{faster}; undetermined above ({reason})"
        else:
            text = f"faster at every level up to {self.highest}"
        if self.unknown:
            text += f" (no interval at {', '.join(map(str, self.unknown))})"
        return text


@dataclass(frozen=True, slots=True)
class BestArm:
    """The arm with the highest system throughput speedup at one level, and its margin over the runner-up.

    When every arm's point estimate is below 1.00x the best is the baseline itself (`arm` is `baseline`, speedup 1.0)
    and the runner-up is the fastest speculative arm: an arm slower than the baseline is never named best."""

    concurrency: int
    arm: str
    speedup: float
    runner_up: str | None
    margin: float | None


@dataclass(frozen=True, slots=True)
class Sweep:
    """Every cell of a sweep, with each arm's crossovers and each level's best arm."""

    arms: tuple[str, ...]
    levels: tuple[int, ...]
    cells: tuple[SweepCell, ...]
    decode_crossover: dict[str, Crossover]
    throughput_crossover: dict[str, Crossover]
    best: tuple[BestArm, ...]
    table: dict[tuple[str, int, str], Estimate] = field(default_factory=dict)
    """The cell table's verdicts as one family: (arm, level, metric key) -> the estimate at its Holm level."""
    load: dict[int, LevelLoad] = field(default_factory=dict)
    """Per level: the in-flight mean each arm achieved (every arm of a level ran interleaved with one baseline)."""

    def cell(self, arm: str, concurrency: int) -> SweepCell | None:
        """The cell of one arm at one level, if it ran."""
        return next((c for c in self.cells if c.arm == arm and c.concurrency == concurrency), None)


def batch_throughput(run: Run) -> dict[int, float]:
    """Output tokens per second of each lock-step batch of a run (tokens / the batch's wall time)."""
    windows: dict[int, list[float]] = {}
    for result in run.results:
        if result.batch is None or result.sent_s is None:
            continue
        start, end = result.sent_s, result.sent_s + result.latency_s
        tokens, first, last = windows.setdefault(result.batch, [0.0, math.inf, -math.inf])
        windows[result.batch] = [tokens + (result.completion_tokens if result.ok else 0), min(first, start),
                                 max(last, end)]
    return {batch: tokens / (last - first) for batch, (tokens, first, last) in windows.items() if last > first}


def throughput_estimate(
    baseline: Run, speculative: Run, *, threshold: float
) -> tuple[Estimate, float | None, float | None]:
    """System throughput speedup, paired by batch: geometric mean of per-batch ratios with its interval."""
    base, spec = batch_throughput(baseline), batch_throughput(speculative)
    shared = sorted(set(base) & set(spec))
    ratios = np.array([spec[batch] / base[batch] for batch in shared if base[batch] > 0 and spec[batch] > 0])
    point, low, high = bootstrap_geomean_ci(ratios)
    found = log_mean(np.log(ratios)) if ratios.size >= MIN_SAMPLES_FOR_CI else None
    estimate = Estimate(THROUGHPUT_SPEEDUP, point, low, high, verdict(point, low, high, THROUGHPUT_SPEEDUP, threshold),
                        p_value=found.p_value() if found is not None else math.nan,
                        df=found.df if found is not None else math.nan)
    base_mean = float(np.mean([base[b] for b in shared])) if shared else None
    spec_mean = float(np.mean([spec[b] for b in shared])) if shared else None
    return estimate, base_mean, spec_mean


def sweep_cell(
    arm: str,
    concurrency: int,
    baseline: Run,
    speculative: Run,
    *,
    threshold: float = DEFAULT_THRESHOLD,
) -> SweepCell:
    """Compare one arm with the baseline at one level: the full comparison plus system throughput."""
    comparison = compare(baseline, speculative, threshold=threshold, baseline_label=cell_name(concurrency, BASELINE),
                         speculative_label=cell_name(concurrency, arm))
    throughput, base_tps, spec_tps = throughput_estimate(baseline, speculative, threshold=threshold)
    return SweepCell(arm, concurrency, comparison, throughput, base_tps, spec_tps)


def crossover(levels: Sequence[float], estimates: Sequence[Estimate], *,
              margin: float = DEFAULT_THRESHOLD) -> Crossover:
    """Fixed-sequence testing over ascending levels: "faster" while each interval lies above 1.00x; at the first level
    that is not, "stops paying" only if its interval lies at or below 1 + margin, else undetermined from there.

    Each claim reads one 95% interval and the sequence stops at the first failure, so the chance of any false
    claim over the whole sweep stays at the single test's level (Maurer et al. 1995). A level without an interval
    ends the sequence (named), never counting as a crossover.
    """
    faster = None
    for level, estimate in zip(levels, estimates, strict=True):
        if not estimate.has_interval:
            return Crossover(faster, None, max(levels), (), level, margin)
        if estimate.low > 1.0:
            faster = level
            continue
        bounds = (estimate.low, estimate.high)
        if estimate.high <= 1.0 + margin:
            return Crossover(faster, level, max(levels), (), None, margin, bounds)
        return Crossover(faster, None, max(levels), (), level, margin, bounds)
    return Crossover(faster, None, max(levels), (), None, margin)


def best_arms(cells: Sequence[SweepCell], levels: Sequence[int]) -> tuple[BestArm, ...]:
    """Per level, the arm with the highest system throughput speedup (per-request decode when none has one); the
    baseline when every arm is slower than it."""
    best = []
    for level in levels:
        ranked = []
        for cell in cells:
            if cell.concurrency != level:
                continue
            value = cell.throughput.point if math.isfinite(cell.throughput.point) else cell.decode.point
            if math.isfinite(value):
                ranked.append((value, cell.arm))
        ranked.sort(reverse=True)
        if not ranked:
            continue
        if ranked[0][0] < 1.0:  # every arm slower than the baseline: the baseline is the level's best
            ranked.insert(0, (1.0, BASELINE))
        runner_up = ranked[1] if len(ranked) > 1 else None
        best.append(BestArm(level, ranked[0][1], ranked[0][0], runner_up[1] if runner_up else None,
                            (ranked[0][0] / runner_up[0] - 1.0) if runner_up else None))
    return tuple(best)


def summarize_sweep(cells: Sequence[SweepCell], *, margin: float | None = None) -> Sweep:
    """Crossovers per arm and the best arm per level, from the cells of a sweep."""
    arms = tuple(dict.fromkeys(cell.arm for cell in cells))
    levels = tuple(sorted({cell.concurrency for cell in cells}))
    decode, throughput = {}, {}
    for arm in arms:
        own = sorted((cell for cell in cells if cell.arm == arm), key=lambda cell: cell.concurrency)
        own_levels = [cell.concurrency for cell in own]
        limit = margin if margin is not None else (own[0].comparison.threshold if own else DEFAULT_THRESHOLD)
        decode[arm] = crossover(own_levels, [cell.decode for cell in own], margin=limit)
        throughput[arm] = crossover(own_levels, [cell.throughput for cell in own], margin=limit)
    loads: dict[int, dict[str, Load]] = {}
    for cell in cells:
        level_arms = loads.setdefault(cell.concurrency, {})
        level_arms.setdefault(BASELINE, cell.comparison.baseline.load)
        level_arms[cell.arm] = cell.comparison.speculative.load
    return Sweep(arms, levels, tuple(cells), decode, throughput, best_arms(cells, levels), cell_family(cells),
                 {level: level_load(level, [level_arms]) for level, level_arms in sorted(loads.items())})


def cell_family(cells: Sequence[SweepCell], alpha: float = FAMILY_ALPHA) -> dict[tuple[str, int, str], Estimate]:
    """The sweep table's verdicts (arm x level x decode, latency, throughput) under Holm: each interval widened to its
    step's level (the geometric mean's t-interval on the same logs), so the table's false-alarm rate stays at alpha."""
    entries = []
    for cell in cells:
        for estimate in (cell.decode, cell.latency, cell.throughput) if cell.comparison.stats else (cell.throughput,):
            entries.append(((cell.arm, cell.concurrency, estimate.metric.key), estimate))
    levels = holm_levels([estimate.p_value if estimate.has_interval else math.nan for _, estimate in entries], alpha)
    table = {}
    threshold = cells[0].comparison.threshold if cells else DEFAULT_THRESHOLD
    for (key, estimate), level in zip(entries, levels, strict=True):
        if not (estimate.has_interval and math.isfinite(level) and math.isfinite(estimate.p_value)):
            table[key] = estimate
            continue
        table[key] = widened(estimate, 1.0 - level, threshold)
    return table


def widened(estimate: Estimate, confidence: float, threshold: float) -> Estimate:
    """The same t-interval on the logs redrawn at `confidence` (its half-width scaled by the quantile ratio)."""
    if confidence <= estimate.confidence or not math.isfinite(estimate.df):
        return estimate
    centre = math.log(estimate.point)
    half = (math.log(estimate.high) - math.log(estimate.low)) / 2.0
    ratio = t_quantile(0.5 + confidence / 2.0, estimate.df) / t_quantile(0.5 + estimate.confidence / 2.0, estimate.df)
    low, high = math.exp(centre - half * ratio), math.exp(centre + half * ratio)
    return dataclasses.replace(estimate, low=low, high=high, confidence=confidence,
                               verdict=verdict(estimate.point, low, high, estimate.metric, threshold))

