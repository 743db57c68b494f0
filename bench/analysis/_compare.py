"""The comparison of two runs, computed once: every output (text, Markdown, JSON, plots, report, bench) renders it."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pandas as pd

from bench._constants import DEFAULT_THRESHOLD, MIN_SAMPLES_FOR_CI, OVERALL
from bench._errors import BenchError
from bench._types import JsonObject
from bench.analysis._cache import CacheUse, cache_use
from bench.analysis._comparability import Comparability, check_comparable
from bench.analysis._compared import PairedMetric, paired_metrics
from bench.analysis._drafted import NOTHING_DRAFTED, Drafted, acceptance_length_by_category, drafted_by_category
from bench.analysis._drafter_state import DrafterState, drafter_state, state_warnings
from bench.analysis._estimate import Estimate, look_estimate
from bench.analysis._explain import SpeedupParts, explain_runs
from bench.analysis._family import (
    DEFAULT_TARGET_EFFECT,
    FAMILY_ALPHA,
    HOLM_METHOD,
    Outlier,
    category_outliers,
    detectable_log_effect,
    holm_levels,
    samples_needed,
)
from bench.analysis._grouping import ArmPair, each_category
from bench.analysis._intervals import LogMean, verdict
from bench.analysis._lossless import LosslessRow, lossless_check
from bench.analysis._metrics import DECODE_SPEEDUP, LATENCY_SPEEDUP
from bench.analysis._paired import pair_runs, paired_log_mean, require_pairs, robust_log_mean
from bench.analysis._reference import ReferenceRow, reference_rows
from bench.analysis._sequential import verified_stop
from bench.analysis._stratified import DEFAULT_WEIGHTS
from bench.analysis._stream import StreamRow, stream_latency_stats
from bench.analysis._thinking import ThinkingRow, thinking_rows
from bench.analysis._variation import RepeatCv, SpeedupCv, repeat_cv, speedup_repeat_cv
from bench.records import Acceptance, Run, SequentialStop, collector_paused


def _percent(share: float) -> str:
    """`5%`, `98.1%`: a share as a percentage with the digits it needs."""
    return f"{share:.1%}".replace(".0%", "%")


@dataclass(frozen=True, slots=True)
class Family:
    """How a table's category verdicts are controlled as one family."""

    method: str
    size: int
    alpha: float
    target_effect: float
    overall_estimator: str | None = None
    """The overall decode row's estimator as it ran (stratified, its weights and any one-sample rule)."""
    overall_weights: str = DEFAULT_WEIGHTS
    """The overall rows' stratum weights: `prompt` (w_c = n_c / N) or `category` (equal)."""

    @property
    def text(self) -> str:
        """One line naming the method, the family and its level."""
        return (f"category rows: {self.method} ({self.size} tests, family-wise false-alarm rate "
                f"{_percent(self.alpha)}); each category interval is drawn at the level its Holm step uses "
                "(shown after 'at'); "
                f"overall row: the primary result, plain {_percent(1 - self.alpha)} interval")


