"""The lossless check: speculative outputs byte-identical to the baseline's, and where and why the others differ."""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.analysis._grouping import each_category
from bench.analysis._paired import first_difference, pair_runs
from bench.records import Run, SampleResult, decode_margins

NEAR_TIE_MARGIN = 0.1
"""A first divergence is a near-tie when the baseline's top two tokens there were within this many nats of
log-probability (probabilities within ~10% of each other): batched verification sums in another order and flips
such ties at temperature 0. Larger margins are real divergences: the speculative server emitted a token the
baseline ranked clearly below its own choice."""


def divergence(
    baseline: SampleResult, speculative: SampleResult, *, threshold: float = NEAR_TIE_MARGIN
) -> dict[str, Any] | None:
    """Where two results' outputs first differ, the baseline's margin there and its kind; None when identical.

    Returns {id, repeat, turn, char, token, margin, kind}: `char` indexes the joined outputs (as `first_diff`),
    `token` is the baseline's token index in that turn, `kind` is `near_tie`, `real` or `unclassified` (no
    log-probabilities recorded, or they do not cover the divergence).
    """
    offset = 0
    for turn, (base_text, spec_text) in enumerate(zip(baseline.outputs, speculative.outputs, strict=False)):
        index = first_difference(base_text, spec_text)
        if index is None:
            offset += len(base_text) + 2  # outputs are joined with "\n\n"
            continue
        token, margin = _divergence_token(baseline, speculative, turn, base_text[:index].encode("utf-8"))
        if margin is None:
            kind = "unclassified"
        else:
            kind = "near_tie" if margin < threshold else "real"
        return {"id": baseline.id, "repeat": baseline.repeat, "turn": turn, "char": offset + index, "token": token,
                "margin": margin, "kind": kind}
    if len(baseline.outputs) != len(speculative.outputs):
        return {"id": baseline.id, "repeat": baseline.repeat, "turn": min(len(baseline.outputs),
                len(speculative.outputs)), "char": offset, "token": None, "margin": None, "kind": "unclassified"}
    return None


def _divergence_token(
    baseline: SampleResult, speculative: SampleResult, turn: int, common: bytes
) -> tuple[int | None, float | None]:
    """The baseline token where the outputs part (the last token start both share at or before the first differing
    byte: the same model tokenizes a common prefix alike) and the baseline's margin there."""
    if turn >= len(baseline.token_margins):
        return None, None
    base = decode_margins(baseline.token_margins[turn])
    starts, position = [], 0
    for size, _ in base:
        starts.append(position)
        position += size
    if not base or len(common) >= position:
        return None, None
    shared = set(starts)
    if turn < len(speculative.token_margins):
        spec_starts, position = set(), 0
        for size, _ in decode_margins(speculative.token_margins[turn]):
            spec_starts.add(position)
            position += size
        shared &= spec_starts or shared
    token = max(index for index, start in enumerate(starts) if start <= len(common) and start in shared)
    return token, base[token][1]


def lossless_check(
    baseline: Run, speculative: Run, *, threshold: float = NEAR_TIE_MARGIN, paired: pd.DataFrame | None = None
) -> list[dict[str, Any]]:
    """Per category: identical outputs, where others differ, and each first divergence classified by its margin.

    Keys per row: category, compared, identical, first_diff ("id@char, ..."), near_tie, real, unclassified (counts
    of differing samples by kind), divergences (list of `divergence` dicts), near_tie_threshold. `paired` is
    `pair_runs(baseline, speculative, min_pairs=0)` when the caller has it already.
    """
    if paired is None:
        paired = pair_runs(baseline, speculative, min_pairs=0)
    base_by_key = {result.key: result for result in baseline.latest}
    spec_by_key = {result.key: result for result in speculative.latest}
    rows = []
    for category, group in each_category(paired):
        known = group[group["identical"].notna()]
        differing = known[~known["identical"].astype(bool)]
        found = [
            divergence(base_by_key[key], spec_by_key[key], threshold=threshold)
            for key in zip(differing["id"], differing["repeat"], strict=True)
        ]
        divergences = [item for item in found if item is not None]
        rows.append(
            {
                "category": category,
                "compared": len(known),
                "identical": int(known["identical"].astype(bool).sum()),
                "first_diff": ", ".join(
                    f"{sample}@{int(index)}"
                    for sample, index in zip(differing["id"], differing["first_diff"], strict=True)
                ),
                "near_tie": sum(item["kind"] == "near_tie" for item in divergences),
                "real": sum(item["kind"] == "real" for item in divergences),
                "unclassified": sum(item["kind"] == "unclassified" for item in divergences),
                "divergences": divergences,
                "near_tie_threshold": threshold,
            }
        )
    return rows
