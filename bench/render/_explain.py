"""The speedup explained, as text and Markdown: acceptance length, per-position acceptance, step cost, reconciled."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bench.render._stats import details
from bench.render._tables import CellValue, Column, markdown_escape, markdown_table, text_table

if TYPE_CHECKING:
    from bench.analysis import StatsRow

POSITIONS_SHOWN = 6
"""Per-position rates shown in a cell (the JSON has them all)."""

EXPLAINED_COLUMNS: list[Column] = [
    ("category", "category", ""),
    ("accept_len/step", "acceptance_length", "speed"),
    ("accept_len/request p10 med p90", "per_request_cell", ""),
    ("joint P(at least i)", "joint_cell", ""),
    ("conditional P(i given i-1)", "conditional_cell", ""),
    ("step_cost", "step_cost", "speed"),
    ("AL/step_cost", "explained_speedup", "speedup"),
    ("pooled_decode", "pooled_decode_speedup", "speedup"),
    ("reconciles", "reconciles_cell", ""),
]

EXPLAINED_MARKDOWN_COLUMNS: list[Column] = [
    column for column in EXPLAINED_COLUMNS if column[1] not in ("joint_cell", "conditional_cell")]
"""The table as a pull request shows it (GitHub's 1012 px); the per-position columns go to a details block."""
POSITION_COLUMNS: list[Column] = [
    column for column in EXPLAINED_COLUMNS if column[1] in ("category", "joint_cell", "conditional_cell")]

LEGEND = (
    "accept_len/step: 1 + accepted / drafts from the counter deltas (tokens per verification step); per request: its "
    "spread over the requests; joint: P(at least i draft tokens accepted) per drafted step; conditional: P(i accepted "
    "| i-1 accepted); step_cost: speculative time per verification step / baseline time per token (generation "
    "times); AL/step_cost is the decode speedup these explain, checked against the pooled decode speedup (output "
    "tokens per generation second, speculative over baseline); reconciles: within 5%, else the likely cause below"
)


def _rates(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    shown = " ".join(f"{value:.2f}" for value in values[:POSITIONS_SHOWN])
    return shown + (" ..." if len(values) > POSITIONS_SHOWN else "")


def _cells(rows: Sequence[StatsRow]) -> list[dict[str, CellValue]]:
    cells = []
    for row in rows:
        parts = row.parts
        if parts is None:
            continue
        spread = parts.per_request
        cells.append({
            **parts.as_cells(), "category": row.category,
            "per_request_cell": f"{spread.p10:.2f} {spread.median:.2f} {spread.p90:.2f}" if spread else "n/a",
            "joint_cell": _rates(parts.joint), "conditional_cell": _rates(parts.conditional),
            "reconciles_cell": {True: "yes", False: "no", None: "n/a"}[parts.reconciles],
        })
    return cells


def _flags(rows: Sequence[StatsRow]) -> list[str]:
    return [f"{row.category}: {row.parts.flag}" for row in rows if row.parts is not None and row.parts.flag]


def explained_text(rows: Sequence[StatsRow]) -> str:
    """The explained-speedup table with its legend and a line per row that does not reconcile ('' when no row
    has counters)."""
    cells = _cells(rows)
    if not cells:
        return ""
    notes = "".join(f"note: {line}\n" for line in _flags(rows))
    return f"Speedup explained: {LEGEND}\n" + text_table(cells, EXPLAINED_COLUMNS) + notes


def explained_markdown(rows: Sequence[StatsRow]) -> str:
    """The explained-speedup table as Markdown at GitHub's width: the parts, then in details blocks the
    per-position acceptance and the legend ('' when no row has counters)."""
    cells = _cells(rows)
    if not cells:
        return ""
    notes = "".join(f"\n- {markdown_escape(line)}" for line in _flags(rows))
    return (markdown_table(cells, EXPLAINED_MARKDOWN_COLUMNS, wrap_headers=True)
            + (f"\nNot reconciled:\n{notes}\n" if notes else "")
            + details("Per-position acceptance (joint and conditional)", markdown_table(cells, POSITION_COLUMNS))
            + details("How to read this table", f"{LEGEND[0].upper()}{LEGEND[1:]}.\n"))
