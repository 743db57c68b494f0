"""Two arms at one arrival schedule, and a sweep of arrival rates: paired speedups, goodput and where it stops paying.

Both arms are offered the same seeded schedule and prompt sequence in alternating blocks (ABBA...), so a request
of one arm pairs with the same request of the other (same prompt, same scheduled offset within its block).
Speedups are geometric means of per-request ratios with two intervals: by request (a t-interval on the logs)
and by block (a t-interval over per-block mean logs: the unit that carries drift and shared queues). The
verdict reads the by-block interval when there are enough blocks, else the by-request one. With more than one
category the overall rows are stratified by category (categories are fixed strata, not noise): by request
`stratified_log_mean`, by block `stratified_block_mean` (category means as strata, the variance over blocks).
Latency and TTFT count from the scheduled arrival (queue included).

Across rates, the break-even rate of an arm is the fixed-sequence crossover of its latency speedup (from the
schedule) over ascending rates (`crossover` of the concurrency sweep, fed rates instead of levels); the
highest rate meeting the SLOs is `slo_capacity` of its attainment.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bench._constants import DEFAULT_THRESHOLD, OVERALL
from bench._errors import BenchError
from bench.analysis._drafter_state import DrafterState
from bench.analysis._estimate import Estimate
from bench.analysis._family import HOLM_METHOD, holm_levels
from bench.analysis._goodput import (
    MIN_BLOCKS,
    MIN_REQUESTS,
    Goodput,
    Interval,
    RequestTiming,
    Slo,
    Throughput,
    goodput,
    throughput,
)
from bench.analysis._intervals import LogMean, geomean_t_intervals, log_mean, verdict
from bench.analysis._metrics import DECODE_SPEEDUP, LATENCY_SPEEDUP_SCHEDULED, TTFT_SPEEDUP_SCHEDULED, Metric
from bench.analysis._paired_goodput import PairedGoodput, paired_goodput
from bench.analysis._stratified import stratified_block_mean, stratified_log_mean
from bench.analysis._sweep import Crossover, crossover

_RATIOS: tuple[tuple[Metric, Callable[[RequestTiming, RequestTiming], float | None]], ...] = (
    (DECODE_SPEEDUP, lambda a, b: _ratio(b.decode_t_s, a.decode_t_s)),
    (LATENCY_SPEEDUP_SCHEDULED, lambda a, b: _ratio(a.e2e_s, b.e2e_s)),
    (TTFT_SPEEDUP_SCHEDULED, lambda a, b: _ratio(a.ttft_s, b.ttft_s)),
)


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator when both are positive, else None."""
    if numerator is None or denominator is None or numerator <= 0 or denominator <= 0:
        return None
    return numerator / denominator


@dataclass(frozen=True)
class PairedSpeedup:
    """One paired speedup at one schedule (overall or one category): by request and by block, with the verdict."""

    metric: Metric
    pairs: int
    by_request: Interval
    by_block: Interval
    estimate: Estimate
    """The interval the verdict reads (by block when there are enough blocks) as the sweep analysis takes it."""
    category: str = OVERALL

    @property
    def primary(self) -> bool:
        """Whether this is an overall row (the primary result at 95%), not a category row of the Holm family."""
        return self.category == OVERALL


TRAFFIC_FAMILY_METHOD = (f"overall rows: primary, 95%; category rows: one family, {HOLM_METHOD} (family-wise 5%), "
                         "each interval drawn at the level its Holm step uses (after 'at')")
"""How the verdicts of an A/B at one schedule are controlled, named under its table."""


@dataclass(frozen=True)
class TrafficComparison:
    """Baseline and candidate at one arrival schedule: throughput of each, paired speedups and paired goodput."""

    baseline: str
    candidate: str
    rate: float | None
    pairs: int
    blocks: int
    throughput_baseline: Throughput
    throughput_candidate: Throughput
    speedups: tuple[PairedSpeedup, ...]
    goodput: PairedGoodput | None
    goodput_baseline: Goodput | None
    goodput_candidate: Goodput | None
    drafter: tuple[DrafterState, ...] = ()

    method: str = TRAFFIC_FAMILY_METHOD

    def speedup(self, key: str, category: str = OVERALL) -> PairedSpeedup | None:
        """The paired speedup of one metric key (overall unless a category is named), if it could be computed."""
        return next((item for item in self.speedups if item.metric.key == key and item.category == category), None)

    def warnings(self) -> list[str]:
        """One line per thing that qualifies the result: a client behind schedule, a drafter that remembers."""
        lines = [f"{name}: {measured.warning()}" for name, measured in
                 ((self.baseline, self.throughput_baseline), (self.candidate, self.throughput_candidate))
                 if measured.warning()]
        lines += [message for state in self.drafter if (message := state.message())]
        return lines


