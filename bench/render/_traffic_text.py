"""Text, Markdown and JSON of open-loop results: throughput, goodput tables, an A/B at one schedule, a rate sweep."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import TYPE_CHECKING

from bench.analysis import ATTAINMENT, ATTAINMENT_DIFFERENCE, CATEGORY, GOODPUT, GOODPUT_RATIO
from bench.records import finite
from bench.render._tables import CellValue, Column, format_value, markdown_escape, markdown_table, text_table

if TYPE_CHECKING:
    from bench.analysis import Goodput, Interval, PairedSpeedup, RateSweep, Throughput, TrafficComparison


def throughput_line(measured: Throughput) -> str:
    """One line: request throughput, output tokens/s, achieved (and offered) rate, queue wait."""
    parts = [f"{measured.completed}/{measured.requests} requests in {measured.duration_s:.2f}s",
             f"request throughput {measured.request_throughput:.3g} req/s",
             f"output {measured.output_throughput:.4g} tokens/s"]
    if measured.achieved_rate is not None:
        offered = f" of {measured.offered_rate:.3g} offered" if measured.offered_rate is not None else ""
        parts.append(f"achieved rate {measured.achieved_rate:.3g} req/s{offered}")
    if measured.max_queue_wait_s > 0:
        parts.append(f"queue wait mean {measured.mean_queue_wait_s:.3g}s max {measured.max_queue_wait_s:.3g}s")
    return ", ".join(parts)


def interval_cell(interval: Interval, kind: str, *, why: bool = True) -> str:
    """`0.92 [0.85, 0.96]` with each value drawn by its display format (a metric's `kind`), or the point alone with
    why the interval is withheld (`why=False`: the point alone)."""
    def show(value: float) -> str:
        return format_value(value, kind)

    if math.isnan(interval.point):
        return "n/a"
    if not interval.has_interval:
        return f"{show(interval.point)} (no interval: {interval.withheld})" if interval.withheld and why else show(
            interval.point)
    return f"{show(interval.point)} [{show(interval.low)}, {show(interval.high)}]"


_GOODPUT_COLUMNS: list[Column] = [
    Column.of(CATEGORY), Column("requests", "requests", "int"), Column("good", "good", "int"),
    Column("attainment", "attainment"), Column("goodput req/s", "goodput"),
]


def _goodput_rows(result: Goodput) -> list[dict[str, CellValue]]:
    return [{"category": row.category, "requests": row.requests, "good": row.good,
             "attainment": interval_cell(row.attainment, ATTAINMENT.kind, why=False),
             "goodput": interval_cell(row.goodput, GOODPUT.kind, why=False)}
            for row in result.rows]


def goodput_text(result: Goodput, *, markdown: bool = False) -> str:
    """SLO attainment and goodput per category with intervals, under a line naming the SLOs."""
    head = (f"SLO {result.slo.text()}: attainment and goodput ({result.confidence:.0%} intervals; latencies from the "
            "scheduled arrival)\n")
    table = markdown_table if markdown else text_table
    reasons = sorted({f"{row.category}: {row.attainment.withheld}" for row in result.rows
                      if not row.attainment.has_interval and row.attainment.withheld})
    foot = ("no interval for " + "; ".join(reasons) + "\n") if reasons else ""
    if len(reasons) > 3:
        foot = f"no interval for {len(reasons)} categories: " + "; ".join(sorted(
            {row.attainment.withheld for row in result.rows if row.attainment.withheld})) + "\n"
    text = head + table(_goodput_rows(result), _GOODPUT_COLUMNS) + foot
    return markdown_escape(head) + table(_goodput_rows(result), _GOODPUT_COLUMNS) + markdown_escape(foot) \
        if markdown else text


_SPEEDUP_COLUMNS: list[Column] = [
    Column("metric", "metric"), Column("pairs", "pairs", "int"), Column("by request", "by_request"),
    Column("by block", "by_block"), Column("verdict", "verdict"),
]


def _speedup_rows(comparison: TrafficComparison) -> list[dict[str, CellValue]]:
    def row(item: PairedSpeedup) -> dict[str, CellValue]:
        label = item.metric.label if item.primary else f"{item.category}: {item.metric.label}"
        level = "" if item.primary or not item.estimate.has_interval else f" (at {item.estimate.confidence:.1%})"
        return {"metric": label, "pairs": item.pairs, "by_request": interval_cell(item.by_request, item.metric.kind),
                "by_block": interval_cell(item.by_block, item.metric.kind), "verdict": item.estimate.verdict + level}

    rows = [row(item) for item in comparison.speedups if item.primary]
    paired = comparison.goodput
    if paired is not None:
        rows.append({"metric": ATTAINMENT_DIFFERENCE.label, "pairs": paired.pairs,
                     "by_request": interval_cell(paired.difference_by_request, ATTAINMENT_DIFFERENCE.kind),
                     "by_block": interval_cell(paired.difference_by_block, ATTAINMENT_DIFFERENCE.kind),
                     "verdict": paired.verdict})
        rows.append({"metric": GOODPUT_RATIO.label, "pairs": paired.pairs, "by_request": "",
                     "by_block": interval_cell(paired.goodput_ratio, GOODPUT_RATIO.kind), "verdict": ""})
    return rows + [row(item) for item in comparison.speedups if not item.primary]


def traffic_text(comparison: TrafficComparison, *, markdown: bool = False) -> str:
    """An A/B at one schedule: each arm's throughput, the paired speedups and goodput, and what qualifies them."""
    rate = f" at {comparison.rate:g} req/s" if comparison.rate is not None else ""
    lines = [f"{comparison.candidate} vs {comparison.baseline}{rate}: {comparison.pairs} paired requests in "
             f"{comparison.blocks} alternating blocks",
             f"  {comparison.baseline}: {throughput_line(comparison.throughput_baseline)}",
             f"  {comparison.candidate}: {throughput_line(comparison.throughput_candidate)}"]
    if markdown:
        lines = [markdown_escape(line.strip()) + "  " for line in lines]
    out = "\n".join(lines) + "\n\n"
    table = markdown_table if markdown else text_table
    out += table(_speedup_rows(comparison), _SPEEDUP_COLUMNS)
    method = f"verdicts: {comparison.method}"
    stratified = next((item.estimate.estimator for item in comparison.speedups
                       if item.primary and item.estimate.estimator), None)
    if stratified:
        method += f"; overall rows: {stratified} (the spread between categories is the design, not noise)"
    if comparison.goodput is not None and comparison.goodput.overall_estimator and not stratified:
        method += f"; attainment and goodput: {comparison.goodput.overall_estimator}"
    out += (markdown_escape(method) if markdown else method) + "\n"
    for result in (comparison.goodput_baseline, comparison.goodput_candidate):
        if result is not None:
            name = comparison.baseline if result is comparison.goodput_baseline else comparison.candidate
            out += f"\n{markdown_escape(name) if markdown else name}: " + goodput_text(result, markdown=markdown)
    for warning in comparison.warnings():
        out += f"\nwarning: {markdown_escape(warning) if markdown else warning}"
    return out + ("\n" if comparison.warnings() else "")


_SWEEP_COLUMNS: list[Column] = [
    Column("arm", "arm"), Column("req/s", "rate"), Column("latency speedup", "latency"),
    Column("decode speedup", "decode"), Column("attainment base", "base_attainment"),
    Column("attainment arm", "arm_attainment"), Column("goodput ratio", "goodput_ratio"),
]


def _chosen(item: PairedSpeedup) -> str:
    """A paired speedup's by-block interval when it has one, else its by-request one."""
    return interval_cell(item.by_block if item.by_block.has_interval else item.by_request, item.metric.kind,
                         why=False)


def _sweep_rows(sweep: RateSweep) -> list[dict[str, CellValue]]:
    rows: list[dict[str, CellValue]] = []
    for item in sweep.comparisons:
        latency = item.speedup("latency_speedup")
        decode = item.speedup("decode_speedup")
        rows.append({
            "arm": item.candidate, "rate": f"{item.rate:g}",
            "latency": f"{_chosen(latency)} {latency.estimate.verdict}" if latency else "n/a",
            "decode": _chosen(decode) if decode else "n/a",
            "base_attainment": interval_cell(item.goodput_baseline.overall.attainment, ATTAINMENT.kind, why=False)
            if item.goodput_baseline else "",
            "arm_attainment": interval_cell(item.goodput_candidate.overall.attainment, ATTAINMENT.kind, why=False)
            if item.goodput_candidate else "",
            "goodput_ratio": interval_cell(item.goodput.goodput_ratio, GOODPUT_RATIO.kind, why=False)
            if item.goodput else "",
        })
    return rows


def rate_sweep_text(sweep: RateSweep, *, markdown: bool = False) -> str:
    """The rate sweep: per arm and rate the paired comparison, then break-even rates and SLO capacities."""
    table = markdown_table if markdown else text_table
    out = table(_sweep_rows(sweep), _SWEEP_COLUMNS)
    lines = ["no interval where a cell shows a point alone (too few paired requests or blocks at that rate)"]
    lines += [f"break-even ({arm}, latency from the schedule): {crossing.text}" for arm, crossing in sweep.break_even]
    named = sorted({item.estimate.estimator for c in sweep.comparisons for item in c.speedups
                    if item.primary and item.estimate.estimator} |
                   {c.goodput.overall_estimator for c in sweep.comparisons
                    if c.goodput is not None and c.goodput.overall_estimator})
    if named:
        lines.append("overall intervals and break-even: " + "; ".join(named))
    lines += [capacity.text() for capacity in sweep.capacity]
    for item in sweep.comparisons:
        lines += [f"at {item.rate:g} req/s: {warning}" for warning in item.warnings()]
    if markdown:
        lines = [markdown_escape(line) + "  " for line in lines]
    return out + "\n" + "\n".join(lines) + "\n"


def _plain(value: object) -> object:
    """Dataclasses (and tuples of them) as JSON-ready values, NaN as null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


def traffic_json(value: TrafficComparison | RateSweep | Goodput) -> str:
    """Any open-loop result as indented JSON (the typed object's fields, NaN as null)."""
    return json.dumps(finite(_plain(value)), indent=2, sort_keys=True) + "\n"
