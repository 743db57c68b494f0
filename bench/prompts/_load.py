"""Select a prompt set from any source: the shipped categories, the offline throughput generator, files or the hub."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from bench._errors import BenchError
from bench._types import JsonValue
from bench.prompts._sets import (
    HUB,
    HUB_REVISION,
    PLACEHOLDER_PREFIX,
    SHIPPED,
    PromptSet,
    Sample,
    hub_rows,
    read_rows,
    rows_to_samples,
    shipped_rows,
)
from bench.prompts._throughput import build_throughput_prompts, estimate_tokens

DEFAULT_GENERATED_PER_TIER = 8
"""Prompts per entropy tier that the offline throughput generator makes when no --limit is given."""


def _rows(dataset: str, bench: str, limit: int | None, revision: str,
          count_tokens: Callable[[Sequence[str]], list[int]] | None) -> list[JsonValue]:
    """The source's rows: generated throughput prompts, the shipped categories, the hub dataset or a local file."""
    if dataset == SHIPPED and bench.startswith("throughput_"):
        generated = build_throughput_prompts(
            bench, per_tier=limit or DEFAULT_GENERATED_PER_TIER, count_tokens=count_tokens or estimate_tokens
        )
        return [
            {"question_id": s.id, "category": s.category, "sub_category": s.sub_category, "turns": list(s.turns)}
            for s in generated.samples
        ]
    if dataset == SHIPPED:
        return shipped_rows(bench)
    if dataset == HUB:
        return hub_rows(bench, revision)
    return read_rows(Path(dataset))


def _wanted(category: str, bench: str, available: list[str]) -> set[str] | None:
    """The categories `--category` selects (None: every one); a one-line BenchError naming an unknown one."""
    requested = [name.strip() for name in category.split(",") if name.strip()]
    if not requested:
        raise BenchError(
            f"--category {category!r} names no category; available categories: all, {', '.join(available)}"
        )
    if "all" in requested:  # "all" anywhere in the list selects every category
        return None
    unknown = [name for name in requested if name not in available]
    if unknown:
        raise BenchError(
            f"unknown --category {', '.join(unknown) or category!r} for bench {bench!r}; "
            f"available categories: all, {', '.join(available)}"
        )
    return set(requested)


def load_prompts(
    dataset: str = SHIPPED,
    *,
    bench: str = "qualitative",
    category: str = "all",
    limit: int | None = None,
    revision: str = HUB_REVISION,
    count_tokens: Callable[[Sequence[str]], list[int]] | None = None,
) -> PromptSet:
    """Select samples from a source by category (`all` or a comma list), at most `limit` per category.

    With the shipped categories, a `throughput_*` bench is generated offline from their text
    (fixed input length by `count_tokens`, e.g. the server's /tokenize; estimated without one).
    """
    rows = _rows(dataset, bench, limit, revision, count_tokens)
    try:
        all_samples, skipped, placeholders = rows_to_samples(rows)
    except BenchError as exc:
        raise BenchError(f"{dataset}: {exc}") from None
    if not all_samples and not placeholders:
        raise BenchError(f"{dataset}: no usable rows (skipped {skipped} without usable turns)")
    if placeholders:
        raise BenchError(
            f"{dataset}: {placeholders} rows are SPEED-Bench placeholders ('{PLACEHOLDER_PREFIX}...'), not prompts; "
            "rebuild them with NVIDIA's specdec_bench preparation scripts and pass the prepared JSONL with --dataset"
        )
    wanted = _wanted(category, bench, list(dict.fromkeys(sample.category for sample in all_samples)))
    selected: list[Sample] = []
    per_category: dict[str, int] = {}
    for sample in all_samples:
        if wanted is not None and sample.category not in wanted:
            continue
        if limit is not None and per_category.get(sample.category, 0) >= limit:
            continue
        selected.append(sample)
        per_category[sample.category] = per_category.get(sample.category, 0) + 1
    return PromptSet(
        samples=tuple(selected),
        source=dataset,
        bench=bench,
        categories=tuple(dict.fromkeys(sample.category for sample in selected)),
        skipped=skipped,
        placeholders=placeholders,
    )
