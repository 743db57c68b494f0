"""The lossless check: speculative outputs byte-identical to the baseline's, and where and why the others differ."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from bench._types import JsonObject
from bench.analysis._grouping import each_category
from bench.analysis._paired import first_difference, pair_runs
from bench.records import Run, SampleResult, decode_margins

NEAR_TIE_MARGIN = 0.1
"""A first divergence is a near-tie when the baseline's top two tokens there were within this many nats of
log-probability (probabilities within ~10% of each other): batched verification sums in another order and flips
such ties at temperature 0. Larger margins are real divergences: the speculative server emitted a token the
baseline ranked clearly below its own choice."""

NEAR_TIE_STEPS = 1
"""At an engine whose log-probabilities come on a grid (bf16 logits: steps of 0.125 nats at the usual logit scale),
a margin of up to this many grid steps is a near-tie: two logits one representable value apart may swap when
batched verification sums in another order."""

MIN_MARGINS_FOR_RESOLUTION = 20
"""Margins needed (each recorded precisely enough to tell the grid apart) before a grid is estimated."""

_GRID_STEPS = tuple(2.0 ** -k for k in range(0, 11))


@dataclass(frozen=True, slots=True)
class Resolution:
    """The log-probability resolution a near-tie rule uses: a grid step (estimated or declared) or none (continuous)."""

    step: float | None
    margins: int
    source: str
    coarsest: float | None = None
    """bf16: the coarsest grid in use (logits of larger magnitude have a coarser step, so their difference moves in
    coarser steps): enough margins are odd multiples of it that a finer grid alone does not explain them."""

    def threshold(self, floor: float = NEAR_TIE_MARGIN, steps: int = NEAR_TIE_STEPS) -> float:
        """The near-tie threshold (margins under it are ties): the fixed floor, or on a grid, half a step past `steps`
        steps (margins are whole steps, so this takes up to `steps` of them)."""
        return max(floor, (steps + 0.5) * self.step) if self.step else floor

    def margin_threshold(self, margin: float, floor: float = NEAR_TIE_MARGIN, steps: int = NEAR_TIE_STEPS) -> float:
        """The near-tie threshold for this margin: on a grid, `steps` of the margin's own step, read from its binary
        form (the largest power of two it is a multiple of), no coarser than the coarsest grid in use and no finer
        than the run's grid."""
        if not self.step:
            return floor
        local = self.step
        for step in _GRID_STEPS:
            if self.step < step <= (self.coarsest or self.step) and _on_grid(margin, step):
                local = step
                break
        return max(floor, (steps + 0.5) * local)

    @property
    def text(self) -> str:
        """How the threshold was set, for the legend ("" when no margin was recorded: nothing to say)."""
        if not self.step and not self.margins:
            return ""
        if not self.step:
            return f"no log-probability grid found in {self.margins} recorded margins (continuous, e.g. fp32)"
        coarser = (f"; margins of logits on a coarser grid, up to {self.coarsest:g} (bf16: the step grows with the "
                   "logits' magnitude), are read at the step of their own binary form"
                   if self.coarsest and self.coarsest > self.step else "")
        return (f"log-probabilities on a grid of {self.step:g} nats ({self.source}, {self.margins} margins): "
                f"up to {NEAR_TIE_STEPS} step(s) is a tie at the engine's precision{coarser}")


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where two results' outputs first differ: `char` indexes the joined outputs (as `first_diff`), `token` is the
    baseline's token index in that turn, `margin` the baseline's top-2 margin there and `kind` `near_tie`, `real` or
    `unclassified` (no log-probabilities recorded, or they do not cover the divergence)."""

    id: str
    repeat: int
    turn: int
    char: int
    token: int | None
    margin: float | None
    kind: str
    segment: str | None = None
    """Reasoning runs: `thinking` or `answer`, where `char` indexes that segment's joined text (None: no thinking)."""

    @property
    def where(self) -> str:
        """`thinking@char 812`, `answer@char 40`, or `@40` for a run without thinking."""
        return f" {self.segment}@char {self.char}" if self.segment else f"@{self.char}"

    def as_cells(self) -> JsonObject:
        """The divergence as JSON cells (`segment` only in reasoning runs)."""
        cells: JsonObject = {"id": self.id, "repeat": self.repeat, "turn": self.turn, "char": self.char,
                             "token": self.token, "margin": self.margin, "kind": self.kind}
        if self.segment is not None:
            cells["segment"] = self.segment
        return cells