def _log_interval(logs: Sequence[float], minimum: int, unit: str, confidence: float) -> Interval:
    """Geometric mean of exp(logs) with a t-interval on the logs; withheld under `minimum` values."""
    values = np.asarray(logs, dtype=float)
    if values.size == 0:
        return Interval(math.nan, math.nan, math.nan, f"no {unit}")
    point = float(np.exp(values.mean()))
    if values.size < max(2, minimum):
        return Interval(point, math.nan, math.nan, f"fewer than {minimum} {unit}")
    _, low, high = geomean_t_intervals(values[None, :], confidence=confidence)
    return Interval(point, float(low[0]), float(high[0]))


def _paired_logs(
    pairs: Sequence[tuple[RequestTiming, RequestTiming]], ratio: Callable[[RequestTiming, RequestTiming], float | None],
    strata: dict[str, list[float]] | None = None,
) -> tuple[list[float], dict[int, list[float]]]:
    """Per-request log ratios of the pairs where both arms succeeded, and the same logs grouped by block (and, into
    `strata` when given, by category)."""
    logs: list[float] = []
    blocks: dict[int, list[float]] = {}
    for a, b in pairs:
        if not (a.ok and b.ok):
            continue
        value = ratio(a, b)
        if value is None:
            continue
        logs.append(math.log(value))
        if strata is not None:
            strata.setdefault(a.category, []).append(math.log(value))
        if a.block is not None:
            blocks.setdefault(a.block, []).append(math.log(value))
    return logs, blocks


def _stratified_interval(strata: dict[str, list[float]], minimum: int, confidence: float) -> tuple[Interval,
                                                                                                   LogMean | None]:
    """The by-request overall interval stratified by category (`stratified_log_mean`); withheld under `minimum`."""
    found = stratified_log_mean(list(strata.values()))
    if found is None:
        return Interval(math.nan, math.nan, math.nan, "no paired requests"), None
    if found.n < max(2, minimum):
        return Interval(math.exp(found.mean), math.nan, math.nan, f"fewer than {minimum} paired requests"), found
    return Interval(*found.interval(confidence)), found


def _blocked_samples(pairs: Sequence[tuple[RequestTiming, RequestTiming]],
                     ratio: Callable[[RequestTiming, RequestTiming], float | None],
                     ) -> tuple[list[float], list[str], list[int]]:
    """Per-request log ratios with their category and block, for the stratified by-block overall interval."""
    logs: list[float] = []
    categories: list[str] = []
    blocks: list[int] = []
    for a, b in pairs:
        value = ratio(a, b) if a.ok and b.ok else None
        if value is None or a.block is None:
            continue
        logs.append(math.log(value))
        categories.append(a.category)
        blocks.append(a.block)
    return logs, categories, blocks


def _stratified_block_interval(found: LogMean | None, minimum: int, blocks: int,
                               confidence: float) -> Interval:
    """The by-block overall interval stratified by category (`stratified_block_mean`); withheld under `minimum`."""
    if found is None:
        return Interval(math.nan, math.nan, math.nan, "no blocks recorded")
    if blocks < max(2, minimum):
        return Interval(math.exp(found.mean), math.nan, math.nan, f"fewer than {minimum} blocks")
    return Interval(*found.interval(confidence))


def _chosen_logs(logs: list[float], blocks: dict[int, list[float]], min_requests: int,
                 min_blocks: int) -> LogMean | None:
    """The t estimate the verdict reads: over block means when there are enough blocks, else over requests."""
    means = [float(np.mean(v)) for v in blocks.values()]
    if len(means) >= max(2, min_blocks):
        return log_mean(means)
    return log_mean(logs) if len(logs) >= max(2, min_requests) else None


