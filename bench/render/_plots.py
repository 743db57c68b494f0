"""Speedup plots with matplotlib (Agg): they take analysed rows and write PNG/SVG files, nothing else."""

from __future__ import annotations

import math
import statistics
import textwrap
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeGuard

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from bench._constants import MIN_SAMPLES_FOR_CI, OVERALL
from bench.render._figures import BLUE, FORMATS, GREEN, GREY, ORANGE, VERMILLION, _label, _save, plt
from bench.render._parts_plot import speedup_parts
from bench.render._tables import Cells

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Annotation
    from matplotlib.transforms import Bbox

    from bench.analysis import Comparison


def _finite(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and math.isfinite(value)


def _number(value: object) -> float:
    """A cell's value to draw: NaN where it is not a finite number."""
    return float(value) if _finite(value) else math.nan


def _footnote(figure: Figure, axis: Axes, lines: Sequence[str], *, width: int = 110) -> None:
    """Notes under the x-axis label (itself under the rotated tick labels), so they never overlap them."""
    if not lines:
        return
    text = "\n".join(textwrap.fill(line, width=width) for line in lines)
    axis.annotate(text, xy=(0.0, 0.0), xycoords=("axes fraction", axis.xaxis.label), xytext=(0, -6),
                  textcoords="offset points", ha="left", va="top", fontsize=8, color="#444444",
                  annotation_clip=False)


def _names(names: Sequence[str], limit: int = 12) -> str:
    shown = [str(name) for name in names[:limit]]
    return ", ".join(shown) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _mark_missing(axis: Axes, positions: Sequence[float], present: Sequence[bool], colour: str) -> list[int]:
    """Write `n/a` where a bar has no value; the indices of those bars."""
    missing = [i for i, found in enumerate(present) if not found]
    for i in missing:
        axis.text(positions[i], 0.02, "n/a", rotation=90, ha="center", va="bottom", fontsize=7, color=colour)
    return missing


def _whiskers(axis: Axes, positions: Sequence[float], values: Sequence[float], lows: Sequence[float],
              highs: Sequence[float], with_ci: Sequence[int]) -> None:
    """Interval whiskers on the bars that have an interval."""
    if with_ci:
        axis.errorbar([positions[i] for i in with_ci], [values[i] for i in with_ci],
                      yerr=[[max(0.0, values[i] - lows[i]) for i in with_ci],
                            [max(0.0, highs[i] - values[i]) for i in with_ci]],
                      fmt="none", ecolor="#333333", elinewidth=1, capsize=3)


def speedup_figure(stats: Sequence[Cells], *, title: str = "", interval: str = "95% CI",
                   no_drafts: Collection[str] = ()) -> Figure:
    """The speedup bar chart as a matplotlib figure (whiskers only where an interval exists, and it says where).

    `interval` names the intervals the whiskers draw (`95% CI`, or the level of a sequential test's stopping look).
    Categories in `no_drafts` (nothing drafted: their speedups are noise) get hatched bars and `(no drafts)` under
    their name."""
    rows = [row for row in stats if _finite(row.get("decode_speedup"))]
    dropped = [_label(row.get("category")) for row in stats if not _finite(row.get("decode_speedup"))]
    categories = [_label(row["category"]) for row in rows]
    undrafted = [index for index, row in enumerate(rows) if row.get("category") in no_drafts]
    figure, axis = plt.subplots(figsize=(max(7.0, 0.75 * len(rows) + 3), 4.6))
    width = 0.38
    with_interval: dict[str, list[str]] = {}
    notes = []
    for offset, key, colour, label in (
        (-width / 2, "decode_speedup", BLUE, "decode speedup (t/s)"),
        (width / 2, "latency_speedup", ORANGE, "latency speedup (end to end)"),
    ):
        values = [value if _finite(value := row.get(key)) else 0.0 for row in rows]
        lows = [_number(row.get(f"{key}_low")) for row in rows]
        highs = [_number(row.get(f"{key}_high")) for row in rows]
        positions = [index + offset for index in range(len(rows))]
        bars = axis.bar(positions, values, width, color=colour, label=label)
        for index in undrafted:  # nothing drafted: the bar is noise, drawn faint and hatched
            bars[index].set_alpha(0.35)
            bars[index].set_hatch("//")
        missing = _mark_missing(axis, positions, [_finite(row.get(key)) for row in rows], colour)
        if missing:
            notes.append(f"{label.split(' (')[0].capitalize()} n/a: {_names([categories[i] for i in missing])}.")
        with_ci = [i for i, (lo, hi) in enumerate(zip(lows, highs, strict=True)) if _finite(lo) and _finite(hi)]
        with_interval[key] = [categories[i] for i in with_ci]
        _whiskers(axis, positions, values, lows, highs, with_ci)
    axis.axhline(1.0, color=GREY, linestyle="--", linewidth=1, label="no change (1.0x)")
    ticks = [f"{name}\n(no drafts)" if index in undrafted else name for index, name in enumerate(categories)]
    axis.set_xticks(range(len(rows)), ticks, rotation=30, ha="right")
    axis.set_ylabel("speedup, speculative vs baseline (x)")
    if undrafted:
        notes.append(f"No drafts (hatched): {_names([categories[i] for i in undrafted])}: nothing was drafted there, "
                     "so those speedups are noise and carry no verdict.")
    shown_ci = [c for c in categories if c in with_interval["decode_speedup"] or c in with_interval["latency_speedup"]]
    scope = _interval_scope(categories, shown_ci, interval)
    axis.set_title(_label(title) if title else f"Speedup per category (geometric mean of per-sample speedups, {scope})")
    if rows and len(shown_ci) < len(rows):
        without = [c for c in categories if c not in shown_ci]
        drawn = "95% t-interval" if interval == "95% CI" else f"t-interval {interval.removeprefix('CI ')}"
        whiskers = f"Whiskers: {drawn} on the logs, on {_names(shown_ci)}. " if shown_ci else ""
        notes.insert(0, f"{whiskers}No whiskers on {_names(without)}: fewer than {MIN_SAMPLES_FOR_CI} paired "
                        "samples, no confidence interval.")
    if dropped:
        notes.append(f"Not shown (decode speedup n/a): {_names(dropped)}.")
    if not rows:
        axis.text(0.5, 0.5, "no category has a decode speedup", transform=axis.transAxes, ha="center")
    axis.set_xlabel("category")
    axis.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")  # outside: never over a bar
    axis.grid(axis="y", alpha=0.3)
    _footnote(figure, axis, notes, width=int(figure.get_figwidth() * 15))
    return figure


def _interval_scope(categories: Sequence[str], with_ci: Sequence[str], interval: str = "95% CI") -> str:
    """Which bars have an interval, counting categories apart from the overall row (`95% CI on 3 of 11 ...`)."""
    if categories and len(with_ci) == len(categories):
        return interval
    named = [category for category in categories if category != OVERALL]
    named_ci = [category for category in with_ci if category != OVERALL]
    overall = OVERALL in with_ci
    if named_ci:
        return f"{interval} on {len(named_ci)} of {len(named)} categories" + (" and overall" if overall else "")
    return f"{interval} on overall only" if overall else "no confidence intervals"


def speedup_bars(
    stats: Sequence[Cells], out_dir: Path, *, title: str = "", formats: Sequence[str] = FORMATS,
    interval: str = "95% CI", no_drafts: Collection[str] = (),
) -> list[Path]:
    """Per-category decode and latency speedup bars (geomean) with CI whiskers where they exist, a 1.0x line;
    categories in `no_drafts` marked."""
    return _save(speedup_figure(stats, title=title, interval=interval, no_drafts=no_drafts), out_dir, "speedup",
                 formats)


LABEL_OFFSETS = [(dx, dy) for dy in (3, -11, 12, -20, 21, -29, 30, -38, 39, -47) for dx in (5, -5)]
"""Candidate label offsets (points) around a point, nearest first; left offsets put the text left of the point."""

_LEADER = {"arrowstyle": "-", "color": "#777777", "linewidth": 0.6, "shrinkA": 0, "shrinkB": 3}


def _candidates() -> list[tuple[int, int]]:
    far = [(dx, sign * 9 * step) for step in range(6, 60) for sign in (1, -1) for dx in (5, -5)]
    return [*LABEL_OFFSETS, *far]


def place_labels(axis: Axes, points: Sequence[tuple[float, float]], labels: Sequence[str]) -> list[Annotation]:
    """Annotate points so no two labels overlap each other or a point; labels moved away get a leader line."""
    figure = axis.figure
    canvas = figure.canvas
    if not isinstance(canvas, FigureCanvasAgg):  # every chart is drawn on Agg (`bench.render._figures`)
        raise TypeError(f"labels are placed on an Agg canvas, not {type(canvas).__name__}")
    canvas.draw()
    renderer = canvas.get_renderer()
    marks = [axis.transData.transform(point) for point in points]
    margin = 3 * figure.dpi / 72.0
    placed: list[Bbox] = []
    annotations = []
    for (x, y), text in sorted(zip(points, labels, strict=True), key=lambda item: (-item[0][1], item[0][0])):
        for dx, dy in _candidates():
            note = axis.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=8,
                                 ha="left" if dx > 0 else "right", va="bottom" if dy >= 0 else "top",
                                 arrowprops=_LEADER if abs(dy) > 12 else None, annotation_clip=False)
            note.update_positions(renderer)
            box = Text.get_window_extent(note, renderer)  # the text alone, not its leader line
            hits_point = any(box.x0 - margin <= mx <= box.x1 + margin and box.y0 - margin <= my <= box.y1 + margin
                             for mx, my in marks)
            if not hits_point and not any(box.overlaps(other) for other in placed):
                break
            note.remove()
        else:  # no free place within reach: keep the last candidate rather than drop the name
            note = axis.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=8,
                                 arrowprops=_LEADER, annotation_clip=False)
            note.update_positions(renderer)
            box = Text.get_window_extent(note, renderer)
        placed.append(box)
        annotations.append(note)
    return annotations