@dataclass(frozen=True, slots=True)
class LosslessRow:
    """One category's lossless check: identical outputs, where the others differ, and each divergence's kind."""

    category: str
    compared: int
    identical: int
    first_diff: str
    """`id@char, ...` of the samples whose outputs differ."""
    near_tie: int
    real: int
    unclassified: int
    divergences: tuple[Divergence, ...]
    near_tie_threshold: float
    resolution: float | None
    """The engine's log-probability grid step the near-tie rule used (None: continuous)."""
    resolution_note: str
    replaced_text: int
    """Compared samples whose server text held lone surrogates (compared as U+FFFD)."""

    def as_cells(self) -> JsonObject:
        """The row as JSON cells (divergences as a list of objects)."""
        return {"category": self.category, "compared": self.compared, "identical": self.identical,
                "first_diff": self.first_diff, "near_tie": self.near_tie, "real": self.real,
                "unclassified": self.unclassified, "divergences": [item.as_cells() for item in self.divergences],
                "near_tie_threshold": self.near_tie_threshold, "resolution": self.resolution,
                "resolution_note": self.resolution_note, "replaced_text": self.replaced_text}


def _rounding(margin: float) -> float:
    """Half a unit in the third significant digit: the rounding error of a margin as run files record it."""
    return 0.5 * 10.0 ** (math.floor(math.log10(margin)) - 2) if margin > 0 else 0.0


def _on_grid(margin: float, step: float) -> bool:
    """Whether a recorded margin is a multiple of `step` within its rounding (and recorded finely enough to say)."""
    rounding = _rounding(margin)
    return rounding < step / 4 and abs(margin - round(margin / step) * step) <= rounding * 1.001 + 1e-12


def _coarsest_grid(values: list[float], step: float) -> float:
    """The coarsest grid 2^-k in use beside the finest one (`step`).

    On one grid g, a margin is an odd multiple of 2g half as often as of g. So a coarser grid G is in use when at
    least `MIN_MARGINS_FOR_RESOLUTION` margins, and twice what chance on the finest grid gives, are odd multiples
    of G, and no fewer than are odd multiples of G / 2.
    """

    def odd(grid: float) -> int:
        return sum(_on_grid(m, grid) and not _on_grid(m, 2 * grid) for m in values)

    for coarse in _GRID_STEPS:
        if coarse <= step:
            break
        here, by_chance = odd(coarse), len(values) * step / (2 * coarse)
        if here >= max(MIN_MARGINS_FOR_RESOLUTION, 2 * by_chance) and here >= odd(coarse / 2):
            return coarse
    return step


def estimate_resolution(margins: Iterable[float | None]) -> Resolution:
    """The coarsest grid 2^-k (1 down to 2^-10 nats) every informative recorded margin lies on, within its rounding.

    A margin informs a grid step only when its rounding is under a quarter of the step; zero margins (exact ties)
    say nothing. Fewer than `MIN_MARGINS_FOR_RESOLUTION` informative margins: no grid (continuous).
    """
    values = [m for m in margins if m is not None and math.isfinite(m) and m > 0]
    for step in _GRID_STEPS:
        usable = [m for m in values if _rounding(m) < step / 4]
        if len(usable) < MIN_MARGINS_FOR_RESOLUTION:
            continue
        if all(abs(m - round(m / step) * step) <= _rounding(m) * 1.001 + 1e-12 for m in usable):
            return Resolution(step, len(usable), "estimated from recorded margins", _coarsest_grid(usable, step))
    return Resolution(None, len(values), "estimated from recorded margins")


def run_margins(run: Run) -> list[float | None]:
    """Every recorded top-2 margin of a run's latest results."""
    return [margin for result in run.latest for turn in result.token_margins for _, margin in decode_margins(turn)]


def divergence(
    baseline: SampleResult, speculative: SampleResult, *, threshold: float = NEAR_TIE_MARGIN,
    resolution: Resolution | None = None,
) -> Divergence | None:
    """Where two results' outputs first differ (in the thinking first, then the answer), the baseline's margin there
    and its kind; None when identical."""
    thought = any(baseline.reasoning) or any(speculative.reasoning)
    segments = (("thinking", baseline.reasoning, speculative.reasoning),) if thought else ()
    for segment, base_texts, spec_texts in (*segments, ("answer", baseline.outputs, speculative.outputs)):
        found = _first_in_turns(base_texts, spec_texts)
        if found is None:
            continue
        turn, char, index = found
        if turn is None:
            return Divergence(baseline.id, baseline.repeat, min(len(base_texts), len(spec_texts)), char, None, None,
                              "unclassified", segment if thought else None)
        lead = _margin_lead(baseline, turn, segment)
        token, margin = (None, None) if lead is None else _divergence_token(
            baseline, speculative, turn, lead + base_texts[turn][:index].encode("utf-8"))
        if margin is None:
            kind = "unclassified"
        else:
            limit = max(threshold, resolution.margin_threshold(margin)) if resolution is not None else threshold
            kind = "near_tie" if margin < limit else "real"
        return Divergence(baseline.id, baseline.repeat, turn, char, token, margin, kind, segment if thought else None)
    return None


