"""The CI gate: compare a candidate with a reference, category by category, and call regressions.

Each side is either a comparison (a baseline run and a speculative run, as `make bench` writes
them) or one run. Per category and metric, the candidate/reference ratio is estimated over the
samples both share (paired by id), with the same interval estimator as `compare`. A metric
regressed only when the interval says it got worse *and* the change exceeds that metric's threshold.
The gate reads runs and returns rows; loading files and rendering are the caller's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench._constants import DEFAULT_GATE_THRESHOLD
from bench._errors import BenchError
from bench.analysis._grouping import each_category
from bench.analysis._intervals import (
    ACCEPT_RATE,
    DECODE_RATE,
    DECODE_SPEEDUP,
    LATENCY,
    LATENCY_SPEEDUP,
    Metric,
    bootstrap_geomean_ci,
    bootstrap_ratio_of_sums,
    verdict,
)
from bench.analysis._paired import pair_runs, results_frame
from bench.records import Run

GateSide = Run | tuple[Run, Run]
"""One side of the gate: a run, or a (baseline, speculative) comparison."""

REGRESSED, IMPROVED, UNCHANGED = "REGRESSED", "improved", "unchanged"


@dataclass(frozen=True, slots=True)
class GateRow:
    """One metric of one category: reference and candidate values, their ratio with its interval, a status."""

    category: str
    metric: Metric
    n: int
    reference: float
    candidate: float
    ratio: float
    low: float
    high: float
    status: str

    @property
    def change(self) -> str:
        """The ratio as a signed percentage."""
        return f"{(self.ratio - 1.0) * 100:+.1f}%" if math.isfinite(self.ratio) else "n/a"

    @property
    def interval(self) -> str:
        """The ratio's 95% interval, or n/a."""
        return f"[{self.low:.3f}, {self.high:.3f}]" if math.isfinite(self.low) else "n/a"


def _geo(series: pd.Series) -> float:
    values = series.to_numpy(dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    return float(np.exp(np.log(values).mean())) if values.size else math.nan


def _comparison_frame(baseline: Run, speculative: Run) -> pd.DataFrame:
    paired = pair_runs(baseline, speculative, min_pairs=0)
    spec = results_frame(speculative)
    spec = spec[spec["ok"]][["id", "repeat", "draft_n", "accepted"]]
    paired = paired.merge(spec, on=["id", "repeat"], how="left")
    frame = paired.groupby(["id", "category"], sort=False).agg(
        decode_speedup=("decode_speedup", _geo), latency_speedup=("latency_speedup", _geo),
        draft_n=("draft_n", "sum"), accepted=("accepted", "sum"),
    )
    return frame.reset_index()


def _run_frame(run: Run) -> pd.DataFrame:
    frame = results_frame(run)
    frame = frame[frame["ok"]]
    grouped = frame.groupby(["id", "category"], sort=False).agg(
        decode_rate=("pred_t_s", _geo), latency=("latency_s", _geo), draft_n=("draft_n", "sum"),
        accepted=("accepted", "sum"),
    )
    return grouped.reset_index()


def _side_frame(side: GateSide) -> tuple[str, pd.DataFrame]:
    if isinstance(side, tuple):
        return "comparison", _comparison_frame(*side)
    return "run", _run_frame(side)


def _metric_row(
    category: str, joined: pd.DataFrame, metric: Metric, threshold: float, resamples: int, seed: int
) -> GateRow | None:
    if metric is ACCEPT_RATE:
        columns = [joined[key].to_numpy(dtype=float) for key in ("accepted_ref", "draft_n_ref", "accepted_new",
                                                                 "draft_n_new")]
        if columns[1].sum() <= 0 or columns[3].sum() <= 0:
            return None
        reference, candidate = columns[0].sum() / columns[1].sum(), columns[2].sum() / columns[3].sum()
        point, low, high = bootstrap_ratio_of_sums(*columns, resamples=resamples, seed=seed)
        n = len(joined)
    else:
        ref_values = joined[f"{metric.key}_ref"].to_numpy(dtype=float)
        new_values = joined[f"{metric.key}_new"].to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            keep = np.isfinite(np.log(new_values / ref_values))
        ref_values, new_values = ref_values[keep], new_values[keep]
        if ref_values.size == 0:
            return None
        reference = float(np.exp(np.log(ref_values).mean()))
        candidate = float(np.exp(np.log(new_values).mean()))
        point, low, high = bootstrap_geomean_ci(new_values / ref_values, resamples=resamples, seed=seed)
        n = int(ref_values.size)
    call = verdict(point, low, high, metric, threshold)
    status = {"better": IMPROVED, "worse": REGRESSED, "not enough data": call}.get(call, UNCHANGED)
    return GateRow(category, metric, n, reference, candidate, point, low, high, status)


def regress(
    reference: GateSide,
    candidate: GateSide,
    *,
    thresholds: Mapping[str, float] | None = None,
    resamples: int = 2000,
    seed: int = 0,
) -> list[GateRow]:
    """Per category and metric: reference, candidate, ratio with its interval and a status."""
    if resamples < 1:
        raise BenchError(f"--resamples must be >= 1 (got {resamples})")
    ref_kind, ref_frame = _side_frame(reference)
    new_kind, new_frame = _side_frame(candidate)
    if ref_kind != new_kind:
        raise BenchError(f"cannot gate a {new_kind} against a {ref_kind}: give two comparison folders or two runs")
    metrics: Sequence[Metric] = (
        [DECODE_SPEEDUP, LATENCY_SPEEDUP, ACCEPT_RATE] if ref_kind == "comparison" else [DECODE_RATE, LATENCY,
                                                                                          ACCEPT_RATE]
    )
    joined = ref_frame.merge(new_frame, on=["id", "category"], suffixes=("_ref", "_new"))
    if joined.empty:
        raise BenchError("the reference and the candidate share no samples; run both over the same prompts")
    limits = {metric.key: DEFAULT_GATE_THRESHOLD for metric in metrics}
    limits.update(thresholds or {})
    rows: list[GateRow] = []
    for category, group in each_category(joined):
        for metric in metrics:
            row = _metric_row(category, group, metric, limits[metric.key], resamples, seed)
            if row is not None:
                rows.append(row)
    return rows
