"""The PR-ready report: configuration, the SpeedBench table, statistics, lossless check and plots, in Markdown."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench._redact import redact_url
from bench.analysis import compare_runs, lossless_check, paired_stats, stream_latency_stats
from bench.records import Run
from bench.render._stats import lossless_markdown, stats_markdown, stream_markdown
from bench.render._tables import comparison_text, markdown_escape

PLOT_TITLES = {
    "speedup": "Decode and latency speedup per category (95% CI)",
    "accept_vs_speedup": "Accept rate vs decode speedup",
    "latency": "Per-request latency, baseline vs speculative",
    "position_acceptance": "Per-position acceptance",
}


def _shown_url(run: Run) -> str | None:
    """The run's URL without credentials (older run files may still carry them)."""
    url = run.config.get("url")
    return redact_url(str(url)) if url is not None else None


def _model_name(run: Run) -> str | None:
    tagged = run.config.get("tags", {}).get("model")
    if tagged:
        return str(tagged)
    models = (run.meta.get("server") or {}).get("models")
    if isinstance(models, Mapping) and isinstance(models.get("data"), list) and models["data"]:
        first = models["data"][0]
        if isinstance(first, Mapping) and first.get("id"):
            return str(first["id"])
    return run.config.get("model")


def _props_summary(run: Run) -> str | None:
    props = (run.meta.get("server") or {}).get("props")
    if not isinstance(props, Mapping):
        return None
    keep = {key: props[key] for key in ("build_info", "model_path", "total_slots") if key in props}
    return json.dumps(keep, sort_keys=True) if keep else None


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
        ("server", *both(lambda run: run.config.get("tags", {}).get("server") or _shown_url(run))),
        ("engine", *both(lambda run: run.meta.get("engine"))),
        ("model", *both(_model_name)),
        ("speculative mode", *both(lambda run: run.config.get("tags", {}).get("mode"))),
        ("dataset / bench", *both(lambda run: f"{run.config.get('dataset', 'n/a')} / {run.config.get('bench')}")),
        ("category / limit", *both(lambda run: f"{run.config.get('category')} / {run.config.get('limit')}")),
        ("osl (max_tokens)", *both(lambda run: run.config.get("osl"))),
        ("concurrency", *both(lambda run: run.config.get("concurrency"))),
        ("extra inputs", *both(lambda run: run.config.get("extra_inputs"))),
        ("samples ok / failed", *both(lambda run: f"{run.completed_samples} / {run.failed_samples}")),
        ("server props", *both(_props_summary)),
        ("harness", *both(lambda run: " ".join(str(v) for v in (run.meta.get("harness") or {}).values() if v))),
        ("started (UTC)", *both(lambda run: run.meta.get("started_at"))),
    ]
    for key in ("threads", "draft_model", "draft_max"):
        values = both(lambda run, key=key: run.config.get("tags", {}).get(key))
        if any(values):
            rows.append((key, *values))
    rows.append(("machine", *both(lambda run: _machine(run.meta.get("machine") or {}))))
    return rows


def render_report(
    baseline: Run,
    speculative: Run,
    *,
    title: str | None = None,
    baseline_label: str,
    speculative_label: str,
    plots: Sequence[str] = (),
    threshold: float = 0.02,
) -> str:
    """The report's Markdown text (deterministic for the same inputs)."""
    rows = compare_runs(baseline, speculative)
    stats = paired_stats(baseline, speculative, threshold=threshold, min_pairs=1)
    lossless = lossless_check(baseline, speculative)
    parts = [f"# {markdown_escape(title or 'Speculative decoding benchmark')}\n\n"]
    parts.append("## Configuration\n\n")
    parts.append("| setting | baseline | speculative |\n| --- | --- | --- |\n")
    parts.extend(f"| {name} | {_cell(base)} | {_cell(spec)} |\n" for name, base, spec in configuration_rows(
        baseline, speculative))
    parts.append("\n## SpeedBench comparison\n\n")
    table = comparison_text(rows, baseline_label, speculative_label)
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", table)), default=0))
    parts.append(f"{fence}\n{table}{fence}\n")
    parts.append(
        "\n## Paired statistics\n\nGeometric mean of per-sample speedups (samples matched by id) with a "
        f"95% bootstrap CI. A verdict needs the CI to exclude 1.00x and a change over {threshold:.0%}; "
        "categories with fewer than 5 samples get no interval.\n\n"
    )
    parts.append(stats_markdown(stats))
    parts.append("\n## Lossless check\n\nSpeculative completions byte-identical to the baseline's "
                 "(temperature 0); for the others, the sample and the index of the first differing character.\n\n")
    parts.append(lossless_markdown(lossless))
    streaming = [(name, stream_latency_stats(run)) for name, run in (("baseline", baseline),
                                                                        ("speculative", speculative))]
    for name, rows_of_run in streaming:
        if rows_of_run:
            parts.append(f"\n## Streaming latencies ({name})\n\n" + stream_markdown(rows_of_run))
    acceptance = speculative.meta.get("acceptance")
    if isinstance(acceptance, Mapping):
        scope = "server-wide (other traffic may be included)" if acceptance.get("server_wide") else "this run only"
        length = acceptance.get("acceptance_length")
        parts.append(
            f"\nServer counters over the speculative run ({scope}): acceptance length "
            f"{'n/a' if length is None else f'{length:.2f}'} tokens per step.\n"
        )
    if plots:
        parts.append("\n## Plots\n\n")
        for path in plots:
            name = Path(path).stem
            parts.append(f"![{PLOT_TITLES.get(name, name)}]({path})\n\n")
    return "".join(parts).rstrip("\n") + "\n"


def write_report(
    baseline: Run,
    speculative: Run,
    out_dir: str | Path,
    *,
    title: str | None = None,
    threshold: float = 0.02,
) -> Path:
    """Write `report.md` and its plots (PNG and SVG) into `out_dir`; return the report's path."""
    from bench.render._plots import plot_all

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stats = paired_stats(baseline, speculative, threshold=threshold, min_pairs=1)
    written = plot_all(baseline, speculative, stats, out / "plots", formats=("png", "svg"))
    relative = [str(path.relative_to(out)) for path in written if path.suffix == ".png"]
    text = render_report(
        baseline,
        speculative,
        title=title,
        baseline_label=str(baseline.path or "baseline"),
        speculative_label=str(speculative.path or "speculative"),
        plots=relative,
        threshold=threshold,
    )
    report = out / "report.md"
    report.write_text(text, encoding="utf-8")
    return report
