"""Run-to-run variation across repeats."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bench.analysis._grouping import each_category
from bench.analysis._paired import pair_runs, results_frame
from bench.records import Run


def repeat_cv(run: Run) -> list[dict[str, Any]]:
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
        row: dict[str, Any] = {"category": category, "repeats": len(per_repeat)}
        for column, key in (("pred_t_s", "pred_t_s_cv"), ("latency_s", "latency_cv")):
            series = per_repeat[column].dropna()
            row[key] = float(series.std(ddof=1) / series.mean()) if len(series) >= 2 and series.mean() else None
        rows.append(row)
    return rows


def speedup_repeat_cv(
    baseline: Run, speculative: Run, *, paired: pd.DataFrame | None = None
) -> list[dict[str, Any]]:
    """Per category, for paired decode and latency speedups: the between-repeat CV (of each repeat's geometric-mean
    speedup) next to the within-run CV (spread of per-sample speedups inside a repeat, pooled over repeats).

    Keys per row: category, repeats, decode_speedup_between_cv, decode_speedup_within_cv,
    latency_speedup_between_cv, latency_speedup_within_cv (None where undefined). Empty with fewer than 2 repeats.
    `paired` is `pair_runs(baseline, speculative, min_pairs=0)` when the caller has it already.
    """
    if paired is None:
        paired = pair_runs(baseline, speculative, min_pairs=0)
    if paired.empty or paired["repeat"].nunique() < 2:
        return []
    rows = []
    for category, group in each_category(paired):
        row: dict[str, Any] = {"category": category, "repeats": int(group["repeat"].nunique())}
        for column in ("decode_speedup", "latency_speedup"):
            values = group[group[column] > 0][["repeat", column]].copy()
            values["log"] = np.log(values[column].astype(float))
            per_repeat = np.exp(values.groupby("repeat")["log"].mean())
            row[f"{column}_between_cv"] = (
                float(per_repeat.std(ddof=1) / per_repeat.mean()) if len(per_repeat) >= 2 else None
            )
            within = values.groupby("repeat")["log"].std(ddof=1).dropna()
            row[f"{column}_within_cv"] = float(np.sqrt(np.expm1((within**2).mean()))) if len(within) else None
        rows.append(row)
    return rows
