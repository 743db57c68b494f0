"""Paired statistics per category: geometric-mean speedups with intervals and verdicts, acceptance length."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench._constants import OVERALL
from bench.analysis._intervals import (
    DECODE_SPEEDUP,
    LATENCY_SPEEDUP,
    SPEED_VERDICT_WORDS,
    bootstrap_geomean_ci,
    verdict,
)
from bench.analysis._paired import pair_runs, per_sample_geomean
from bench.records import Run


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
            per_sample = per_sample_geomean(group, metric.key)
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


def config_differences(baseline: Run, speculative: Run) -> list[str]:
    """Warnings for settings that should match between two compared runs."""
    warnings = []
    for key in ("bench", "osl", "extra_inputs", "category", "dataset"):
        base_value = baseline.config.get(key)
        spec_value = speculative.config.get(key)
        if base_value != spec_value:
            warnings.append(f"runs differ in {key}: baseline={base_value!r} speculative={spec_value!r}")
    return warnings
