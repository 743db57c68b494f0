"""Text, Markdown and JSON renderers of table rows; they return text and never print."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, TypeAlias

from bench._types import JsonValue
from bench.analysis import REFERENCE_METRICS, SUMMARY_METRICS, Metric
from bench.render._escape import markdown_escape, terminal_text


class Column(NamedTuple):
    """A table column: its header, the key of its cell in each row, and its display format (a metric's `kind`)."""

    header: str
    key: str
    kind: str = ""

    @classmethod
    def of(cls, metric: Metric) -> Column:
        """The column a declared metric is shown in."""
        return cls(metric.header, metric.key, metric.kind)


def columns_of(metrics: Sequence[Metric]) -> list[Column]:
    """The columns of a table whose rows carry these declared metrics, in their order."""
    return [Column.of(metric) for metric in metrics]


CellValue: TypeAlias = "JsonValue | tuple[JsonValue, ...]"
"""One cell before it is drawn: a JSON value, or a tuple of them (one Markdown cell of several lines)."""

Cells: TypeAlias = "Mapping[str, CellValue]"
"""One table row's cells, keyed by its columns' keys."""

SUMMARY_COLUMNS: list[Column] = columns_of(SUMMARY_METRICS)

COMPARISON_COLUMNS: list[Column] = columns_of(REFERENCE_METRICS)

NO_OVERLAP_MESSAGE = "No overlapping categories found for comparison."


_FORMATTERS: dict[str, Callable[[float], str]] = {
    "rate": lambda value: f"{value:.4f}",
    "seconds": lambda value: f"{value:.3f}s",
    "speed": lambda value: f"{value:.2f}",
    "speedup": lambda value: f"{value:.2f}x",
    "ms": lambda value: f"{1000.0 * value:.1f}ms",
    "percent": lambda value: f"{100.0 * value:.1f}%",
    "difference": lambda value: f"{100.0 * value:+.1f}",
    "number": lambda value: f"{value:.3g}",
}
"""How each numeric display format of `FORMATS` draws a value ("" and `int` are drawn by `format_value` itself)."""


def format_value(value: CellValue, kind: str = "") -> str:
    """Format one cell by its display format (a metric's `kind`), the way the SpeedBench reference does (`n/a` for a
    missing value); every renderer draws a metric's value through this."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    formatter = _FORMATTERS.get(kind)
    if kind == "int" and not isinstance(value, list | dict | tuple):
        return str(int(value))
    if formatter is None or isinstance(value, list | dict | tuple):
        return str(value)
    return formatter(float(value))


def _cells(rows: Sequence[Cells], columns: Sequence[Column]) -> list[list[str]]:
    return [[format_value(row.get(key), kind) for _, key, kind in columns] for row in rows]


def text_table(rows: Sequence[Cells], columns: Sequence[Column]) -> str:
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


def markdown_table(rows: Sequence[Cells], columns: Sequence[Column], *, wrap_headers: bool = False) -> str:
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


def _markdown_cell(value: CellValue, kind: str) -> str:
    """One Markdown cell; a tuple of values is one cell of several lines (joined by `<br>`, each part escaped)."""
    if isinstance(value, tuple):
        return "<br>".join(_escape_cell(format_value(part, kind)) for part in value)
    return _escape_cell(format_value(value, kind))


def _escape_cell(text: str) -> str:
    return markdown_escape(text).replace("|", "\\|")


def summary_text(summary: Sequence[Cells]) -> str:
    """The per-run summary table in the reference's exact text format."""
    return text_table(summary, SUMMARY_COLUMNS)


def comparison_text(rows: Sequence[Cells], baseline_label: str, speculative_label: str) -> str:
    """Exactly what `speed_bench_compare.py` prints: the header line, then the table."""
    head = f"Comparison: baseline={terminal_text(baseline_label)} speculative={terminal_text(speculative_label)}\n"
    if not rows:
        return head + NO_OVERLAP_MESSAGE + "\n"
    return head + text_table(rows, COMPARISON_COLUMNS)


def comparison_markdown(rows: Sequence[Cells]) -> str:
    """The comparison table as a GitHub Markdown table (the reference's headers, each free to break after `_`)."""
    return markdown_table(rows, COMPARISON_COLUMNS, wrap_headers=True) if rows else NO_OVERLAP_MESSAGE + "\n"

