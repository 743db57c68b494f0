"""Renderers of the paired-statistics, lossless and run-to-run tables (text and Markdown)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bench.render._tables import Column, format_value, markdown_escape, markdown_table, text_table

if TYPE_CHECKING:
    from bench.analysis import StatsRow

STATS_COLUMNS: list[Column] = [
    ("category", "category", ""),
    ("n", "n", "int"),
    ("decode_speedup", "decode_speedup_ci", ""),
    ("decode_verdict", "decode_verdict", ""),
    ("latency_speedup", "latency_speedup_ci", ""),
    ("latency_verdict", "latency_verdict", ""),
    ("accept_rate", "accept_rate", "rate"),
    ("accept_len", "acceptance_length", "speed"),
    ("drafted", "drafted_share", "percent"),
    ("identical", "identical_cell", ""),
]

LOSSLESS_COLUMNS: list[Column] = [
    ("category", "category", ""),
    ("identical", "identical_cell", ""),
    ("near_tie", "near_tie", "int"),
    ("real", "real", "int"),
    ("first_difference (sample@char: kind, baseline top-2 margin)", "first_diff", ""),
]

SPEEDUP_CV_COLUMNS: list[Column] = [
    ("category", "category", ""),
    ("repeats", "repeats", "int"),
    ("decode_between_repeats", "decode_speedup_between_cv", "percent"),
    ("decode_within_run", "decode_speedup_within_cv", "percent"),
    ("latency_between_repeats", "latency_speedup_between_cv", "percent"),
    ("latency_within_run", "latency_speedup_within_cv", "percent"),
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


def _stats_cells(rows: Sequence[StatsRow]) -> list[dict[str, Any]]:
    cells = []
    for row in rows:
        cell = row.as_cells()
        for estimate in (row.decode, row.latency):
            key = estimate.metric.key
            cell[f"{key}_ci"] = ci_cell(estimate.point, estimate.low, estimate.high)
        cell["identical_cell"] = f"{row.identical}/{row.compared_outputs}" if row.compared_outputs else "n/a"
        cells.append(cell)
    return cells


def _stats_legend(threshold: float) -> str:
    return (
        "geometric mean of per-sample speedups (the SpeedBench table: ratio of arithmetic means), samples matched by "
        "id, with a 95% t-interval on the logs; a verdict needs the "
        f"interval to exclude 1.00x and a change over {threshold:.0%}; drafted: share of the speculative output "
        "that came from accepted drafts (a row with nothing drafted gets no verdict: its speedups are noise)"
    )


def _disagreement_lines(rows: Sequence[StatsRow]) -> list[str]:
    return [
        f"{row.category}: the reference's ratio of means and the paired geometric mean disagree in direction "
        f"({'; '.join(row.disagreements)})"
        for row in rows if row.disagreements
    ]


def stats_text(rows: Sequence[StatsRow], threshold: float) -> str:
    """The paired statistics table, both verdicts labelled, with a line that says how to read it."""
    notes = "".join(f"note: {line}\n" for line in _disagreement_lines(rows))
    return f"Paired statistics: {_stats_legend(threshold)}\n" + text_table(_stats_cells(rows), STATS_COLUMNS) + notes


def stats_markdown(rows: Sequence[StatsRow], threshold: float) -> str:
    """The paired statistics table as Markdown, with its legend and any direction disagreements."""
    notes = "".join(f"\n- {markdown_escape(line)}" for line in _disagreement_lines(rows))
    legend = f"{_stats_legend(threshold).capitalize()}.\n\n"
    return legend + markdown_table(_stats_cells(rows), STATS_COLUMNS) + (f"\nNotes:\n{notes}\n" if notes else "")


def _divergence_cell(item: Mapping[str, Any]) -> str:
    """`math-005@93: near-tie 0.04`, `qa-004@40: real 2.31`, or `x@7: unclassified` (no log-probabilities)."""
    kind = str(item.get("kind", "unclassified")).replace("_", "-")
    margin = item.get("margin")
    return f"{item['id']}@{item['char']}: {kind}" + (f" {margin:.2f}" if isinstance(margin, int | float) else "")


def _lossless_cells(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    cells = []
    for row in rows:
        divergences = row.get("divergences") or []
        shown = ", ".join(_divergence_cell(item) for item in divergences) if divergences else row["first_diff"]
        cells.append({**row, "identical_cell": f"{row['identical']}/{row['compared']}", "first_diff": shown or "-"})
    return cells


def _lossless_legend(rows: Sequence[Mapping[str, Any]]) -> str:
    threshold = next((row.get("near_tie_threshold") for row in rows if row.get("near_tie_threshold")), None)
    if threshold is None:
        return ""
    return (
        f"near-tie: at the first difference the baseline's top two tokens were under {threshold:g} nats of "
        "log-probability apart (batched verification flips such ties); real: further apart; unclassified: no "
        "log-probabilities recorded (run with --logprobs)"
    )


def lossless_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """Lossless check: byte-identical outputs per category, and each first divergence classified by its margin."""
    legend = _lossless_legend(rows)
    return "Lossless check (speculative output byte-identical to baseline)\n" + text_table(
        _lossless_cells(rows), LOSSLESS_COLUMNS
    ) + (f"({legend})\n" if legend else "")


def lossless_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The lossless check as Markdown, with the near-tie rule."""
    legend = _lossless_legend(rows)
    return markdown_table(_lossless_cells(rows), LOSSLESS_COLUMNS) + (f"\n{legend.capitalize()}.\n" if legend else "")


def speedup_cv_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """Between-repeat against within-run variation of the paired speedups."""
    return ("Speedup variation: between repeats (CV of each repeat's geometric mean) vs within a run "
            "(spread of per-sample speedups)\n" + text_table(rows, SPEEDUP_CV_COLUMNS))


def speedup_cv_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """Between-repeat against within-run variation of the paired speedups, as Markdown."""
    return markdown_table(rows, SPEEDUP_CV_COLUMNS)


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
