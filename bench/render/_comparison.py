"""A comparison rendered whole, as text, Markdown or JSON: the same numbers from the same `Comparison` object."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench._types import JsonObject
from bench.records import finite
from bench.render._escape import terminal_text
from bench.render._explain import explained_markdown, explained_text
from bench.render._stats import (
    cv_markdown,
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
from bench.render._tables import comparison_markdown, comparison_text, markdown_escape
from bench.render._thinking import thinking_markdown, thinking_payload, thinking_text

if TYPE_CHECKING:
    from bench.analysis import Comparison

def _reference_rows(comparison: Comparison) -> list[JsonObject]:
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


Part = Callable[["Comparison"], str]
Payload = Callable[["Comparison"], JsonObject]


def _nothing(comparison: Comparison) -> str:
    return ""


def _no_payload(comparison: Comparison) -> JsonObject:
    return {}


@dataclass(frozen=True, slots=True)
class Section:
    """One part of a rendered comparison as each output shows it: its text, its Markdown and its JSON keys.

    `render_text`, `render_markdown` and `comparison_payload` walk `SECTIONS` in order, so a new part of the
    comparison is one entry there; a part with `needs_stats` is left out of all three when no statistics were drawn.
    """

    name: str
    text: Part = _nothing
    markdown: Part = _nothing
    payload: Payload = _no_payload
    needs_stats: bool = True


def _lines(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _reader_markdown(comparison: Comparison) -> str:
    lines = reader_lines(comparison)
    if not lines:
        return ""
    return "### Before reading the tables\n\n" + "".join(f"- {markdown_escape(line)}\n" for line in lines) + "\n"


def _comparability_payload(comparison: Comparison) -> JsonObject:
    checked = comparison.comparability
    if checked is None:
        return {}
    return {"comparability": {
        "checked": checked.checked,
        "errors": [difference.message for difference in checked.errors],
        "warnings": [difference.message for difference in checked.warnings],
        "flags": list(checked.flags),
        "notes": list(checked.notes),
    }}


def _stats_note_text(comparison: Comparison) -> str:
    note = comparison.stats_note
    return f"\nspeedbench: no paired statistics: {note}\n" if note else ""


def _stats_note_markdown(comparison: Comparison) -> str:
    note = comparison.stats_note
    return f"\nNo paired statistics: {markdown_escape(note)}\n" if note else ""


def _drafter_text(comparison: Comparison) -> str:
    return "\n" + _lines(drafter_lines(comparison)) if drafter_lines(comparison) else ""


def _drafter_payload(comparison: Comparison) -> JsonObject:
    if not comparison.drafter_warnings:
        return {}
    return {"drafter_state": {"warnings": list(comparison.drafter_warnings),
                              "arms": [dataclasses.asdict(state) for state in comparison.drafter]}}


def _stats_text(comparison: Comparison) -> str:
    return "\n" + stats_text(comparison.stats, comparison.threshold, comparison.family,
                             sequential=comparison.sequential, sequential_notes=comparison.sequential_notes)


def _stats_markdown(comparison: Comparison) -> str:
    return "\n### Paired statistics\n\n" + stats_markdown(
        comparison.stats, comparison.threshold, comparison.family, sequential=comparison.sequential,
        sequential_notes=comparison.sequential_notes)


def _stats_payload(comparison: Comparison) -> JsonObject:
    payload: JsonObject = {"threshold": comparison.threshold, "stats": [row.as_cells() for row in comparison.stats]}
    family = comparison.family
    if family is not None:
        payload["family"] = {"method": family.method, "size": family.size, "alpha": family.alpha,
                             "target_effect": family.target_effect, "primary": "overall",
                             "overall_estimator": family.overall_estimator, "overall_weights": family.overall_weights}
    if comparison.sequential is not None:
        payload["sequential"] = sequential_payload(comparison)
    return payload


def _cache_text(comparison: Comparison) -> str:
    line = cache_line(comparison)
    return f"{line}\n" if line else ""


def _cache_markdown(comparison: Comparison) -> str:
    line = cache_line(comparison)
    return f"\n{markdown_escape(line)}\n" if line else ""


def _cache_payload(comparison: Comparison) -> JsonObject:
    cache = comparison.cache
    return {} if cache is None else {"cache": {"known": cache.known, "differs": cache.differs,
                                               "message": cache.message}}


def _explained_text(comparison: Comparison) -> str:
    text = explained_text(comparison.stats)
    return "\n" + text if text else ""


def _explained_markdown(comparison: Comparison) -> str:
    markdown = explained_markdown(comparison.stats)
    return "\n### Speedup explained\n\n" + markdown if markdown else ""


def _streaming_text(comparison: Comparison) -> str:
    return "".join(f"\n{name}: " + stream_text(rows) for name, rows in comparison.streaming.items() if rows)


def _streaming_markdown(comparison: Comparison) -> str:
    return "".join(f"\n### Streaming latencies ({name})\n\n" + stream_markdown(rows)
                   for name, rows in comparison.streaming.items() if rows)


def _variation_text(comparison: Comparison) -> str:
    return "".join(f"\n{name}: " + cv_text(rows) for name, rows in comparison.variation.items() if rows)


def _variation_markdown(comparison: Comparison) -> str:
    return "".join(f"\n### Run-to-run variation ({name})\n\n" + cv_markdown(rows)
                   for name, rows in comparison.variation.items() if rows)


def _speedup_variation_text(comparison: Comparison) -> str:
    rows = comparison.speedup_variation
    return "\n" + speedup_cv_text(rows) if rows else ""


def _speedup_variation_markdown(comparison: Comparison) -> str:
    rows = comparison.speedup_variation
    return ("\n### Speedup variation between repeats and within a run\n\n" + speedup_cv_markdown(rows)) if rows else ""


def _acceptance_text(comparison: Comparison) -> str:
    line = acceptance_line(comparison)
    return "\n" + line + "\n" if line else ""


def _acceptance_payload(comparison: Comparison) -> JsonObject:
    acceptance = comparison.run_acceptance
    return {"acceptance": dataclasses.asdict(acceptance) if acceptance is not None else None}


SECTIONS: tuple[Section, ...] = (
    Section("before reading", text=lambda comparison: _lines(mismatch_lines(comparison)), markdown=_reader_markdown,
            payload=_comparability_payload, needs_stats=False),
    Section("reference table", text=lambda comparison: comparison_text(
        _reference_rows(comparison), comparison.baseline_label, comparison.speculative_label),
        markdown=lambda comparison: "### SpeedBench comparison\n\n" + comparison_markdown(_reference_rows(comparison)),
        payload=lambda comparison: {"comparison": [*_reference_rows(comparison)]}, needs_stats=False),
    Section("why no statistics", text=_stats_note_text, markdown=_stats_note_markdown,
            payload=lambda comparison: {"stats_note": comparison.stats_note} if comparison.stats_note else {},
            needs_stats=False),
    Section("drafter state", text=_drafter_text, payload=_drafter_payload, needs_stats=False),
    Section("prompt cache use", payload=_cache_payload, needs_stats=False),  # its line is drawn under the statistics
    Section("paired statistics", text=_stats_text, markdown=_stats_markdown, payload=_stats_payload),
    Section("prompt cache", text=_cache_text, markdown=_cache_markdown),
    Section("speedup explained", text=_explained_text, markdown=_explained_markdown),
    Section("lossless check", text=lambda comparison: "\n" + lossless_text(comparison.lossless),
            markdown=lambda comparison: "\n### Lossless check\n\n" + lossless_markdown(comparison.lossless),
            payload=lambda comparison: {"lossless": [row.as_cells() for row in comparison.lossless]}),
    Section("thinking and answer", text=thinking_text, markdown=thinking_markdown, payload=thinking_payload),
    Section("streaming latencies", text=_streaming_text, markdown=_streaming_markdown,
            payload=lambda comparison: {"streaming": {
                name: [row.as_cells() for row in rows] for name, rows in comparison.streaming.items()}}),
    Section("run-to-run variation", text=_variation_text, markdown=_variation_markdown,
            payload=lambda comparison: {"repeat_cv": {
                name: [row.as_cells() for row in rows] for name, rows in comparison.variation.items()}}),
    Section("speedup variation", text=_speedup_variation_text, markdown=_speedup_variation_markdown,
            payload=lambda comparison: {"speedup_repeat_cv": [row.as_cells() for row in comparison.speedup_variation]}),
    Section("server acceptance", text=_acceptance_text, markdown=_acceptance_text, payload=_acceptance_payload),
)
"""Every part of a rendered comparison, in the order each output shows it."""


def sections_of(comparison: Comparison) -> tuple[Section, ...]:
    """The sections a comparison has: all of them with statistics, else those that need none."""
    return tuple(section for section in SECTIONS if comparison.has_stats or not section.needs_stats)


def render_text(comparison: Comparison) -> str:
    """The reference's exact comparison output, then (with statistics) every table `compare --stats` shows.

    Mismatches (runs compared anyway) come first; otherwise the output starts byte for byte as the reference's.
    Names in notes and mismatch lines are escaped: they never drive the terminal.
    """
    return terminal_text("".join(section.text(comparison) for section in sections_of(comparison)), keep_lines=True)


def render_markdown(comparison: Comparison) -> str:
    """Every table of the comparison as Markdown, each under a heading (what the report's tables carry)."""
    return "".join(section.markdown(comparison) for section in sections_of(comparison))


def comparison_payload(comparison: Comparison) -> JsonObject:
    """The comparison as one JSON-ready object (`comparison` rows keep the reference's keys)."""
    payload: JsonObject = {}
    for section in sections_of(comparison):
        payload.update(section.payload(comparison))
    return payload


def sequential_payload(comparison: Comparison) -> JsonObject:
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
