"""The decode speedup explained as a chart: tokens per step, step cost and the speedup, each on its own scale.

One row per category; three panels sharing the rows: tokens per decode step (tokens/step, the step's own token
and the accepted draft tokens apart), the cost of a decode step (x baseline token, with the drafted and plain
steps' costs marked where identified) and the decode speedup (x), where the measured speedup and the quotient of
the first two panels meet on one scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bench.render._figures import BLUE, FORMATS, GREEN, GREY, ORANGE, VERMILLION, _label, _save, plt
from bench.render._tables import Cells

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _number(row: Cells, key: str) -> float | None:
    value = row.get(key)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def parts_figure(rows: Sequence[Cells]) -> Figure | None:
    """The three-panel figure of the rows whose parts were computed (None when no row has them)."""
    shown = [row for row in rows if _number(row, "explained_speedup") is not None
             and _number(row, "tokens_per_step") is not None and _number(row, "step_cost") is not None]
    if not shown:
        return None
    shown = shown[::-1]  # the first row on top
    positions = list(range(len(shown)))
    names = [_label(row["category"]) for row in shown]
    figure, (tokens, cost, speedup) = plt.subplots(
        1, 3, sharey=True, figsize=(11.0, 2.2 + 0.38 * len(shown)), layout="constrained")
    per_step = [_number(row, "tokens_per_step") or 0.0 for row in shown]
    tokens.barh(positions, [1.0] * len(shown), color=GREY, label="the step's own token")
    tokens.barh(positions, [value - 1.0 for value in per_step], left=1.0, color=BLUE,
                label="+ drafted share x accepted/draft")
    for y, row, value in zip(positions, shown, per_step, strict=True):
        share, accepted = _number(row, "drafted_step_share"), _number(row, "accepted_per_draft")
        shown_share = f"{share:.1%}" if share is not None and share < 0.1 else f"{share:.0%}"
        detail = f" = 1 + {shown_share} x {accepted:.1f}" if share is not None and accepted is not None else ""
        tokens.text(value, y, f" {value:.2f}{detail}", va="center", fontsize=7)
    tokens.set_xlim(0, max(per_step) * 1.9)
    tokens.set_xlabel("tokens per decode step (tokens/step)")
    tokens.set_yticks(positions, names)
    costs = [_number(row, "step_cost") or 0.0 for row in shown]
    cost.barh(positions, costs, color=GREY, alpha=0.6, label="step cost (all steps)")
    for key, marker, colour, label in (("drafted_step_cost", ">", VERMILLION, "a step with a draft"),
                                       ("plain_step_cost", "o", BLUE, "a step without one")):
        points = [(step_cost, y) for y, row in zip(positions, shown, strict=True)
                  if (step_cost := _number(row, key)) is not None]
        if points:
            cost.scatter([x for x, _ in points], [y for _, y in points], marker=marker, color=colour, zorder=3,
                         label=label)
    for y, value in zip(positions, costs, strict=True):
        cost.text(value, y, f" {value:.2f}", va="center", fontsize=7)
    cost.axvline(1.0, color="black", linewidth=0.8)
    cost.set_xlim(0, max([*costs, 1.0]) * 1.35)
    cost.set_xlabel("step cost (x baseline token)")
    measured = [_number(row, "pooled_decode_speedup") for row in shown]
    explained = [_number(row, "explained_speedup") or 0.0 for row in shown]
    speedup.barh(positions, [value or 0.0 for value in measured], color=GREEN, alpha=0.8,
                 label="measured (pooled: output tokens per generation second)")
    speedup.scatter(explained, positions, marker="D", color=ORANGE, zorder=3, label="tokens/step / step cost")
    for y, row, pooled in zip(positions, shown, measured, strict=True):
        mark = "" if row.get("reconciles") is not False else "  not reconciled"
        speedup.text(max(pooled or 0.0, explained[y]), y, f"  {pooled or 0.0:.2f}x{mark}", va="center", fontsize=7)
    speedup.axvline(1.0, color="black", linewidth=0.8)
    speedup.set_xlim(0, max([*(value or 0.0 for value in measured), *explained, 1.0]) * 1.35)
    speedup.set_xlabel("decode speedup (x)")
    handles, labels = [], []
    for axis in (tokens, cost, speedup):
        axis.grid(axis="x", alpha=0.3)
        own_handles, own_labels = axis.get_legend_handles_labels()
        handles += own_handles
        labels += own_labels
    figure.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=7, frameon=False)
    figure.suptitle("The decode speedup explained: tokens per step / step cost = speedup (the diamond should sit at "
                    "the bar's end)", fontsize=10)
    return figure


def speedup_parts(rows: Sequence[Cells], out_dir: Path, *, formats: Sequence[str] = FORMATS) -> list[Path]:
    """The parts chart of the rows with parts, saved as `speedup_parts.<format>` ([] when no row has them)."""
    figure = parts_figure(rows)
    return [] if figure is None else _save(figure, out_dir, "speedup_parts", formats)
