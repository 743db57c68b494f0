"""A history rendered: series and change points as text, Markdown and JSON, the check's table, the trend line, and
one self-contained HTML page (inline SVG charts and styles: no script, style sheet, font or image from elsewhere).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bench._types import JsonObject
from bench.render._escape import markdown_escape, terminal_lines, terminal_text
from bench.render._tables import Column, format_value, markdown_table as _markdown_rows, text_table as _text_rows

if TYPE_CHECKING:
    from bench.analysis import HistoryAnalysis, Metric, Regression, Series, Trend


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Rows of ready cells as the padded text table."""
    return _text_rows([dict(zip(headers, row, strict=True)) for row in rows], [Column(name, name) for name in headers])


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Rows of ready cells as a GitHub Markdown table (cells escaped by the table)."""
    return _markdown_rows([dict(zip(headers, row, strict=True)) for row in rows],
                          [Column(name, name) for name in headers])

_HEADERS = ["workload", "category", "metric", "commits", "latest", "95% interval", "change points"]
_CHANGE_HEADERS = ["workload", "category", "metric", "commits", "direction", "before", "after", "change", "p"]


_SHOWN_AS = {"speedup": "speedup", "rate": "percent", "percent": "percent"}
"""The display format a history shows a metric's values in, by the metric's own: its rates are shares, shown as
percentages; any other metric as a plain number."""


def _value(metric: Metric, value: float) -> str:
    """One value of a series as the history shows it (`n/a` when not finite)."""
    if not math.isfinite(value):
        return "n/a"
    return format_value(value, _SHOWN_AS.get(metric.kind, "number"))


def _series_rows(analysis: HistoryAnalysis) -> list[list[str]]:
    rows = []
    for series in analysis.series:
        last = series.points[-1]
        rows.append([series.workload, series.category, series.name, str(len(series.points)),
                     _value(series.metric, last.estimate),
                     f"[{_value(series.metric, last.low)}, {_value(series.metric, last.high)}]",
                     str(len(series.change_points))])
    return rows


def _change_rows(analysis: HistoryAnalysis) -> list[list[str]]:
    return [[series.workload, series.category, series.name, f"{change.previous[:10]}..{change.commit[:10]}",
             change.direction, _value(series.metric, change.before), _value(series.metric, change.after),
             f"{change.change:+.1%}", f"{change.p_value:.1e}"] for series, change in analysis.change_points]


def history_text(analysis: HistoryAnalysis) -> str:
    """The history as terminal text: one line per series, then every change point, then the method."""
    if not analysis.series:
        return "history: no points yet (speedbench history add FOLDER --history DIR)\n"
    machines = {series.machine.fingerprint: series.machine for series in analysis.series}
    lines = [f"history: {len(analysis.commits)} commits, {len(analysis.series)} series"]
    lines += [f"machine {machine.fingerprint}: {machine.name}; engine {machine.engine_build}; model {machine.model}"
              for machine in machines.values()]
    lines += ["", *text_table(_HEADERS, _series_rows(analysis)).splitlines(), ""]
    changes = _change_rows(analysis)
    lines += [*(text_table(_CHANGE_HEADERS, changes).splitlines() if changes else ["no change point"]), "",
              analysis.method]
    return terminal_lines(lines)


def history_markdown(analysis: HistoryAnalysis) -> str:
    """The history as GitHub Markdown: the change points first, then every series."""
    if not analysis.series:
        return "No history points yet.\n"
    changes = _change_rows(analysis)
    parts = [f"**History**: {len(analysis.commits)} commits, {len(analysis.series)} series, "
             f"{len(changes)} change point(s)", ""]
    if changes:
        parts += [markdown_table(_CHANGE_HEADERS, changes), ""]
    parts += ["<details><summary>Every series</summary>", "",
              markdown_table(_HEADERS, _series_rows(analysis)),
              "", "</details>", "", f"_{markdown_escape(analysis.method)}_"]
    return "\n".join(parts) + "\n"


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def history_json(analysis: HistoryAnalysis) -> JsonObject:
    """The history as a JSON object: `{"series": [{workload, category, metric, points, change_points}], ...}`."""
    return {
        "method": analysis.method, "alpha": analysis.alpha, "candidate_splits": analysis.splits,
        "split_level": analysis.level,
        "series": [{
            "workload": series.workload, "category": series.category, "metric": series.name,
            "machine": series.machine.to_dict(), "between_commit_sd": series.tau,
            "points": [{"commit": point.commit, "time": point.time, "branch": point.branch,
                        "estimate": _finite(point.estimate), "low": _finite(point.low), "high": _finite(point.high),
                        "log_se": _finite(point.log_se), "n": point.n, "points": point.points}
                       for point in series.points],
            "change_points": [{"commit": change.commit, "previous": change.previous, "before": change.before,
                               "after": change.after, "change": change.change, "low": change.low,
                               "high": change.high, "p_value": change.p_value, "direction": change.direction}
                              for change in series.change_points],
        } for series in analysis.series],
    }


def _regression_cells(regression: Regression) -> list[str]:
    series, change = regression.series, regression.change
    return [series.workload, series.category, series.name, f"{change.previous[:10]}..{change.commit[:10]}",
            _value(series.metric, change.before), _value(series.metric, regression.newest), f"{regression.size:+.1%}"]


_CHECK_HEADERS = ["workload", "category", "metric", "commits", "before", "now", "change"]


def check_text(regressions: Sequence[Regression], analysis: HistoryAnalysis, threshold: float) -> str:
    """`history check`'s verdict as terminal text: each unrecovered regression, or that there is none."""
    if not regressions:
        return (f"history check: no unrecovered regression over {threshold:.0%} "
                f"({len(analysis.series)} series, {len(analysis.commits)} commits)\n{analysis.method}\n")
    lines = [f"history check: FAILED: {len(regressions)} proven regression(s) over {threshold:.0%} not recovered "
             "at the newest commit", *text_table(_CHECK_HEADERS, [_regression_cells(item) for item in regressions])
             .splitlines(), analysis.method]
    return terminal_lines(lines)


