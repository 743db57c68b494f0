"""The lossless check: speculative outputs byte-identical to the baseline's, and where the others differ."""

from __future__ import annotations

from typing import Any

from bench.analysis._grouping import each_category
from bench.analysis._paired import pair_runs
from bench.records import Run


def lossless_check(baseline: Run, speculative: Run) -> list[dict[str, Any]]:
    """Per category: how many speculative outputs are byte-identical to the baseline's, and where others differ."""
    paired = pair_runs(baseline, speculative, min_pairs=0)
    rows = []
    for category, group in each_category(paired):
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
