"""A comparison rendered whole, as text, Markdown or JSON: the same numbers from the same `Comparison` object."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from bench.records import finite
from bench.render._escape import terminal_text
from bench.render._explain import explained_markdown, explained_text
from bench.render._stats import (
    cv_text,
    lossless_markdown,
    lossless_text,
    speedup_cv_markdown,
    speedup_cv_text,
    stats_markdown,
    stats_text,
    stream_markdown,
    stream_text,
)
from bench.render._tables import (
    comparison_markdown,
    comparison_text,
    markdown_escape,
    markdown_table,
)

if TYPE_CHECKING:
    from bench.analysis import Comparison

_CV_MARKDOWN_COLUMNS = [
    ("category", "category", ""),
    ("repeats", "repeats", "int"),
    ("decode_t/s_cv", "pred_t_s_cv", "percent"),
    ("latency_cv", "latency_cv", "percent"),
]


def _reference_rows(comparison: Comparison) -> list[dict[str, Any]]:
    return [row.as_cells() for row in comparison.reference]


def acceptance_line(comparison: Comparison) -> str | None:
    """One sentence on the server counters over the speculative run, when they recorded an acceptance length."""
    acceptance = comparison.run_acceptance
    if not acceptance or acceptance.acceptance_length is None:
        return None
    scope = "server-wide (other traffic may be included)" if acceptance.server_wide else "this run only"
    return (
        f"Server counters over the speculative run ({scope}): acceptance length "
        f"{acceptance.acceptance_length:.2f} tokens per step."
    )


def mismatch_lines(comparison: Comparison) -> list[str]:
    """Differences that change the meaning of the comparison (shown only when compared anyway)."""
    checked = comparison.comparability
    return [f"mismatch: {difference.message}" for difference in checked.errors] if checked else []


def drafter_lines(comparison: Comparison) -> list[str]:
    """The drafter-state warnings (a drafter that remembers, arms run from different server states)."""
    return [f"warning: {line}" for line in comparison.drafter_warnings]


def reader_lines(comparison: Comparison) -> list[str]:
    """Everything a reader should know before trusting the tables: mismatches, warnings, partial runs, notes."""
    checked = comparison.comparability.lines(allowed=True) if comparison.comparability else []  # compared anyway
    return checked + drafter_lines(comparison)


def cache_line(comparison: Comparison) -> str | None:
    """The prompt-cache hygiene line, when cache use was recorded."""
    return comparison.cache.message if comparison.cache is not None and comparison.cache.known else None


def render_text(comparison: Comparison) -> str:
    """The reference's exact comparison output, then (with statistics) every table `compare --stats` shows.

    Mismatches (runs compared anyway) come first; otherwise the output starts byte for byte as the reference's.
    """
    mismatches = "".join(line + "\n" for line in mismatch_lines(comparison))
    text = mismatches + comparison_text(_reference_rows(comparison), comparison.baseline_label,
                                        comparison.speculative_label)
    if comparison.stats_note:
        text += f"\nspeedbench: no paired statistics: {comparison.stats_note}\n"
    if drafter_lines(comparison):
        text += "\n" + "".join(line + "\n" for line in drafter_lines(comparison))
    if not comparison.has_stats:
        return terminal_text(text, keep_lines=True)
    text += "\n" + stats_text(comparison.stats, comparison.threshold, comparison.family,
                              sequential=comparison.sequential, sequential_notes=comparison.sequential_notes)
    if cache_line(comparison):
        text += f"{cache_line(comparison)}\n"
    if explained_text(comparison.stats):
        text += "\n" + explained_text(comparison.stats)
    text += "\n" + lossless_text(comparison.lossless)
    for name, rows in comparison.streaming.items():
        if rows:
            text += f"\n{name}: " + stream_text(rows)
    for name, rows in comparison.variation.items():
        if rows:
            text += f"\n{name}: " + cv_text(rows)
    if comparison.speedup_variation:
        text += "\n" + speedup_cv_text(comparison.speedup_variation)
    line = acceptance_line(comparison)
    if line:
        text += "\n" + line + "\n"
    return terminal_text(text, keep_lines=True)  # names in notes and mismatch lines never drive the terminal


def render_markdown(comparison: Comparison) -> str:
    """Every table of the comparison as Markdown, each under a heading (what the report's tables carry)."""
    parts = []
    if reader_lines(comparison):
        parts += ["### Before reading the tables\n\n", *(f"- {markdown_escape(line)}\n" for line in reader_lines(
            comparison)), "\n"]
    parts += ["### SpeedBench comparison\n\n", comparison_markdown(_reference_rows(comparison))]
    if comparison.stats_note:
        parts.append(f"\nNo paired statistics: {markdown_escape(comparison.stats_note)}\n")
    if comparison.has_stats:
        parts += ["\n### Paired statistics\n\n",
                  stats_markdown(comparison.stats, comparison.threshold, comparison.family,
                                 sequential=comparison.sequential, sequential_notes=comparison.sequential_notes)]
        if cache_line(comparison):
            parts.append(f"\n{markdown_escape(cache_line(comparison) or '')}\n")
        if explained_markdown(comparison.stats):
            parts += ["\n### Speedup explained\n\n", explained_markdown(comparison.stats)]
        parts += ["\n### Lossless check\n\n", lossless_markdown(comparison.lossless)]
        for name, rows in comparison.streaming.items():
            if rows:
                parts += [f"\n### Streaming latencies ({name})\n\n", stream_markdown(rows)]
        for name, rows in comparison.variation.items():
            if rows:
                parts += [f"\n### Run-to-run variation ({name})\n\n", markdown_table(rows, _CV_MARKDOWN_COLUMNS)]
        if comparison.speedup_variation:
            parts += ["\n### Speedup variation between repeats and within a run\n\n",
                      speedup_cv_markdown(comparison.speedup_variation)]
        line = acceptance_line(comparison)
        if line:
            parts.append("\n" + line + "\n")
    return "".join(parts)


def comparison_payload(comparison: Comparison) -> dict[str, Any]:
    """The comparison as one JSON-ready object (`comparison` rows keep the reference's keys)."""
    payload: dict[str, Any] = {"comparison": _reference_rows(comparison)}
    checked = comparison.comparability
    if checked is not None:
        payload["comparability"] = {
            "checked": checked.checked,
            "errors": [difference.message for difference in checked.errors],
            "warnings": [difference.message for difference in checked.warnings],
            "flags": list(checked.flags),
            "notes": list(checked.notes),
        }
    if comparison.cache is not None:
        payload["cache"] = {"known": comparison.cache.known, "differs": comparison.cache.differs,
                            "message": comparison.cache.message}
    if comparison.drafter_warnings:
        payload["drafter_state"] = {"warnings": list(comparison.drafter_warnings),
                                    "arms": [dataclasses.asdict(state) for state in comparison.drafter]}
    if comparison.stats_note:
        payload["stats_note"] = comparison.stats_note
    if comparison.has_stats:
        payload["threshold"] = comparison.threshold
        if comparison.family is not None:
            payload["family"] = {"method": comparison.family.method, "size": comparison.family.size,
                                 "alpha": comparison.family.alpha, "target_effect": comparison.family.target_effect,
                                 "primary": "overall",
                                 "overall_estimator": comparison.family.overall_estimator,
                                 "overall_weights": comparison.family.overall_weights}
        payload["stats"] = [row.as_cells() for row in comparison.stats]
        if comparison.sequential is not None:
            payload["sequential"] = sequential_payload(comparison)
        payload["lossless"] = [dict(row) for row in comparison.lossless]
        payload["repeat_cv"] = {name: [dict(row) for row in rows] for name, rows in comparison.variation.items()}
        payload["speedup_repeat_cv"] = [dict(row) for row in comparison.speedup_variation]
        payload["streaming"] = {name: [dict(row) for row in rows] for name, rows in comparison.streaming.items()}
        acceptance = comparison.run_acceptance
        payload["acceptance"] = dataclasses.asdict(acceptance) if acceptance is not None else None
    return payload


def sequential_payload(comparison: Comparison) -> dict[str, Any]:
    """The stopping look every verdict of a comparison sampled until decided is drawn at, with the design."""
    stop = comparison.sequential
    assert stop is not None
    look = stop.last
    verdict = None
    if look is not None:
        verdict = {"faster": "faster", "slower": "slower", "equivalent": "equivalent"}.get(look.decision, "undecided")
    return {
        **stop.to_dict(),
        "decision": look.decision if look is not None else None,
        "verdict": verdict,
        "point": look.point if look is not None else None,
        "low": look.low if look is not None else None,
        "high": look.high if look is not None else None,
        "level": look.level if look is not None else None,
        "confidence": look.confidence if look is not None else None,
        "looks_used": len(stop.looks),
        "samples": look.n if look is not None else 0,
        "limit_samples": stop.max_samples,
        "limit_rounds": stop.rounds,
        "table_level": comparison.family.alpha if comparison.family is not None else None,
        "notes": list(comparison.sequential_notes),
    }


def render_json(comparison: Comparison) -> str:
    """The comparison as indented JSON (NaN written as null)."""
    return json.dumps(finite(comparison_payload(comparison)), indent=2, sort_keys=True) + "\n"
