"""Speedup plots with matplotlib (Agg): they take analysed rows and write PNG/SVG files, nothing else."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

from bench.records import Run

if TYPE_CHECKING:
    from bench.analysis import Comparison

matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "speedbench"  # stable SVG ids: same inputs, same bytes
import matplotlib.pyplot as plt  # noqa: E402

# Okabe-Ito colour-blind-safe palette
BLUE, ORANGE, GREEN, VERMILLION, GREY = "#0072B2", "#E69F00", "#009E73", "#D55E00", "#999999"
FORMATS = ("png", "svg")


def _save(figure: Any, out_dir: Path, stem: str, formats: Sequence[str]) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = out_dir / f"{stem}.{fmt}"
        metadata = {"Software": None} if fmt == "png" else {"Date": None, "Creator": None}
        figure.savefig(path, dpi=110, bbox_inches="tight", metadata=metadata)
        paths.append(path)
    plt.close(figure)
    return paths


def _label(text: Any) -> str:
    """Text shown as is: `$` would start matplotlib mathtext."""
    return str(text).replace("$", r"\$")


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def speedup_bars(
    stats: Sequence[Mapping[str, Any]], out_dir: Path, *, title: str = "", formats: Sequence[str] = FORMATS
) -> list[Path]:
    """Per-category decode and latency speedup bars (geomean) with 95% CI whiskers and a 1.0x line."""
    rows = [row for row in stats if _finite(row.get("decode_speedup"))]
    categories = [_label(row["category"]) for row in rows]
    figure, axis = plt.subplots(figsize=(max(7.0, 0.75 * len(rows) + 3), 4.6))
    width = 0.38
    missing_ci = False
    for offset, key, colour, label in (
        (-width / 2, "decode_speedup", BLUE, "decode speedup (t/s)"),
        (width / 2, "latency_speedup", ORANGE, "latency speedup (end to end)"),
    ):
        values = [row.get(key) if _finite(row.get(key)) else 0.0 for row in rows]
        lows = [row.get(f"{key}_low") for row in rows]
        highs = [row.get(f"{key}_high") for row in rows]
        positions = [index + offset for index in range(len(rows))]
        axis.bar(positions, values, width, color=colour, label=label)
        with_ci = [i for i, (lo, hi) in enumerate(zip(lows, highs, strict=True)) if _finite(lo) and _finite(hi)]
        if with_ci:
            axis.errorbar(
                [positions[i] for i in with_ci],
                [values[i] for i in with_ci],
                yerr=[
                    [max(0.0, values[i] - lows[i]) for i in with_ci],
                    [max(0.0, highs[i] - values[i]) for i in with_ci],
                ],
                fmt="none", ecolor="#333333", elinewidth=1, capsize=3,
            )
        missing_ci = missing_ci or len(with_ci) < len(rows)
    axis.axhline(1.0, color=GREY, linestyle="--", linewidth=1, label="no change (1.0x)")
    axis.set_xticks(range(len(rows)), categories, rotation=30, ha="right")
    axis.set_ylabel("speedup, speculative vs baseline (x)")
    axis.set_title(_label(title) if title else "Speedup per category (geometric mean of per-sample speedups, 95% CI)")
    if missing_ci:
        figure.text(0.01, -0.02, "Bars without whiskers: fewer than 5 paired samples, no confidence interval.",
                    fontsize=8, color="#555555")
    axis.legend(loc="best", fontsize="small")
    axis.grid(axis="y", alpha=0.3)
    return _save(figure, out_dir, "speedup", formats)


def accept_vs_speedup(
    stats: Sequence[Mapping[str, Any]], out_dir: Path, *, formats: Sequence[str] = FORMATS
) -> list[Path]:
    """Accept rate against decode speedup, one labelled point per category."""
    rows = [
        row for row in stats
        if row.get("category") != "overall" and _finite(row.get("accept_rate")) and _finite(row.get("decode_speedup"))
    ]
    figure, axis = plt.subplots(figsize=(6.5, 4.6))
    axis.scatter([row["accept_rate"] for row in rows], [row["decode_speedup"] for row in rows], color=GREEN, s=40)
    for row in rows:
        axis.annotate(_label(row["category"]), (row["accept_rate"], row["decode_speedup"]), fontsize=8,
                      xytext=(4, 3), textcoords="offset points")
    axis.axhline(1.0, color=GREY, linestyle="--", linewidth=1)
    axis.set_xlabel("accept rate (accepted / drafted tokens)")
    axis.set_ylabel("decode speedup (x)")
    axis.set_title("Accept rate vs decode speedup per category")
    axis.grid(alpha=0.3)
    if not rows:
        axis.text(0.5, 0.5, "no drafts recorded", transform=axis.transAxes, ha="center")
    return _save(figure, out_dir, "accept_vs_speedup", formats)


def latency_distributions(
    baseline: Mapping[str, Sequence[float]],
    speculative: Mapping[str, Sequence[float]],
    out_dir: Path,
    *,
    formats: Sequence[str] = FORMATS,
) -> list[Path]:
    """Per-category box plots of per-request latency, baseline against speculative."""
    categories = [category for category in speculative if baseline.get(category)]
    figure, axis = plt.subplots(figsize=(max(7.0, 0.8 * len(categories) + 3), 4.6))
    positions_base = [index * 3.0 for index in range(len(categories))]
    positions_spec = [index * 3.0 + 1.0 for index in range(len(categories))]
    for positions, data, colour in (
        (positions_base, [baseline[c] for c in categories], BLUE),
        (positions_spec, [speculative[c] for c in categories], ORANGE),
    ):
        if data:
            boxes = axis.boxplot(data, positions=positions, widths=0.8, patch_artist=True, showfliers=True,
                                 medianprops={"color": "black", "linewidth": 1.5})
            for patch in boxes["boxes"]:
                patch.set_facecolor(colour)
                patch.set_alpha(0.75)
    axis.set_xticks(
        [index * 3.0 + 0.5 for index in range(len(categories))], [_label(c) for c in categories], rotation=30,
        ha="right",
    )
    axis.set_ylabel("request latency (s)")
    axis.set_title("Per-request latency: baseline (blue) vs speculative (orange)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour, alpha=0.75) for colour in (BLUE, ORANGE)]
    axis.legend(handles, ["baseline", "speculative"], fontsize="small")
    axis.grid(axis="y", alpha=0.3)
    return _save(figure, out_dir, "latency", formats)


def position_acceptance(
    per_position: Sequence[float], out_dir: Path, *, formats: Sequence[str] = FORMATS
) -> list[Path]:
    """Acceptance per draft position (accepted at position k / drafts)."""
    figure, axis = plt.subplots(figsize=(6.5, 4.2))
    positions = list(range(1, len(per_position) + 1))
    axis.bar(positions, list(per_position), color=VERMILLION)
    axis.set_xlabel("draft position")
    axis.set_ylabel("share of drafts accepted at this position")
    axis.set_ylim(0, max(1.0, max(per_position, default=0.0)))
    axis.set_title("Per-position acceptance (server counters over the run)")
    axis.grid(axis="y", alpha=0.3)
    return _save(figure, out_dir, "position_acceptance", formats)


def plot_all(comparison: Comparison, out_dir: Path, *, formats: tuple[str, ...]) -> list[Path]:
    """Every plot of a comparison: speedup bars, accept rate vs speedup, latencies, per-position acceptance."""
    stats = [row.as_cells() for row in comparison.stats]
    files = speedup_bars(stats, out_dir, formats=formats)
    files += accept_vs_speedup(stats, out_dir, formats=formats)
    files += latency_distributions(_latencies(comparison.baseline), _latencies(comparison.speculative), out_dir,
                                   formats=formats)
    per_position = comparison.run_acceptance.per_position if comparison.run_acceptance else ()
    if per_position:
        files += position_acceptance(per_position, out_dir, formats=formats)
    return files


def _latencies(run: Run) -> dict[str, list[float]]:
    by_category: dict[str, list[float]] = {}
    for result in run.results:
        if result.ok:
            by_category.setdefault(result.category, []).append(result.latency_s)
    return by_category
