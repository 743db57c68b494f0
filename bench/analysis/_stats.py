"""Paired statistics as flat rows: the comparison's view for callers that want mappings."""

from __future__ import annotations

from typing import Any

from bench._constants import DEFAULT_THRESHOLD
from bench.analysis._compare import paired_rows, reference_rows
from bench.records import Run


def paired_stats(
    baseline: Run,
    speculative: Run,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    min_pairs: int = 1,
) -> list[dict[str, Any]]:
    """Per category and overall: the comparison's paired statistics rows as flat mappings."""
    reference = reference_rows(baseline, speculative)
    rows = paired_rows(baseline, speculative, reference, threshold=threshold,
                       min_pairs=min_pairs)
    return [row.as_cells() for row in rows]
