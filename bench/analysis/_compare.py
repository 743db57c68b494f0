"""The comparison of two runs, computed once: every output (text, Markdown, JSON, plots, report, bench) renders it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from bench._constants import DEFAULT_THRESHOLD, OVERALL
from bench._errors import BenchError
from bench.analysis._cache import CacheUse, cache_use
from bench.analysis._comparability import Comparability, check_comparable
from bench.analysis._drafted import NOTHING_DRAFTED, Drafted, drafted_by_category
from bench.analysis._grouping import each_category
from bench.analysis._intervals import (
    DECODE_SPEEDUP,
    LATENCY_SPEEDUP,
    SPEED_VERDICT_WORDS,
    Metric,
    verdict,
)
from bench.analysis._lossless import lossless_check
from bench.analysis._paired import pair_runs, paired_interval, require_pairs
from bench.analysis._reference import compare_summaries
from bench.analysis._stream import stream_latency_stats
from bench.analysis._variation import repeat_cv, speedup_repeat_cv
from bench.records import Acceptance, Run, collector_paused


@dataclass(frozen=True, slots=True)
class ReferenceRow:
    """One row of the reference's comparison table (`speed_bench_compare.py`), from the saved summaries."""

    category: str
    base_avg_pred_t_s: float | None
    spec_avg_pred_t_s: float | None
    decode_speedup: float | None
    base_avg_latency: float | None
    spec_avg_latency: float | None
    latency_speedup: float | None
    accept_rate: float | None

    def as_cells(self) -> dict[str, Any]:
        """The row as a flat mapping keyed like the reference's columns."""
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class Estimate:
    """A geometric-mean speedup with its 95% interval and the verdict of both gates (interval and threshold)."""

    metric: Metric
    point: float
    low: float
    high: float
    verdict: str

    @property
    def has_interval(self) -> bool:
        """Whether an interval was given (enough samples)."""
        return not (math.isnan(self.low) or math.isnan(self.high))

    @property
    def word(self) -> str:
        """The verdict as a reader says it: faster, slower, no significant change, not enough data."""
        return SPEED_VERDICT_WORDS.get(self.verdict, self.verdict)


@dataclass(frozen=True, slots=True)
class StatsRow:
    """Paired statistics of one category (or overall): both speedups, acceptance and identical outputs."""

    category: str
    n: int
    pairs: int
    decode: Estimate
    latency: Estimate
    accept_rate: float | None
    acceptance_length: float | None
    identical: int | None
    compared_outputs: int
    disagreements: tuple[str, ...] = ()
    drafted: Drafted | None = None
    """Draft tokens of the row's speculative samples; `drafted.share` is the drafted share of the output."""

    @property
    def drafted_share(self) -> float | None:
        """Output tokens that came from accepted drafts / output tokens (None when the server did not say)."""
        return self.drafted.share if self.drafted is not None else None

    @property
    def nothing_drafted(self) -> bool:
        """Whether no draft token was proposed for this row: its speedups are noise and carry no verdict."""
        return self.drafted is not None and self.drafted.nothing_drafted

    def as_cells(self) -> dict[str, Any]:
        """A flat mapping (0.1's JSON keys plus the latency verdict) for tables, JSON and plots."""
        cells: dict[str, Any] = {"category": self.category, "n": self.n, "pairs": self.pairs}
        for estimate in (self.decode, self.latency):
            key = estimate.metric.key
            cells[key] = estimate.point
            cells[f"{key}_low"] = estimate.low
            cells[f"{key}_high"] = estimate.high
            cells[f"{key}_verdict"] = estimate.verdict
        cells.update(
            accept_rate=self.accept_rate,
            acceptance_length=self.acceptance_length,
            identical=self.identical,
            compared_outputs=self.compared_outputs,
            drafted_share=self.drafted_share,
            drafted_tokens=self.drafted.accepted if self.drafted is not None else None,
            output_tokens=self.drafted.output_tokens if self.drafted is not None else None,
            identical_share=(self.identical / self.compared_outputs) if self.compared_outputs else None,
            verdict=self.decode.word,
            decode_verdict=self.decode.word,
            latency_verdict=self.latency.word,
            disagreements=list(self.disagreements),
        )
        return cells


@dataclass(frozen=True, slots=True)
class Comparison:
    """Two runs compared: the reference table, paired statistics, lossless check, streaming and variation."""

    baseline: Run
    speculative: Run
    baseline_label: str
    speculative_label: str
    reference: tuple[ReferenceRow, ...]
    threshold: float = DEFAULT_THRESHOLD
    stats: tuple[StatsRow, ...] = ()
    stats_note: str | None = None
    lossless: tuple[Mapping[str, Any], ...] = ()
    streaming: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)
    variation: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)
    speedup_variation: tuple[Mapping[str, Any], ...] = ()
    comparability: Comparability | None = None
    cache: CacheUse | None = None

    @property
    def has_stats(self) -> bool:
        """Whether paired statistics were computed."""
        return bool(self.stats)

    @property
    def run_acceptance(self) -> Acceptance | None:
        """Server counters over the speculative run (acceptance length, per position), when recorded."""
        return self.speculative.info.acceptance


def reference_rows(baseline: Run, speculative: Run) -> tuple[ReferenceRow, ...]:
    """The reference comparison rows, typed."""
    return tuple(ReferenceRow(**row) for row in compare_summaries(baseline.summary, speculative.summary))


