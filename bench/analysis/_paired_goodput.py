"""The paired A/B comparison of two arms at one schedule: attainment difference and goodput ratio, by request and block.

The attainment difference (percentage points) by block (a t-interval over per-block differences; the unit that
carries drift and queues) and by request (paired t over per-request differences); the goodput ratio by block (ratio
of summed good requests over summed block time, t on per-block log ratios would drop blocks with no good request,
so the ratio of sums is resampled). With more than one category these overall intervals are stratified by
category, as every overall row is: by request `stratified_log_mean` over per-request differences, by block
`stratified_block_mean` and `stratified_block_ratio` (residuals around each category's mean, summed per block: the
spread between categories is the design, a block's drift stays in); `PairedGoodput.overall_estimator` names it.
Coverage of each is checked on synthetic truth in tests/test_goodput.py at the sizes printed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench._errors import BenchError
from bench.analysis._goodput import MIN_BLOCKS, MIN_REQUESTS, Interval, RequestTiming, Slo
from bench.analysis._intervals import LogMean, t_quantile
from bench.analysis._stratified import stratified_block_mean, stratified_block_ratio, stratified_log_mean


@dataclass(frozen=True)
class PairedGoodput:
    """Two arms at one schedule: attainment difference (candidate minus baseline) and goodput ratio."""

    slo: Slo
    baseline: str
    candidate: str
    pairs: int
    blocks: int
    attainment_baseline: float
    attainment_candidate: float
    difference_by_request: Interval
    """Candidate minus baseline attainment, paired by request (same prompt, same scheduled arrival)."""
    difference_by_block: Interval
    """The same difference with its interval over per-block differences."""
    goodput_ratio: Interval
    """Candidate goodput over baseline goodput at the shared schedule: both arms are offered the same requests
    over the same scheduled time, so it is the ratio of good requests; its interval resamples blocks."""
    verdict: str
    overall_estimator: str | None = None
    """How the by-block (else by-request) intervals were estimated: stratified by category, or None for plain t."""


def _mean_interval(found: LogMean | None, confidence: float, minimum: int, count: int, unit: str) -> Interval:
    """A mean (not a log) with its t-interval from a LogMean; withheld under `minimum` units."""
    if found is None:
        return Interval(math.nan, math.nan, math.nan, f"no {unit}")
    if count < max(2, minimum):
        return Interval(found.mean, math.nan, math.nan, f"fewer than {minimum} {unit}")
    half = found.half_width(confidence)
    return Interval(found.mean, found.mean - half, found.mean + half)


def _t_mean_interval(values: Sequence[float], confidence: float, minimum: int, unit: str) -> Interval:
    """Mean with a t-interval; withheld under `minimum` values."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return Interval(math.nan, math.nan, math.nan, f"no {unit}")
    point = float(data.mean())
    if data.size < max(2, minimum):
        return Interval(point, math.nan, math.nan, f"fewer than {minimum} {unit}")
    half = t_quantile(0.5 + confidence / 2, data.size - 1) * float(data.std(ddof=1)) / math.sqrt(data.size)
    return Interval(point, point - half, point + half)


def _goodput_ratio(pairs: Sequence[tuple[RequestTiming, RequestTiming]], slo: Slo, strata: bool, block_count: int,
                   good_a: Sequence[int], good_b: Sequence[int], *, confidence: float, min_blocks: int) -> Interval:
    """The candidate's goodput over the baseline's: stratified over blocks, by blocks' sums, or a point with why."""
    if strata and block_count >= max(2, min_blocks) and sum(good_a) > 0:
        blocked = [(a, b) for a, b in pairs if a.block is not None]
        found = stratified_block_ratio([float(a.meets(slo)) for a, _ in blocked],
                                       [float(b.meets(slo)) for _, b in blocked],
                                       [a.category for a, _ in blocked], [a.block or 0 for a, _ in blocked])
        if found is None:
            return Interval(math.nan, math.nan, math.nan, "no good request in the baseline")
        point, se, df, _ = found
        half = t_quantile(0.5 + confidence / 2, df) * se
        return Interval(point, max(0.0, point - half), point + half)
    if block_count >= max(2, min_blocks) and sum(good_a) > 0:
        return ratio_of_sums_interval(good_a, good_b, confidence=confidence)
    reason = "no blocks recorded" if not block_count else (
        f"fewer than {min_blocks} blocks" if block_count < min_blocks else "no good request in the baseline")
    good = (sum(a.meets(slo) for a, _ in pairs), sum(b.meets(slo) for _, b in pairs))
    return Interval(good[1] / good[0] if good[0] else math.nan, math.nan, math.nan, reason)


