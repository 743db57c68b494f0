"""Mermaid charts for Markdown that renders where images cannot: GitHub draws them in PR descriptions.

The chart is an `xychart-beta` block: decode speedup as bars, latency speedup as a line, one
x-axis label per category. Its text follows the rules of Mermaid's xychart grammar (see
tests/test_mermaid.py): every text is double-quoted and holds no double quote, backtick, `;`,
`%%` or line break; numbers are plain decimals; every data list is as long as the x-axis.
Mermaid has no missing value, so a category lacking a value is left out and named under the chart (that
note is Markdown, outside the block: its names are escaped for Markdown, not for Mermaid).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from bench.render._escape import markdown_escape, mermaid_text

DECODE_NAME = "decode speedup"
LATENCY_NAME = "latency speedup"


def _number(value: float | None) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _axis_top(values: Sequence[float]) -> float:
    """A round y-axis maximum a little above the largest value (and at least 1.25x, so 1.00x shows)."""
    top = max([1.0, *values]) * 1.1
    return math.ceil(top * 4) / 4


def speedup_chart(
    title: str,
    categories: Sequence[str],
    decode: Sequence[float | None],
    latency: Sequence[float | None],
) -> str:
    """A fenced Mermaid `xychart-beta` block (decode speedup bars, latency speedup line) and a line naming gaps."""
    if not (len(categories) == len(decode) == len(latency)):
        raise ValueError("categories, decode and latency must have the same length")
    decode_values = [_number(value) for value in decode]
    latency_values = [_number(value) for value in latency]
    has_decode = any(value is not None for value in decode_values)
    has_latency = any(value is not None for value in latency_values)
    if not (has_decode or has_latency):
        names = ", ".join(markdown_escape(category) for category in categories) or "no category"
        return f"_No speedup to chart: {DECODE_NAME} and {LATENCY_NAME} are n/a for every category ({names})._\n"
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
    joined = "; ".join(notes)
    note = f"_{joined[:1].upper()}{joined[1:]}._" if notes else ""
    if not kept:
        return note + "\n"
    shown = [value for index in kept for value in (decode_values[index], latency_values[index]) if value is not None]
    lines = [
        "```mermaid",
        "xychart-beta",
        f'    title "{mermaid_text(title)}"',
        '    x-axis "category" [' + ", ".join(f'"{mermaid_text(categories[index])}"' for index in kept) + "]",
        f'    y-axis "speedup (x), 1.00 = no change" 0 --> {_axis_top(shown):.2f}',
    ]
    if has_decode:
        lines.append("    bar [" + ", ".join(f"{decode_values[index]:.2f}" for index in kept) + "]")
    if has_latency:
        lines.append("    line [" + ", ".join(f"{latency_values[index]:.2f}" for index in kept) + "]")
    lines.append("```")
    series = "; ".join(name for name, present in ((f"bars: {DECODE_NAME}", has_decode),
                                                  (f"line: {LATENCY_NAME}", has_latency)) if present)
    legend = f"_{series[:1].upper()}{series[1:]}, speculative vs baseline (1.00 = no change)._"
    return "\n".join(lines) + "\n\n" + legend + ("\n\n" + note if note else "") + "\n"