def accept_figure(stats: Sequence[Cells]) -> Figure:
    """Accept rate against decode speedup as a figure; categories that cannot be placed are named on it."""
    categories = [row for row in stats if row.get("category") != "overall"]
    rows = [row for row in categories if _finite(row.get("accept_rate")) and _finite(row.get("decode_speedup"))]
    no_accept = [_label(row.get("category")) for row in categories if not _finite(row.get("accept_rate"))]
    no_speedup = [_label(row.get("category")) for row in categories
                  if _finite(row.get("accept_rate")) and not _finite(row.get("decode_speedup"))]
    figure, axis = plt.subplots(figsize=(6.5, 4.6))
    rates = {_number(row.get("accept_rate")) for row in rows}
    shares = [_number(row.get("drafted_share")) for row in rows]
    by_share = len(rows) > 1 and max(rates) - min(rates) < ACCEPT_SPREAD and all(_finite(share) for share in shares)
    if by_share:  # one accept rate everywhere (1.0 when every draft is taken) separates nothing: drafted share does
        points = [(share, _number(row.get("decode_speedup"))) for share, row in zip(shares, rows, strict=True)]
        axis.set_xlabel("drafted share (output tokens that came from accepted drafts)")
        axis.set_title(f"Drafted share vs decode speedup per category (every accept rate {min(rates):.2f})")
    else:
        points = [(_number(row.get("accept_rate")), _number(row.get("decode_speedup"))) for row in rows]
        axis.set_xlabel("accept rate (accepted / drafted tokens)")
        axis.set_title("Accept rate vs decode speedup per category")
    axis.scatter([x for x, _ in points], [y for _, y in points], color=GREEN, s=40, zorder=3)
    axis.axhline(1.0, color=GREY, linestyle="--", linewidth=1)
    axis.set_ylabel("decode speedup (x)")
    axis.grid(alpha=0.3)
    if points:
        xs, ys = [x for x, _ in points], [y for _, y in points]
        pad_x = max(0.05, (max(xs) - min(xs)) * 0.15)
        pad_y = max(0.1, (max(ys) - min(ys)) * 0.25)
        axis.set_xlim(min(xs) - pad_x, max(xs) + pad_x)
        axis.set_ylim(min(min(ys), 1.0) - pad_y, max(ys) + pad_y)
        place_labels(axis, points, [_label(row["category"]) for row in rows])
    else:
        axis.text(0.5, 0.5, "no category has both an accept rate and a decode speedup", transform=axis.transAxes,
                  ha="center")
    notes = []
    if by_share:
        notes.append(f"Every category accepted {min(rates):.0%} of its drafts, so the accept rate cannot tell them "
                     "apart; the x axis is the share of the output the drafts made instead.")
    if no_accept:
        notes.append(f"Not shown, accept rate n/a (nothing drafted): {_names(no_accept)}.")
    if no_speedup:
        notes.append(f"Not shown, decode speedup n/a: {_names(no_speedup)}.")
    _footnote(figure, axis, notes, width=95)
    return figure


