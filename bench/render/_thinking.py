"""Reasoning runs rendered: thinking and answer apart per category, and the empty answers a budget left."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bench._types import JsonObject
from bench.render._tables import CellValue, Column, markdown_escape, markdown_table, text_table

if TYPE_CHECKING:
    from bench.analysis import Comparison, ThinkingRow

THINKING_COLUMNS: list[Column] = [
    Column("category", "category", ""),
    Column("pairs", "pairs", "int"),
    Column("thinking_share (base/spec)", "share_cell", ""),
    Column("decode", "decode_speedup", "speedup"),
    Column("answer_decode", "answer_decode", "speedup"),
    Column("tok/step thinking (base/spec)", "steps_thinking_cell", ""),
    Column("tok/step answer (base/spec)", "steps_answer_cell", ""),
    Column("empty_answers (base/spec)", "empty_cell", ""),
]

THINKING_LEGEND = (
    "thinking_share: thinking tokens over output tokens (baseline/speculative); decode and answer_decode: geometric "
    "means of the per-prompt decode speedups over the whole output and over the answer alone (streamed: the answer "
    "segment's rates), over the prompts that have both: descriptive, not part of the verdict family; tok/step: "
    "tokens per verification step inside the thinking and the answer, read from the stream's bursts (tokens that "
    "arrive together after one step's gap; checked against a server of known truth by benchmarks/thinking_truth.py); "
    "empty_answers: answers left empty because thinking used up max_tokens (flagged above 5% of a row)"
)


def _pair(values: tuple[float | None, float | None], kind: str) -> str:
    shown = ["n/a" if value is None else f"{100 * value:.1f}%" if kind == "percent" else f"{value:.2f}"
             for value in values]
    return "/".join(shown)


def thinking_cells(rows: Sequence[ThinkingRow]) -> list[dict[str, CellValue]]:
    """The rows' cells for the tables: each pair of arms as one `baseline/speculative` cell."""
    return [{**row.as_cells(), "share_cell": _pair(row.share, "percent"),
             "steps_thinking_cell": _pair(row.steps_thinking, "steps"),
             "steps_answer_cell": _pair(row.steps_answer, "steps"),
             "empty_cell": f"{row.budget[0].empty}/{row.budget[1].empty}"} for row in rows]


def flag_lines(rows: Sequence[ThinkingRow]) -> list[str]:
    """One line per flagged row: its empty answers and the osl that would fit."""
    return [f"{row.category}: {row.flag}" for row in rows if row.flag]


def thinking_text(comparison: Comparison) -> str:
    """The thinking table as text, its legend and flags; "" when neither run thought."""
    rows = comparison.thinking
    if not rows:
        return ""
    flags = "".join(f"flag: {line}\n" for line in flag_lines(rows))
    return (f"\nThinking and answer: {THINKING_LEGEND}\n" + text_table(thinking_cells(rows), THINKING_COLUMNS)
            + flags)


def thinking_markdown(comparison: Comparison, heading: str = "###") -> str:
    """The thinking table as Markdown under a heading, with its legend and flags; "" when neither run thought."""
    rows = comparison.thinking
    if not rows:
        return ""
    flags = "".join(f"- **{markdown_escape(line)}**\n" for line in flag_lines(rows))
    return (f"\n{heading} Thinking and answer\n\n" + markdown_table(thinking_cells(rows), THINKING_COLUMNS,
                                                                     wrap_headers=True)
            + f"\n{markdown_escape(THINKING_LEGEND)}.\n" + (f"\n{flags}" if flags else ""))


def thinking_payload(comparison: Comparison) -> JsonObject:
    """The thinking rows as JSON (`thinking`), absent when neither run thought."""
    return {"thinking": [row.as_cells() for row in comparison.thinking]} if comparison.thinking else {}