@dataclass(frozen=True, slots=True)
class StatsRow:
    """Paired statistics of one category (or overall): each compared metric's speedup, acceptance and identical
    outputs."""

    category: str
    n: int
    pairs: int
    estimates: dict[str, Estimate]
    """Each compared metric's estimate by its key, in the order `paired_metrics()` declares them."""
    accept_rate: float | None
    acceptance_length: float | None
    identical: int | None
    compared_outputs: int
    disagreements: tuple[str, ...] = ()
    outliers: tuple[Outlier, ...] = ()

    @property
    def primary(self) -> bool:
        """Whether this is the overall row (the primary result, outside the category family)."""
        return self.category == OVERALL
    drafted: Drafted | None = None  # draft tokens of the row's speculative samples
    parts: SpeedupParts | None = None
    """The decode speedup explained: acceptance length, per-position acceptance, step cost, reconciled."""

    @property
    def decode(self) -> Estimate:
        """The decode speedup: the primary compared metric."""
        return self.estimates[DECODE_SPEEDUP.key]

    @property
    def latency(self) -> Estimate:
        """The end-to-end latency speedup."""
        return self.estimates[LATENCY_SPEEDUP.key]

    def compared(self) -> list[tuple[PairedMetric, Estimate]]:
        """Each compared metric this row has an estimate of, with it, in declaration order."""
        return [(paired, self.estimates[paired.key]) for paired in paired_metrics() if paired.key in self.estimates]

    def with_estimate(self, estimate: Estimate) -> StatsRow:
        """This row with one compared metric's estimate replaced (the metric named by the estimate)."""
        return replace(self, estimates={**self.estimates, estimate.metric.key: estimate})

    @property
    def drafted_share(self) -> float | None:
        """Output tokens that came from accepted drafts / output tokens (None when the server did not say)."""
        return self.drafted.share if self.drafted is not None else None

    @property
    def nothing_drafted(self) -> bool:
        """Whether no draft token was proposed for this row: its speedups are noise and carry no verdict."""
        return self.drafted is not None and self.drafted.nothing_drafted

    def as_cells(self) -> JsonObject:
        """A flat mapping (0.1's JSON keys plus the latency verdict) for tables, JSON and plots."""
        cells: JsonObject = {"category": self.category, "n": self.n, "pairs": self.pairs}
        compared = self.compared()
        for _, estimate in compared:
            cells.update(estimate.as_cells())
        cells.update(
            accept_rate=self.accept_rate,
            acceptance_length=self.acceptance_length,
            identical=self.identical,
            compared_outputs=self.compared_outputs,
            drafted_share=self.drafted_share,
            drafted_tokens=self.drafted.accepted if self.drafted is not None else None,
            output_tokens=self.drafted.output_tokens if self.drafted is not None else None,
            identical_share=(self.identical / self.compared_outputs
                             if self.identical is not None and self.compared_outputs else None),
            verdict=self.decode.word,
        )
        cells.update({f"{paired.name}_verdict": estimate.word for paired, estimate in compared})
        cells.update(
            disagreements=list(self.disagreements),
            primary=self.primary,
            outliers=[outlier.as_cells() for outlier in self.outliers],
        )
        cells.update(self.parts.as_cells() if self.parts is not None else {"step_cost": None})
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
    lossless: tuple[LosslessRow, ...] = ()
    streaming: ArmPair[tuple[StreamRow, ...]] = field(default_factory=lambda: ArmPair((), ()))
    variation: ArmPair[tuple[RepeatCv, ...]] = field(default_factory=lambda: ArmPair((), ()))
    speedup_variation: tuple[SpeedupCv, ...] = ()
    comparability: Comparability | None = None
    cache: CacheUse | None = None
    family: Family | None = None
    drafter: tuple[DrafterState, ...] = ()
    """Each arm's check for a drafter that remembers earlier requests (labels "baseline", "speculative")."""
    drafter_warnings: tuple[str, ...] = ()
    """One line per arm whose drafter remembers, and one when the arms' recorded server states differ."""
    sequential: SequentialStop | None = None
    """Sampled until decided: the stopping rule and its looks, the last one the look every verdict is drawn at."""
    sequential_notes: tuple[str, ...] = ()
    """What a reader must know about that record: an interrupted test, runs that disagree, samples added since."""
    thinking: tuple[ThinkingRow, ...] = ()
    """Reasoning runs: per category thinking share, answer-only decode speedup, tokens per step per segment, empty
    answers (descriptive, outside the verdict family); () when neither run carries thinking."""

    @property
    def has_stats(self) -> bool:
        """Whether paired statistics were computed."""
        return bool(self.stats)

    @property
    def run_acceptance(self) -> Acceptance | None:
        """Server counters over the speculative run (acceptance length, per position), when recorded."""
        return self.speculative.info.acceptance


