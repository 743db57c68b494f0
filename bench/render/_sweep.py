"""A sweep rendered: per arm and level the speedups with intervals, crossovers, the best arm per level, plots."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bench._types import JsonObject
from bench.records import BASELINE, finite, open_no_follow
from bench.render._escape import terminal_text
from bench.render._stats import ci_cell, details
from bench.render._tables import CellValue, Column, format_value, markdown_escape, markdown_table, text_table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from bench.analysis import Crossover, Estimate, Sweep

SWEEP_COLUMNS: list[Column] = [
    Column("arm", "arm", ""),
    Column("concurrency", "concurrency", "int"),
    Column("n", "n", "int"),
    Column("decode_speedup", "decode", ""),
    Column("decode_verdict", "decode_verdict", ""),
    Column("latency_speedup", "latency", ""),
    Column("throughput_speedup", "throughput", ""),
    Column("throughput_verdict", "throughput_verdict", ""),
    Column("base_tok/s", "base_tps", "speed"),
    Column("spec_tok/s", "spec_tps", "speed"),
    Column("accept_rate", "accept_rate", "rate"),
]
SWEEP_MARKDOWN_COLUMNS: list[Column] = [
    Column("arm", "arm", ""),
    Column("concurrency", "concurrency", "int"),
    Column("n", "n", "int"),
    Column("decode_speedup", "decode_md", ""),
    Column("throughput_speedup", "throughput_md", ""),
    Column("latency_speedup", "latency", ""),
    Column("accept_rate", "accept_rate", "rate"),
]
"""The cell table as a pull request shows it (GitHub's 1012 px): each speedup with its verdict under it; the
arms' tokens/s in a second table."""
SWEEP_MORE_COLUMNS: list[Column] = [
    Column("arm", "arm", ""),
    Column("concurrency", "concurrency", "int"),
    Column("base_tok/s", "base_tps", "speed"),
    Column("spec_tok/s", "spec_tps", "speed"),
]

CROSSOVER_COLUMNS: list[Column] = [
    Column("arm", "arm", ""),
    Column("decode_speedup_crossover", "decode", ""),
    Column("throughput_speedup_crossover", "throughput", ""),
]
BEST_COLUMNS: list[Column] = [
    Column("concurrency", "concurrency", "int"),
    Column("best_arm", "arm", ""),
    Column("throughput_speedup", "speedup", "speedup"),
    Column("runner_up", "runner_up", ""),
    Column("margin", "margin", "percent"),
]
LEGEND = (
    "the cell table's verdicts are one family: Holm over arm x level x metric (family-wise 5%), each interval drawn "
    "at its step's level (after 'at'); "
    "decode and latency: geometric mean of per-request speedups (overall row of each cell's paired statistics, its "
    "interval stratified by category); "
    "throughput: system output tokens/s of the arm over the baseline's, paired by lock-step batch; intervals are 95% "
    "t-intervals on the logs; crossover (per arm, from the 95% intervals), read level by level from the lowest "
    "(fixed-sequence, 5% for the whole "
    "sweep): faster while each interval lies above 1.00x; stops paying only where the next interval lies at or below "
    "1 + the threshold; otherwise undetermined above (lack of evidence is not a crossover); "
    "best arm: highest throughput speedup, the baseline when every arm is below 1.00x"
)


def _ci(estimate: Estimate) -> str:
    return ci_cell(estimate.point, estimate.low, estimate.high, estimate.confidence)


def _shown(sweep: Sweep, arm: str, level: int, estimate: Estimate) -> Estimate:
    """The cell's estimate as the table's family shows it (Holm level), else as computed."""
    return sweep.table.get((arm, level, estimate.metric.key), estimate)


def _cell_rows(sweep: Sweep) -> list[dict[str, CellValue]]:
    rows: list[dict[str, CellValue]] = []
    for arm in sweep.arms:
        for level in sweep.levels:
            cell = sweep.cell(arm, level)
            if cell is None:
                continue
            overall = cell.comparison.stats[-1] if cell.comparison.stats else None
            decode = _shown(sweep, arm, level, cell.decode) if overall else None
            latency = _shown(sweep, arm, level, cell.latency) if overall else None
            throughput = _shown(sweep, arm, level, cell.throughput)
            decode_cell = _ci(decode) if decode else "n/a"
            decode_verdict = decode.word if decode else "not enough data"
            throughput_cell = _ci(throughput)
            rows.append({
                "arm": arm, "concurrency": level, "n": overall.n if overall else 0,
                "decode": decode_cell,
                "decode_verdict": decode_verdict,
                "latency": _ci(latency) if latency else "n/a",
                "throughput": throughput_cell, "throughput_verdict": throughput.word,
                "base_tps": cell.base_tokens_per_s, "spec_tps": cell.spec_tokens_per_s,
                "accept_rate": overall.accept_rate if overall else None,
                "decode_md": (decode_cell, decode_verdict),  # two lines in Markdown
                "throughput_md": (throughput_cell, throughput.word),
            })
    return rows


def _crossover_rows(sweep: Sweep) -> list[dict[str, CellValue]]:
    return [{"arm": arm, "decode": sweep.decode_crossover[arm].text, "throughput": sweep.throughput_crossover[arm].text}
            for arm in sweep.arms]


def _best_rows(sweep: Sweep) -> list[dict[str, CellValue]]:
    return [{"concurrency": best.concurrency, "arm": best.arm, "speedup": best.speedup,
             "runner_up": best.runner_up or "-", "margin": best.margin} for best in sweep.best]


def sweep_decision_text(sweep: Sweep) -> str:
    """The sweep's decision in one sentence: per level, the arm to run (an arm only when its throughput interval
    says faster, else the baseline) with the best arm's throughput speedup, interval and verdict."""
    parts = []
    for best in sweep.best:
        fastest = best.runner_up if best.arm == BASELINE else best.arm
        cell = sweep.cell(fastest, best.concurrency) if fastest else None
        if cell is None:
            parts.append(f"c={best.concurrency}: baseline (no arm measured)")
            continue
        shown = _shown(sweep, cell.arm, best.concurrency, cell.throughput)
        if shown.verdict == "better":
            parts.append(f"c={best.concurrency}: {cell.arm}, throughput {_ci(shown)} faster")
        else:
            parts.append(f"c={best.concurrency}: baseline (no arm faster; best {cell.arm} {_ci(shown)} {shown.word})")
    return "sweep decision: " + ("; ".join(parts) if parts else "no cell with paired statistics")


def load_lines(sweep: Sweep) -> list[str]:
    """Each level with the in-flight mean its arms achieved beside it, then the flags (arms apart, unreachable)."""
    loads = sweep.load
    return [f"concurrency {level}: {load.text}" for level, load in loads.items()] + [
        f"warning: {flag}" for load in loads.values() for flag in load.flags]


def sweep_text(sweep: Sweep) -> str:
    """The sweep summary as text: every cell, each arm's crossover, the best arm per level."""
    return terminal_text(
        "Sweep: speculative arms against the baseline across concurrency\n"
        + text_table(_cell_rows(sweep), SWEEP_COLUMNS)
        + "\nLoad achieved (mean requests in flight while the arm ran)\n" + "".join(f"{line}\n" for line in
                                                                                   load_lines(sweep))
        + "\nCrossover (speculation stops paying)\n" + text_table(_crossover_rows(sweep), CROSSOVER_COLUMNS)
        + "\nBest arm per level\n" + text_table(_best_rows(sweep), BEST_COLUMNS)
        + f"({LEGEND})\n",
        keep_lines=True,
    )


def sweep_markdown(sweep: Sweep, plots: Sequence[str] = ()) -> str:
    """The sweep summary as Markdown, each table under a heading, with the plots linked."""
    cells = _cell_rows(sweep)
    parts = [
        "## Sweep\n\n", markdown_table(cells, SWEEP_MARKDOWN_COLUMNS, wrap_headers=True),
        details("Output tokens/s of each cell's arms", markdown_table(cells, SWEEP_MORE_COLUMNS)),
        "\n### Load achieved\n\n", *(f"- {markdown_escape(line)}\n" for line in load_lines(sweep)),
        "\n### Crossover\n\n", markdown_table(_crossover_rows(sweep), CROSSOVER_COLUMNS),
        "\n### Best arm per level\n\n", markdown_table(_best_rows(sweep), BEST_COLUMNS),
        f"\n{LEGEND.capitalize()}.\n",
    ]
    for path in plots:
        parts.append(f"\n![{Path(path).stem.replace('_', ' ')}]({path})\n")
    return "".join(parts)


def _estimate(estimate: Estimate) -> JsonObject:
    return {"point": estimate.point, "low": estimate.low, "high": estimate.high, "verdict": estimate.verdict}


def _crossover(found: Crossover) -> JsonObject:
    return {"stops_paying_at": found.stops_at, "faster_up_to": found.faster_up_to,
            "undetermined_from": found.undetermined_from, "margin": found.margin, "established": found.established,
            "text": found.text}


def sweep_json(sweep: Sweep) -> str:
    """The sweep as JSON: cells with their estimates, crossovers (the level, or null when not established) and the
    best arm per level."""
    payload = {
        "arms": list(sweep.arms),
        "levels": list(sweep.levels),
        "cells": [
            {"arm": cell.arm, "concurrency": cell.concurrency, "decode_speedup": _estimate(cell.decode),
             "latency_speedup": _estimate(cell.latency), "throughput_speedup": _estimate(cell.throughput),
             "base_tokens_per_s": cell.base_tokens_per_s, "spec_tokens_per_s": cell.spec_tokens_per_s}
            for cell in sweep.cells if cell.comparison.stats
        ],
        "crossover": {arm: {"decode": sweep.decode_crossover[arm].stops_at,
                            "throughput": sweep.throughput_crossover[arm].stops_at} for arm in sweep.arms},
        "crossover_detail": {arm: {"decode": _crossover(sweep.decode_crossover[arm]),
                                   "throughput": _crossover(sweep.throughput_crossover[arm])} for arm in sweep.arms},
        "best": [{"concurrency": best.concurrency, "arm": best.arm, "speedup": best.speedup,
                  "runner_up": best.runner_up, "margin": best.margin} for best in sweep.best],
        "load": {str(level): load.to_json() for level, load in sweep.load.items()},
    }
    return json.dumps(finite(payload), indent=2, sort_keys=True) + "\n"


def _save_figure(figure: Figure, stem: Path, formats: tuple[str, ...]) -> list[Path]:
    """Lay out and write a figure in each format (no link or non-regular file followed); the paths written."""
    figure.tight_layout()
    files = []
    for suffix in formats:
        path = stem.with_name(f"{stem.name}.{suffix}")
        with open_no_follow(path, "wb") as handle:
            figure.savefig(handle, format=suffix, dpi=110,
                           metadata={"Software": None} if suffix == "png" else {"Date": None})
        files.append(path)
    return files


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
            line = axis.plot(levels, values, marker="", label=arm)[0]
            shown = sweep.decode_crossover[arm] if metric == "decode" else sweep.throughput_crossover[arm]
            faster_to = shown.faster_up_to if shown.faster_up_to is not None else 0
            for level, value in zip(levels, values, strict=True):
                established = level <= faster_to or level == shown.stops_at
                axis.plot([level], [value], marker="o", color=line.get_color(),
                          markerfacecolor=line.get_color() if established else "white")
            if shown.stops_at is not None:
                axis.axvline(shown.stops_at, color=line.get_color(), linestyle=":", linewidth=1)
            banded = [(level, est) for level, est in points if est.has_interval]
            if banded:
                axis.fill_between([lv for lv, _ in banded], [e.low for _, e in banded], [e.high for _, e in banded],
                                  alpha=0.2)
        axis.axhline(1.0, color="#777777", linestyle="--", linewidth=1)
        axis.set_xscale("log", base=2)
        axis.set_xticks(list(sweep.levels), [str(level) for level in sweep.levels])
        axis.set_xlabel("concurrency (requests in flight)")
        axis.set_ylabel(f"{'per-request decode' if metric == 'decode' else 'system throughput'} speedup (x)")
        axis.set_title(f"{metric.capitalize()} speedup vs concurrency\n95% bands; filled: established; dotted: "
                       "stops paying", fontsize="small")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize="small")
    files += _save_figure(figure, out_dir / "sweep_speedup", formats)
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
    files += _save_figure(figure, out_dir / "sweep_heatmap", formats)
    plt.close(figure)
    return files