def paired_goodput(
    baseline: Sequence[RequestTiming], candidate: Sequence[RequestTiming], slo: Slo, *,
    names: tuple[str, str] = ("baseline", "candidate"), confidence: float = 0.95, threshold: float = 0.02,
    min_requests: int = MIN_REQUESTS, min_blocks: int = MIN_BLOCKS,
) -> PairedGoodput:
    """Pair two arms' requests by (id, repeat) and compare attainment and goodput by request and by block."""
    by_key = {(r.id, r.repeat): r for r in baseline}
    pairs = [(by_key[(r.id, r.repeat)], r) for r in candidate if (r.id, r.repeat) in by_key]
    if not pairs:
        raise BenchError("no request of the two arms pairs up (same prompt and repeat): run them on one schedule")
    differences = [float(b.meets(slo)) - float(a.meets(slo)) for a, b in pairs]
    by_request = _t_mean_interval(differences, confidence, min_requests, "paired requests")
    blocks: dict[int, list[tuple[RequestTiming, RequestTiming]]] = {}
    for a, b in pairs:
        if a.block is not None:
            blocks.setdefault(a.block, []).append((a, b))
    block_diffs, good_a, good_b, sizes = [], [], [], []
    for members in blocks.values():
        flags_a = [a.meets(slo) for a, _ in members]
        flags_b = [b.meets(slo) for _, b in members]
        block_diffs.append(statistics.fmean(flags_b) - statistics.fmean(flags_a))
        good_a.append(sum(flags_a))
        good_b.append(sum(flags_b))
        sizes.append(len(members))
    by_block = _t_mean_interval(block_diffs, confidence, min_blocks, "blocks")
    estimator = None
    strata = len({a.category for a, _ in pairs}) > 1
    if strata:
        by_category: dict[str, list[float]] = {}
        for (a, _), difference in zip(pairs, differences, strict=True):
            by_category.setdefault(a.category, []).append(difference)
        request_strata = stratified_log_mean(list(by_category.values()))
        by_request = _mean_interval(request_strata, confidence, min_requests, len(differences), "paired requests")
        blocked = [(a, b) for a, b in pairs if a.block is not None]
        block_strata = stratified_block_mean([float(b.meets(slo)) - float(a.meets(slo)) for a, b in blocked],
                                             [a.category for a, _ in blocked], [a.block or 0 for a, _ in blocked])
        by_block = _mean_interval(block_strata, confidence, min_blocks, len(blocks), "blocks")
        chosen_strata = block_strata if by_block.has_interval else request_strata
        estimator = chosen_strata.method if chosen_strata is not None else None
    ratio = _goodput_ratio(pairs, slo, strata, len(blocks), good_a, good_b, confidence=confidence,
                           min_blocks=min_blocks)
    primary = by_block if by_block.has_interval else by_request
    return PairedGoodput(
        slo=slo, baseline=names[0], candidate=names[1], pairs=len(pairs), blocks=len(blocks),
        attainment_baseline=statistics.fmean(float(a.meets(slo)) for a, _ in pairs),
        attainment_candidate=statistics.fmean(float(b.meets(slo)) for _, b in pairs),
        difference_by_request=by_request, difference_by_block=by_block, goodput_ratio=ratio,
        verdict=difference_verdict(primary, threshold), overall_estimator=estimator,
    )


def ratio_of_sums_interval(baseline: Sequence[float], candidate: Sequence[float], *,
                           confidence: float = 0.95) -> Interval:
    """sum(candidate) / sum(baseline) over paired units with a delta-method t-interval (m - 1 degrees of freedom)."""
    base = np.asarray(baseline, dtype=float)
    cand = np.asarray(candidate, dtype=float)
    units = base.size
    if units < 2 or base.sum() <= 0:
        return Interval(math.nan, math.nan, math.nan, "no good request in the baseline")
    point = float(cand.sum() / base.sum())
    residuals = cand - point * base
    half = (t_quantile(0.5 + confidence / 2, units - 1) * float(residuals.std(ddof=1))
            / (math.sqrt(units) * float(base.mean())))
    return Interval(point, max(0.0, point - half), point + half)


def difference_verdict(interval: Interval, threshold: float) -> str:
    """`better`/`worse` when the interval of a difference excludes 0 and the point exceeds `threshold`."""
    if not interval.has_interval:
        return "not enough data"
    if interval.low > 0 and interval.point > threshold:
        return "better"
    if interval.high < 0 and interval.point < -threshold:
        return "worse"
    return "no significant change"
