"""The PR-ready report: configuration, the SpeedBench table, statistics, lossless check and plots, in Markdown."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench._constants import MIN_SAMPLES_FOR_CI, OVERALL
from bench.records import Run, write_text_file
from bench.render._comparison import acceptance_line, cache_line, reader_lines
from bench.render._mermaid import speedup_chart
from bench.render._stats import lossless_markdown, stats_markdown, stream_markdown
from bench.render._sweep import sweep_markdown

if TYPE_CHECKING:
    from bench.analysis import Comparison, Sweep
from bench.render._tables import comparison_text, markdown_escape

PLOT_TITLES = {
    "speedup": (
        f"Decode and latency speedup per category (geometric means; 95% CI where n >= {MIN_SAMPLES_FOR_CI})"
    ),
    "accept_vs_speedup": "Accept rate vs decode speedup",
    "latency": "Per-request latency, baseline vs speculative",
    "position_acceptance": "Per-position acceptance",
}


def _model_name(run: Run) -> str | None:
    return run.settings.tags.get("model") or run.info.server.model or run.settings.model


def _server(run: Run) -> str | None:
    """The server as what it is: engine, build and slots (never a local path or URL)."""
    described = run.info.server
    parts = [run.settings.tags.get("server") or described.engine or run.info.engine]
    if described.build:
        parts.append(f"build {described.build}")
    if described.slots:
        parts.append(f"{described.slots} slot{'s' if described.slots != 1 else ''}")
    return ", ".join(part for part in parts if part) or None


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "n/a"
    if isinstance(value, Mapping):
        value = json.dumps(dict(value), sort_keys=True)
    return markdown_escape(str(value)).replace("|", "\\|")


def _machine(machine: Mapping[str, Any]) -> str | None:
    if not machine:
        return None
    cpu = machine.get("processor") or machine.get("machine")
    return f"{machine.get('cpu_count')} CPUs, {cpu}, {machine.get('platform')}"


def configuration_rows(baseline: Run, speculative: Run) -> list[tuple[str, Any, Any]]:
    """(setting, baseline value, speculative value) rows that describe both runs."""

    def both(getter: Any) -> tuple[Any, Any]:
        return getter(baseline), getter(speculative)

    rows: list[tuple[str, Any, Any]] = [
        ("server", *both(_server)),
        ("engine", *both(lambda run: run.info.engine)),
        ("model", *both(_model_name)),
        ("speculative mode", *both(lambda run: run.settings.tags.get("mode"))),
        ("dataset / bench", *both(lambda run: f"{run.settings.dataset or 'n/a'} / {run.settings.bench}")),
        ("category / limit", *both(lambda run: f"{run.settings.category} / {run.settings.limit}")),
        ("osl (max_tokens)", *both(lambda run: run.settings.osl)),
        ("concurrency", *both(lambda run: run.settings.concurrency)),
        ("extra inputs", *both(lambda run: run.settings.extra_inputs)),
        ("samples ok / failed", *both(lambda run: f"{run.completed_samples} / {run.failed_samples}")),
        ("harness", *both(lambda run: run.info.harness)),
        ("started (UTC)", *both(lambda run: run.info.started_at)),
    ]
    for key in ("threads", "draft_model", "draft_max"):
        values = both(lambda run, key=key: run.settings.tags.get(key))
        if any(values):
            rows.append((key, *values))
    rows.append(("machine", *both(lambda run: _machine(run.info.machine))))
    return rows


def render_report(comparison: Comparison, *, title: str | None = None, plots: Sequence[str] = ()) -> str:
    """The report's Markdown text (deterministic for the same comparison)."""
    baseline, speculative = comparison.baseline, comparison.speculative
    parts = [f"# {markdown_escape(title or 'Speculative decoding benchmark')}\n\n"]
    if reader_lines(comparison):
        parts.append("## Before reading the tables\n\n")
        parts.extend(f"- {markdown_escape(line)}\n" for line in reader_lines(comparison))
        parts.append("\n")
    parts.append("## Configuration\n\n")
    parts.append("| setting | baseline | speculative |\n| --- | --- | --- |\n")
    parts.extend(f"| {name} | {_cell(base)} | {_cell(spec)} |\n" for name, base, spec in configuration_rows(
        baseline, speculative))
    parts.append("\n## SpeedBench comparison\n\n")
    table = comparison_text([row.as_cells() for row in comparison.reference], _file_name(comparison.baseline_label),
                            _file_name(comparison.speculative_label))
    parts.append(_fenced(table))
    if comparison.has_stats:
        parts.append("\n## Paired statistics\n\n")
        parts.append(stats_markdown(comparison.stats, comparison.threshold))
        if cache_line(comparison):
            parts.append(f"\n{markdown_escape(cache_line(comparison) or '')}\n")
        parts.append(
            f"\nCategories with fewer than {MIN_SAMPLES_FOR_CI} paired samples get no interval and no verdict.\n"
        )
        parts.append("\n## Lossless check\n\nSpeculative completions byte-identical to the baseline's "
                     "(temperature 0); for the others, the sample and the index of the first differing character.\n\n")
        parts.append(lossless_markdown(comparison.lossless))
        for name, rows in comparison.streaming.items():
            if rows:
                parts.append(f"\n## Streaming latencies ({name})\n\n" + stream_markdown(rows))
    elif comparison.stats_note:
        parts.append(f"\nNo paired statistics: {markdown_escape(comparison.stats_note)}\n")
    line = acceptance_line(comparison)
    if line:
        parts.append("\n" + line + "\n")
    parts.append("\n## Speedup chart\n\n" + _chart(comparison))
    if plots:
        parts.append(
            "\n## Plots\n\nThe PNG files beside this report (`plots/`), for docs and wikis that serve them; a pull "
            "request description shows the chart above, which GitHub draws from the text.\n\n"
        )
        for path in plots:
            name = Path(path).stem
            parts.append(f"![{PLOT_TITLES.get(name, name)}]({path})\n\n")
    return "".join(parts).rstrip("\n") + "\n"


