"""The reference's comparison rows, computed from two runs' saved summaries as `speed_bench_compare.py` does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench._types import JsonMapping, JsonObject, JsonValue
from bench.analysis._metrics import REFERENCE_METRICS, metric_cells
from bench.records import Run


def _number(value: JsonValue) -> float | None:
    """A summary value that is a number, as it is (None when missing or not a number)."""
    return value if isinstance(value, int | float) else None


def _ratio(numerator: JsonValue, denominator: JsonValue) -> float | None:
    top, bottom = _number(numerator), _number(denominator)
    if not top or not bottom:
        return None
    return float(top) / float(bottom)


def compare_summaries(
    baseline: Sequence[JsonMapping], speculative: Sequence[JsonMapping]
) -> list[JsonObject]:
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


def compare_runs(baseline: Run, speculative: Run) -> list[JsonObject]:
    """Comparison rows of two runs, from their saved summaries (as the reference compare does)."""
    return compare_summaries(baseline.summary, speculative.summary)


@dataclass(frozen=True, slots=True)
class ReferenceRow:
    """One row of the reference's comparison table (`speed_bench_compare.py`), from the saved summaries."""

    category: str
    base_avg_pred_t_s: float | None
    spec_avg_pred_t_s: float | None
    decode_speedup: float | None
    base_avg_latency: float | None
    spec_avg_latency: float | None
    latency_speedup: float | None
    accept_rate: float | None

    def as_cells(self) -> JsonObject:
        """The row as a flat mapping keyed like the reference's columns."""
        return metric_cells(self, REFERENCE_METRICS)


def reference_rows(baseline: Run, speculative: Run) -> tuple[ReferenceRow, ...]:
    """The reference comparison rows, typed."""
    return tuple(_reference_row(row) for row in compare_summaries(baseline.summary, speculative.summary))


def _reference_row(cells: JsonMapping) -> ReferenceRow:
    """One comparison row read into its typed fields."""
    return ReferenceRow(
        category=str(cells["category"]),
        base_avg_pred_t_s=_number(cells["base_avg_pred_t_s"]),
        spec_avg_pred_t_s=_number(cells["spec_avg_pred_t_s"]),
        decode_speedup=_number(cells["decode_speedup"]),
        base_avg_latency=_number(cells["base_avg_latency"]),
        spec_avg_latency=_number(cells["spec_avg_latency"]),
        latency_speedup=_number(cells["latency_speedup"]),
        accept_rate=_number(cells["accept_rate"]),
    )