ACCEPT_SPREAD = 0.005
"""Accept rates closer together than this (all 1.0, say) cannot separate categories on an axis."""


def accept_vs_speedup(
    stats: Sequence[Cells], out_dir: Path, *, formats: Sequence[str] = FORMATS
) -> list[Path]:
    """Accept rate against decode speedup, one labelled point per category (labels kept apart)."""
    return _save(accept_figure(stats), out_dir, "accept_vs_speedup", formats)


FEW_SAMPLES = 5
"""Below this many requests per arm and category, latencies are drawn as points: a box of 1-2 values is a line."""


def latency_figure(ratios: Mapping[str, Sequence[float]], missing: Sequence[str] = ()) -> Figure:
    """Per category, each prompt's latency speedup (its baseline latency / its speculative latency): prompts of
    very different length are compared each with itself, never pooled. Boxes where there are enough prompts,
    the prompts themselves where there are few; `missing` names categories without a matched prompt."""
    categories = [category for category, values in ratios.items() if len(values)]
    figure, axis = plt.subplots(figsize=(max(7.0, 0.6 * len(categories) + 3), 4.6))
    boxed = [(index, list(ratios[c])) for index, c in enumerate(categories) if len(ratios[c]) >= FEW_SAMPLES]
    if boxed:
        boxes = axis.boxplot([values for _, values in boxed], positions=[p for p, _ in boxed], widths=0.6,
                             patch_artist=True, showfliers=True, medianprops={"color": "black", "linewidth": 1.5})
        for patch in boxes["boxes"]:
            patch.set_facecolor(ORANGE)
            patch.set_alpha(0.75)
    few = [c for c in categories if len(ratios[c]) < FEW_SAMPLES]
    for index, category in enumerate(categories):
        values = list(ratios[category])
        if len(values) >= FEW_SAMPLES:
            continue
        spread = [index + 0.4 * (k - (len(values) - 1) / 2) / max(1, len(values)) for k in range(len(values))]
        axis.scatter(spread, values, color=ORANGE, edgecolor="black", linewidth=0.6, s=30, zorder=3)
        axis.hlines(statistics.median(values), index - 0.3, index + 0.3, color="black", linewidth=1.5, zorder=2)
    axis.axhline(1.0, color=GREY, linestyle="--", linewidth=1, label="no change (1.0x)")
    axis.set_xticks(range(len(categories)), [_label(c) for c in categories], rotation=30, ha="right")
    axis.set_xlabel("category")
    axis.set_ylabel("latency speedup per prompt (x)")
    axis.set_title("Per-prompt latency speedup: baseline latency / speculative latency of the same prompt")
    axis.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    axis.grid(axis="y", alpha=0.3)
    if not categories:
        axis.text(0.5, 0.5, "no prompt succeeded in both runs", transform=axis.transAxes, ha="center")
    notes = ["Above 1.0x: the prompt finished sooner with speculation."]
    if few:
        boxes_too = " Boxes elsewhere: quartiles, whiskers 1.5 IQR." if len(few) < len(categories) else ""
        notes.append(f"Points, one per prompt, with a line at the median: fewer than {FEW_SAMPLES} prompts "
                     f"({_names([_label(c) for c in few])}).{boxes_too}")
    if missing:
        notes.append(f"Not shown (no prompt succeeded in both runs): {_names([_label(c) for c in missing])}.")
    _footnote(figure, axis, notes, width=int(figure.get_figwidth() * 15))
    return figure