def _stats_rows(baseline: Run, speculative: Run, reference: tuple[ReferenceRow, ...], stop: SequentialStop | None,
                paired: pd.DataFrame, *, threshold: float, min_pairs: int, target_effect: float, alpha: float,
                strict: bool) -> tuple[tuple[StatsRow, ...], str | None]:
    """The paired rows, the overall decode row read at the stopping look; with too few pairs, none and why
    (an error with `strict`)."""
    look = stop.last if stop is not None else None
    try:
        rows = paired_rows(baseline, speculative, reference, threshold=threshold, min_pairs=min_pairs, paired=paired,
                           target_effect=target_effect, alpha=alpha)
    except BenchError as exc:
        if strict:
            raise
        return (), str(exc)
    if look is not None:
        rows = tuple(row.with_estimate(look_estimate(row.decode, look))
                     if row.primary and not row.nothing_drafted else row for row in rows)
    return rows, None


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
    target_effect: float = DEFAULT_TARGET_EFFECT,
) -> Comparison:
    """Compare two runs once. With `strict`, too few matched samples is an error; otherwise the stats are withheld.

    Runs sampled until decided (a sequential record in their files) are compared at the stopping look, re-derived
    from the samples (`verified_stop`; a record the samples contradict is refused): every interval and verdict is
    drawn at the level that look spent, and the overall decode row is the look itself."""
    reference = reference_rows(baseline, speculative)
    arms = {"baseline": baseline, "speculative": speculative}
    common = Comparison(
        baseline, speculative,
        baseline_label=baseline_label or str(baseline.path or "baseline"),
        speculative_label=speculative_label or str(speculative.path or "speculative"),
        reference=reference, threshold=threshold,
        comparability=comparability or check_comparable(baseline, speculative),
        drafter=tuple(drafter_state(run, name) for name, run in arms.items()),
        drafter_warnings=tuple(state_warnings(arms)),
    )
    if not stats:
        return common
    paired = pair_runs(baseline, speculative, min_pairs=0)  # once, for every table below
    stop, notes = verified_stop(baseline, speculative, threshold=threshold, paired=paired)
    alpha = stop.last.level if stop is not None and stop.last is not None else FAMILY_ALPHA
    rows, note = _stats_rows(baseline, speculative, reference, stop, paired, threshold=threshold,
                             min_pairs=min_pairs, target_effect=target_effect, alpha=alpha, strict=strict)
    return replace(
        common,
        stats=rows,
        stats_note=note,
        lossless=tuple(lossless_check(baseline, speculative, paired=paired)),
        streaming=ArmPair(tuple(stream_latency_stats(baseline)), tuple(stream_latency_stats(speculative))),
        variation=ArmPair(tuple(repeat_cv(baseline)), tuple(repeat_cv(speculative))),
        speedup_variation=tuple(speedup_repeat_cv(baseline, speculative, paired=paired)),
        cache=cache_use(baseline, speculative),
        family=Family(HOLM_METHOD, family_size(rows), alpha, target_effect, overall_estimator(rows)),
        sequential=stop,
        sequential_notes=notes,
        thinking=thinking_rows(baseline, speculative),
    )

def paired_rows(
    baseline: Run,
    speculative: Run,
    reference: tuple[ReferenceRow, ...],
    *,
    threshold: float,
    min_pairs: int,
    paired: pd.DataFrame | None = None,
    target_effect: float = DEFAULT_TARGET_EFFECT,
    alpha: float = FAMILY_ALPHA,
) -> tuple[StatsRow, ...]:
    """Per category and overall: each compared metric's geometric-mean speedup with its interval and verdict.

    The category rows' verdicts are one family (Holm over category x metric at `alpha`); the overall row is the
    primary result at 1 - `alpha`; with `alpha` 0 (a stopping look with no interval) no row gets one. `paired` is
    `pair_runs(baseline, speculative, min_pairs=0)` when the caller has it already."""
    if paired is None:
        paired = pair_runs(baseline, speculative, min_pairs=0)
    require_pairs(paired, baseline, speculative, min_pairs)
    accept_rates = {row.category: row.accept_rate for row in speculative.summary}
    reference_by_category = {row.category: row for row in reference}
    acceptance_length = acceptance_length_by_category(speculative)
    groups = list(each_category(paired))
    metrics = paired_metrics()
    logs = {(category, metric.key): paired_log_mean(group, metric.key, stratified=category == OVERALL)
            for category, group in groups for metric in metrics}
    outliers = {category: category_outliers(group) for category, group in groups if category != OVERALL}
    outliers[OVERALL] = tuple(item for category, found in outliers.items() for item in found)
    estimates = family_estimates(logs, threshold=threshold, target_effect=target_effect, alpha=alpha,
                                 min_samples=MIN_SAMPLES_FOR_CI if alpha > 0 else sys.maxsize,
                                 robust={key: robust_log_mean(group, key[1]) for category, group in groups
                                         for key in ((category, metric.key) for metric in metrics)})
    drafted = drafted_by_category(speculative, zip(paired["id"], paired["repeat"], strict=True))
    explained = explain_runs(baseline, speculative)
    rows = []
    for category, group in groups:
        known = group["identical"].dropna()
        own = {metric.key: estimates[(category, metric.key)] for metric in metrics}
        row_drafted = drafted.get(category)
        if row_drafted is not None and row_drafted.nothing_drafted:  # noise, not an effect: no speedup verdict
            own = {key: replace(estimate, verdict=NOTHING_DRAFTED, robust_verdict=None)
                   for key, estimate in own.items()}
        rows.append(
            StatsRow(
                category=category,
                n=int(group["id"].nunique()),
                pairs=len(group),
                estimates=own,
                accept_rate=accept_rates.get(category),
                acceptance_length=acceptance_length.get(category),
                identical=int(known.sum()) if len(known) else None,
                compared_outputs=len(known),
                disagreements=_disagreements(own, reference_by_category.get(category)),
                outliers=outliers.get(category, ()),
                drafted=row_drafted,
                parts=explained.get(category),
            )
        )
    return tuple(rows)