def paired_speedups(
    pairs: Sequence[tuple[RequestTiming, RequestTiming]], *, confidence: float = 0.95,
    threshold: float = DEFAULT_THRESHOLD, min_requests: int = MIN_REQUESTS, min_blocks: int = MIN_BLOCKS,
) -> tuple[PairedSpeedup, ...]:
    """Decode, latency and TTFT speedups (candidate over baseline) of paired requests, by request and by block.

    The overall rows are the primary result at `confidence`; with more than one category, each category's rows
    follow, their verdicts one family under Holm (category x metric, family-wise 1 - `confidence`), each interval
    drawn at its Holm step's level, as in the comparison tables."""
    alpha = 1.0 - confidence
    categories = sorted({a.category for a, _ in pairs})
    groups: list[tuple[str, Sequence[tuple[RequestTiming, RequestTiming]]]] = [(OVERALL, pairs)]
    if len(categories) > 1:
        groups += [(name, [pair for pair in pairs if pair[0].category == name]) for name in categories]
    found = []
    strata: dict[tuple[str, str], dict[str, list[float]]] = {}
    blocked: dict[tuple[str, str], LogMean | None] = {}
    for category, members in groups:
        for metric, ratio in _RATIOS:
            by_category: dict[str, list[float]] | None = {} if category == OVERALL and len(categories) > 1 else None
            logs, blocks = _paired_logs(members, ratio, by_category)
            if logs:
                chosen_logs = _chosen_logs(logs, blocks, min_requests, min_blocks)
                if by_category is not None:
                    strata[(category, metric.key)] = by_category
                    blocked[(category, metric.key)] = stratified_block_mean(*_blocked_samples(members, ratio))
                    if chosen_logs is not None and len(blocks) < max(2, min_blocks):  # by request: strata
                        chosen_logs = _stratified_interval(by_category, min_requests, confidence)[1]
                    elif chosen_logs is not None:  # by block: strata, blocks as units
                        chosen_logs = blocked[(category, metric.key)]
                found.append((category, metric, logs, blocks, chosen_logs))
    tested = {index: item[4] for index, item in enumerate(found) if item[0] != OVERALL and item[4] is not None}
    holm = dict(zip(tested, holm_levels([chosen.p_value() for chosen in tested.values()], alpha), strict=True))
    out = []
    for index, (category, metric, logs, blocks, chosen_logs) in enumerate(found):
        level = alpha if category == OVERALL else holm.get(index, alpha)
        level_confidence = 1.0 - level
        stratified: LogMean | None = None
        if (category, metric.key) in strata:
            by_request, stratified = _stratified_interval(strata[(category, metric.key)], min_requests,
                                                          level_confidence)
        else:
            by_request = _log_interval(logs, min_requests, "paired requests", level_confidence)
        by_block_strata = blocked.get((category, metric.key))
        if (category, metric.key) in blocked:
            by_block = _stratified_block_interval(by_block_strata, min_blocks, len(blocks), level_confidence)
        else:
            by_block = _log_interval([float(np.mean(v)) for v in blocks.values()], min_blocks, "blocks",
                                     level_confidence)
        chosen = by_block if by_block.has_interval else by_request
        named = by_block_strata if chosen is by_block else stratified
        estimate = Estimate(metric, chosen.point, chosen.low, chosen.high,
                            verdict(chosen.point, chosen.low, chosen.high, metric, threshold),
                            confidence=level_confidence,
                            p_value=chosen_logs.p_value() if chosen_logs is not None else math.nan,
                            estimator=named.method if named is not None else None)
        out.append(PairedSpeedup(metric, len(logs), by_request, by_block, estimate, category))
    return tuple(out)


def compare_traffic(
    baseline: Sequence[RequestTiming], candidate: Sequence[RequestTiming], *, names: tuple[str, str],
    slo: Slo | None = None, rate: float | None = None, confidence: float = 0.95,
    threshold: float = DEFAULT_THRESHOLD, drafter: Sequence[DrafterState] = (),
) -> TrafficComparison:
    """The paired comparison of two arms run on one schedule (requests paired by sample id and repeat)."""
    by_key = {(r.id, r.repeat): r for r in baseline}
    pairs = [(by_key[(r.id, r.repeat)], r) for r in candidate if (r.id, r.repeat) in by_key]
    if not pairs:
        raise BenchError("no request of the two arms pairs up (same prompt and repeat): run them on one schedule")
    blocks = len({a.block for a, _ in pairs if a.block is not None})
    return TrafficComparison(
        baseline=names[0], candidate=names[1], rate=rate, pairs=len(pairs), blocks=blocks,
        throughput_baseline=throughput(baseline), throughput_candidate=throughput(candidate),
        speedups=paired_speedups(pairs, confidence=confidence, threshold=threshold),
        goodput=None if slo is None else paired_goodput(baseline, candidate, slo, names=names,
                                                        confidence=confidence, threshold=threshold),
        goodput_baseline=None if slo is None else goodput(baseline, slo, confidence=confidence),
        goodput_candidate=None if slo is None else goodput(candidate, slo, confidence=confidence),
        drafter=tuple(drafter),
    )


DEFAULT_SLO_TARGET = 0.9
"""The attainment a rate must reach to count as meeting the SLOs (`--slo-target`)."""


