"""Paired statistics as flat rows (the comparison's view for callers that want mappings), and config checks."""

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


def config_differences(baseline: Run, speculative: Run) -> list[str]:
    """Warnings for settings that should match between two compared runs."""
    warnings = []
    for key in ("bench", "osl", "extra_inputs", "category", "dataset"):
        base_value = baseline.config.get(key)
        spec_value = speculative.config.get(key)
        if base_value != spec_value:
            warnings.append(f"runs differ in {key}: baseline={base_value!r} speculative={spec_value!r}")
    return warnings
