"""The PR-ready report: configuration, the SpeedBench table, statistics, lossless check and plots, in Markdown."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bench._constants import MIN_SAMPLES_FOR_CI, OVERALL
from bench.records import MachineInfo, Run, report_file, write_text_file
from bench.render._comparison import acceptance_line, cache_line, reader_lines
from bench.render._explain import explained_markdown
from bench.render._mermaid import speedup_chart, sweep_chart
from bench.render._stats import ci_cell, details, lossless_markdown, stats_markdown, stream_markdown
from bench.render._sweep import sweep_decision_text, sweep_markdown
from bench.render._tables import comparison_text, format_value, markdown_escape
from bench.render._thinking import thinking_markdown

if TYPE_CHECKING:
    from bench.analysis import Comparison, Estimate, RateSweep, StatsRow, Sweep, SweepCell

PLOT_TITLES = {
    "goodput_rate": "Goodput and SLO attainment against the arrival rate, every arm, with interval bands",
    "speedup": (
        f"Decode and latency speedup per category (geometric means; 95% CI where n >= {MIN_SAMPLES_FOR_CI})"
    ),
    "accept_vs_speedup": "Accept rate vs decode speedup",
    "latency": "Per-sample latency speedup per category (baseline / speculative latency of the same prompt)",
    "position_acceptance": "Per-position acceptance",
    "speedup_parts": "The decode speedup explained: tokens per step, step cost and their quotient against measured",
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


def _mode(run: Run) -> str | None:
    """The speculative mode as the server reported it (llama.cpp's /slots), else as the run was tagged (`bench`'s
    --spec), else whether it drafted."""
    reported = run.info.server.speculative
    if reported == "none":
        return "baseline"  # the server reports speculation off, whatever the run was called
    if reported:
        return reported
    mode = run.settings.tags.get("mode")
    if mode:
        return mode
    from bench.analysis import drafted_by_category

    drafted = drafted_by_category(run).get(OVERALL)
    if drafted is not None and drafted.proposed:
        return f"speculative (drafted {drafted.proposed} tokens; the server does not report its mode)"
    return None


def _draft_settings(run: Run) -> str | None:
    """The draft settings the server reports (`n_max 16, p_min 0.75`), None when it reports none."""
    settings = run.info.server.draft_settings
    if not settings:
        return None
    return ", ".join(f"{key.removeprefix('speculative.')} {value}" for key, value in sorted(settings.items()))


def _cell(value: object) -> str:
    if value is None or value == "":
        return "n/a"
    if isinstance(value, Mapping):
        value = json.dumps(dict(value), sort_keys=True)
    return markdown_escape(str(value)).replace("|", "\\|")


def _machine(machine: MachineInfo) -> str | None:
    if not machine:
        return None
    cpu = machine.get("processor") or machine.get("machine")
    return f"{machine.get('cpu_count')} CPUs, {cpu}, {machine.get('platform')}"


def configuration_rows(baseline: Run, speculative: Run) -> list[tuple[str, object, object]]:
    """(setting, baseline value, speculative value) rows that describe both runs."""

    def both(getter: Callable[[Run], object]) -> tuple[object, object]:
        return getter(baseline), getter(speculative)

    rows: list[tuple[str, object, object]] = [
        ("server", *both(_server)),
        ("engine", *both(lambda run: run.info.engine)),
        ("model", *both(_model_name)),
        ("speculative mode", *both(_mode)),
        ("dataset / bench", *both(lambda run: f"{run.settings.dataset or 'n/a'} / {run.settings.bench}")),
        ("category / limit", *both(lambda run: f"{run.settings.category} / {run.settings.limit}")),
        ("osl (max_tokens)", *both(lambda run: run.settings.osl)),
        ("concurrency", *both(lambda run: run.settings.concurrency)),
        ("extra inputs", *both(lambda run: run.settings.extra_inputs)),
        ("samples ok / failed", *both(lambda run: f"{run.completed_samples} / {run.failed_samples}")),
        ("harness", *both(lambda run: run.info.harness)),
        ("started (UTC)", *both(lambda run: run.info.started_at)),
    ]
    settings = both(_draft_settings)
    if any(settings):
        rows.append(("draft settings (server)", *settings))
    for key in ("threads", "draft_model", "draft_max"):
        values = baseline.settings.tags.get(key), speculative.settings.tags.get(key)
        if any(values):
            rows.append((key, *values))
    rows.append(("machine", *both(lambda run: _machine(run.info.machine))))
    return rows


def workload(comparison: Comparison) -> str:
    """The prompt set a comparison ran (`grounded`, `qualitative`, ...), as its runs recorded it."""
    return comparison.speculative.settings.bench or comparison.baseline.settings.bench or "prompts"


def _estimate_words(estimate: Estimate) -> str:
    """`1.53x [1.21, 1.95] faster`, or the point and why there is no verdict."""
    return f"{ci_cell(estimate.point, estimate.low, estimate.high)} {estimate.word}"


def _overall(comparison: Comparison) -> StatsRow | None:
    return next((row for row in comparison.stats if row.category == OVERALL), None)


def _decision_part(comparison: Comparison) -> str:
    """One workload's overall decode and latency speedups with intervals and verdicts, and its drafted share.

    Sampled until decided, the decode verdict is the stopping look's and both intervals are drawn at its level."""
    row = _overall(comparison)
    if row is None:
        return f"no paired statistics ({comparison.stats_note or 'no matched samples'})"
    drafted = row.drafted_share
    share = f", {format_value(drafted, 'percent')} of the output drafted" if drafted is not None else ""
    decode, latency = _estimate_words(row.decode), _estimate_words(row.latency)
    look = comparison.sequential.last if comparison.sequential is not None else None
    if look is not None:  # sampled until decided: only intervals at the stopping look's level keep their error rate
        level = f"{look.confidence:.1%} interval" if look.has_interval else "no interval"
        outcome = {"undecided": "undecided at the limit", "equivalent": "equivalent within the threshold"}
        if not row.nothing_drafted:
            decode = f"{ci_cell(row.decode.point, row.decode.low, row.decode.high)} " + outcome.get(
                row.decode.verdict, row.decode.word)
        decode, latency = f"{decode} (sequential test, {level})", f"{latency} ({level})"
    from bench.analysis import budget_line

    budget = budget_line(comparison.thinking)
    return f"decode {decode}, latency {latency} ({row.n} prompts{share})" + (f"; {budget}" if budget else "")


