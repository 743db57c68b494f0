"""The `report` job's inputs: the vetted comparison of two run files and the history's trend lines."""

from __future__ import annotations

from collections.abc import Sequence

from bench.analysis import Comparison, compare, recent_trend
from bench.pipeline._history import load_history_analysis, workload_name
from bench.pipeline._vet import vet
from bench.records import load_run
from bench.render import trend_line


def vetted_comparison(baseline_path: str, speculative_path: str, *, threshold: float, allow_mismatch: bool,
                      allow_partial: bool) -> Comparison:
    """The comparison of two run files, refused (a BenchError) when they are not comparable."""
    baseline, speculative = load_run(baseline_path), load_run(speculative_path)
    checked = vet(baseline, speculative, allow_mismatch=allow_mismatch, allow_partial=allow_partial)
    return compare(baseline, speculative, threshold=threshold, comparability=checked)


def report_trends(history: str | None, comparisons: Sequence[Comparison]) -> list[str]:
    """With a history folder: one trend line per compared workload (its overall decode series), else none."""
    if not history:
        return []
    analysis = load_history_analysis(history)
    lines = []
    for comparison in comparisons:
        name = workload_name(comparison.speculative)
        line = trend_line(recent_trend(analysis, name))
        lines.append(f"{name}: {line}" if len(comparisons) > 1 else line)
    return lines
