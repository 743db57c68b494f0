"""Mermaid charts for Markdown that renders where images cannot: GitHub draws them in PR descriptions.

Each chart is an `xychart-beta` block: for a comparison, horizontal bars, two rows per category (its
decode speedup, then its latency speedup, each in its own colour; nothing joins one category to the
next, which a line would), and a 1.00x reference line; for a sweep, one line per speculative arm
across concurrency levels (an axis just around the values and 1.00x) and the same reference.
Series are named and the block's front matter turns Mermaid's legend on and fixes the colours, which
the sentence under the chart names too (renderers without a legend still get one).

The text follows the rules of Mermaid's xychart grammar (see tests/test_mermaid.py): every text is
double-quoted and holds no double quote, backtick, `;`, `%%` or line break; numbers are plain
decimals; every data list is as long as the x-axis. Mermaid has no missing value, so a label lacking
a value is left out and named under the chart (the notes and the legend sentence are Markdown, outside
the block: their names are escaped for Markdown, not for Mermaid).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from bench.render._escape import markdown_escape, mermaid_text, short_labels

DECODE_NAME = "decode speedup"
LATENCY_NAME = "latency speedup"
REFERENCE_NAME = "1.00x = no change"
PALETTE = (("#4C78A8", "blue"), ("#F58518", "orange"), ("#54A24B", "green"), ("#B279A2", "purple"),
           ("#E45756", "red"), ("#72B7B2", "teal"))
"""Series colours in order, with the word the legend sentence uses; the reference line is always grey."""
REFERENCE_COLOUR = ("#7F7F7F", "grey")


def _number(value: float | None) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _axis_top(values: Sequence[float]) -> float:
    """A round axis maximum a little above the largest value (and at least 1.25x, so 1.00x shows)."""
    top = max([1.0, *values]) * 1.1
    return math.ceil(top * 4) / 4


def _axis_around_one(values: Sequence[float]) -> tuple[float, float]:
    """A round axis range just around the values and 1.00x (steps of 0.05), so 0.94x and 1.00x look apart."""
    low, high = min([1.0, *values]), max([1.0, *values])
    pad = max(0.02, (high - low) * 0.1)
    return max(0.0, math.floor((low - pad) * 20) / 20), math.ceil((high + pad) * 20) / 20


MAX_AXIS_LABEL = 40
"""The longest axis label a chart shows: Mermaid's renderer drops every label of an axis whose labels do not fit
(a category name of about 70 characters hides them all), so longer category names are cut (the tables beside the
chart name them in full)."""
_METRIC_SUFFIX = len(": latency")


def _sentence(text: str) -> str:
    return f"_{text[:1].upper()}{text[1:]}._"


def _block(
    title: str, axis_name: str, labels: Sequence[str], series: Sequence[tuple[str, str, Sequence[float]]], *,
    horizontal: bool, from_zero: bool = True,
) -> tuple[str, str]:
    """The fenced block and its legend sentence for named `(kind, name, values)` series plus the 1.00x line; the
    value axis starts at 0 (bars) or, with `from_zero=False`, spans just the values and 1.00x (lines)."""
    colours = [*PALETTE[: len(series)], REFERENCE_COLOUR]
    shown = [value for _, _, values in series for value in values]
    bottom, top = (0.0, _axis_top(shown)) if from_zero else _axis_around_one(shown)
    height = max(320, 28 * len(labels) + 160) if horizontal else 420
    lines = [
        "```mermaid",
        "---",
        "config:",
        "  xyChart:",
        "    showLegend: true",
        "    width: 900",
        f"    height: {height}",
        "  themeVariables:",
        "    xyChart:",
        f'      plotColorPalette: "{", ".join(colour for colour, _ in colours)}"',
        "---",
        "xychart-beta horizontal" if horizontal else "xychart-beta",
        f'    title "{mermaid_text(title)}"',
        f'    x-axis "{mermaid_text(axis_name)}" [' + ", ".join(f'"{mermaid_text(label)}"' for label in labels) + "]",
        f'    y-axis "speedup (x)" {bottom:g} --> {top:.2f}',
    ]
    for kind, name, values in series:
        lines.append(f'    {kind} "{mermaid_text(name)}" [' + ", ".join(f"{value:.2f}" for value in values) + "]")
    lines.append(f'    line "{REFERENCE_NAME}" [' + ", ".join("1.00" for _ in labels) + "]")
    lines.append("```")
    shapes = {"bar": "bars", "line": "line"}
    legend = "; ".join(f"{word} {shapes[kind]}: {markdown_escape(name)}"
                       for (kind, name, _), (_, word) in zip(series, colours, strict=False))
    legend += f"; {REFERENCE_COLOUR[1]} line: {REFERENCE_NAME}"
    return "\n".join(lines) + "\n", legend


def speedup_chart(
    title: str,
    categories: Sequence[str],
    decode: Sequence[float | None],
    latency: Sequence[float | None],
) -> str:
    """A fenced Mermaid chart (decode speedup bars, latency speedup line, 1.00x line), its legend and any gaps."""
    if not (len(categories) == len(decode) == len(latency)):
        raise ValueError("categories, decode and latency must have the same length")
    decode_values = [_number(value) for value in decode]
    latency_values = [_number(value) for value in latency]
    has_decode = any(value is not None for value in decode_values)
    has_latency = any(value is not None for value in latency_values)
    if not (has_decode or has_latency):
        listed = ", ".join(markdown_escape(category) for category in categories) or "no category"
        return f"_No speedup to chart: {DECODE_NAME} and {LATENCY_NAME} are n/a for every category ({listed})._\n"
    kept: list[int] = []
    missing: list[str] = []
    for index, category in enumerate(categories):
        gaps = [name for name, present, value in ((DECODE_NAME, has_decode, decode_values[index]),
                                                  (LATENCY_NAME, has_latency, latency_values[index]))
                if present and value is None]
        if gaps:
            missing.append(f"{markdown_escape(category)} ({' and '.join(gaps)} n/a)")
        else:
            kept.append(index)
    notes = [f"{name} n/a for every category" for name, present in ((DECODE_NAME, has_decode),
                                                                     (LATENCY_NAME, has_latency)) if not present]
    if missing:
        notes.append("not charted: " + ", ".join(missing))
    note = _sentence("; ".join(notes)) if notes else ""
    if not kept:
        return note + "\n"
    series: list[tuple[str, str, Sequence[float]]] = []
    both = has_decode and has_latency
    names = short_labels([categories[index] for index in kept], MAX_AXIS_LABEL - (_METRIC_SUFFIX if both else 0))
    cut = [index for index, name in zip(kept, names, strict=True) if name != mermaid_text(categories[index])]
    labels = names
    if both:  # a row per category and metric: bars side by side, no line between categories
        labels = [f"{name}: {metric}" for name in names for metric in ("decode", "latency")]
        series.append(("bar", DECODE_NAME, [value for index in kept for value in (decode_values[index] or 0.0, 0.0)]))
        series.append(("bar", LATENCY_NAME, [value for index in kept
                                             for value in (0.0, latency_values[index] or 0.0)]))
    elif has_decode:
        series.append(("bar", DECODE_NAME, [decode_values[index] or 0.0 for index in kept]))
    else:
        series.append(("bar", LATENCY_NAME, [latency_values[index] or 0.0 for index in kept]))
    block, legend = _block(title, "category", labels, series, horizontal=True)
    legend += "; speculative vs baseline"
    if cut:
        legend += (f"; {len(cut)} category name(s) cut to {MAX_AXIS_LABEL} characters in the chart, named in full "
                   "in the tables")
    legend = _sentence(legend)
    return block + "\n" + legend + ("\n\n" + note if note else "") + "\n"


def sweep_chart(title: str, levels: Sequence[int], arms: Mapping[str, Sequence[float | None]]) -> str:
    """A fenced Mermaid chart of each arm's speedup (one line per arm) across concurrency levels, with 1.00x."""
    values = {arm: [_number(value) for value in points] for arm, points in arms.items()}
    if any(len(points) != len(levels) for points in values.values()):
        raise ValueError("every arm needs one value per level")
    kept = [index for index in range(len(levels)) if values and all(points[index] is not None
                                                                    for points in values.values())]
    dropped = [f"c={levels[index]}" for index in range(len(levels)) if index not in kept]
    note = _sentence("not charted (an arm has no value there): " + ", ".join(dropped)) if dropped else ""
    if not kept:
        return (note or "_No speedup to chart._") + "\n"
    series = [("line", arm, [points[index] or 0.0 for index in kept]) for arm, points in values.items()]
    block, legend = _block(title, "concurrency", [f"c={levels[index]}" for index in kept], series[: len(PALETTE)],
                           horizontal=False, from_zero=False)
    return block + "\n" + _sentence(legend) + ("\n\n" + note if note else "") + "\n"