def decision_text(comparisons: Sequence[Comparison]) -> str:
    """The decision as plain text: overall decode and latency speedups with 95% intervals, per workload if several."""
    first = comparisons[0]
    arms = f"{_mode(first.speculative) or 'speculative'} vs {_mode(first.baseline) or 'baseline'}"
    if len(comparisons) == 1:
        return f"{arms}: {_decision_part(first)}"
    return f"{arms}: " + "; ".join(f"{workload(each)}: {_decision_part(each)}" for each in comparisons)


def decision_line(comparisons: Sequence[Comparison]) -> str:
    """The decision as the line under the report's title (bold Markdown)."""
    return f"**{markdown_escape(decision_text(comparisons))}.**"


def render_report(
    comparison: Comparison | Sequence[Comparison], *, title: str | None = None, plots: Sequence[str] = (),
    trends: Sequence[str] = (),
) -> str:
    """The report's Markdown text (deterministic for the same comparisons): the title, then the decision.

    Several comparisons (one per workload, e.g. grounded and qualitative prompts of one `make bench`) share
    the decision line; each then gets its own section. `plots` are PNG paths beside the report; `trends` are one
    line each from the history (`report --history`), shown under the decision."""
    comparisons = [comparison] if not isinstance(comparison, Sequence) else list(comparison)
    if not comparisons:
        raise ValueError("a report needs at least one comparison")
    parts = [f"# {markdown_escape(title or 'Speculative decoding benchmark')}\n\n", decision_line(comparisons) + "\n\n"]
    parts.extend(f"History: {markdown_escape(line)}\n\n" for line in trends)
    parts.append(_decision_legend(comparisons) + "\n")
    if len(comparisons) == 1:
        parts.append(_body(comparisons[0], level=2))
    else:
        for each in comparisons:
            parts.append(f"## Workload: {markdown_escape(workload(each))}\n\n{_body(each, level=3)}\n")
    if plots:
        parts.append(_attachments(plots))
    return "".join(parts).rstrip("\n") + "\n"


def _decision_legend(comparisons: Sequence[Comparison]) -> str:
    """A one-line legend under the decision, and the full one in a details block."""
    sequential = any(each.sequential is not None for each in comparisons)
    levels = ("intervals at the sequential test's stopping look (sampled until decided: a fixed 95% interval would "
              "not keep its error rate)" if sequential else "95% intervals")
    short = (f"_All prompts, speculative over baseline, with {'sequential-test' if sequential else '95%'} "
             f"intervals; per category below._\n")
    return short + details("How the decision is drawn", (
        f"Overall geometric means of per-prompt speedups with {levels} (t-intervals on the logs, stratified by "
        "category: the spread between categories is fixed by the design, not noise); a verdict needs "
        f"the interval to exclude 1.00x and a change over {comparisons[0].threshold:.0%}."))


