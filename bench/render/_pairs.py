"""The report of a `bench --config` folder: the title, one decision line per pair, a summary table, then each pair's
section (its SpeedBench table as the reference prints it, its paired statistics, its plots)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bench.analysis import paired_metrics
from bench.records import report_file, write_text_file
from bench.render._report import _attachments, _body, _decision_legend, _decision_part, _overall, _safe_name
from bench.render._stats import ci_cell
from bench.render._tables import format_value, markdown_escape

if TYPE_CHECKING:
    from bench.analysis import Comparison

def _summary_header() -> str:
    """The summary table's header: the pair, each compared metric with its interval, the acceptance columns, the
    verdict of the primary metric."""
    names = ["pair", *(f"{paired.label} [95% CI]" for paired in paired_metrics()), "accept rate",
             "acceptance length", "drafted share", "verdict"]
    return "| " + " | ".join(names) + " |\n" + "| --- " * len(names) + "|\n"


def _summary_row(name: str, comparison: Comparison) -> str:
    """One pair's overall row of the summary table (`n/a` where the comparison has no paired statistics)."""
    row = _overall(comparison)
    if row is None:
        empty = ["n/a"] * (len(paired_metrics()) + 3)
        return "| " + " | ".join([markdown_escape(name), *empty, "no paired statistics"]) + " |\n"
    intervals = [ci_cell(estimate.point, estimate.low, estimate.high) for _, estimate in row.compared()]
    cells = [markdown_escape(name), *intervals, format_value(row.accept_rate, "rate"),
             format_value(row.acceptance_length, "speed"), format_value(row.drafted_share, "percent"),
             markdown_escape(row.decode.word)]
    return "| " + " | ".join(cells) + " |\n"


def render_pairs_report(pairs: Sequence[tuple[str, Comparison]], *, title: str | None = None,
                        plots: Sequence[str] = ()) -> str:
    """The Markdown of a several-pair report (deterministic for the same comparisons)."""
    if not pairs:
        raise ValueError("a pairs report needs at least one finished pair")
    parts = [f"# {markdown_escape(title or 'Speculative decoding benchmark')}\n\n"]
    parts.extend(f"- **{markdown_escape(name)}**: {markdown_escape(_decision_part(comparison))}.\n"
                 for name, comparison in pairs)
    parts.append("\n" + _decision_legend([comparison for _, comparison in pairs]) + "\n")
    parts.append("## Summary\n\n" + _summary_header())
    parts.extend(_summary_row(name, comparison) for name, comparison in pairs)
    for name, comparison in pairs:
        parts.append(f"\n## Pair: {markdown_escape(name)}\n\n{_body(comparison, level=3)}")
    if plots:
        parts.append(_attachments(plots))
    return "".join(parts).rstrip("\n") + "\n"


def write_pairs_report(pairs: Sequence[tuple[str, Comparison]], out_dir: str | Path, *,
                       title: str | None = None) -> Path:
    """Write `report.md` over every pair and each pair's plots (`plots/<pair>/`) into `out_dir`; its path."""
    from bench.render._plots import plot_all

    out = Path(out_dir)
    written: list[Path] = []
    for name, comparison in pairs:
        written += plot_all(comparison, out / "plots" / _safe_name(name), formats=("png", "svg"))
    relative = [path.relative_to(out).as_posix() for path in written if path.suffix == ".png"]
    report = report_file(out)
    write_text_file(report, render_pairs_report(pairs, title=title, plots=relative))
    return report
