"""Renderers: tables as text, Markdown and JSON, plots, the report and the rich progress display.

Each takes data (a run, rows, a comparison) and returns text or writes files; none runs anything.
Plots, the report and the progress display load matplotlib or rich, so they are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from bench.render._comparison import comparison_payload, render_json, render_markdown, render_text
from bench.render._console import CONSOLE_LINES, console_text, note_lines
from bench.render._escape import markdown_escape, mermaid_text, terminal_lines, terminal_text
from bench.render._gate import gate_markdown, gate_text
from bench.render._history import (
    check_markdown,
    check_text,
    history_html,
    history_json,
    history_markdown,
    history_text,
    trend_line,
)
from bench.render._mermaid import MAX_AXIS_LABEL, speedup_chart, sweep_chart
from bench.render._stats import (
    STREAM_DEFINITIONS,
    ci_cell,
    cv_text,
    lossless_markdown,
    lossless_text,
    stats_markdown,
    stats_text,
    stream_markdown,
    stream_text,
)
from bench.render._sweep import plot_sweep, sweep_decision_text, sweep_json, sweep_markdown, sweep_text
from bench.render._tables import (
    COMPARISON_COLUMNS,
    SUMMARY_COLUMNS,
    Column,
    comparison_markdown,
    comparison_text,
    format_value,
    markdown_table,
    summary_text,
    text_table,
)
from bench.render._traffic_text import (
    goodput_text,
    rate_sweep_text,
    throughput_line,
    traffic_json,
    traffic_text,
)
from bench.render._tune import decision_lines, plot_tune, tune_markdown, tune_text

_LAZY = {
    "FEW_SAMPLES": "bench.render._plots",
    "accept_figure": "bench.render._plots",
    "latency_figure": "bench.render._plots",
    "interval_label": "bench.render._plots",
    "latency_speedups": "bench.render._plots",
    "parts_figure": "bench.render._parts_plot",
    "place_labels": "bench.render._plots",
    "plot_all": "bench.render._plots",
    "speedup_figure": "bench.render._plots",
    "speedup_parts": "bench.render._parts_plot",
    "write_report": "bench.render._report",
    "write_pairs_report": "bench.render._pairs",
    "render_pairs_report": "bench.render._pairs",
    "write_sweep_report": "bench.render._report",
    "write_rate_sweep_report": "bench.render._report",
    "render_rate_sweep_report": "bench.render._report",
    "render_report": "bench.render._report",
    "decision_line": "bench.render._report",
    "decision_text": "bench.render._report",
    "RichProgress": "bench.render._rich",
    "goodput_rate_figure": "bench.render._traffic",
    "plot_goodput_rate": "bench.render._traffic",
    "plot_timeline": "bench.render._traffic",
    "timeline_figure": "bench.render._traffic",
}

__all__ = [
    "COMPARISON_COLUMNS",
    "CONSOLE_LINES",
    "FEW_SAMPLES",
    "MAX_AXIS_LABEL",
    "STREAM_DEFINITIONS",
    "SUMMARY_COLUMNS",
    "Column",
    "RichProgress",
    "accept_figure",
    "check_markdown",
    "check_text",
    "ci_cell",
    "comparison_markdown",
    "comparison_payload",
    "comparison_text",
    "console_text",
    "cv_text",
    "decision_line",
    "decision_lines",
    "decision_text",
    "format_value",
    "gate_markdown",
    "gate_text",
    "goodput_rate_figure",
    "goodput_text",
    "history_html",
    "history_json",
    "history_markdown",
    "history_text",
    "interval_label",
    "latency_figure",
    "latency_speedups",
    "lossless_markdown",
    "lossless_text",
    "markdown_escape",
    "markdown_table",
    "mermaid_text",
    "note_lines",
    "parts_figure",
    "place_labels",
    "plot_all",
    "plot_goodput_rate",
    "plot_sweep",
    "plot_timeline",
    "plot_tune",
    "rate_sweep_text",
    "render_json",
    "render_markdown",
    "render_pairs_report",
    "render_rate_sweep_report",
    "render_report",
    "render_text",
    "speedup_chart",
    "speedup_figure",
    "speedup_parts",
    "stats_markdown",
    "stats_text",
    "stream_markdown",
    "stream_text",
    "summary_text",
    "sweep_chart",
    "sweep_decision_text",
    "sweep_json",
    "sweep_markdown",
    "sweep_text",
    "terminal_lines",
    "terminal_text",
    "text_table",
    "throughput_line",
    "timeline_figure",
    "traffic_json",
    "traffic_text",
    "trend_line",
    "tune_markdown",
    "tune_text",
    "write_pairs_report",
    "write_rate_sweep_report",
    "write_report",
    "write_sweep_report",
]


# The same names for a type checker, which cannot follow the lazy import below.
if TYPE_CHECKING:
    from bench.render._pairs import (
        render_pairs_report as render_pairs_report,
        write_pairs_report as write_pairs_report,
    )
    from bench.render._parts_plot import (
        parts_figure as parts_figure,
        speedup_parts as speedup_parts,
    )
    from bench.render._plots import (
        FEW_SAMPLES as FEW_SAMPLES,
        accept_figure as accept_figure,
        interval_label as interval_label,
        latency_figure as latency_figure,
        latency_speedups as latency_speedups,
        place_labels as place_labels,
        plot_all as plot_all,
        speedup_figure as speedup_figure,
    )
    from bench.render._report import (
        decision_line as decision_line,
        decision_text as decision_text,
        render_rate_sweep_report as render_rate_sweep_report,
        render_report as render_report,
        write_rate_sweep_report as write_rate_sweep_report,
        write_report as write_report,
        write_sweep_report as write_sweep_report,
    )
    from bench.render._rich import (
        RichProgress as RichProgress,
    )
    from bench.render._traffic import (
        goodput_rate_figure as goodput_rate_figure,
        plot_goodput_rate as plot_goodput_rate,
        plot_timeline as plot_timeline,
        timeline_figure as timeline_figure,
    )


def __getattr__(name: str) -> object:
    """Import plots, the report or the rich display on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bench.render' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
