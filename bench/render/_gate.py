"""The CI gate's result as text and Markdown (for a terminal and `$GITHUB_STEP_SUMMARY`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bench.render._escape import terminal_text
from bench.render._tables import Column, markdown_table, text_table

if TYPE_CHECKING:
    from bench.analysis import GateRow

GATE_COLUMNS: list[Column] = [
    ("category", "category", ""),
    ("metric", "metric", ""),
    ("n", "n", "int"),
    ("reference", "reference", "speed"),
    ("candidate", "candidate", "speed"),
    ("change", "change", ""),
    ("95% CI", "ci", ""),
    ("status", "status", ""),
]
_LEGEND = (
    "reference, candidate: geometric means over the samples both share (accept rate: pooled); "
    "change: geometric mean of per-sample candidate/reference ratios, 95% interval; a regression needs the "
    "interval below 1.00x and a change over the metric's threshold"
)


def _cells(rows: Sequence[GateRow]) -> list[dict[str, Any]]:
    return [
        {"category": row.category, "metric": row.metric.label, "n": row.n, "reference": row.reference,
         "candidate": row.candidate, "change": row.change, "ci": row.interval, "status": row.status}
        for row in rows
    ]


def _regressed(rows: Sequence[GateRow]) -> list[GateRow]:
    return [row for row in rows if row.status == "REGRESSED"]


def gate_text(rows: Sequence[GateRow]) -> str:
    """The gate's one-line verdict, its table and how to read it."""
    regressed = _regressed(rows)
    head = f"speedbench regress: {len(regressed)} regression(s)"
    if regressed:
        head += ": " + ", ".join(f"{terminal_text(row.category)} {row.metric.label}" for row in regressed)
    return head + "\n" + _LEGEND + "\n" + text_table(_cells(rows), GATE_COLUMNS)


def gate_markdown(rows: Sequence[GateRow]) -> str:
    """The gate's result as Markdown."""
    regressed = len(_regressed(rows))
    head = "### speedbench regress: " + ("no regression" if not regressed else f"{regressed} regression(s)")
    return head + "\n\n" + _LEGEND.capitalize() + ".\n\n" + markdown_table(_cells(rows), GATE_COLUMNS)
