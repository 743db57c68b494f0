"""The CI gate: is the candidate worse than the reference by more than a threshold, with what evidence.

Each side is either a comparison (a baseline run and a speculative run, as `make bench` writes them), one run, or
(reference only) a list of runs of one configuration. Per category and metric the candidate/reference ratio is
estimated over the samples both share (paired by id). Every row gets one of three outcomes, read off one interval:

- `non-inferior`: the interval's low end lies above 1/(1 + threshold): proven not worse than the threshold;
- `REGRESSED`: the interval lies below 1.00x and the change exceeds the threshold: the only outcome that fails;
- `inconclusive`: neither; the row says the smallest regression it could have detected (80% power).

The gated rows (by default overall and every category, for decode, latency and accept rate) are one family under
weighted Holm (one-sided, 5%; the overall rows keep half the weight), so an unchanged build fails at most 5% of the
time and a category that regressed fails the job; with `gate_categories=False` (`--gate overall`) only the overall
rows are gated and the category rows are reported under their own Holm family. Overall rows are stratified by
category (`stratified_log_mean`), as the comparison's are. The accept rate's interval is the delta method on the
ratio of pooled rates with a t quantile (n - 1 df); when every paired sample drafted and accepted exactly the same
counts (greedy decoding of the same prompts is deterministic), the ratio is exactly 1.00 and the row is non-inferior
by that exact rule. In run-vs-run mode drift between runs does not cancel: its variance comes from three or more
reference runs (their run-level means); with fewer, the run rows are inconclusive and say why. A candidate that lost
samples or categories the reference has is named in `Gate.missing` and fails unless partial results are allowed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from bench._constants import DEFAULT_GATE_THRESHOLD, MIN_SAMPLES_FOR_CI, OVERALL
from bench._errors import BenchError
from bench.analysis._family import (
    FAMILY_ALPHA,
    GATE_OVERALL_SHARE,
    detectable_log_effect,
    family_weights,
    holm_levels,
    weighted_holm_levels,
)
from bench.analysis._intervals import (
    LogMean,
    accept_rate_log_mean,
    log_mean,
)
from bench.analysis._metrics import ACCEPT_RATE, DECODE_RATE, DECODE_SPEEDUP, LATENCY, LATENCY_SPEEDUP, Metric
from bench.analysis._paired import pair_runs, results_frame
from bench.analysis._sequential import stopping_level, verified_stop
from bench.analysis._stratified import stratified_log_mean
from bench.records import Run, SequentialStop

GateSide = Run | tuple[Run, Run] | list[Run]
"""One side of the gate: a run, a (baseline, speculative) comparison, or (reference) a list of runs."""

REGRESSED, NON_INFERIOR, INCONCLUSIVE = "REGRESSED", "non-inferior", "inconclusive"
NOT_ENOUGH = "not enough data"

MIN_REFERENCE_RUNS = 3
"""Run-vs-run mode estimates drift between runs from at least this many reference runs."""


@dataclass(frozen=True, slots=True)
class GateRow:
    """One metric of one category: reference and candidate values, their ratio with its interval, an outcome.

    `low`/`high` bound the ratio at `confidence` (two-sided; its one-sided bounds are the family's tests);
    `detectable` is the smallest regression (relative) the row detects with 80% power; `gated` says whether the row
    can fail the job; `note` explains an exact rule or a withheld decision.
    """

    category: str
    metric: Metric
    n: int
    reference: float
    candidate: float
    ratio: float
    low: float
    high: float
    status: str
    gated: bool = True
    confidence: float = 0.90
    detectable: float = math.nan
    note: str | None = None

    @property
    def change(self) -> str:
        """The ratio as a signed percentage."""
        return f"{(self.ratio - 1.0) * 100:+.1f}%" if math.isfinite(self.ratio) else "n/a"

    @property
    def interval(self) -> str:
        """The ratio's interval with its level, or n/a."""
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return "n/a"
        return f"[{self.low:.3f}, {self.high:.3f}] at {self.confidence:.1%}"

    @property
    def fails(self) -> bool:
        """Whether this row fails the job."""
        return self.gated and self.status == REGRESSED


GATE_CATEGORIES_METHOD = (
    "gated rows: overall and every category, one family under weighted Holm, one-sided 5% (an unchanged build fails "
    f"<= 5%; the overall rows keep {GATE_OVERALL_SHARE:.0%} of the weight, the category rows share the rest); "
    "overall rows stratified by category")
GATE_OVERALL_METHOD = ("gated rows: one Holm family, one-sided 5% (an unchanged build fails <= 5%); category rows: "
                       "their own Holm family, reported (--gate overall); overall rows stratified by category")


@dataclass(frozen=True, slots=True)
class Gate:
    """The gate's decision: every row, what the candidate lost, and how the family was controlled."""

    rows: tuple[GateRow, ...]
    missing: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()
    """Findings that fail the job besides the rows (speculation switched off or lost), one sentence each."""
    warnings: tuple[str, ...] = ()
    """What explains the outcome and is shown above the table (servers that started in different states, ...)."""
    method: str = GATE_OVERALL_METHOD
    threshold: Mapping[str, float] = field(default_factory=dict)

    @property
    def regressions(self) -> tuple[GateRow, ...]:
        """Rows that fail the job."""
        return tuple(row for row in self.rows if row.fails)

    def failed(self, *, allow_partial: bool = False) -> bool:
        """Whether the job fails: a gated regression, speculation lost, or lost samples/categories/levels unless
        allowed."""
        return bool(self.regressions) or bool(self.failures) or (bool(self.missing) and not allow_partial)


def _per_sample(frame: pd.DataFrame, geometric: Sequence[str], summed: Sequence[str]) -> pd.DataFrame:
    """Per (id, category): the geometric mean of positive values of `geometric` columns, the sum of `summed`."""
    logs = frame[["id", "category"]].copy()
    for column in geometric:
        values = frame[column].to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            logs[column] = np.where(np.isfinite(values) & (values > 0), np.log(values), np.nan)
    for column in summed:
        logs[column] = frame[column].to_numpy(dtype=float)
    grouped = logs.groupby(["id", "category"], sort=False)
    result = grouped[list(geometric)].mean()
    result = np.exp(result)
    for column in summed:
        result[column] = grouped[column].sum()
    return result.reset_index()


def _comparison_frame(baseline: Run, speculative: Run) -> pd.DataFrame:
    paired = pair_runs(baseline, speculative, min_pairs=0)
    return _per_sample(paired.rename(columns={"draft_n_spec": "draft_n", "accepted_spec": "accepted"}),
                       ["decode_speedup", "latency_speedup"], ["draft_n", "accepted"])


def _run_frame(run: Run) -> pd.DataFrame:
    frame = results_frame(run)
    frame = frame[frame["ok"]].rename(columns={"pred_t_s": "decode_rate", "latency_s": "latency"})
    return _per_sample(frame, ["decode_rate", "latency"], ["draft_n", "accepted"])


def _side(side: GateSide) -> tuple[str, pd.DataFrame, list[pd.DataFrame]]:
    """(kind, frame, per-run frames): several reference runs are averaged per sample (geometric mean)."""
    if isinstance(side, tuple):
        return "comparison", _comparison_frame(*side), []
    if isinstance(side, list):
        if not side:
            raise BenchError("no reference runs given")
        frames = [_run_frame(run) for run in side]
        stacked = pd.concat(frames)
        merged = _per_sample(stacked, ["decode_rate", "latency"], ["draft_n", "accepted"])
        counts = stacked.groupby("id", sort=False).size()
        merged = merged[merged["id"].map(counts) == len(side)]  # samples every reference run has
        return "run", merged, frames
    return "run", _run_frame(side), [_run_frame(side)]


Columns = Mapping[str, np.ndarray]
"""One category's joined per-sample columns (`<metric>_ref`, `<metric>_new`, counts), as arrays."""


def _oriented_logs(joined: Columns, metric: Metric) -> tuple[np.ndarray, float, float, np.ndarray]:
    """Per-sample log(candidate/reference) oriented so that positive is better, with both geometric means and the
    mask of the samples kept."""
    ref_values = joined[f"{metric.key}_ref"]
    new_values = joined[f"{metric.key}_new"]
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(new_values / ref_values)
    keep = np.isfinite(logs)
    if not keep.any():
        return np.array([]), math.nan, math.nan, keep
    reference = float(np.exp(np.log(ref_values[keep]).mean()))
    candidate = float(np.exp(np.log(new_values[keep]).mean()))
    return (logs[keep] if metric.higher_is_better else -logs[keep]), reference, candidate, keep


@dataclass(frozen=True, slots=True)
class _Pending:
    category: str
    metric: Metric
    estimate: LogMean | None
    reference: float
    candidate: float
    gated: bool
    note: str | None = None
    exact: bool = False


def _row_estimate(category: str, joined: Columns, metric: Metric, drift: tuple[float, float] | None,
                  gated: bool, strata: np.ndarray | None = None) -> _Pending | None:
    """One row's estimate; with `strata` (each sample's category, the overall row) the log ratios' mean is
    stratified by category (`stratified_log_mean`), as the comparison's overall row is."""
    note: str | None = None
    if metric is ACCEPT_RATE:
        columns = [joined[key] for key in ("accepted_ref", "draft_n_ref", "accepted_new", "draft_n_new")]
        if columns[1].sum() <= 0 or columns[3].sum() <= 0:
            return None
        reference, candidate = columns[0].sum() / columns[1].sum(), columns[2].sum() / columns[3].sum()
        if np.array_equal(columns[0], columns[2]) and np.array_equal(columns[1], columns[3]):
            note = "every sample drafted and accepted the same counts: unchanged by the exact rule"
            size = len(columns[0])
            return _Pending(category, metric, LogMean(0.0, 0.0, size - 1.0, size, "exact"), reference,
                            candidate, gated, note, exact=True)
        return _Pending(category, metric, accept_rate_log_mean(*columns), reference, candidate, gated)
    logs, reference, candidate, keep = _oriented_logs(joined, metric)
    if strata is None:
        estimate = log_mean(logs)
    else:
        labels = strata[keep]
        estimate = stratified_log_mean([logs[labels == name] for name in dict.fromkeys(labels)])
    if estimate is not None and metric in (DECODE_RATE, LATENCY):
        if drift is None:
            return _Pending(category, metric, None, reference, candidate, gated,
                            f"one reference run cannot separate drift between runs from a change: give "
                            f">= {MIN_REFERENCE_RUNS} reference runs (or gate comparisons)")
        variance, df = drift
        within = estimate.se ** 2
        combined = within + variance
        denominator = within ** 2 / estimate.df + variance ** 2 / df
        estimate = LogMean(estimate.mean, math.sqrt(combined), combined ** 2 / denominator if denominator else
                           estimate.df, estimate.n, f"{estimate.method} + between-run drift")
        note = f"drift between runs from {int(df) + 1} reference runs"
    return _Pending(category, metric, estimate, reference, candidate, gated, note)


def _drift(frames: Sequence[pd.DataFrame], metric: Metric) -> tuple[float, float] | None:
    """Between-run variance of a run's mean log (over samples every run has) x (1 + 1/R), with R - 1 df."""
    if len(frames) < MIN_REFERENCE_RUNS:
        return None
    shared = frames[0][["id"]]
    for frame in frames[1:]:
        shared = shared.merge(frame[["id"]], on="id")
    means = []
    for frame in frames:
        values = frame.set_index("id").loc[shared["id"], metric.key].to_numpy(dtype=float)
        means.append(float(np.log(values[values > 0]).mean()))
    runs = len(means)
    return float(np.var(means, ddof=1)) * (1.0 + 1.0 / runs), runs - 1.0


def _decide(pending: Sequence[_Pending], thresholds: Mapping[str, float], alpha: float,
            overall_share: float | None = None) -> list[GateRow]:
    """Holm over the rows' one-sided regression tests; each row's interval at its step's level; three outcomes.

    With `overall_share`, the family holds overall and category rows and Holm is weighted: the overall rows share
    that part of the weight, the category rows the rest (`weighted_holm_levels`)."""
    testable = [item for item in pending if item.estimate is not None and item.estimate.n >= MIN_SAMPLES_FOR_CI
                and not item.exact]
    p_values = []
    for item in testable:
        assert item.estimate is not None
        p_values.append(item.estimate.one_sided_p(0.0, above=False))  # evidence the metric got worse
    if overall_share is None:
        found = holm_levels(p_values, alpha)
    else:
        found = weighted_holm_levels(p_values, family_weights([item.category == OVERALL for item in pending],
                                                              [item in testable for item in pending],
                                                              overall_share), alpha)
    levels = dict(zip((id(item) for item in testable), found, strict=True))
    rows = []
    for item in pending:
        bound = -math.log1p(thresholds[item.metric.key])
        estimate = item.estimate
        ratio = math.exp(estimate.mean) if estimate is not None else math.nan
        if not item.metric.higher_is_better and math.isfinite(ratio):
            ratio = 1.0 / ratio  # shown as candidate/reference of the metric itself
        if item.exact:
            rows.append(GateRow(item.category, item.metric, estimate.n if estimate else 0, item.reference,
                                item.candidate, 1.0, 1.0, 1.0, NON_INFERIOR, item.gated, 1.0, 0.0, item.note))
            continue
        if id(item) not in levels:
            rows.append(GateRow(item.category, item.metric, estimate.n if estimate else 0, item.reference,
                                item.candidate, ratio, math.nan, math.nan,
                                INCONCLUSIVE if item.note else NOT_ENOUGH, item.gated, math.nan, math.nan, item.note))
            continue
        assert estimate is not None
        level = levels[id(item)]
        half = math.log(estimate.interval(1.0 - 2.0 * level)[2]) - estimate.mean
        low, high = estimate.mean - half, estimate.mean + half
        if high < 0.0 and estimate.mean < bound:
            status = REGRESSED
        elif low > bound:
            status = NON_INFERIOR
        else:
            status = INCONCLUSIVE
        detectable = -math.expm1(-detectable_log_effect(estimate, 2.0 * level, thresholds[item.metric.key]))
        shown = (math.exp(low), math.exp(high)) if item.metric.higher_is_better else (math.exp(-high), math.exp(-low))
        rows.append(GateRow(item.category, item.metric, estimate.n, item.reference, item.candidate, ratio, *shown,
                            status, item.gated, 1.0 - 2.0 * level, detectable, item.note))
    return rows


def gate(
    reference: GateSide,
    candidate: GateSide,
    *,
    thresholds: Mapping[str, float] | None = None,
    gate_categories: bool = True,
    alpha: float = FAMILY_ALPHA,
) -> Gate:
    """Decide the gate: gated rows (overall and, with `gate_categories`, every category; decode, latency, accept
    rate) and what was lost; without `gate_categories` the category rows are only reported (`--gate overall`)."""
    ref_kind, ref_frame, ref_runs = _side(reference)
    new_kind, new_frame, _ = _side(candidate)
    if isinstance(candidate, list):
        raise BenchError("give one candidate run (several reference runs are allowed)")
    if ref_kind != new_kind:
        raise BenchError(f"cannot gate a {new_kind} against a {ref_kind}: give two comparison folders or two runs")
    spent, notes = alpha, []
    for name, side in (("reference", reference), ("candidate", candidate)):
        for stop in _stops(side):
            share = stopping_level(stop) / stop.alpha
            spent *= share
            notes.append(f"the {name} was sampled until decided (a sequential test on its own decode speedup, "
                         f"{len(stop.looks)} look(s), {stop.last.n if stop.last else 0} samples): its sample size was "
                         f"chosen by looking at the data, so a fixed level would not hold; the gate's family is tested "
                         f"at {share:.1%} of its {alpha:.0%}, the share of the error budget the stopping look spent "
                         "(union bound over looks: an unchanged build still fails at most "
                         f"{alpha:.0%}); gate runs of a fixed --limit for full power")
    result = gate_frames(ref_kind, ref_frame, new_frame, ref_runs, thresholds=thresholds,
                         gate_categories=gate_categories, alpha=spent)
    return replace(result, notes=(*result.notes, *notes)) if notes else result


def _stops(side: GateSide) -> list[SequentialStop]:
    """The sequential records one side of the gate carries (none for runs of a fixed size)."""
    if isinstance(side, tuple):
        stop = verified_stop(*side)[0]
        return [stop] if stop is not None else []
    runs = side if isinstance(side, list) else [side]
    return [run.info.sequential for run in runs if run.info.sequential is not None]


def gate_frames(
    kind: str,
    reference: pd.DataFrame,
    candidate: pd.DataFrame,
    reference_runs: Sequence[pd.DataFrame] = (),
    *,
    thresholds: Mapping[str, float] | None = None,
    gate_categories: bool = True,
    alpha: float = FAMILY_ALPHA,
) -> Gate:
    """The gate's decision on per-sample frames (one row per id and category): `kind` "comparison" has columns
    decode_speedup, latency_speedup, draft_n, accepted; "run" has decode_rate, latency, draft_n, accepted, and
    `reference_runs` (one frame per reference run) for the drift between runs. `gate` calls it on loaded runs."""
    metrics: Sequence[Metric] = (
        [DECODE_SPEEDUP, LATENCY_SPEEDUP, ACCEPT_RATE] if kind == "comparison" else [DECODE_RATE, LATENCY,
                                                                                      ACCEPT_RATE]
    )
    joined = reference.merge(candidate, on=["id", "category"], suffixes=("_ref", "_new"))
    if joined.empty:
        raise BenchError("the reference and the candidate share no samples; run both over the same prompts")
    limits = {metric.key: DEFAULT_GATE_THRESHOLD for metric in metrics}
    limits.update(thresholds or {})
    drift = ({metric.key: _drift(reference_runs, metric) for metric in metrics if metric is not ACCEPT_RATE}
             if kind == "run" else {})
    primary: list[_Pending] = []
    categories: list[_Pending] = []
    arrays = {name: joined[name].to_numpy(dtype=float) for name in joined.columns if name not in ("id", "category")}
    labels = joined["category"].to_numpy()
    groups = [(category, labels == category) for category in dict.fromkeys(labels)]
    for category, rows in [*groups, (OVERALL, np.ones(len(labels), dtype=bool))]:
        group = {name: values[rows] for name, values in arrays.items()}
        for metric in metrics:
            item = _row_estimate(category, group, metric, drift.get(metric.key),
                                 gated=category == OVERALL or gate_categories,
                                 strata=labels if category == OVERALL and len(groups) > 1 else None)
            if item is not None:
                (primary if category == OVERALL else categories).append(item)
    if gate_categories:
        decided = _decide([*primary, *categories], limits, alpha, overall_share=GATE_OVERALL_SHARE)
        overall_rows, category_rows = decided[:len(primary)], decided[len(primary):]
        method = GATE_CATEGORIES_METHOD
    else:
        category_rows = _decide(categories, limits, alpha)
        overall_rows = _decide(primary, limits, alpha)
        method = GATE_OVERALL_METHOD
    notes = []
    if kind == "run" and len(reference_runs) < MIN_REFERENCE_RUNS:
        notes.append(f"run-vs-run: decode and latency rows withheld: one reference run cannot separate drift between "
                     f"runs from a change; give >= {MIN_REFERENCE_RUNS} reference runs")
    return Gate(tuple(category_rows + overall_rows), missing=tuple(lost_samples(reference, candidate)),
                notes=tuple(notes), method=method, threshold=dict(limits))


def lost_samples(reference: pd.DataFrame, candidate: pd.DataFrame) -> list[str]:
    """What the candidate lacks that the reference has: whole categories, then samples per category (ids named)."""
    found = []
    new_ids = set(candidate["id"])
    new_categories = set(candidate["category"])
    for category, group in reference.groupby("category", sort=False):
        lost = [sample for sample in group["id"] if sample not in new_ids]
        if not lost:
            continue
        if category not in new_categories:
            found.append(f"category {category}: missing from the candidate ({len(lost)} samples)")
        else:
            found.append(f"{category}: {len(lost)} of {len(group)} samples missing ({', '.join(map(str, lost))})")
    return found


def regress(
    reference: GateSide,
    candidate: GateSide,
    *,
    thresholds: Mapping[str, float] | None = None,
    resamples: int = 2000,
    seed: int = 0,
) -> list[GateRow]:
    """The gate's rows (see `gate`); `resamples` and `seed` are kept for callers and unused (no resampling)."""
    if resamples < 1:
        raise BenchError(f"--resamples must be >= 1 (got {resamples})")
    return list(gate(reference, candidate, thresholds=thresholds).rows)
