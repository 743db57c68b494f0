"""A sweep rendered: per arm and level the speedups with intervals, crossovers, the best arm per level, plots."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.records import finite
from bench.render._escape import terminal_text
from bench.render._stats import ci_cell
from bench.render._tables import Column, format_value, markdown_table, text_table

if TYPE_CHECKING:
    from bench.analysis import Estimate, Sweep

SWEEP_COLUMNS: list[Column] = [
    ("arm", "arm", ""),
    ("concurrency", "concurrency", "int"),
    ("n", "n", "int"),
    ("decode_speedup", "decode", ""),
    ("decode_verdict", "decode_verdict", ""),
    ("latency_speedup", "latency", ""),
    ("throughput_speedup", "throughput", ""),
    ("throughput_verdict", "throughput_verdict", ""),
    ("base_tok/s", "base_tps", "speed"),
    ("spec_tok/s", "spec_tps", "speed"),
    ("accept_rate", "accept_rate", "rate"),
]
CROSSOVER_COLUMNS: list[Column] = [
    ("arm", "arm", ""),
    ("decode_speedup_crossover", "decode", ""),
    ("throughput_speedup_crossover", "throughput", ""),
]
BEST_COLUMNS: list[Column] = [
    ("concurrency", "concurrency", "int"),
    ("best_arm", "arm", ""),
    ("throughput_speedup", "speedup", "speedup"),
    ("runner_up", "runner_up", ""),
    ("margin", "margin", "percent"),
]
LEGEND = (
    "decode and latency: geometric mean of per-request speedups (overall row of each cell's paired statistics); "
    "throughput: system output tokens/s of the arm over the baseline's, paired by lock-step batch; intervals are 95% "
    "t-intervals on the logs; crossover: the level range where a speedup's interval first reaches down to 1.00x "
    "(speculation no longer significantly faster); "
    "best arm: highest throughput speedup"
)


def _ci(estimate: Estimate) -> str:
    return ci_cell(estimate.point, estimate.low, estimate.high)


def _cell_rows(sweep: Sweep) -> list[dict[str, Any]]:
    rows = []
    for arm in sweep.arms:
        for level in sweep.levels:
            cell = sweep.cell(arm, level)
            if cell is None:
                continue
            overall = cell.comparison.stats[-1] if cell.comparison.stats else None
            rows.append({
                "arm": arm, "concurrency": level, "n": overall.n if overall else 0,
                "decode": _ci(cell.decode) if overall else "n/a",
                "decode_verdict": cell.decode.word if overall else "not enough data",
                "latency": _ci(cell.latency) if overall else "n/a",
                "throughput": _ci(cell.throughput), "throughput_verdict": cell.throughput.word,
                "base_tps": cell.base_tokens_per_s, "spec_tps": cell.spec_tokens_per_s,
                "accept_rate": overall.accept_rate if overall else None,
            })
    return rows


def _crossover_rows(sweep: Sweep) -> list[dict[str, Any]]:
    return [{"arm": arm, "decode": sweep.decode_crossover[arm].text, "throughput": sweep.throughput_crossover[arm].text}
            for arm in sweep.arms]


def _best_rows(sweep: Sweep) -> list[dict[str, Any]]:
    return [{"concurrency": best.concurrency, "arm": best.arm, "speedup": best.speedup,
             "runner_up": best.runner_up or "-", "margin": best.margin} for best in sweep.best]


def sweep_text(sweep: Sweep) -> str:
    """The sweep summary as text: every cell, each arm's crossover, the best arm per level."""
    return terminal_text(
        "Sweep: speculative arms against the baseline across concurrency\n"
        + text_table(_cell_rows(sweep), SWEEP_COLUMNS)
        + "\nCrossover (speculation stops paying)\n" + text_table(_crossover_rows(sweep), CROSSOVER_COLUMNS)
        + "\nBest arm per level\n" + text_table(_best_rows(sweep), BEST_COLUMNS)
        + f"({LEGEND})\n",
        keep_lines=True,
    )


def sweep_markdown(sweep: Sweep, plots: Sequence[str] = ()) -> str:
    """The sweep summary as Markdown, each table under a heading, with the plots linked."""
    parts = [
        "## Sweep\n\n", markdown_table(_cell_rows(sweep), SWEEP_COLUMNS),
        "\n### Crossover\n\n", markdown_table(_crossover_rows(sweep), CROSSOVER_COLUMNS),
        "\n### Best arm per level\n\n", markdown_table(_best_rows(sweep), BEST_COLUMNS),
        f"\n{LEGEND.capitalize()}.\n",
    ]
    for path in plots:
        parts.append(f"\n![{Path(path).stem.replace('_', ' ')}]({path})\n")
    return "".join(parts)


