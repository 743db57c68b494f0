"""Analysis of run records: the reference's summaries and comparisons, paired statistics, lossless checks."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bench._constants import OVERALL
from bench._errors import BenchError
from bench.records import Run, latest_by_key


@dataclass(frozen=True)
class Metric:
    """A compared metric and the direction that counts as better."""

    key: str
    label: str
    higher_is_better: bool
    kind: str


DECODE_SPEEDUP = Metric("decode_speedup", "decode speedup", True, "speedup")
LATENCY_SPEEDUP = Metric("latency_speedup", "latency speedup", True, "speedup")
ACCEPT_RATE = Metric("accept_rate", "accept rate", True, "rate")
DECODE_RATE = Metric("decode_rate", "decode t/s", True, "speed")
LATENCY = Metric("latency", "latency", False, "seconds")


# ---------------------------------------------------------------- paired statistics


def results_frame(run: Run) -> pd.DataFrame:
    """One row per (sample, repeat) of a run, the last attempt of each kept."""
    rows = [
        {
            "id": r.id,
            "repeat": r.repeat,
            "category": r.category,
            "ok": r.ok,
            "latency_s": r.latency_s,
            "pred_t_s": r.predicted_per_second if r.predicted_per_second is not None else r.client_decode_t_s,
            "draft_n": r.draft_n,
            "accepted": r.draft_n_accepted,
            "output": "\n\n".join(r.outputs) if r.outputs else None,
        }
        for r in latest_by_key(run.results)
    ]
    columns = ["id", "repeat", "category", "ok", "latency_s", "pred_t_s", "draft_n", "accepted", "output"]
    frame = pd.DataFrame(rows, columns=columns)
    # typed even when empty: an empty object-dtype "ok" column would index columns, not rows
    return frame.astype({"ok": bool})


def first_difference(a: str, b: str) -> int | None:
    """Index of the first differing character, or None when the strings are identical."""
    if a == b:
        return None
    limit = min(len(a), len(b))
    for index in range(limit):
        if a[index] != b[index]:
            return index
    return limit


def pair_runs(baseline: Run, speculative: Run, *, min_pairs: int = 1) -> pd.DataFrame:
    """Match successful samples of two runs by (id, repeat) and compute per-sample speedups."""
    base = results_frame(baseline)
    spec = results_frame(speculative)
    base = base[base["ok"]]
    spec = spec[spec["ok"]]
    merged = base.merge(spec, on=["id", "repeat"], suffixes=("_base", "_spec"))
    if len(merged) < min_pairs:
        raise BenchError(
            f"only {len(merged)} successful samples match between the runs "
            f"(baseline {len(base)}, speculative {len(spec)}); at least {min_pairs} needed: "
            "run both over the same prompts"
        )
    merged = merged.rename(columns={"category_spec": "category"}).drop(columns=["category_base"])
    merged["decode_speedup"] = merged["pred_t_s_spec"] / merged["pred_t_s_base"]
    merged["latency_speedup"] = merged["latency_s_base"] / merged["latency_s_spec"]
    identical = []
    first_diff = []
    for out_base, out_spec in zip(merged["output_base"], merged["output_spec"], strict=True):
        if out_base is None or out_spec is None:
            identical.append(None)
            first_diff.append(None)
            continue
        index = first_difference(out_base, out_spec)
        identical.append(index is None)
        first_diff.append(index)
    merged["identical"] = pd.array(identical, dtype="boolean")
    merged["first_diff"] = pd.array(first_diff, dtype="Int64")
    return merged


MIN_SAMPLES_FOR_CI = 5
"""Below this many paired samples a bootstrap interval is not trustworthy: no CI and no verdict."""
NORMAL_ABOVE = 5000
"""Above this many samples the bootstrap distribution of the mean of logs is normal to within its own
Monte-Carlo error (central limit theorem), so the normal interval is used instead of resampling
(n * resamples gathers would dominate the analysis of large runs)."""


def bootstrap_geomean_ci(
    values: Sequence[float] | np.ndarray,
    *,
    resamples: int = 4000,
    confidence: float = 0.95,
    seed: int = 0,
    min_samples: int = MIN_SAMPLES_FOR_CI,
    normal_above: int = NORMAL_ABOVE,
) -> tuple[float, float, float]:
    """Geometric mean of positive ratios with a seeded percentile-bootstrap CI: (geomean, low, high)."""
    if resamples < 1:
        raise BenchError(f"resamples must be >= 1 (got {resamples})")
    logs = np.log(np.asarray(values, dtype=float))
    logs = logs[np.isfinite(logs)]
    if logs.size == 0:
        return (math.nan, math.nan, math.nan)
    point = float(np.exp(logs.mean()))
    if logs.size < max(2, min_samples):
        return (point, math.nan, math.nan)
    if logs.size > normal_above:
        half = statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0) * logs.std(ddof=1) / math.sqrt(logs.size)
        return (point, float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half)))
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    chunk = max(1, 2_000_000 // logs.size)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        index = rng.integers(0, logs.size, size=(stop - start, logs.size))
        means[start:stop] = logs[index].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return (point, float(np.exp(low)), float(np.exp(high)))


def verdict(point: float, low: float, high: float, metric: Metric, threshold: float) -> str:
    """`better`/`worse` only when the CI excludes no-change and the change exceeds the threshold."""
    if any(math.isnan(x) for x in (point, low, high)):
        return "not enough data"
    improved = low > 1.0 and point > 1.0 + threshold
    degraded = high < 1.0 and point < 1.0 / (1.0 + threshold)
    if not metric.higher_is_better:
        improved, degraded = degraded, improved
    if improved:
        return "better"
    if degraded:
        return "worse"
    return "no significant change"


SPEED_VERDICT_WORDS = {"better": "faster", "worse": "slower"}


def _per_sample_logmean(frame: pd.DataFrame, column: str) -> np.ndarray:
    values = frame[["id", column]].copy()
    values = values[values[column] > 0]
    values["log"] = np.log(values[column].astype(float))
    return np.exp(values.groupby("id", sort=False)["log"].mean().to_numpy())


def paired_stats(
    baseline: Run,
    speculative: Run,
    *,
    threshold: float = 0.02,
    resamples: int = 4000,
    seed: int = 0,
    min_pairs: int = 1,
) -> list[dict[str, Any]]:
    """Per category and overall: geomean decode and latency speedups with bootstrap CIs and a verdict."""
    paired = pair_runs(baseline, speculative, min_pairs=min_pairs)
    spec_summary = {row.get("category"): row for row in speculative.summary}
    acceptance_length = _acceptance_length_by_category(speculative)
    order = list(dict.fromkeys(paired["category"]))
    rows = []
    for category in [*order, OVERALL]:
        group = paired if category == OVERALL else paired[paired["category"] == category]
        row: dict[str, Any] = {"category": category, "n": int(group["id"].nunique()), "pairs": len(group)}
        for metric in (DECODE_SPEEDUP, LATENCY_SPEEDUP):
            per_sample = _per_sample_logmean(group, metric.key)
            point, low, high = bootstrap_geomean_ci(per_sample, resamples=resamples, seed=seed)
            row[metric.key] = point
            row[f"{metric.key}_low"] = low
            row[f"{metric.key}_high"] = high
            row[f"{metric.key}_verdict"] = verdict(point, low, high, metric, threshold)
        summary_row = spec_summary.get(category, {})
        row["accept_rate"] = summary_row.get("accept_rate")
        row["acceptance_length"] = acceptance_length.get(category)
        known = group["identical"].dropna()
        row["identical"] = int(known.sum()) if len(known) else None
        row["compared_outputs"] = len(known)
        row["identical_share"] = float(known.mean()) if len(known) else None
        decode_verdict = row["decode_speedup_verdict"]
        row["verdict"] = SPEED_VERDICT_WORDS.get(decode_verdict, decode_verdict)
        rows.append(row)
    return rows


def _acceptance_length_by_category(run: Run) -> dict[str, float]:
    """Acceptance length per category: tokens per verify step, from per-sample counter deltas or engine data."""
    sums: dict[str, list[float]] = {}
    for result in run.results:
        if not result.ok:
            continue
        if result.spec.get("drafts"):
            tokens, steps = result.spec["drafts"] + result.spec.get("accepted", 0.0), result.spec["drafts"]
        elif result.spec.get("steps"):
            tokens, steps = result.draft_n_accepted + result.spec["steps"], result.spec["steps"]
        else:
            continue
        for category in (result.category, OVERALL):
            pair = sums.setdefault(category, [0.0, 0.0])
            pair[0] += tokens
            pair[1] += steps
    lengths = {category: total / steps for category, (total, steps) in sums.items() if steps}
    run_wide = run.meta.get("acceptance") or {}
    if OVERALL not in lengths and isinstance(run_wide, Mapping) and run_wide.get("acceptance_length"):
        lengths[OVERALL] = float(run_wide["acceptance_length"])
    return lengths


def lossless_check(baseline: Run, speculative: Run) -> list[dict[str, Any]]:
    """Per category: how many speculative outputs are byte-identical to the baseline's, and where others differ."""
    paired = pair_runs(baseline, speculative, min_pairs=0)
    rows = []
    order = list(dict.fromkeys(paired["category"]))
    for category in [*order, OVERALL]:
        group = paired if category == OVERALL else paired[paired["category"] == category]
        known = group[group["identical"].notna()]
        differing = known[~known["identical"].astype(bool)]
        rows.append(
            {
                "category": category,
                "compared": len(known),
                "identical": int(known["identical"].astype(bool).sum()),
                "first_diff": ", ".join(
                    f"{sample}@{int(index)}"
                    for sample, index in zip(differing["id"], differing["first_diff"], strict=True)
                ),
            }
        )
    return rows


