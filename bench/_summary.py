"""The reference's aggregation: per-category summaries and comparison rows (pure Python, no numpy or pandas).

Kept apart from the statistics so that running a benchmark never imports the analysis stack.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bench._records import Run, SampleResult

OVERALL = "overall"


def _mean(values: Sequence[float]) -> float | None:
    return statistics.mean(values) if values else None


def summarize_group(category: str, results: Sequence[SampleResult]) -> dict[str, Any]:
    """One summary row with the reference's aggregation (plain means over successful samples, pooled rate)."""
    ok = [result for result in results if result.ok]
    draft_n = sum(result.draft_n for result in ok)
    accepted = sum(result.draft_n_accepted for result in ok)
    return {
        "category": category,
        "requests": len(ok),
        "turns": sum(result.turns for result in ok),
        "failed": len(results) - len(ok),
        "avg_prompt_t_s": _mean([r.prompt_per_second for r in ok if r.prompt_per_second is not None]),
        "avg_pred_t_s": _mean([r.predicted_per_second for r in ok if r.predicted_per_second is not None]),
        "avg_latency": _mean([result.latency_s for result in ok]),
        "draft_n": draft_n,
        "accepted": accepted,
        "accept_rate": (accepted / draft_n) if draft_n > 0 else None,
    }


def summarize(results: Iterable[SampleResult], categories: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Per-category summary rows in first-seen order, then `overall`, as `speed_bench.py` computes them."""
    results = list(results)
    order = list(categories) if categories is not None else list(dict.fromkeys(r.category for r in results))
    groups: dict[str, list[SampleResult]] = {category: [] for category in order}
    for result in results:
        groups.setdefault(result.category, []).append(result)
    rows = [summarize_group(category, group) for category, group in groups.items()]
    rows.append(summarize_group(OVERALL, results))
    return rows


def _ratio(numerator: Any, denominator: Any) -> float | None:
    if not numerator or not denominator:
        return None
    return float(numerator) / float(denominator)


def compare_summaries(
    baseline: Sequence[Mapping[str, Any]], speculative: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The reference's comparison rows: speculative order, categories missing from the baseline dropped."""
    baseline_by_category = {row.get("category"): row for row in baseline}
    rows = []
    for row in speculative:
        base = baseline_by_category.get(row.get("category"))
        if not base:
            continue
        rows.append(
            {
                "category": row.get("category"),
                "base_avg_pred_t_s": base.get("avg_pred_t_s"),
                "spec_avg_pred_t_s": row.get("avg_pred_t_s"),
                "decode_speedup": _ratio(row.get("avg_pred_t_s"), base.get("avg_pred_t_s")),
                "base_avg_latency": base.get("avg_latency"),
                "spec_avg_latency": row.get("avg_latency"),
                "latency_speedup": _ratio(base.get("avg_latency"), row.get("avg_latency")),
                "accept_rate": row.get("accept_rate"),
            }
        )
    return rows


def compare_runs(baseline: Run, speculative: Run) -> list[dict[str, Any]]:
    """Comparison rows of two runs, from their saved summaries (as the reference compare does)."""
    return compare_summaries(baseline.summary, speculative.summary)
