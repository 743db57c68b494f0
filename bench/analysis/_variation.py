"""Run-to-run variation across repeats."""

from __future__ import annotations

from typing import Any

from bench.analysis._grouping import each_category
from bench.analysis._paired import results_frame
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
