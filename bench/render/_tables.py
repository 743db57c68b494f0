"""Text, Markdown and JSON renderers of table rows; they return text and never print."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from bench.render._escape import markdown_escape, terminal_text

Column = tuple[str, str, str]
"""(header, row key, kind): kind is one of "", "int", "rate", "seconds", "speed", "speedup"."""

SUMMARY_COLUMNS: list[Column] = [
    ("category", "category", ""),
    ("samples", "requests", "int"),
    ("avg_prompt_t/s", "avg_prompt_t_s", "speed"),
    ("avg_pred_t/s", "avg_pred_t_s", "speed"),
    ("avg_latency", "avg_latency", "seconds"),
    ("accept_rate", "accept_rate", "rate"),
]

COMPARISON_COLUMNS: list[Column] = [
    ("category", "category", ""),
    ("base_avg_pred_t/s", "base_avg_pred_t_s", "speed"),
    ("spec_avg_pred_t/s", "spec_avg_pred_t_s", "speed"),
    ("decode_speedup", "decode_speedup", "speedup"),
    ("base_avg_latency", "base_avg_latency", "seconds"),
    ("spec_avg_latency", "spec_avg_latency", "seconds"),
    ("latency_speedup", "latency_speedup", "speedup"),
    ("accept_rate", "accept_rate", "rate"),
]

NO_OVERLAP_MESSAGE = "No overlapping categories found for comparison."


def format_value(value: Any, kind: str = "") -> str:
    """Format one cell the way the SpeedBench reference does (`n/a` for a missing value)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if kind == "int":
        return str(int(value))
    if kind == "rate":
        return f"{float(value):.4f}"
    if kind == "seconds":
        return f"{float(value):.3f}s"
    if kind == "speed":
        return f"{float(value):.2f}"
    if kind == "speedup":
        return f"{float(value):.2f}x"
    if kind == "ms":
        return f"{1000.0 * float(value):.1f}ms"
    if kind == "percent":
        return f"{100.0 * float(value):.1f}%"
    return str(value)


def _cells(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column]) -> list[list[str]]:
    return [[format_value(row.get(key), kind) for _, key, kind in columns] for row in rows]


def text_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column]) -> str:
    """Render rows as the reference's padded text table: two-space gaps, every cell left-justified.

    A cell's control characters are shown escaped (`terminal_text`): a name never drives the terminal.
    """
    rendered = [[terminal_text(cell) for cell in cells] for cells in _cells(rows, columns)]
    widths = [len(header) for header, _, _ in columns]
    for cells in rendered:
        widths = [max(width, len(cell)) for width, cell in zip(widths, cells, strict=True)]
    lines = ["  ".join(header.ljust(width) for (header, _, _), width in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * width for width in widths))
    lines.extend("  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)) for cells in rendered)
    return "\n".join(lines) + "\n"


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column], *, wrap_headers: bool = False) -> str:
    """Render rows as a GitHub Markdown table with the same cell formats; text columns left, numbers right.

    With `wrap_headers` a header may break after each `_` (`<wbr>`, drawn as nothing): long names such as
    `base_avg_pred_t/s` then need not set the table's width."""
    escaped = [_escape_cell(header) for header, _, _ in columns]
    if wrap_headers:
        escaped = [header.replace("_", "_<wbr>") for header in escaped]
    header = "| " + " | ".join(escaped) + " |"
    align = "| " + " | ".join("---" if kind == "" else "---:" for _, _, kind in columns) + " |"
    body = ["| " + " | ".join(_markdown_cell(row.get(key), kind) for _, key, kind in columns) + " |" for row in rows]
    return "\n".join([header, align, *body]) + "\n"


def _markdown_cell(value: Any, kind: str) -> str:
    """One Markdown cell; a tuple of values is one cell of several lines (joined by `<br>`, each part escaped)."""
    if isinstance(value, tuple):
        return "<br>".join(_escape_cell(format_value(part, kind)) for part in value)
    return _escape_cell(format_value(value, kind))


def _escape_cell(text: str) -> str:
    return markdown_escape(text).replace("|", "\\|")




def summary_text(summary: Sequence[Mapping[str, Any]]) -> str:
    """The per-run summary table in the reference's exact text format."""
    return text_table(summary, SUMMARY_COLUMNS)


def comparison_text(rows: Sequence[Mapping[str, Any]], baseline_label: str, speculative_label: str) -> str:
    """Exactly what `speed_bench_compare.py` prints: the header line, then the table."""
    head = f"Comparison: baseline={terminal_text(baseline_label)} speculative={terminal_text(speculative_label)}\n"
    if not rows:
        return head + NO_OVERLAP_MESSAGE + "\n"
    return head + text_table(rows, COMPARISON_COLUMNS)


def comparison_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The comparison table as a GitHub Markdown table (the reference's headers, each free to break after `_`)."""
    return markdown_table(rows, COMPARISON_COLUMNS, wrap_headers=True) if rows else NO_OVERLAP_MESSAGE + "\n"

