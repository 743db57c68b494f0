"""Paired statistics as flat rows: the comparison's view for callers that want mappings."""

from __future__ import annotations

from bench._constants import DEFAULT_THRESHOLD
from bench._types import JsonObject
from bench.analysis._compare import compare
from bench.records import Run


def paired_stats(
    baseline: Run,
    speculative: Run,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    min_pairs: int = 1,
) -> list[JsonObject]:
    """Per category and overall: the comparison's paired statistics rows as flat mappings (a run sampled until
    decided is read at its stopping look, as every output of the comparison is)."""
    comparison = compare(baseline, speculative, threshold=threshold, min_pairs=min_pairs, strict=True)
    return [row.as_cells() for row in comparison.stats]
