"""Every reported metric declared once: its key, label, unit, display format, direction and table column.

A table's columns are a tuple of these; the text, Markdown and JSON outputs all read a row's cells by `key`
(`metric_cells`) and draw them by `kind` under `header`, so a new column is one declaration and one row field.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench._types import JsonObject

FORMATS = ("", "int", "rate", "seconds", "speed", "speedup", "ms", "percent", "difference", "number")
"""The display formats a metric may name; `render.format_value` draws each one, the same in every renderer:
"" the value as text, `int` a count, `rate` a fraction to four decimals (the reference's accept rate), `seconds`
and `ms` a time in seconds, `speed` two decimals, `speedup` two decimals and `x`, `percent` a fraction as a
percentage, `difference` a change of a fraction in percentage points (signed), `number` three significant digits."""


@dataclass(frozen=True, slots=True)
class Metric:
    """A reported metric: its cell key, a reader's label, the direction that counts as better, its display format
    (`kind`, one of `FORMATS`), its unit and the column header a table shows (the key when not given)."""

    key: str
    label: str
    higher_is_better: bool | None
    kind: str
    unit: str = ""
    column: str = ""

    def __post_init__(self) -> None:
        """Refuse a display format the renderers do not know."""
        if self.kind not in FORMATS:
            raise ValueError(f"metric {self.key!r}: unknown display format {self.kind!r}")

    @property
    def header(self) -> str:
        """The column header of this metric in a table."""
        return self.column or self.key


DECODE_SPEEDUP = Metric("decode_speedup", "decode speedup", True, "speedup", "x")
LATENCY_SPEEDUP = Metric("latency_speedup", "latency speedup", True, "speedup", "x")
ACCEPT_RATE = Metric("accept_rate", "accept rate", True, "rate")
DECODE_RATE = Metric("decode_rate", "decode t/s", True, "speed", "t/s")
LATENCY = Metric("latency", "latency", False, "seconds", "s")
ACCEPTANCE_LENGTH = Metric("acceptance_length", "acceptance length", True, "speed", "tokens/step", "accept_len")
DRAFTED = Metric("drafted_share", "drafted share", True, "percent", "%", "drafted")
"""Output tokens that came from accepted drafts / output tokens (a table's `drafted` column, a history series)."""
STEP_COST = Metric("step_cost", "decode step / baseline token", False, "speed", "x base token")

THROUGHPUT_SPEEDUP = Metric("throughput_speedup", "system throughput speedup", True, "speedup", "x")
"""A sweep cell's tokens per second of the whole system, speculative over baseline."""
LATENCY_SPEEDUP_SCHEDULED = Metric("latency_speedup", "latency speedup (from schedule)", True, "speedup", "x")
"""An open-loop A/B's latency speedup, each latency counted from the request's scheduled arrival."""
TTFT_SPEEDUP_SCHEDULED = Metric("ttft_speedup", "TTFT speedup (from schedule)", True, "speedup", "x")
"""An open-loop A/B's time-to-first-token speedup, counted from the scheduled arrival."""

ATTAINMENT = Metric("slo_attainment", "SLO attainment", True, "percent", "%")
GOODPUT = Metric("goodput", "goodput (req/s)", True, "number", "req/s")
GOODPUT_RATIO = Metric("goodput_ratio", "goodput ratio", True, "speedup", "x")
ATTAINMENT_DIFFERENCE = Metric("attainment_difference", "attainment change (points)", True, "difference", "points")
REQUEST_THROUGHPUT = Metric("request_throughput", "requests/s", True, "rate", "req/s")
OUTPUT_THROUGHPUT = Metric("output_throughput", "output tokens/s", True, "rate", "t/s")
ACHIEVED_RATE = Metric("achieved_rate", "achieved rate (req/s)", True, "rate", "req/s")

CATEGORY = Metric("category", "category", None, "")
SAMPLES = Metric("n", "samples", None, "int")
REPEATS = Metric("repeats", "repeats", None, "int")

SUMMARY_METRICS: tuple[Metric, ...] = (
    CATEGORY,
    Metric("requests", "samples", None, "int", "", "samples"),
    Metric("avg_prompt_t_s", "prompt processing rate", True, "speed", "t/s", "avg_prompt_t/s"),
    Metric("avg_pred_t_s", "decode rate", True, "speed", "t/s", "avg_pred_t/s"),
    Metric("avg_latency", "latency", False, "seconds", "s"),
    ACCEPT_RATE,
)
"""The reference's per-run summary table (`speed_bench.py`), column for column."""

REFERENCE_METRICS: tuple[Metric, ...] = (
    CATEGORY,
    Metric("base_avg_pred_t_s", "baseline decode rate", True, "speed", "t/s", "base_avg_pred_t/s"),
    Metric("spec_avg_pred_t_s", "speculative decode rate", True, "speed", "t/s", "spec_avg_pred_t/s"),
    Metric("decode_speedup", "decode speedup (ratio of means)", True, "speedup", "x"),
    Metric("base_avg_latency", "baseline latency", False, "seconds", "s"),
    Metric("spec_avg_latency", "speculative latency", False, "seconds", "s"),
    Metric("latency_speedup", "latency speedup (ratio of means)", True, "speedup", "x"),
    ACCEPT_RATE,
)
"""The reference's comparison table (`speed_bench_compare.py`), column for column."""

STREAM_PARTS: tuple[tuple[str, str, str, str], ...] = (
    ("ttft", "time to first token", "ms", "ms"),
    ("itl", "inter-token latency per chunk", "ms", "ms"),
    ("itl_tok", "inter-token latency per token", "ms", "ms"),
    ("tpot", "time per output token", "ms", "ms"),
    ("queue", "queue wait", "ms", "ms"),
    ("e2e", "end to end", "seconds", "s"),
)
"""(name, label, display format, unit) of each streaming latency; each is reported at these quantiles."""

STREAM_QUANTILES = ("p50", "p90", "p99")

STREAM_METRICS: tuple[Metric, ...] = (
    CATEGORY,
    SAMPLES,
    *(Metric(f"{name}_{quantile}", f"{label} {quantile}", False, kind, unit)
      for name, label, kind, unit in STREAM_PARTS for quantile in STREAM_QUANTILES),
    Metric("client_decode_t_s", "client-side decode rate", True, "speed", "t/s", "client_decode_t/s"),
)
"""The streaming latency table, per category."""

REPEAT_CV_METRICS: tuple[Metric, ...] = (
    CATEGORY,
    REPEATS,
    Metric("pred_t_s_cv", "decode t/s variation across repeats", False, "percent", "%", "decode_t/s_cv"),
    Metric("latency_cv", "latency variation across repeats", False, "percent", "%"),
)
"""The run-to-run variation table of one run, per category."""

SPEEDUP_CV_METRICS: tuple[Metric, ...] = (
    CATEGORY,
    REPEATS,
    Metric("decode_speedup_between_cv", "decode speedup between repeats", False, "percent", "%",
           "decode_between_repeats"),
    Metric("decode_speedup_within_cv", "decode speedup within a run", False, "percent", "%", "decode_within_run"),
    Metric("latency_speedup_between_cv", "latency speedup between repeats", False, "percent", "%",
           "latency_between_repeats"),
    Metric("latency_speedup_within_cv", "latency speedup within a run", False, "percent", "%", "latency_within_run"),
)
"""Between-repeat against within-run variation of the paired speedups, per category."""


def metric_cells(row: object, metrics: Sequence[Metric]) -> JsonObject:
    """A typed row's cells: each declared metric's value, read from the row's attribute of the same key."""
    return {metric.key: getattr(row, metric.key) for metric in metrics}