def repeat_cv(run: Run) -> list[dict[str, Any]]:
    """Run-to-run coefficient of variation per category across repeats of mean decode t/s and latency."""
    if len({result.repeat for result in run.results}) < 2:
        return []
    frame = results_frame(run)
    frame = frame[frame["ok"]]
    if frame.empty or frame["repeat"].nunique() < 2:
        return []
    rows = []
    order = list(dict.fromkeys(frame["category"]))
    for category in [*order, OVERALL]:
        group = frame if category == OVERALL else frame[frame["category"] == category]
        per_repeat = group.groupby("repeat")[["pred_t_s", "latency_s"]].mean()
        row: dict[str, Any] = {"category": category, "repeats": len(per_repeat)}
        for column, key in (("pred_t_s", "pred_t_s_cv"), ("latency_s", "latency_cv")):
            series = per_repeat[column].dropna()
            row[key] = float(series.std(ddof=1) / series.mean()) if len(series) >= 2 and series.mean() else None
        rows.append(row)
    return rows


def _percentiles(values: Sequence[float], prefix: str) -> dict[str, float | None]:
    array = np.asarray([value for value in values if value is not None and math.isfinite(value)], dtype=float)
    if array.size == 0:
        return {f"{prefix}_p{q}": None for q in (50, 90, 99)}
    p50, p90, p99 = np.percentile(array, [50, 90, 99])
    return {f"{prefix}_p50": float(p50), f"{prefix}_p90": float(p90), f"{prefix}_p99": float(p99)}