def _first_in_turns(base: Sequence[str], spec: Sequence[str]) -> tuple[int | None, int, int] | None:
    """(turn, index in the joined texts, index in the turn) of the first difference; turn None when the texts
    agree but one side has more turns; None when identical."""
    offset = 0
    for turn, (base_text, spec_text) in enumerate(zip(base, spec, strict=False)):
        index = first_difference(base_text, spec_text)
        if index is None:
            offset += len(base_text) + 2  # turns are joined with "\n\n"
            continue
        return turn, offset + index, index
    if len(base) != len(spec) and (any(base) or any(spec)):
        return None, offset, 0
    return None


def _margin_lead(result: SampleResult, turn: int, segment: str) -> bytes | None:
    """What the turn's recorded margins cover before the segment's text (as placeholder bytes of that length), or
    None when the segment's tokens cannot be placed. Margins span the thinking and then the answer only when they
    cover exactly both texts' bytes (no template tags between them); otherwise they are the answer's."""
    thinking = len(result.reasoning[turn].encode("utf-8")) if turn < len(result.reasoning) else 0
    if not thinking or turn >= len(result.token_margins):
        return b""
    covered = sum(size for size, _ in decode_margins(result.token_margins[turn]))
    answer = len(result.outputs[turn].encode("utf-8")) if turn < len(result.outputs) else 0
    both = covered == thinking + answer
    if segment == "answer":
        return b"\0" * thinking if both else b""
    return b"" if both else None


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
    baseline: Run, speculative: Run, *, threshold: float | None = None, paired: pd.DataFrame | None = None,
    resolution: Resolution | None = None,
) -> list[LosslessRow]:
    """Per category: identical outputs, where others differ, and each first divergence classified by its margin.

    Without `threshold`, the threshold follows the engine's log-probability resolution (declared as `resolution`,
    else estimated from the baseline's recorded margins). `paired` is `pair_runs(baseline,
    speculative, min_pairs=0)` when the caller has it already.
    """
    if resolution is None:
        resolution = estimate_resolution(run_margins(baseline)) if threshold is None else Resolution(
            None, 0, "given threshold")
    per_margin = resolution if threshold is None else None  # a threshold given is one rule for every margin
    if threshold is None:
        threshold = resolution.threshold()
    if paired is None:
        paired = pair_runs(baseline, speculative, min_pairs=0)
    base_by_key = {result.key: result for result in baseline.latest}
    spec_by_key = {result.key: result for result in speculative.latest}
    rows = []
    for category, group in each_category(paired):
        known = group[group["identical"].notna()]
        differing = known[~known["identical"].astype(bool)]
        found = [
            divergence(base_by_key[key], spec_by_key[key], threshold=threshold, resolution=per_margin)
            for key in zip(differing["id"], differing["repeat"], strict=True)
        ]
        divergences = [item for item in found if item is not None]
        replaced = sum(base_by_key[key].replaced_chars > 0 or spec_by_key[key].replaced_chars > 0
                       for key in zip(known["id"], known["repeat"], strict=True))
        rows.append(LosslessRow(
            category=category,
            compared=len(known),
            identical=int(known["identical"].astype(bool).sum()),
            first_diff=", ".join(
                f"{sample}@{int(index)}" if segment is None else f"{sample} {segment}@char {int(index)}"
                for sample, index, segment in zip(differing["id"], differing["first_diff"], differing["diff_segment"],
                                                  strict=True)),
            near_tie=sum(item.kind == "near_tie" for item in divergences),
            real=sum(item.kind == "real" for item in divergences),
            unclassified=sum(item.kind == "unclassified" for item in divergences),
            divergences=tuple(divergences),
            near_tie_threshold=threshold,
            resolution=resolution.step,
            resolution_note=resolution.text,
            replaced_text=replaced,
        ))
    return rows