def _body(comparison: Comparison, *, level: int) -> str:
    """One comparison's sections: chart, paired statistics, configuration, reference table, lossless check."""
    head = "#" * level
    baseline, speculative = comparison.baseline, comparison.speculative
    parts = [f"{head} Speedup chart\n\n" + _chart(comparison) + "\n"]
    if reader_lines(comparison):
        parts.append(f"{head} Before reading the tables\n\n")
        parts.extend(f"- {markdown_escape(line)}\n" for line in reader_lines(comparison))
        parts.append("\n")
    if comparison.has_stats:
        parts.append(f"{head} Paired statistics\n\n")
        parts.append(stats_markdown(comparison.stats, comparison.threshold, comparison.family,
                                    sequential=comparison.sequential, sequential_notes=comparison.sequential_notes))
        if cache_line(comparison):
            parts.append(f"\n{markdown_escape(cache_line(comparison) or '')}\n")
        if explained_markdown(comparison.stats):
            parts.append(f"\n{head} Speedup explained\n\n" + explained_markdown(comparison.stats))
        parts.append(
            f"\nCategories with fewer than {MIN_SAMPLES_FOR_CI} paired samples get no interval and no verdict.\n\n"
        )
    elif comparison.stats_note:
        parts.append(f"No paired statistics: {markdown_escape(comparison.stats_note)}\n\n")
    parts.append(f"{head} Configuration\n\n")
    parts.append("| setting | baseline | speculative |\n| --- | --- | --- |\n")
    parts.extend(f"| {name} | {_cell(base)} | {_cell(spec)} |\n" for name, base, spec in configuration_rows(
        baseline, speculative))
    parts.append(f"\n{head} SpeedBench comparison\n\n")
    table = comparison_text([row.as_cells() for row in comparison.reference], _file_name(comparison.baseline_label),
                            _file_name(comparison.speculative_label))
    parts.append(_fenced(table))
    if comparison.has_stats:
        parts.append(f"\n{head} Lossless check\n\nSpeculative completions byte-identical to the baseline's "
                     "(temperature 0); for the others, the sample and the index of the first differing character.\n\n")
        parts.append(lossless_markdown(comparison.lossless))
        parts.append(thinking_markdown(comparison, head))
        for name, rows in comparison.streaming.items():
            if rows:
                parts.append(f"\n{head} Streaming latencies ({name})\n\n" + stream_markdown(rows))
    line = acceptance_line(comparison)
    if line:
        parts.append("\n" + line + "\n")
    return "".join(parts)


def _attachments(plots: Sequence[str]) -> str:
    """The PNG plots as files to attach: a pull request cannot show images linked by a relative path."""
    lines = ["\n## Plots beside this report\n\n",
             "The chart above is drawn from this text. The PNG files beside this report are not linked: a relative "
             "link breaks in a pull request description or a job summary. Attach the ones you want to show.\n\n"]
    lines.extend(f"- `{markdown_escape(path)}`: {PLOT_TITLES.get(Path(path).stem, Path(path).stem)}\n"
                 for path in plots)
    return "".join(lines)


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
        labels = [f"{row.category} (no drafts)" if row.nothing_drafted else row.category for row in rows]
        return speedup_chart("Speedup per category (geometric mean of per-sample speedups)", labels,
                             [row.decode.point for row in rows], [row.latency.point for row in rows])
    reference = [row for row in comparison.reference if row.category != OVERALL]
    return speedup_chart("Speedup per category (ratio of means, as the reference table)",
                         [row.category for row in reference], [row.decode_speedup for row in reference],
                         [row.latency_speedup for row in reference])


def write_report(
    comparison: Comparison | Sequence[Comparison], out_dir: str | Path, *, title: str | None = None,
    trends: Sequence[str] = (),
) -> Path:
    """Write `report.md` and its plots (PNG and SVG) into `out_dir`; return the report's path.

    With several comparisons (one per workload) each one's plots go to `plots/<workload>/`."""
    from bench.render._plots import plot_all

    comparisons = [comparison] if not isinstance(comparison, Sequence) else list(comparison)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for each in comparisons:
        folder = out / "plots" if len(comparisons) == 1 else out / "plots" / _safe_name(workload(each))
        written += plot_all(each, folder, formats=("png", "svg"))
    relative = [path.relative_to(out).as_posix() for path in written if path.suffix == ".png"]
    report = report_file(out)
    write_text_file(report, render_report(comparisons, title=title, plots=relative, trends=trends))
    return report


