"""Reasoning models compared: thinking share, answer-only decode speedup, tokens per verification step inside
thinking and inside the answer (from the stream's bursts), answers left empty by a budget thinking used up.

Everything here is descriptive: the verdicts stay those of the paired statistics (one family); these rows say
where the time went. Tokens per step are read from streamed chunk arrivals: a server that streams one chunk per
token sends the tokens one verification step accepted together, after that step's gap, so a step is a burst of
chunks whose gaps are far shorter than the gaps between bursts (validated on a server of known truth,
benchmarks/thinking_truth.py).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from bench._constants import OVERALL
from bench._types import JsonObject
from bench.analysis._grouping import each_category_of
from bench.records import ANSWER_CHUNK, THINKING_CHUNK, Run, SampleResult, recorded_reasoning

EMPTY_ANSWER_FLAG = 0.05
"""A row whose share of empty answers (thinking used up the output budget) is above this is flagged."""
BURST_RATIO = 4.0
"""Gaps between verification steps are at least this many times the gaps inside one step's burst: the largest
jump of a sample's sorted gaps by at least this factor separates the two (none: every chunk is its own step)."""
TOGETHER_S = 1e-4
"""Chunks that arrive within 0.1 ms of each other came together (one socket read, or one step's writes); a
verification step itself takes longer than `BURST_RATIO` times this on any server that decodes a model."""
LONGER_THINKING = 1.10
"""A speculative arm whose paired samples think over 10% longer than the baseline's did not run like it (another
budget, template or sampling): named as a mismatch."""


def thinking_text(result: SampleResult) -> str:
    """The sample's thinking, its turns joined as its outputs are."""
    return "\n\n".join(result.reasoning)


def answer_text(result: SampleResult) -> str:
    """The sample's answer text, its turns joined."""
    return "\n\n".join(result.outputs)


def has_thinking(run: Run) -> bool:
    """Whether any successful sample of the run carries thinking text."""
    return any(result.ok and any(result.reasoning) for result in run.latest)


def thinking_tokens(result: SampleResult) -> int | None:
    """Thinking tokens of a sample: as recorded; 0 when it has no thinking text; None when not known."""
    if result.thinking_tokens is not None and 0 <= result.thinking_tokens <= max(result.completion_tokens, 0):
        return result.thinking_tokens
    if result.thinking_tokens is None and not any(result.reasoning):
        return 0
    return None


def budget_exhausted(result: SampleResult, osl: int | None) -> bool:
    """An empty answer because thinking reached max_tokens: thinking text, no answer text, stopped by length."""
    if not result.ok or not any(result.reasoning) or answer_text(result).strip():
        return False
    tokens = thinking_tokens(result)
    return result.finish_reason == "length" or (osl is not None and tokens is not None and tokens >= osl)


