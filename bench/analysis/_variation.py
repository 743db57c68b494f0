"""Run-to-run variation across repeats: of one run's means, and of the paired speedups between two runs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench._types import JsonObject
from bench.analysis._grouping import each_category
from bench.analysis._metrics import REPEAT_CV_METRICS, SPEEDUP_CV_METRICS, metric_cells
from bench.analysis._paired import pair_runs, results_frame
from bench.records import Run


@dataclass(frozen=True, slots=True)
class RepeatCv:
    """One category's coefficient of variation across repeats of mean decode t/s and mean latency."""

    category: str
    repeats: int
    pred_t_s_cv: float | None
    latency_cv: float | None

    def as_cells(self) -> JsonObject:
        """The row's cells, keyed by `REPEAT_CV_METRICS`."""
        return metric_cells(self, REPEAT_CV_METRICS)


@dataclass(frozen=True, slots=True)
class SpeedupCv:
    """One category's paired speedups: the CV between repeats next to the spread within a run (None if undefined)."""

    category: str
    repeats: int
    decode_speedup_between_cv: float | None
    decode_speedup_within_cv: float | None
    latency_speedup_between_cv: float | None
    latency_speedup_within_cv: float | None

    def as_cells(self) -> JsonObject:
        """The row's cells, keyed by `SPEEDUP_CV_METRICS`."""
        return metric_cells(self, SPEEDUP_CV_METRICS)


def _cv(series: pd.Series) -> float | None:
    """Sample standard deviation over mean, None below two values or at a zero mean."""
    return float(series.std(ddof=1) / series.mean()) if len(series) >= 2 and series.mean() else None


def repeat_cv(run: Run) -> list[RepeatCv]:
    """Run-to-run coefficient of variation per category across repeats of mean decode t/s and latency."""
    if len({result.repeat for result in run.results}) < 2:
        return []
    frame = results_frame(run)
    frame = frame[frame["ok"]]
    if frame.empty or frame["repeat"].nunique() < 2:
        return []
    rows = []
    for category, group in each_category(frame):
        per_repeat = group.groupby("repeat")[["pred_t_s", "latency_s"]].mean()
        rows.append(RepeatCv(category, len(per_repeat), _cv(per_repeat["pred_t_s"].dropna()),
                             _cv(per_repeat["latency_s"].dropna())))
    return rows


def _between_and_within(group: pd.DataFrame, column: str) -> tuple[float | None, float | None]:
    """A speedup's CV of each repeat's geometric mean, and its within-repeat spread pooled over repeats."""
    values = group[group[column] > 0][["repeat", column]].copy()
    values["log"] = np.log(values[column].astype(float))
    per_repeat = np.exp(values.groupby("repeat")["log"].mean())
    between = _cv(per_repeat)  # each repeat's geometric mean is positive: the mean is never 0
    within = values.groupby("repeat")["log"].std(ddof=1).dropna()
    return between, float(np.sqrt(np.expm1((within**2).mean()))) if len(within) else None


def speedup_repeat_cv(
    baseline: Run, speculative: Run, *, paired: pd.DataFrame | None = None
) -> list[SpeedupCv]:
    """Per category, for paired decode and latency speedups: the between-repeat CV (of each repeat's geometric-mean
    speedup) next to the within-run CV (spread of per-sample speedups inside a repeat, pooled over repeats).

    Empty with fewer than 2 repeats. `paired` is `pair_runs(baseline, speculative, min_pairs=0)` when the caller has
    it already.
    """
    if paired is None:
        paired = pair_runs(baseline, speculative, min_pairs=0)
    if paired.empty or paired["repeat"].nunique() < 2:
        return []
    return [SpeedupCv(category, int(group["repeat"].nunique()), *_between_and_within(group, "decode_speedup"),
                      *_between_and_within(group, "latency_speedup"))
            for category, group in each_category(paired)]