def _fenced(table: str) -> str:
    """A text table in a code fence longer than any backtick run inside it (no injection from category names)."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", table)), default=0))
    return f"{fence}\n{table}{fence}\n"


def _file_name(label: str) -> str:
    """A run's label as the report shows it: its file name, never a local path."""
    return Path(label).name or label


def _chart(comparison: Comparison) -> str:
    """Per-category speedups as a Mermaid chart: paired geometric means when computed, else the reference's ratios."""
    if comparison.has_stats:
        rows = [row for row in comparison.stats if row.category != OVERALL]
        return speedup_chart("Speedup per category (geometric mean of per-sample speedups)",
                             [row.category for row in rows], [row.decode.point for row in rows],
                             [row.latency.point for row in rows])
    reference = [row for row in comparison.reference if row.category != OVERALL]
    return speedup_chart("Speedup per category (ratio of means, as the reference table)",
                         [row.category for row in reference], [row.decode_speedup for row in reference],
                         [row.latency_speedup for row in reference])


def write_report(comparison: Comparison, out_dir: str | Path, *, title: str | None = None) -> Path:
    """Write `report.md` and its plots (PNG and SVG) into `out_dir`; return the report's path."""
    from bench.render._plots import plot_all

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = plot_all(comparison, out / "plots", formats=("png", "svg"))
    relative = [str(path.relative_to(out)) for path in written if path.suffix == ".png"]
    report = out / "report.md"
    write_text_file(report, render_report(comparison, title=title, plots=relative))
    return report


def render_sweep_report(sweep: Sweep, *, title: str | None = None, plots: Sequence[str] = ()) -> str:
    """A sweep's report: the summary tables and plots, then each cell's SpeedBench table under its heading."""
    parts = [f"# {markdown_escape(title or 'Speculative decoding sweep')}\n\n", sweep_markdown(sweep, plots)]
    for cell in sweep.cells:
        labels = cell.comparison.baseline_label, cell.comparison.speculative_label  # relative: c<level>/<arm>.json
        table = comparison_text([row.as_cells() for row in cell.comparison.reference], *labels)
        parts.append(f"\n### {markdown_escape(cell.arm)} at concurrency {cell.concurrency}\n\n{_fenced(table)}")
    return "".join(parts).rstrip("\n") + "\n"


def write_sweep_report(sweep: Sweep, out_dir: Path, *, title: str | None = None) -> Path:
    """Write a sweep's `report.md` and its plots into `out_dir`; return the report's path."""
    from bench.render._sweep import plot_sweep

    out_dir.mkdir(parents=True, exist_ok=True)
    plots = [str(path.relative_to(out_dir)) for path in plot_sweep(sweep, out_dir / "plots")]
    report = out_dir / "report.md"
    write_text_file(report, render_sweep_report(sweep, title=title, plots=plots))
    return report
