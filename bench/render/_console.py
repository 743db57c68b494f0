"""A comparison as `bench` prints it on a terminal: what fits a screen, the rest in the files (and `--verbose`).

Per workload: the decision line, the SpeedBench table (byte for byte), the paired table in the report's narrow
layout, the speedup explained in one line, then one line per kind of note naming the rows it applies to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bench.analysis import DRAFTED, SAMPLES, paired_metrics
from bench.records import level_text
from bench.render._comparison import _reference_rows, drafter_lines, mismatch_lines, render_text
from bench.render._escape import terminal_text
from bench.render._stats import CATEGORY_COLUMN, IDENTICAL_COLUMN, _stats_cells
from bench.render._tables import Column, comparison_text, text_table

if TYPE_CHECKING:
    from bench.analysis import Comparison, StatsRow

CONSOLE_LINES = 45
"""The most lines a workload's console output takes by default (the decision over all workloads apart)."""

def console_columns() -> list[Column]:
    """The paired table as the report's narrow layout has it: per compared metric its interval and verdict; the
    rest is in comparison.txt."""
    compared = [column for paired in paired_metrics() for column in (
        Column(paired.key, f"{paired.key}_ci"), Column(f"{paired.name}_verdict", f"{paired.name}_verdict"))]
    return [CATEGORY_COLUMN, Column.of(SAMPLES), *compared, Column.of(DRAFTED), IDENTICAL_COLUMN]


def _names(names: Sequence[str]) -> str:
    return ", ".join(names)


def _grouped(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """`text (rows)` once per distinct text, in first-seen order."""
    rows: dict[str, list[str]] = {}
    for row, text in pairs:
        rows.setdefault(text, []).append(row)
    return [f"{text} ({_names(names)})" for text, names in rows.items()]


def note_lines(comparison: Comparison) -> list[str]:
    """One line per kind of note, naming the rows it applies to (the notes in full are in comparison.txt)."""
    rows = comparison.stats
    lines = []
    if disagree := [row.category for row in rows if row.disagreements]:
        lines.append("the reference's ratio of means and the paired geometric mean disagree in direction on "
                     + _names(disagree))
    if outlying := [row.category for row in rows if row.outliers and not row.primary]:
        lines.append(f"outlying samples in {_names(outlying)}")
    lines += _grouped([(row.category, f"{estimate.metric.label}: {estimate.note}") for row in rows
                       for _, estimate in row.compared() if estimate.note])
    if robust := [row.category for row in rows for _, estimate in row.compared()
                  if estimate.robust_disagrees and estimate.robust is not None]:
        lines.append("the robust (trimmed) interval reads another verdict, so the verdict rests on a few samples, on "
                     + _names(list(dict.fromkeys(robust))))
    if nothing := [row.category for row in rows if row.nothing_drafted]:
        lines.append(f"nothing drafted, so no verdict, on {_names(nothing)}")
    lines += _grouped([(row.category, f"not reconciled: {row.parts.flag.rsplit(': ', 1)[-1]}") for row in rows
                       if row.parts is not None and row.parts.flag])
    if real := [row.category for row in comparison.lossless if row.real]:
        lines.append(f"outputs differ from the baseline's beyond a near-tie in {_names(real)}")
    look = comparison.sequential.last if comparison.sequential is not None else None
    if look is not None and look.has_interval:
        lines.append(f"sampled until decided: every interval drawn at the stopping look's level (overall "
                     f"{level_text(look.confidence)}, categories under Holm within {level_text(look.level)})")
    return [f"note: {line}" for line in lines]


def explained_line(rows: Sequence[StatsRow]) -> str | None:
    """The overall row's parts in one line, with how many rows reconcile (None without parts)."""
    with_parts = [row for row in rows if row.parts is not None and row.parts.explained is not None]
    overall = next((row.parts for row in with_parts if row.primary), None)
    if overall is None or overall.tokens_per_step is None or overall.step_cost is None:
        return None
    share, split = overall.drafted_share or 0.0, overall.split
    costs = ""
    if split is not None and split.drafted is not None:
        costs = (f" (drafted {split.drafted:.2f}, plain {split.plain:.2f})" if split.plain is not None
                 else " (every step drafted)")
    agree = sum(1 for row in with_parts if row.parts is not None and row.parts.reconciles)
    measured = f"{overall.measured:.2f}x" if overall.measured is not None else "n/a"
    return (f"Speedup explained (overall): {overall.tokens_per_step:.2f} tokens/step (1 + {share:.1%} drafted x "
            f"{overall.accepted_per_draft:.2f} accepted/draft) / step cost {overall.step_cost:.2f} x base token"
            f"{costs} = {overall.explained:.2f}x, measured {measured}; reconciles on {agree} of {len(with_parts)} "
            "rows")


def console_text(comparison: Comparison, *, verbose: bool = False) -> str:
    """What `bench` prints of a comparison: everything (`verbose`), else the screen's worth described above."""
    if verbose:
        return render_text(comparison)
    from bench.render._report import decision_text

    parts = ["".join(line + "\n" for line in mismatch_lines(comparison) + drafter_lines(comparison)),
             f"decision: {decision_text([comparison])}\n",
             comparison_text(_reference_rows(comparison), comparison.baseline_label, comparison.speculative_label)]
    if comparison.stats_note:
        parts.append(f"speedbench: no paired statistics: {comparison.stats_note}\n")
    if comparison.has_stats:
        parts.append(f"Paired statistics (samples matched by id): geometric mean of per-sample speedups with its "
                     f"interval; a verdict needs it to exclude 1.00x and a change over {comparison.threshold:.0%}\n")
        parts.append(text_table(_stats_cells(comparison.stats, comparison.sequential), console_columns()))
        explained = explained_line(comparison.stats)
        parts.append(f"{explained}\n" if explained else "")
        parts.append("".join(line + "\n" for line in note_lines(comparison)))
    return terminal_text("".join(parts), keep_lines=True)
