"""The reference's per-category summary of a run (pure Python: running a benchmark never loads numpy or pandas)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from bench._constants import OVERALL
from bench.records._results import SampleResult


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