def stream_latency_stats(run: Run) -> list[dict[str, Any]]:
    """Streaming latencies per category: TTFT, inter-token latency, TPOT and end-to-end, each p50/p90/p99.

    TTFT is the first turn's; ITL pools every gap between content chunks; TPOT is
    (end-to-end - TTFT) / (tokens - 1) over single-turn samples; client decode t/s is averaged.
    Empty when the run was not streamed.
    """
    ok = [result for result in latest_by_key(run.results) if result.ok and result.ttft_s is not None]
    if not ok:
        return []
    rows = []
    for category in [*dict.fromkeys(result.category for result in ok), OVERALL]:
        group = ok if category == OVERALL else [result for result in ok if result.category == category]
        tpot = [
            (result.latency_s - result.ttft_s) / (result.completion_tokens - 1)
            for result in group
            if result.turns == 1 and result.completion_tokens > 1 and result.ttft_s is not None
        ]
        decode = [result.client_decode_t_s for result in group if result.client_decode_t_s is not None]
        row: dict[str, Any] = {"category": category, "n": len(group)}
        row.update(_percentiles([result.ttft_s for result in group], "ttft"))
        row.update(_percentiles([gap for result in group for gap in result.itl_s], "itl"))
        row.update(_percentiles(tpot, "tpot"))
        row.update(_percentiles([result.latency_s for result in group], "e2e"))
        row["client_decode_t_s"] = statistics.mean(decode) if decode else None
        rows.append(row)
    return rows


def config_differences(baseline: Run, speculative: Run) -> list[str]:
    """Warnings for settings that should match between two compared runs."""
    warnings = []
    for key in ("bench", "osl", "extra_inputs", "category", "dataset"):
        base_value = baseline.config.get(key)
        spec_value = speculative.config.get(key)
        if base_value != spec_value:
            warnings.append(f"runs differ in {key}: baseline={base_value!r} speculative={spec_value!r}")
    return warnings