def latency_ratios(
    ratios: Mapping[str, Sequence[float]], out_dir: Path, *, missing: Sequence[str] = (),
    formats: Sequence[str] = FORMATS,
) -> list[Path]:
    """Per category, each prompt's latency speedup (baseline / speculative latency of the same prompt)."""
    return _save(latency_figure(ratios, missing), out_dir, "latency", formats)


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
    no_drafts = {row.category for row in comparison.stats if row.nothing_drafted}
    files = speedup_bars(stats, out_dir, formats=formats, interval=interval_label(comparison), no_drafts=no_drafts)
    files += accept_vs_speedup(stats, out_dir, formats=formats)
    ratios, missing = latency_speedups(comparison)
    files += latency_ratios(ratios, out_dir, missing=missing, formats=formats)
    per_position = comparison.run_acceptance.per_position if comparison.run_acceptance else ()
    if per_position:
        files += position_acceptance(per_position, out_dir, formats=formats)
    files += speedup_parts(stats, out_dir, formats=formats)
    return files


def interval_label(comparison: Comparison) -> str:
    """What the speedup plot's whiskers are: `95% CI`, or the level of the sequential test's stopping look."""
    look = comparison.sequential.last if comparison.sequential is not None else None
    if look is None:
        return "95% CI"
    return f"CI at the sequential stopping look ({look.confidence:.1%} overall)" if look.has_interval else "no CI"


def latency_speedups(comparison: Comparison) -> tuple[dict[str, list[float]], list[str]]:
    """Per category, the latency speedup of each matched prompt (first-seen order), and categories with none."""
    from bench.analysis import pair_runs

    paired = pair_runs(comparison.baseline, comparison.speculative, min_pairs=0)
    ratios: dict[str, list[float]] = {}
    for category, value in zip(paired["category"], paired["latency_speedup"], strict=True):
        if _finite(value) and value > 0:
            ratios.setdefault(str(category), []).append(float(value))
    seen = dict.fromkeys(result.category for run in (comparison.speculative, comparison.baseline)
                         for result in run.results)
    return ratios, [category for category in seen if category not in ratios]
