"""Renderers of the paired-statistics, lossless and run-to-run tables (text and Markdown)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.render._tables import Column, format_value, markdown_table, text_table

STATS_COLUMNS: list[Column] = [
    ("category", "category", ""),
    ("n", "n", "int"),
    ("decode_speedup", "decode_speedup_ci", ""),
    ("latency_speedup", "latency_speedup_ci", ""),
    ("accept_rate", "accept_rate", "rate"),
    ("accept_len", "acceptance_length", "speed"),
    ("identical", "identical_cell", ""),
    ("verdict", "verdict", ""),
]

LOSSLESS_COLUMNS: list[Column] = [
    ("category", "category", ""),
    ("identical", "identical_cell", ""),
    ("first_difference (sample@char)", "first_diff", ""),
]

CV_COLUMNS: list[Column] = [
    ("category", "category", ""),
    ("repeats", "repeats", "int"),
    ("decode_t/s_cv", "pred_t_s_cv", "percent"),
    ("latency_cv", "latency_cv", "percent"),
]


def ci_cell(point: Any, low: Any, high: Any) -> str:
    """`1.23x [1.10, 1.37]`, or `n/a` parts where a bound is missing."""
    if point is None or point != point:
        return "n/a"
    if low is None or high is None or low != low or high != high:
        return format_value(point, "speedup")
    bounds = f"[{format_value(low, 'speed')}, {format_value(high, 'speed')}]"
    return f"{format_value(point, 'speedup')} {bounds}"


def _stats_cells(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    cells = []
    for row in rows:
        cell = dict(row)
        for key in ("decode_speedup", "latency_speedup"):
            cell[f"{key}_ci"] = ci_cell(row.get(key), row.get(f"{key}_low"), row.get(f"{key}_high"))
        compared = row.get("compared_outputs") or 0
        cell["identical_cell"] = f"{row.get('identical')}/{compared}" if compared else "n/a"
        cells.append(cell)
    return cells


def stats_text(rows: Sequence[Mapping[str, Any]], threshold: float) -> str:
    """The paired statistics table with a line that says how to read it."""
    head = (
        "Paired statistics: geometric mean of per-sample speedups, 95% bootstrap CI; "
        f"verdict needs the CI to exclude 1.00x and a change over {threshold:.0%}\n"
    )
    return head + text_table(_stats_cells(rows), STATS_COLUMNS)


def stats_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The paired statistics table as Markdown."""
    return markdown_table(_stats_cells(rows), STATS_COLUMNS)


def _lossless_cells(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**row, "identical_cell": f"{row['identical']}/{row['compared']}", "first_diff": row["first_diff"] or "-"}
        for row in rows
    ]


def lossless_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """Lossless check: byte-identical outputs per category and where the others first differ."""
    return "Lossless check (speculative output byte-identical to baseline)\n" + text_table(
        _lossless_cells(rows), LOSSLESS_COLUMNS
    )


def lossless_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The lossless check as Markdown."""
    return markdown_table(_lossless_cells(rows), LOSSLESS_COLUMNS)


STREAM_DEFINITIONS: dict[str, str] = {
    "ttft": "time to first token: request sent -> first content chunk's last byte read off the socket",
    "itl": "inter-token latency per chunk: gap between consecutive content chunks (a burst of tokens is one gap)",
    "itl_tok": "per-token ITL: each chunk's gap spread evenly over the tokens it carried (first chunk's are TTFT)",
    "tpot": "time per output token: (end to end - TTFT) / (output tokens - 1), per sample",
    "queue": "queue wait: request sent - sample scheduled (a concurrency slot freed); not in TTFT or e2e",
    "e2e": "end to end: request sent -> stream finished ([DONE]), summed over turns",
}
"""One line per streaming metric, shown under the table (README: Streaming timing definitions)."""


STREAM_COLUMNS: list[Column] = [
    ("category", "category", ""),
    ("n", "n", "int"),
    *[(f"{name}_{q}", f"{name}_{q}", "ms") for name in ("ttft", "itl", "itl_tok", "tpot", "queue")
      for q in ("p50", "p90", "p99")],
    *[(f"e2e_{q}", f"e2e_{q}", "seconds") for q in ("p50", "p90", "p99")],
    ("client_decode_t/s", "client_decode_t_s", "speed"),
]


def stream_definitions() -> list[str]:
    """`name: definition` lines of the streaming metrics (one per column family)."""
    return [f"{name}: {text}" for name, text in STREAM_DEFINITIONS.items()]


def stream_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """Streaming latency percentiles per category, followed by each metric's definition."""
    return (
        "Streaming latencies (TTFT, inter-token per chunk and per token, time per output token, queue wait, "
        "end to end)\n" + text_table(rows, STREAM_COLUMNS) + "".join(f"  {line}\n" for line in stream_definitions())
    )


def stream_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """Streaming latency percentiles as Markdown, followed by each metric's definition."""
    return markdown_table(rows, STREAM_COLUMNS) + "\n" + "".join(f"- {line}\n" for line in stream_definitions())


def cv_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """Run-to-run coefficient of variation across repeats."""
    return "Run-to-run variation across repeats\n" + text_table(rows, CV_COLUMNS)
