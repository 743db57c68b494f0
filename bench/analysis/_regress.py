"""The CI gate: compare a candidate with a reference, category by category, and call regressions.

Inputs are either two comparisons (folders holding `baseline.json` and `speculative.json`, as
`make bench` writes them) or two run files of one configuration. Per category and metric, the
candidate/reference ratio is estimated over the samples both share (paired by id), with a seeded
bootstrap 95% CI. A metric regressed only when the CI says it got worse *and* the change exceeds
that metric's threshold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench._constants import OVERALL
from bench._errors import BenchError
from bench.analysis._intervals import (
    ACCEPT_RATE,
    DECODE_RATE,
    DECODE_SPEEDUP,
    LATENCY,
    LATENCY_SPEEDUP,
    Metric,
    verdict,
)
from bench.analysis._paired import pair_runs, results_frame
from bench.records import Run, load_run
from bench.render import Column, markdown_table, text_table

RESULT_COLUMNS: list[Column] = [
    ("category", "category", ""),
    ("metric", "metric", ""),
    ("n", "n", "int"),
    ("reference", "reference", "speed"),
    ("candidate", "candidate", "speed"),
    ("change", "change", ""),
    ("95% CI", "ci", ""),
    ("status", "status", ""),
]

MIN_SAMPLES = 5

MEANS_LINE = (
    "reference, candidate: geometric means over the samples both share (accept rate: pooled); "
    "change: geometric mean of per-sample candidate/reference ratios, 95% bootstrap CI"
)
"""How the gate's figures are averaged (compare's SpeedBench table uses arithmetic means)."""


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


def _geo(series: pd.Series) -> float:
    values = series.to_numpy(dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    return float(np.exp(np.log(values).mean())) if values.size else math.nan


def load_side(path: str) -> tuple[str, pd.DataFrame]:
    """Load a comparison folder or a run file; return its kind ('comparison' or 'run') and per-sample frame."""
    target = Path(path)
    if target.is_dir():
        base, spec = target / "baseline.json", target / "speculative.json"
        if not base.exists() or not spec.exists():
            raise BenchError(f"{target}: a comparison folder needs baseline.json and speculative.json")
        return "comparison", _comparison_frame(load_run(base), load_run(spec))
    if not target.exists():
        raise BenchError(f"{target}: no such file or folder")
    return "run", _run_frame(load_run(target))


def _bootstrap_ratio(
    statistic: Callable[[np.ndarray], float], n: int, *, resamples: int, seed: int
) -> tuple[float, float, float]:
    point = statistic(np.arange(n))
    if n < MIN_SAMPLES or not math.isfinite(point):
        return point, math.nan, math.nan
    rng = np.random.default_rng(seed)
    draws = np.array([statistic(rng.integers(0, n, n)) for _ in range(resamples)])
    draws = draws[np.isfinite(draws)]
    if draws.size < resamples * 0.9:
        return point, math.nan, math.nan
    low, high = np.quantile(draws, [0.025, 0.975])
    return point, float(low), float(high)


def _pooled_rate_ratio(
    accepted_ref: np.ndarray, drafted_ref: np.ndarray, accepted_new: np.ndarray, drafted_new: np.ndarray
) -> Callable[[np.ndarray], float]:
    """Statistic over resampled sample indices: candidate pooled accept rate / reference pooled accept rate."""

    def statistic(index: np.ndarray) -> float:
        ref_drafted, new_drafted = drafted_ref[index].sum(), drafted_new[index].sum()
        if ref_drafted <= 0 or new_drafted <= 0:
            return math.nan
        ref = accepted_ref[index].sum() / ref_drafted
        return (accepted_new[index].sum() / new_drafted) / ref if ref else math.nan

    return statistic


def _geomean_of(logs: np.ndarray) -> Callable[[np.ndarray], float]:
    """Statistic over resampled sample indices: geometric mean of per-sample candidate/reference ratios."""

    def statistic(index: np.ndarray) -> float:
        return float(np.exp(logs[index].mean()))

    return statistic


def _metric_rows(
    category: str,
    joined: pd.DataFrame,
    metrics: Sequence[Metric],
    thresholds: Mapping[str, float],
    resamples: int,
    seed: int,
) -> list[dict[str, Any]]:
    rows = []
    for metric in metrics:
        n = len(joined)
        if metric is ACCEPT_RATE:
            drafted_ref = joined["draft_n_ref"].to_numpy(dtype=float)
            accepted_ref = joined["accepted_ref"].to_numpy(dtype=float)
            drafted_new = joined["draft_n_new"].to_numpy(dtype=float)
            accepted_new = joined["accepted_new"].to_numpy(dtype=float)
            if drafted_ref.sum() <= 0 or drafted_new.sum() <= 0:
                continue
            reference = accepted_ref.sum() / drafted_ref.sum()
            candidate = accepted_new.sum() / drafted_new.sum()
            statistic = _pooled_rate_ratio(accepted_ref, drafted_ref, accepted_new, drafted_new)
        else:
            ref_values = joined[f"{metric.key}_ref"].to_numpy(dtype=float)
            new_values = joined[f"{metric.key}_new"].to_numpy(dtype=float)
            logs = np.log(new_values / ref_values)
            keep = np.isfinite(logs)
            logs, ref_values, new_values = logs[keep], ref_values[keep], new_values[keep]
            if logs.size == 0:
                continue
            reference = float(np.exp(np.log(ref_values).mean()))
            candidate = float(np.exp(np.log(new_values).mean()))

            statistic = _geomean_of(logs)
            n = int(logs.size)
        point, low, high = _bootstrap_ratio(statistic, n, resamples=resamples, seed=seed)
        call = verdict(point, low, high, metric, thresholds.get(metric.key, 0.05))
        status = {"better": "improved", "worse": "REGRESSED", "not enough data": call}.get(call, "unchanged")
        rows.append(
            {
                "category": category,
                "metric": metric.label,
                "key": metric.key,
                "n": n,
                "reference": reference,
                "candidate": candidate,
                "ratio": point,
                "low": low,
                "high": high,
                "change": f"{(point - 1.0) * 100:+.1f}%" if math.isfinite(point) else "n/a",
                "ci": f"[{low:.3f}, {high:.3f}]" if math.isfinite(low) else "n/a",
                "status": status,
            }
        )
    return rows


def regress(
    reference: str,
    candidate: str,
    *,
    thresholds: Mapping[str, float] | None = None,
    resamples: int = 2000,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Per category and metric: reference, candidate, ratio with CI and a status (REGRESSED/improved/unchanged)."""
    if resamples < 1:
        raise BenchError(f"--resamples must be >= 1 (got {resamples})")
    ref_kind, ref_frame = load_side(reference)
    new_kind, new_frame = load_side(candidate)
    if ref_kind != new_kind:
        raise BenchError(f"cannot compare a {ref_kind} ({reference}) with a {new_kind} ({candidate})")
    metrics = [DECODE_SPEEDUP, LATENCY_SPEEDUP, ACCEPT_RATE] if ref_kind == "comparison" else [
        DECODE_RATE, LATENCY, ACCEPT_RATE]
    joined = ref_frame.merge(new_frame, on=["id", "category"], suffixes=("_ref", "_new"))
    if joined.empty:
        raise BenchError(f"{reference} and {candidate} share no samples; run both over the same prompts")
    defaults = {metric.key: 0.05 for metric in metrics}
    defaults.update(thresholds or {})
    rows: list[dict[str, Any]] = []
    for category in [*dict.fromkeys(joined["category"]), OVERALL]:
        group = joined if category == OVERALL else joined[joined["category"] == category]
        rows.extend(_metric_rows(category, group, metrics, defaults, resamples, seed))
    return rows


def regress_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """The gate's table and a one-line verdict."""
    regressed = [row for row in rows if row["status"] == "REGRESSED"]
    head = (
        f"speedbench regress: {len(regressed)} regression(s)"
        + (": " + ", ".join(f"{row['category']} {row['metric']}" for row in regressed) if regressed else "")
        + "\n"
    )
    return head + MEANS_LINE + "\n" + text_table(rows, RESULT_COLUMNS)


def regress_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The gate's result as Markdown (for $GITHUB_STEP_SUMMARY)."""
    regressed = sum(row["status"] == "REGRESSED" for row in rows)
    head = "### speedbench regress: " + ("no regression" if not regressed else f"{regressed} regression(s)") + "\n\n"
    return head + MEANS_LINE + "\n\n" + markdown_table(rows, RESULT_COLUMNS)