@collector_paused()
def compare(
    baseline: Run,
    speculative: Run,
    *,
    stats: bool = True,
    threshold: float = DEFAULT_THRESHOLD,
    min_pairs: int = 1,
    baseline_label: str | None = None,
    speculative_label: str | None = None,
    strict: bool = False,
    comparability: Comparability | None = None,
) -> Comparison:
    """Compare two runs once. With `strict`, too few matched samples is an error; otherwise the stats are withheld."""
    reference = reference_rows(baseline, speculative)
    labels = {
        "baseline_label": baseline_label or str(baseline.path or "baseline"),
        "speculative_label": speculative_label or str(speculative.path or "speculative"),
    }
    checked = comparability or check_comparable(baseline, speculative)
    if not stats:
        return Comparison(baseline, speculative, reference=reference, threshold=threshold, comparability=checked,
                          **labels)
    paired = pair_runs(baseline, speculative, min_pairs=0)  # once, for every table below
    try:
        rows = paired_rows(baseline, speculative, reference, threshold=threshold, min_pairs=min_pairs, paired=paired)
        note = None
    except BenchError as exc:
        if strict:
            raise
        rows, note = (), str(exc)
    return Comparison(
        baseline,
        speculative,
        reference=reference,
        threshold=threshold,
        stats=rows,
        stats_note=note,
        lossless=tuple(lossless_check(baseline, speculative, paired=paired)),
        streaming={name: tuple(stream_latency_stats(run)) for name, run in (("baseline", baseline),
                                                                            ("speculative", speculative))},
        variation={name: tuple(repeat_cv(run)) for name, run in (("baseline", baseline), ("speculative", speculative))},
        speedup_variation=tuple(speedup_repeat_cv(baseline, speculative, paired=paired)),
        comparability=checked,
        cache=cache_use(baseline, speculative),
        **labels,
    )


def paired_rows(
    baseline: Run,
    speculative: Run,
    reference: tuple[ReferenceRow, ...],
    *,
    threshold: float,
    min_pairs: int,
    paired: pd.DataFrame | None = None,
) -> tuple[StatsRow, ...]:
    """Per category and overall: geometric-mean decode and latency speedups with intervals and verdicts.

    `paired` is `pair_runs(baseline, speculative, min_pairs=0)` when the caller has it already."""
    if paired is None:
        paired = pair_runs(baseline, speculative, min_pairs=0)
    require_pairs(paired, baseline, speculative, min_pairs)
    spec_summary = {row.get("category"): row for row in speculative.summary}
    reference_by_category = {row.category: row for row in reference}
    acceptance_length = acceptance_length_by_category(speculative)
    drafted = drafted_by_category(speculative, zip(paired["id"], paired["repeat"], strict=True))
    rows = []
    for category, group in each_category(paired):
        row_drafted = drafted.get(category)
        nothing = row_drafted is not None and row_drafted.nothing_drafted
        estimates = {}
        for metric in (DECODE_SPEEDUP, LATENCY_SPEEDUP):
            point, low, high = paired_interval(group, metric.key)
            called = NOTHING_DRAFTED if nothing else verdict(point, low, high, metric, threshold)
            estimates[metric.key] = Estimate(metric, point, low, high, called)
        known = group["identical"].dropna()
        rows.append(
            StatsRow(
                category=category,
                n=int(group["id"].nunique()),
                pairs=len(group),
                decode=estimates["decode_speedup"],
                latency=estimates["latency_speedup"],
                accept_rate=spec_summary.get(category, {}).get("accept_rate"),
                acceptance_length=acceptance_length.get(category),
                identical=int(known.sum()) if len(known) else None,
                compared_outputs=len(known),
                disagreements=_disagreements(estimates, reference_by_category.get(category)),
                drafted=row_drafted,
            )
        )
    return tuple(rows)


def _disagreements(estimates: Mapping[str, Estimate], reference: ReferenceRow | None) -> tuple[str, ...]:
    """Where the paired geometric mean and the reference's ratio of means point in opposite directions."""
    if reference is None:
        return ()
    found = []
    for key, name in (("decode_speedup", "decode"), ("latency_speedup", "latency")):
        ratio = getattr(reference, key)
        point = estimates[key].point
        if ratio is None or math.isnan(point):
            continue
        if (ratio - 1.0) * (point - 1.0) < 0:
            found.append(f"{name}: ratio of means {ratio:.2f}x vs geometric mean {point:.2f}x")
    return tuple(found)


def acceptance_length_by_category(run: Run) -> dict[str, float]:
    """Acceptance length per category: tokens per verify step, from per-sample counter deltas or engine data."""
    sums: dict[str, list[float]] = {}
    for result in run.results:
        counted = result.verify_steps() if result.ok else None
        if counted is None:
            continue
        tokens, steps = counted
        for category in (result.category, OVERALL):
            pair = sums.setdefault(category, [0.0, 0.0])
            pair[0] += tokens
            pair[1] += steps
    lengths = {category: total / steps for category, (total, steps) in sums.items() if steps}
    run_wide = run.info.acceptance
    if OVERALL not in lengths and run_wide is not None and run_wide.acceptance_length:
        lengths[OVERALL] = run_wide.acceptance_length
    return lengths