def _estimate(estimate: Estimate) -> dict[str, Any]:
    return {"point": estimate.point, "low": estimate.low, "high": estimate.high, "verdict": estimate.verdict}


def sweep_json(sweep: Sweep) -> str:
    """The sweep as JSON: cells with their estimates, crossovers and the best arm per level."""
    payload = {
        "arms": list(sweep.arms),
        "levels": list(sweep.levels),
        "cells": [
            {"arm": cell.arm, "concurrency": cell.concurrency, "decode_speedup": _estimate(cell.decode),
             "latency_speedup": _estimate(cell.latency), "throughput_speedup": _estimate(cell.throughput),
             "base_tokens_per_s": cell.base_tokens_per_s, "spec_tokens_per_s": cell.spec_tokens_per_s}
            for cell in sweep.cells if cell.comparison.stats
        ],
        "crossover": {arm: {"decode": sweep.decode_crossover[arm].text,
                            "throughput": sweep.throughput_crossover[arm].text} for arm in sweep.arms},
        "best": [{"concurrency": best.concurrency, "arm": best.arm, "speedup": best.speedup,
                  "runner_up": best.runner_up, "margin": best.margin} for best in sweep.best],
    }
    return json.dumps(finite(payload), indent=2, sort_keys=True) + "\n"


def plot_sweep(sweep: Sweep, out_dir: Path, *, formats: tuple[str, ...] = ("png",)) -> list[Path]:
    """Speedup vs concurrency per arm (interval bands, 1.0x line, log-2 axis) and an arm x level heatmap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.4), sharey=False)
    for axis, metric in zip(axes, ("decode", "throughput"), strict=True):
        for arm in sweep.arms:
            cells = [sweep.cell(arm, level) for level in sweep.levels]
            points = [(c.concurrency, getattr(c, metric)) for c in cells if c is not None and c.comparison.stats]
            levels = [level for level, _ in points]
            values = [est.point for _, est in points]
            axis.plot(levels, values, marker="o", label=arm)
            banded = [(level, est) for level, est in points if est.has_interval]
            if banded:
                axis.fill_between([lv for lv, _ in banded], [e.low for _, e in banded], [e.high for _, e in banded],
                                  alpha=0.2)
        axis.axhline(1.0, color="#777777", linestyle="--", linewidth=1)
        axis.set_xscale("log", base=2)
        axis.set_xticks(list(sweep.levels), [str(level) for level in sweep.levels])
        axis.set_xlabel("concurrency (requests in flight)")
        axis.set_ylabel(f"{'per-request decode' if metric == 'decode' else 'system throughput'} speedup (x)")
        axis.set_title(f"{metric} speedup vs concurrency (95% interval bands)")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize="small")
    figure.tight_layout()
    for suffix in formats:
        path = out_dir / f"sweep_speedup.{suffix}"
        figure.savefig(path, dpi=110, metadata={"Software": None} if suffix == "png" else {"Date": None})
        files.append(path)
    plt.close(figure)
    grid = [[(c.throughput.point if (c := sweep.cell(arm, level)) is not None else math.nan)
             for level in sweep.levels] for arm in sweep.arms]
    figure, axis = plt.subplots(figsize=(1.6 * len(sweep.levels) + 3, 0.7 * len(sweep.arms) + 2))
    image = axis.imshow(grid, cmap="RdYlGn", vmin=0.5, vmax=1.5, aspect="auto")
    axis.set_xticks(range(len(sweep.levels)), [str(level) for level in sweep.levels])
    axis.set_yticks(range(len(sweep.arms)), list(sweep.arms))
    for row, values in enumerate(grid):
        for column, value in enumerate(values):
            axis.text(column, row, format_value(value, "speedup"), ha="center", va="center", fontsize=9)
    axis.set_xlabel("concurrency")
    axis.set_title("System throughput speedup (arm x concurrency)")
    figure.colorbar(image, ax=axis)
    figure.tight_layout()
    for suffix in formats:
        path = out_dir / f"sweep_heatmap.{suffix}"
        figure.savefig(path, dpi=110, metadata={"Software": None} if suffix == "png" else {"Date": None})
        files.append(path)
    plt.close(figure)
    return files