def check_markdown(regressions: Sequence[Regression], analysis: HistoryAnalysis, threshold: float) -> str:
    """`history check`'s verdict for $GITHUB_STEP_SUMMARY."""
    if not regressions:
        return (f"### History check: passed\n\nNo unrecovered regression over {threshold:.0%} in "
                f"{len(analysis.series)} series over {len(analysis.commits)} commits.\n\n"
                f"_{markdown_escape(analysis.method)}_\n")
    rows = [_regression_cells(item) for item in regressions]
    return (f"### History check: FAILED\n\n{len(regressions)} proven regression(s) over {threshold:.0%} not recovered "
            f"at the newest commit.\n\n{markdown_table(_CHECK_HEADERS, rows)}\n\n"
            f"_{markdown_escape(analysis.method)}_\n")


def trend_line(trend: Trend | None) -> str:
    """One line: 'decode 1.34x; over the last 20 commits 1.36x -> 1.34x, no change point'."""
    if trend is None:
        return "history: no overall decode series for this workload yet"
    changes = trend.change_points
    said = ("no change point" if not changes else
            "; ".join(f"{change.direction} {change.change:+.1%} at {change.commit[:10]}" for change in changes))
    return (f"{trend.series.name} {_value(trend.series.metric, trend.newest)}; over the last {trend.window} commits "
            f"{_value(trend.series.metric, trend.start_level)} -> {_value(trend.series.metric, trend.end_level)}, "
            f"{said}")