def step_starts(gaps: Sequence[float]) -> list[bool]:
    """Per chunk after the first: whether it starts a new verification step (its gap is an inter-step gap).

    Gaps under `TOGETHER_S` are one step's tokens arriving together. The gaps split at the largest jump of their
    sorted values by at least `BURST_RATIO`, when the gaps under the cut are mostly such arrivals; otherwise every
    chunk is its own step (a server without speculation, or one that sends a step's tokens as one chunk)."""
    if not gaps:
        return []
    ordered = sorted(max(gap, TOGETHER_S) for gap in gaps)
    best, cut, below = BURST_RATIO, None, 0
    for index, (low, high) in enumerate(itertools.pairwise(ordered)):
        if high / low >= best:
            best, cut, below = high / low, math.sqrt(low * high), index + 1
    if cut is None or ordered[(below - 1) // 2] > 2 * TOGETHER_S:
        return [True] * len(gaps)
    return [gap >= cut for gap in gaps]


def segment_steps(result: SampleResult) -> dict[str, tuple[int, int]] | None:
    """(tokens, verification steps) per segment (`t`, `a`) of a streamed single-turn sample, from its bursts;
    None when the sample's chunks and gaps do not line up (several turns, not streamed, no segments)."""
    kinds = result.chunk_segments
    if not kinds or result.turns != 1 or len(result.itl_s) != len(kinds) - 1:
        return None
    counts = result.chunk_tokens if len(result.chunk_tokens) == len(kinds) else (1,) * len(kinds)
    starts = [True, *step_starts(result.itl_s)]
    found: dict[str, tuple[int, int]] = {}
    for kind in (THINKING_CHUNK, ANSWER_CHUNK):
        indexes = [index for index, letter in enumerate(kinds) if letter == kind]
        if not indexes:
            continue
        tokens = sum(counts[index] for index in indexes)
        steps = sum(starts[index] for index in indexes) or 1
        found[kind] = (tokens, steps)
    return found


def tokens_per_step(results: Iterable[SampleResult]) -> dict[str, float | None]:
    """Pooled tokens per verification step inside thinking (`t`) and the answer (`a`) over streamed samples."""
    totals = {THINKING_CHUNK: [0, 0], ANSWER_CHUNK: [0, 0]}
    for result in results:
        found = segment_steps(result) if result.ok else None
        for kind, (tokens, steps) in (found or {}).items():
            totals[kind][0] += tokens
            totals[kind][1] += steps
    return {kind: tokens / steps if steps else None for kind, (tokens, steps) in totals.items()}


@dataclass(frozen=True, slots=True)
class Budget:
    """One arm's answers left empty in a row because thinking used up the output budget."""

    empty: int
    samples: int
    longest_finished: int | None
    """The most output tokens a turn of the row's samples used when its thinking finished (None: none finished;
    a sample of several turns counts its mean turn)."""
    osl: int | None = None
    """The arm's max_tokens."""

    @property
    def share(self) -> float:
        """Empty answers over the row's samples."""
        return self.empty / self.samples if self.samples else 0.0


@dataclass(frozen=True, slots=True)
class ThinkingRow:
    """One category's (or overall) thinking and answer figures, baseline and speculative."""

    category: str
    pairs: int
    share: tuple[float | None, float | None]
    """Thinking tokens over output tokens, summed over the row's samples (baseline, speculative)."""
    decode: float | None
    """Geometric mean of the paired whole-output decode speedups where the answer speedup is known too."""
    answer_decode: float | None
    """Geometric mean of the paired answer-only decode speedups (streamed: the answer segment's rates)."""
    answer_pairs: int
    steps_thinking: tuple[float | None, float | None]
    """Tokens per verification step inside thinking, from the stream's bursts (baseline, speculative)."""
    steps_answer: tuple[float | None, float | None]
    budget: tuple[Budget, Budget]
    osl: int | None

    @property
    def flagged(self) -> bool:
        """Whether either arm left over 5% of this row's answers empty."""
        return any(arm.share > EMPTY_ANSWER_FLAG for arm in self.budget)

    @property
    def flag(self) -> str | None:
        """`answers empty: baseline 7/10, speculative 6/10 (thinking used up osl 64); ...`, when flagged."""
        if not self.flagged:
            return None
        counts = ", ".join(f"{name} {arm.empty}/{arm.samples}" for name, arm in zip(
            ("baseline", "speculative"), self.budget, strict=True))
        osls = sorted({arm.osl for arm in self.budget if arm.empty and arm.osl})
        osl = f"osl {'/'.join(map(str, osls))}" if osls else "the output budget"
        return f"answers empty: {counts} (thinking used up {osl}); {fitting_osl(self.budget)}"

    def as_cells(self) -> JsonObject:
        """The row as JSON cells."""
        return {
            "category": self.category, "pairs": self.pairs,
            "thinking_share_baseline": self.share[0], "thinking_share_speculative": self.share[1],
            "decode_speedup": self.decode, "answer_decode": self.answer_decode, "answer_pairs": self.answer_pairs,
            "tokens_per_step_thinking_baseline": self.steps_thinking[0],
            "tokens_per_step_thinking_speculative": self.steps_thinking[1],
            "tokens_per_step_answer_baseline": self.steps_answer[0],
            "tokens_per_step_answer_speculative": self.steps_answer[1],
            "empty_answers_baseline": self.budget[0].empty, "empty_answers_speculative": self.budget[1].empty,
            "samples_baseline": self.budget[0].samples, "samples_speculative": self.budget[1].samples,
            "flag": self.flag,
        }


def fitting_osl(budget: Sequence[Budget]) -> str:
    """What output length would fit: a power of two above the longest output of a turn that finished thinking
    (the observed thinking lengths), or, when none finished beyond the budget that ran out, that none did."""
    longest = max((arm.longest_finished for arm in budget if arm.longest_finished is not None), default=None)
    spent = max((arm.osl for arm in budget if arm.empty and arm.osl), default=0)
    if longest is None or longest <= spent:
        return (f"no sample finished thinking within osl {spent}: raise --osl well past it (SPEED-Bench uses 4096)"
                if spent else "no sample finished thinking")
    fit = 1 << max(0, math.ceil(math.log2(longest)))
    return f"samples that finished used up to {longest} tokens: --osl {fit} fits them"


def _budget(results: Sequence[SampleResult], osl: int | None) -> Budget:
    exhausted = [budget_exhausted(result, osl) for result in results]
    finished = [math.ceil(result.completion_tokens / max(1, result.turns)) for result, empty in zip(
        results, exhausted, strict=True) if not empty and any(result.reasoning) and answer_text(result).strip()]
    return Budget(sum(exhausted), len(results), max(finished) if finished else None, osl)


def _share(results: Iterable[SampleResult]) -> float | None:
    thinking = output = 0
    for result in results:
        tokens = thinking_tokens(result)
        if tokens is None or result.completion_tokens <= 0:
            continue
        thinking += tokens
        output += result.completion_tokens
    return thinking / output if output else None


def _geomean(ratios: Sequence[float]) -> float | None:
    values = [ratio for ratio in ratios if ratio > 0 and math.isfinite(ratio)]
    return float(np.exp(np.mean(np.log(values)))) if values else None


def _whole_decode(base: SampleResult, spec: SampleResult) -> float | None:
    """The pair's whole-output decode speedup, on the rates the paired statistics read first."""
    for name in ("server_decode_t_s", "predicted_per_second", "client_decode_t_s"):
        low, high = getattr(base, name), getattr(spec, name)
        if low and high and low > 0 and high > 0:
            return float(high / low)
    return None


def thinking_rows(baseline: Run, speculative: Run) -> tuple[ThinkingRow, ...]:
    """Per category and overall: thinking share, answer-only beside whole decode speedup, tokens per step in each
    segment, empty answers; () when neither run carries thinking."""
    if not (has_thinking(baseline) or has_thinking(speculative)):
        return ()
    base_ok = {result.key: result for result in baseline.latest if result.ok}
    spec_ok = [result for result in speculative.latest if result.ok]
    osls = (baseline.settings.osl, speculative.settings.osl)
    pairs = [(base_ok[result.key], result) for result in spec_ok if result.key in base_ok]
    arms = {"baseline": list(base_ok.values()), "speculative": spec_ok}
    by_arm = {name: dict(each_category_of(results, lambda result: result.category)) for name, results in arms.items()}
    rows = []
    for category, group in each_category_of(pairs, lambda pair: pair[1].category):
        answer = [(spec.answer_decode_t_s / base.answer_decode_t_s, _whole_decode(base, spec)) for base, spec in group
                  if base.answer_decode_t_s and spec.answer_decode_t_s and base.answer_decode_t_s > 0]
        base_rows = by_arm["baseline"].get(category, [])
        spec_rows = by_arm["speculative"].get(category, [])
        steps = (tokens_per_step(base_rows), tokens_per_step(spec_rows))
        rows.append(ThinkingRow(
            category=category, pairs=len(group),
            share=(_share(base for base, _ in group), _share(spec for _, spec in group)),
            decode=_geomean([whole for _, whole in answer if whole is not None]),
            answer_decode=_geomean([ratio for ratio, _ in answer]), answer_pairs=len(answer),
            steps_thinking=(steps[0][THINKING_CHUNK], steps[1][THINKING_CHUNK]),
            steps_answer=(steps[0][ANSWER_CHUNK], steps[1][ANSWER_CHUNK]),
            budget=(_budget(base_rows, osls[0]), _budget(spec_rows, osls[1])), osl=osls[1] or osls[0],
        ))
    return tuple(rows)


def budget_line(rows: Sequence[ThinkingRow]) -> str | None:
    """What the decision line says of empty answers: the flagged rows' counts and the osl that fits, or None."""
    flagged = [row for row in rows if row.flagged and row.category != OVERALL] or [
        row for row in rows if row.flagged]
    if not flagged:
        return None
    overall = next((row for row in rows if row.category == OVERALL), flagged[0])
    empty = sum(arm.empty for arm in overall.budget)
    samples = sum(arm.samples for arm in overall.budget)
    names = ", ".join(row.category for row in flagged if row.category != OVERALL)
    where = f" (over 5% in {names})" if names else ""
    osls = sorted({arm.osl for arm in overall.budget if arm.empty and arm.osl})
    return (f"{empty} of {samples} answers empty: thinking used up osl {'/'.join(map(str, osls)) or 'n/a'}{where}; "
            f"{fitting_osl(overall.budget)}")


def reasoning_mismatch(first: Run, second: Run) -> tuple[str, str] | None:
    """The two runs' thinking switches (`config.reasoning`, `auto` when not recorded) when they differ."""
    a, b = recorded_reasoning(first.config), recorded_reasoning(second.config)
    return (a, b) if a != b else None


def longer_thinking(first: Run, second: Run) -> tuple[float, float] | None:
    """(first's, second's) mean thinking tokens over paired samples when the second thinks over 10% longer."""
    first_by_key = {result.key: result for result in first.latest if result.ok}
    pairs = [(thinking_tokens(first_by_key[result.key]), thinking_tokens(result))
             for result in second.latest if result.ok and result.key in first_by_key]
    known = [(a, b) for a, b in pairs if a is not None and b is not None]
    if not known:
        return None
    mean_a = sum(a for a, _ in known) / len(known)
    mean_b = sum(b for _, b in known) / len(known)
    if mean_b > 0 and mean_b > LONGER_THINKING * mean_a:
        return mean_a, mean_b
    return None
