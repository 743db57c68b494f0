"""The speedup explained, as text and Markdown: tokens per decode step, step cost and its split, reconciled."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bench.render._stats import details
from bench.render._tables import CellValue, Column, markdown_escape, markdown_table, text_table

if TYPE_CHECKING:
    from bench.analysis import StatsRow, StepSplit

POSITIONS_SHOWN = 6
"""Per-position rates shown in a cell (the JSON has them all)."""

EXPLAINED_COLUMNS: list[Column] = [
    Column("category", "category", ""),
    Column("tokens/step", "tokens_per_step", "speed"),
    Column("steps drafted", "drafted_share_cell", ""),
    Column("accepted/draft (tokens)", "accepted_per_draft", "speed"),
    Column("step cost (x base token)", "step_cost", "speed"),
    Column("drafted / plain step (x base token)", "split_cell", ""),
    Column("explained", "explained_speedup", "speedup"),
    Column("measured", "pooled_decode_speedup", "speedup"),
    Column("reconciles", "reconciles_cell", ""),
    Column("accept_len/request p10 med p90", "per_request_cell", ""),
    Column("joint P(at least i)", "joint_cell", ""),
    Column("conditional P(i given i-1)", "conditional_cell", ""),
]

EXPLAINED_MARKDOWN_COLUMNS: list[Column] = [
    column for column in EXPLAINED_COLUMNS
    if column.key not in ("split_cell", "per_request_cell", "joint_cell", "conditional_cell")]
"""The table as a pull request shows it (GitHub's 1012 px): the parts and the check; the split, the per-request
spread and the per-position columns go to a details block."""
DETAIL_COLUMNS: list[Column] = [
    column for column in EXPLAINED_COLUMNS if column.key in ("category", "split_cell", "per_request_cell")]
POSITION_COLUMNS: list[Column] = [
    column for column in EXPLAINED_COLUMNS if column.key in ("category", "joint_cell", "conditional_cell")]

LEGEND = (
    "every decode step emits one token plus the draft tokens it accepted; tokens/step = 1 + drafted share x "
    "accepted/draft (drafted share, shown as steps drafted: drafts from the counter deltas over decode steps, which "
    "are output tokens less accepted ones); step cost: speculative generation time per decode step over the "
    "baseline's time per token, in baseline tokens (x base token); drafted / plain step: the step cost of steps with "
    "a draft and without one, from a least-squares line through the requests' step costs against their drafted "
    "share, where their shares differ enough to identify it; explained = tokens/step / step cost, checked against "
    "the measured pooled decode speedup (output tokens per generation second, speculative over baseline); "
    "reconciles: within 5% and counters that cover exactly the row's requests, else the likely cause below; "
    "accept_len/request: 1 + accepted / drafts of each request (p10, median, p90); joint: P(at least i draft tokens "
    "accepted) per draft; conditional: P(i accepted | i-1 accepted)"
)


def _rates(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    shown = " ".join(f"{value:.2f}" for value in values[:POSITIONS_SHOWN])
    return shown + (" ..." if len(values) > POSITIONS_SHOWN else "")


def _cells(rows: Sequence[StatsRow]) -> list[dict[str, CellValue]]:
    cells: list[dict[str, CellValue]] = []
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
            "drafted_share_cell": f"{parts.drafted_share:.1%}" if parts.drafted_share is not None else "n/a",
            "split_cell": _split(parts.split),
        })
    return cells


def _split(split: StepSplit | None) -> str:
    """`1.60 / 1.05`, `1.30 / -` (every step drafted) or `n/a` (not identified)."""
    if split is None or split.drafted is None:
        return "n/a"
    return f"{split.drafted:.2f} / " + (f"{split.plain:.2f}" if split.plain is not None else "-")


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
            + details("Step cost split and acceptance per request", markdown_table(cells, DETAIL_COLUMNS)
                      + "\n\n" + "".join(f"- {markdown_escape(row.category)}: {markdown_escape(row.parts.split.how)}\n"
                                         for row in rows if row.parts is not None and row.parts.split is not None))
            + details("Per-position acceptance (joint and conditional)", markdown_table(cells, POSITION_COLUMNS))
            + details("How to read this table", f"{LEGEND[0].upper()}{LEGEND[1:]}.\n"))