# ---- the page ----

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:16px;color:#1f2328;
max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left}
.grid{display:flex;flex-wrap:wrap;gap:8px}.small{border:1px solid #eaeef2;padding:4px}
.meta{color:#59636e}svg text{font:11px system-ui,sans-serif;fill:#1f2328}
.band{fill:#0969da;fill-opacity:.16}.line{fill:none;stroke:#0969da;stroke-width:1.5}
.dot{fill:#0969da}.regression{stroke:#cf222e;stroke-width:2;stroke-dasharray:5 3}
.improvement{stroke:#1a7f37;stroke-width:2;stroke-dasharray:5 3}.axis{stroke:#8c959f;stroke-width:1}
"""


def _page_text(value: object) -> str:
    """A name or figure as the page's text: HTML escaped, and control characters and bidirectional overrides shown
    escaped (`\\u202e`) as on a terminal, so a name can neither inject markup nor reorder the text around it."""
    return html.escape(terminal_text(value))


def _chart(series: Series, width: int, height: int, title: str) -> str:
    """One series as an inline SVG: the 95% band, the estimates, and each change point as a dashed line."""
    points = series.points
    pad_left, pad_right, pad_top, pad_bottom = 46, 8, 18, 18
    lows = [point.low for point in points if math.isfinite(point.low)]
    highs = [point.high for point in points if math.isfinite(point.high)]
    estimates = [point.estimate for point in points]
    bottom, top = min(lows + estimates), max(highs + estimates)
    if top - bottom < 1e-9:
        bottom, top = bottom * 0.99, top * 1.01
    count = len(points)

    def x(index: int) -> float:
        return pad_left + (width - pad_left - pad_right) * (index / max(count - 1, 1))

    def y(value: float) -> float:
        return pad_top + (height - pad_top - pad_bottom) * (1.0 - (value - bottom) / (top - bottom))

    upper = [f"{x(i):.1f},{y(point.high if math.isfinite(point.high) else point.estimate):.1f}"
             for i, point in enumerate(points)]
    lower = [f"{x(i):.1f},{y(point.low if math.isfinite(point.low) else point.estimate):.1f}"
             for i, point in reversed(list(enumerate(points)))]
    line = " ".join(f"{x(i):.1f},{y(point.estimate):.1f}" for i, point in enumerate(points))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="{_page_text(title)}" class="chart">',
             f'<text x="{pad_left}" y="12">{_page_text(title)}</text>',
             f'<line class="axis" x1="{pad_left}" y1="{height - pad_bottom}" x2="{width - pad_right}" '
             f'y2="{height - pad_bottom}"/>',
             f'<text x="2" y="{y(top) + 4:.1f}">{_page_text(_value(series.metric, top))}</text>',
             f'<text x="2" y="{y(bottom):.1f}">{_page_text(_value(series.metric, bottom))}</text>',
             f'<polygon class="band" points="{" ".join(upper + lower)}"/>',
             f'<polyline class="line" points="{line}"/>']
    if count <= 120:
        parts += [f'<circle class="dot" cx="{x(i):.1f}" cy="{y(point.estimate):.1f}" r="2"><title>'
                  f'{_page_text(point.commit[:12])}: {_page_text(_value(series.metric, point.estimate))}</title>'
                  "</circle>" for i, point in enumerate(points)]
    for change in series.change_points:
        middle = (x(change.index - 1) + x(change.index)) / 2
        parts.append(f'<line class="{change.direction}" x1="{middle:.1f}" y1="{pad_top}" x2="{middle:.1f}" '
                     f'y2="{height - pad_bottom}"><title>{change.direction} {change.change:+.1%} at '
                     f"{_page_text(change.commit[:12])}</title></line>")
    parts.append(f'<text x="{pad_left}" y="{height - 4}">{_page_text(points[0].commit[:8])}</text>')
    parts.append(f'<text x="{width - pad_right}" y="{height - 4}" text-anchor="end">'
                 f"{_page_text(points[-1].commit[:8])}</text></svg>")
    return "".join(parts)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{_page_text(cell)}</th>" for cell in headers)
    body = "".join("<tr>" + "".join(f"<td>{_page_text(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def history_html(analysis: HistoryAnalysis, *, title: str = "speedbench history") -> str:
    """One self-contained page: per workload the overall trends with bands and change points, small multiples per
    category, the change points with their commit ranges, and the machine and model of the series."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_page_text(title)}</title><style>{_STYLE}</style></head><body>",
             f"<h1>{_page_text(title)}</h1>",
             f'<p class="meta">{len(analysis.commits)} commits, {len(analysis.series)} series. '
             f"{_page_text(analysis.method)}</p>"]
    if not analysis.series:
        parts.append("<p>No points yet.</p></body></html>")
        return "\n".join(parts)
    groups: dict[tuple[str, str], list[Series]] = {}
    for series in analysis.series:
        groups.setdefault((series.machine.fingerprint, series.workload), []).append(series)
    for (_, workload), members in groups.items():
        machine = members[0].machine
        parts.append(f"<section><h2>{_page_text(workload)}</h2>")
        parts.append(f'<p class="meta">machine {_page_text(machine.name)} ({_page_text(machine.fingerprint)}, '
                     f"{machine.cores} cores); engine {_page_text(machine.engine_build)}; model "
                     f"{_page_text(machine.model)} (digest {_page_text(machine.model_digest)})</p>")
        overall = [series for series in members if series.primary]
        parts.append('<div class="grid">' + "".join(
            f'<div class="small">{_chart(series, 560, 200, f"overall {series.metric.label}")}</div>'
            for series in overall) + "</div>")
        decode = [series for series in members if not series.primary and series.name == "decode"]
        if decode:
            parts.append("<h3>Decode speedup per category</h3><div class=\"grid\">" + "".join(
                f'<div class="small">{_chart(series, 270, 130, series.category)}</div>' for series in decode)
                + "</div>")
        changes = [[series.category, series.name, f"{change.previous[:12]}..{change.commit[:12]}", change.direction,
                    _value(series.metric, change.before), _value(series.metric, change.after),
                    f"{change.change:+.1%}", f"[{change.low:+.1%}, {change.high:+.1%}]", f"{change.p_value:.1e}"]
                   for series in members for change in series.change_points]
        parts.append("<h3>Change points</h3>" + (_table(
            ["category", "metric", "commits", "direction", "before", "after", "change", "interval", "p"], changes)
            if changes else "<p>No change point.</p>"))
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)
