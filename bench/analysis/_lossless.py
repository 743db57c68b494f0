"""The lossless check: speculative outputs byte-identical to the baseline's, and where the others differ."""

from __future__ import annotations

from typing import Any

from bench._constants import OVERALL
from bench.analysis._paired import pair_runs
from bench.records import Run


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