@dataclass(frozen=True)
class RateLevel:
    """One arm at one requested arrival rate: its throughput, attainment and goodput."""

    arm: str
    rate: float
    result: Goodput


@dataclass(frozen=True)
class SloCapacity:
    """The highest requested rate at which an arm meets the SLOs, by the interval of its attainment."""

    arm: str
    target: float
    rate: float | None
    """Highest rate whose attainment interval lies at or above `target`, with every lower rate meeting it too."""
    possible_rate: float | None
    """Highest rate whose attainment point reaches `target` (its interval does not exclude missing it)."""

    def text(self) -> str:
        """One line: the rate, or why none is established."""
        target = f"{self.target:.0%}"
        if self.rate is not None:
            return f"{self.arm}: meets the SLOs ({target} attainment, by its interval) up to {self.rate:g} req/s"
        if self.possible_rate is not None:
            return (f"{self.arm}: no rate established at {target} attainment (up to {self.possible_rate:g} req/s "
                    "the point reaches it, but its interval does not)")
        return f"{self.arm}: no tested rate meets the SLOs at {target} attainment"


def slo_capacity(levels: Sequence[RateLevel], target: float = DEFAULT_SLO_TARGET) -> SloCapacity:
    """The highest rate of one arm meeting `target` attainment by its interval (all lower rates meeting it too)."""
    if not levels:
        raise BenchError("no rate levels to search")
    if not 0 < target <= 1:
        raise BenchError(f"--slo-target must be a share in (0, 1] (got {target})")
    ordered = sorted(levels, key=lambda level: level.rate)
    established = possible = None
    chain = True
    for level in ordered:
        share = level.result.overall.attainment
        if chain and share.has_interval and share.low >= target:
            established = level.rate
        else:
            chain = False
        if share.point >= target:
            possible = level.rate
    return SloCapacity(arm=ordered[0].arm, target=target, rate=established, possible_rate=possible)


@dataclass(frozen=True)
class RateSweep:
    """Every arm against the baseline at every requested rate, with break-even rates and SLO capacities."""

    baseline: str
    rates: tuple[float, ...]
    comparisons: tuple[TrafficComparison, ...]
    levels: tuple[RateLevel, ...]
    """Every arm's (baseline included) goodput at every rate, for the goodput-vs-rate plot; empty without SLOs."""
    break_even: tuple[tuple[str, Crossover], ...]
    capacity: tuple[SloCapacity, ...]
    target: float

    def comparison(self, arm: str, rate: float) -> TrafficComparison | None:
        """One arm against the baseline at one rate."""
        return next((c for c in self.comparisons if c.candidate == arm and c.rate == rate), None)


def rate_sweep(comparisons: Sequence[TrafficComparison], *, target: float = DEFAULT_SLO_TARGET) -> RateSweep:
    """Per arm, the break-even rate of its latency speedup and, with SLOs, the highest rate meeting them."""
    if not comparisons:
        raise BenchError("a rate sweep needs at least one comparison")
    if any(item.rate is None for item in comparisons):
        raise BenchError("every comparison of a rate sweep needs its rate")
    rates = tuple(sorted({float(item.rate) for item in comparisons if item.rate is not None}))
    arms = list(dict.fromkeys(item.candidate for item in comparisons))
    baseline = comparisons[0].baseline
    break_even = []
    for arm in arms:
        mine = sorted((c for c in comparisons if c.candidate == arm), key=lambda c: c.rate or 0.0)
        estimates = []
        for item in mine:
            paired = item.speedup(LATENCY_SPEEDUP_SCHEDULED.key)
            estimates.append(paired.estimate if paired is not None else Estimate(
                LATENCY_SPEEDUP_SCHEDULED, math.nan, math.nan, math.nan, "not enough data"))
        break_even.append((arm, crossover([item.rate or 0.0 for item in mine], estimates)))  # every rate given
    levels: list[RateLevel] = []
    seen_baseline: set[float] = set()
    for item in comparisons:
        if item.goodput_candidate is None or item.goodput_baseline is None or item.rate is None:
            continue
        if item.rate not in seen_baseline:
            seen_baseline.add(item.rate)
            levels.append(RateLevel(item.baseline, item.rate, item.goodput_baseline))
        levels.append(RateLevel(item.candidate, item.rate, item.goodput_candidate))
    capacity = tuple(slo_capacity([level for level in levels if level.arm == arm], target)
                     for arm in dict.fromkeys(level.arm for level in levels))
    return RateSweep(baseline=baseline, rates=rates, comparisons=tuple(comparisons), levels=tuple(levels),
                     break_even=tuple(break_even), capacity=capacity, target=target)