def _safe_name(name: str) -> str:
    """A workload's name as a folder name: letters, digits, `-` and `_` only."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "workload"


def _sweep_charts(sweep: Sweep) -> str:
    """The sweep's throughput and decode speedups per arm across concurrency levels, as Mermaid charts."""

    def points(estimate_of: Callable[[SweepCell], Estimate]) -> dict[str, list[float | None]]:
        values: dict[str, list[float | None]] = {}
        for arm in sweep.arms:
            cells = [sweep.cell(arm, level) for level in sweep.levels]
            values[arm] = [estimate_of(cell).point if cell is not None and cell.comparison.stats else None
                           for cell in cells]
        return values

    return (
        sweep_chart("Throughput speedup per arm by concurrency", sweep.levels, points(lambda cell: cell.throughput))
        + "\n"
        + sweep_chart("Decode speedup per request by concurrency", sweep.levels, points(lambda cell: cell.decode))
    )


def render_sweep_report(sweep: Sweep, *, title: str | None = None, plots: Sequence[str] = ()) -> str:
    """A sweep's report: its charts, the summary tables, then each cell's SpeedBench table under its heading."""
    parts = [f"# {markdown_escape(title or 'Speculative decoding sweep')}\n\n",
             f"**{markdown_escape(sweep_decision_text(sweep))}.**\n\n", "## Speedup charts\n\n",
             _sweep_charts(sweep), "\n", sweep_markdown(sweep)]
    for cell in sweep.cells:
        labels = cell.comparison.baseline_label, cell.comparison.speculative_label  # relative: c<level>/<arm>.json
        table = comparison_text([row.as_cells() for row in cell.comparison.reference], *labels)
        parts.append(f"\n### {markdown_escape(cell.arm)} at concurrency {cell.concurrency}\n\n{_fenced(table)}")
    if plots:
        parts.append(_attachments(plots))
    return "".join(parts).rstrip("\n") + "\n"


def write_sweep_report(sweep: Sweep, out_dir: Path, *, title: str | None = None) -> Path:
    """Write a sweep's `report.md` and its plots into `out_dir`; return the report's path."""
    from bench.render._sweep import plot_sweep

    out_dir.mkdir(parents=True, exist_ok=True)
    plots = [path.relative_to(out_dir).as_posix() for path in plot_sweep(sweep, out_dir / "plots")]
    report = report_file(out_dir)
    write_text_file(report, render_sweep_report(sweep, title=title, plots=plots))
    return report


def render_rate_sweep_report(sweep: RateSweep, *, title: str | None = None, plots: Sequence[str] = ()) -> str:
    """A rate sweep's report: per rate and arm the paired comparison, break-even rates, SLO capacities, plots."""
    from bench.render._traffic_text import rate_sweep_text

    rates = ", ".join(f"{rate:g}" for rate in sweep.rates)
    parts = [f"# {markdown_escape(title or 'Speculative decoding rate sweep')}\n\n",
             f"Every arm against {markdown_escape(sweep.baseline)} at the same seeded arrival schedule, at {rates} "
             "req/s. Latency and TTFT count from the scheduled arrival. A break-even rate is stated only when its "
             "evidence rule establishes it; the highest rate meeting the SLOs reads the attainment interval.\n\n",
             "## Paired comparison per rate\n\n", rate_sweep_text(sweep, markdown=True)]
    if plots:
        parts.append(_attachments(plots))
    return "".join(parts).rstrip("\n") + "\n"


def write_rate_sweep_report(sweep: RateSweep, out_dir: Path, *, title: str | None = None) -> Path:
    """Write a rate sweep's `report.md` and its goodput/attainment-vs-rate plot into `out_dir`; return the path."""
    from bench.render._traffic import plot_goodput_rate

    out_dir.mkdir(parents=True, exist_ok=True)
    drawn = plot_goodput_rate(list(sweep.levels), out_dir / "plots", target=sweep.target, formats=("png",)) \
        if sweep.levels else []
    plots = [path.relative_to(out_dir).as_posix() for path in drawn]
    report = report_file(out_dir)
    write_text_file(report, render_rate_sweep_report(sweep, title=title, plots=plots))
    return report