def overall_estimator(rows: tuple[StatsRow, ...]) -> str | None:
    """The estimator the overall decode row used, as a phrase (None without an overall row)."""
    return next((row.decode.estimator for row in rows if row.primary), None)


def family_size(rows: tuple[StatsRow, ...]) -> int:
    """How many category verdicts a table's family holds (rows with an interval, x each compared metric)."""
    return sum(estimate.has_interval for row in rows if not row.primary for estimate in row.estimates.values())


def family_estimates(
    logs: Mapping[tuple[str, str], LogMean | None],
    *,
    threshold: float,
    target_effect: float = DEFAULT_TARGET_EFFECT,
    alpha: float = FAMILY_ALPHA,
    robust: Mapping[tuple[str, str], LogMean | None] | None = None,
    min_samples: int = MIN_SAMPLES_FOR_CI,
) -> dict[tuple[str, str], Estimate]:
    """Estimates of one table from its (category, metric key) log means: category rows under Holm, overall at alpha.

    This is the decision rule of every category table (compare, bench, report, sweep cells), callable on
    synthetic truth. A row below `min_samples` gets no interval and no verdict.
    """
    metric_of = {paired.key: paired.metric for paired in paired_metrics()}
    testable: dict[tuple[str, str], LogMean] = {key: value for key, value in logs.items()
                                                if value is not None and value.n >= min_samples
                                                and value.withheld is None}
    family = [key for key in testable if key[0] != OVERALL]
    levels = dict(zip(family, holm_levels([testable[key].p_value() for key in family], alpha), strict=True))
    size = max(1, sum(key[0] != OVERALL for key in logs))  # planning: every category row would be tested
    overall_sd = {key[1]: value.sd for key, value in testable.items() if key[0] == OVERALL}
    estimates: dict[tuple[str, str], Estimate] = {}
    for key, value in logs.items():
        category, metric_key = key
        metric = metric_of[metric_key]
        primary = category == OVERALL
        mde_alpha = alpha if primary else alpha / size
        own = value is not None and value.n >= min_samples and value.se > 0  # two samples' sd cannot plan
        sd = value.sd if own and value is not None else overall_sd.get(metric_key, math.nan)
        tested = testable.get(key)
        if value is None or tested is None:
            needed = samples_needed(sd, target_effect, mde_alpha, threshold)
            estimates[key] = Estimate(metric, math.exp(value.mean) if value is not None else math.nan, math.nan,
                                      math.nan, "not enough data", needed=needed,
                                      note=value.withheld if value is not None else None,
                                      estimator=value.method if value is not None and primary else None)
            continue
        value = tested
        level = alpha if primary else levels[key]
        point, low, high = value.interval(1.0 - level)
        mde = math.expm1(detectable_log_effect(value, mde_alpha, threshold))
        needed = samples_needed(sd, target_effect, mde_alpha, threshold) if mde > target_effect else None
        robust_estimate = (robust or {}).get(key)
        robust_interval = robust_estimate.interval(1.0 - level) if robust_estimate is not None else None
        estimates[key] = Estimate(
            metric, point, low, high, verdict(point, low, high, metric, threshold), confidence=1.0 - level,
            p_value=value.p_value(), mde=mde, needed=needed, robust=robust_interval,
            robust_verdict=verdict(*robust_interval, metric, threshold) if robust_interval else None,
            note=f"interval: {value.method}" if value.drift_se > 0 else None, df=value.df,
            estimator=value.method if primary else None,
        )
    return estimates


def _disagreements(estimates: Mapping[str, Estimate], reference: ReferenceRow | None) -> tuple[str, ...]:
    """Where the paired geometric mean and the reference's ratio of means point in opposite directions."""
    if reference is None:
        return ()
    found = []
    for paired in paired_metrics():
        if paired.reference is None or paired.key not in estimates:
            continue
        ratio: float | None = getattr(reference, paired.reference)
        point = estimates[paired.key].point
        if ratio is None or math.isnan(point):
            continue
        if (ratio - 1.0) * (point - 1.0) < 0:
            found.append(f"{paired.name}: ratio of means {ratio:.2f}x vs geometric mean {point:.2f}x")
    return tuple(found)
