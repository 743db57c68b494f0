"""Offline fixed-input-length prompts shaped like SPEED-Bench's `throughput_*` splits.

SPEED-Bench's throughput splits hold prompts cut or padded to a fixed input length in three
entropy tiers; they live on the hub, which is not always reachable. This module builds prompts of
the same shape offline, from the text of the shipped `categories/*.jsonl` files only (the
project's own prompts; the only other words are short headings, table scaffolding and the closing
instruction line).

The tiers put speculative decoding in front of genuinely different predictability:

* `low_entropy`: one structure repeated with small changes, so both the prompt and the answer it
  invites are highly predictable. Each prompt is one of three kinds, rotating with the index: one
  code sample from `coding` repeated as numbered variants (its function renamed per variant), a
  Markdown table with one row per prompt of a category (id, sub-category, difficulty, turns,
  words, opening words), cycling through the category, or the same rows as key-value records. It
  ends with "Continue the ... above for ten more ..." so the reply copies the pattern, which is
  what n-gram, EAGLE and MTP drafters predict best.
* `high_entropy`: paragraphs (long ones split at sentence ends) interleaved from every category,
  ten other categories round-robin in a shuffled order with a `multilingual` paragraph every third
  unit, its scripts round-robin too (Latin, Cyrillic, Han, kana, Hangul, Arabic, Devanagari,
  Greek, Hebrew, Thai), so topic, register and language change every few hundred characters. It
  ends with an instruction that invites a free-form answer (a summary, an essay, a response).
* `mixed`: half of each, alternating a low-entropy chunk and a high-entropy chunk of about an
  eighth of the target each (by `estimate_tokens`), ending with an instruction asking for both.

Length: a prompt's text is assembled with about 30% more material than needed (more, and repeated,
if the counter disagrees), then cut at a paragraph break, else a line break, else a word boundary
(a character boundary in unspaced CJK text) so that the counter puts the whole prompt (cut text
plus instruction) within 2% of the target. The cut point is searched with batched candidates
around an interpolated guess, so a counter such as a server's `/tokenize` is called a few times
per prompt (at most 12). Every prompt opens with a heading naming its own id, so no two prompts
share more than a few tokens of prefix and prefix caching cannot shortcut prefill. Everything is
deterministic for a seed: each prompt draws from `random.Random(f"{seed}:{bench}:{tier}:{index}")`,
so a smaller `per_tier` yields a prefix of a larger one.
"""

from __future__ import annotations

import bisect
import random
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from bench._errors import BenchError
from bench.prompts._sets import PromptSet, Sample, categories_dir
from bench.prompts._throughput_text import (
    Unit,
    estimate_tokens,
    high_units,
    load_source,
    low_units,
    mixed_units,
    prose_summary,
)

THROUGHPUT_BENCHES = {
    "throughput_1k": 1024,
    "throughput_2k": 2048,
    "throughput_8k": 8192,
    "throughput_16k": 16384,
    "throughput_32k": 32768,
}
"""Throughput benches and their input length in tokens."""
TIERS = ("low_entropy", "mixed", "high_entropy")
"""The entropy tiers of the throughput text, from repetitive to varied."""
TOLERANCE = 0.02
"""A prompt's token count may differ from the target by at most this fraction."""
MAX_COUNT_CALLS = 12
"""Token-counter calls allowed per prompt before giving up."""

TokenCounter = Callable[[Sequence[str]], list[int]]
"""Batch token counter: texts -> token counts (for example a server's `/tokenize`)."""

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_LOW_KINDS = ("code", "table", "records")
_LOW_INSTRUCTIONS = {
    "code": "Write ten more variants of the code above, following the same pattern.",
    "table": "Continue the table above for ten more rows.",
    "records": "Continue the pattern above for ten more records.",
}
_HIGH_INSTRUCTIONS = (
    "Summarise the material above in five bullet points.",
    "Write a free-form essay that connects the themes of the passages above.",
    "Pick the passage above you find most interesting and respond to it freely.",
)
_MIXED_INSTRUCTION = (
    "Continue the structured entries above for five more entries, then summarise the passages in five bullet points."
)


class _Fitter:
    """Assembles units into a body and cuts it so that the whole prompt has `target` tokens."""

    def __init__(self, units: Iterator[Unit], header: str, instruction: str, target: int,
                 count_tokens: TokenCounter, label: str) -> None:
        self.units = units
        self.suffix = "\n\n" + instruction
        self.target = target
        self.count_tokens = count_tokens
        self.label = label
        self.parts = [header + "\n\n"]
        self.kept: list[Unit] = []
        self.offsets: list[int] = []
        self.cumulative: list[int] = []
        self.length = len(self.parts[0])
        self.floor = self.length
        self.estimate = estimate_tokens([self.parts[0] + self.suffix])[0]
        self.body = ""
        self.calls = 0

    def grow(self, goal: float) -> None:
        """Append units until the estimated size of the body reaches `goal` tokens."""
        while self.estimate < goal:
            unit = next(self.units)
            self.offsets.append(self.length)
            self.cumulative.append(self.estimate)
            self.kept.append(unit)
            self.parts.append(unit.text)
            self.length += len(unit.text)
            self.estimate += estimate_tokens([unit.text])[0]
        self.body = "".join(self.parts)
        self.paragraphs = [match.start() for match in _PARAGRAPH_BREAK.finditer(self.body)]
        self.lines = [match.start() for match in re.finditer("\n", self.body)]

    def prompt(self, cut: int) -> str:
        """The body cut at `cut` characters, followed by the instruction."""
        return self.body[:cut].rstrip() + self.suffix

    def count(self, cuts: Sequence[int]) -> list[int]:
        """Token counts of the prompts cut at `cuts`, in one counter call."""
        self.calls += 1
        if self.calls > MAX_COUNT_CALLS:
            raise BenchError(f"{self.label}: no cut within {TOLERANCE:.0%} of {self.target} tokens "
                             f"after {MAX_COUNT_CALLS} token-count calls")
        counts = self.count_tokens([self.prompt(cut) for cut in cuts])
        if not isinstance(counts, list) or len(counts) != len(cuts) or not all(isinstance(n, int) for n in counts):
            raise BenchError(f"{self.label}: the token counter must return one integer per text")
        return counts

    def snap(self, cut: int) -> tuple[int, int]:
        """The word boundary at or before `cut` (rank 2), or `cut` itself in unspaced text (rank 3)."""
        start = max(self.floor, cut - 48)
        space = max(self.body.rfind(" ", start, cut + 1), self.body.rfind("\n", start, cut + 1))
        return (space, 2) if space > self.floor else (cut, 3)

    def nearby(self, boundaries: list[int], guess: int, low: int, high: int, rank: int) -> list[tuple[int, int]]:
        """The boundaries just before and just after `guess`, inside (low, high) and within 3% of it."""
        index = bisect.bisect_left(boundaries, guess)
        found = []
        for position in boundaries[max(0, index - 1):index + 1]:
            if low < position < high and abs(position - guess) <= 0.03 * guess:
                found.append((position, rank))
        return found

    def guess_from_estimate(self) -> int:
        """The character position where the estimated size reaches the target."""
        index = max(0, bisect.bisect_right(self.cumulative, self.target) - 1)
        if not self.offsets:
            return self.length
        start = self.offsets[index]
        before = self.cumulative[index]
        unit = self.kept[index]
        size = max(1, estimate_tokens([unit.text])[0])
        return min(self.length, start + int(len(unit.text) * max(0.0, self.target - before) / size))

    def bracket(self, observed: dict[int, int]) -> tuple[int, int, int, int]:
        """The longest observed cut below the target and the shortest one above it: (cut, count) twice."""
        low_cut, low_n = max(((c, n) for c, n in observed.items() if n < self.target), default=(0, 0))
        high_cut, high_n = min(
            ((c, n) for c, n in observed.items() if n >= self.target and c > low_cut),
            default=(self.length, observed.get(self.length, self.target)),
        )
        return low_cut, low_n, high_cut, high_n

    def candidates(self, guess: int, observed: dict[int, int]) -> dict[int, int]:
        """Untried cuts around `guess` inside the bracket, each with its boundary rank (0 is a paragraph)."""
        low_cut, _, high_cut, _ = self.bracket(observed)
        spacing = max(1, min(int(0.012 * guess), (high_cut - low_cut) // 6))
        found: dict[int, int] = {}
        for step in (-2, -1, 0, 1, 2):
            cut, rank = self.snap(guess + step * spacing)
            if low_cut < cut < high_cut and cut not in observed:
                found.setdefault(cut, rank)
        nearby = self.nearby(self.paragraphs, guess, low_cut, high_cut, 0)
        for cut, rank in nearby + self.nearby(self.lines, guess, low_cut, high_cut, 1):
            if cut not in observed:
                found[cut] = min(rank, found.get(cut, rank))
        return found

    def fit(self) -> tuple[str, int, int]:
        """Return (prompt, its token count, cut position), the count within the tolerance."""
        tolerance = TOLERANCE * self.target
        self.grow(1.3 * self.target + 32)
        guess = self.guess_from_estimate()
        observed: dict[int, int] = {}
        need_full = True
        while True:
            candidates = self.candidates(guess, observed)
            cuts = sorted(candidates) + ([self.length] if need_full else [])
            if not cuts:
                raise BenchError(
                    f"{self.label}: no cut within {TOLERANCE:.0%} of {self.target} tokens "
                    "(the token counter jumps too far between neighbouring cuts)"
                )
            counts = self.count(cuts)
            need_full = False
            observed.update(zip(cuts, counts, strict=True))
            fitting = [
                (rank, abs(observed[cut] - self.target), cut)
                for cut, rank in candidates.items()
                if abs(observed[cut] - self.target) <= tolerance
            ]
            if fitting:
                _, _, cut = min(fitting)
                return self.prompt(cut), observed[cut], cut
            full = observed[self.length]
            if full < self.target:
                if full <= 0:
                    raise BenchError(f"{self.label}: the token counter returned {full} for the whole material")
                chars_per_token = self.length / full
                self.grow(self.estimate * self.target / full * 1.25 + 32)
                guess = min(self.length, int(self.target * chars_per_token))
                need_full = True
                continue
            low_cut, low_n, high_cut, high_n = self.bracket(observed)
            if high_n <= low_n:
                guess = (low_cut + high_cut) // 2
            else:
                guess = low_cut + int((self.target - low_n) * (high_cut - low_cut) / (high_n - low_n))


def build_throughput_prompts(
    bench: str,
    *,
    per_tier: int = 8,
    count_tokens: TokenCounter = estimate_tokens,
    categories: Path | None = None,
    seed: int = 0,
) -> PromptSet:
    """Fixed-input-length prompts (within 2% of the target token count by `count_tokens`) in three entropy tiers."""
    if bench not in THROUGHPUT_BENCHES:
        raise BenchError(f"unknown throughput bench {bench!r}; available benches: {', '.join(THROUGHPUT_BENCHES)}")
    if per_tier < 1:
        raise BenchError(f"per_tier must be at least 1, not {per_tier}")
    target = THROUGHPUT_BENCHES[bench]
    label = bench.removeprefix("throughput_")
    source = load_source(categories if categories is not None else categories_dir())
    samples: list[Sample] = []
    for tier in TIERS:
        for index in range(1, per_tier + 1):
            sample_id = f"{tier}-{label}-{index:03d}"
            rng = random.Random(f"{seed}:{bench}:{tier}:{index}")
            kind = _LOW_KINDS[(index + seed) % len(_LOW_KINDS)]
            if tier == "low_entropy":
                description, units = low_units(source, kind, rng)
                header = f"Reference {sample_id}: {description}."
                instruction = _LOW_INSTRUCTIONS[description.split()[0]]
            elif tier == "high_entropy":
                units = high_units(source, rng)
                header = f"Reference {sample_id}: passages from several sources and languages."
                instruction = rng.choice(_HIGH_INSTRUCTIONS)
            else:
                description, low = low_units(source, kind, rng)
                units = mixed_units(low, high_units(source, rng), max(128, target // 8))
                header = f"Reference {sample_id}: {description} interleaved with passages."
                instruction = _MIXED_INSTRUCTION
            fitter = _Fitter(units, header, instruction, target, count_tokens, sample_id)
            prompt, _, cut = fitter.fit()
            kept = [unit for unit, offset in zip(fitter.kept, fitter.offsets, strict=True) if offset < cut]
            if tier == "low_entropy":
                sub_category = description
            elif tier == "high_entropy":
                sub_category = prose_summary(kept)
            else:
                sub_category = f"{description} + {prose_summary(kept)}"
            samples.append(Sample(id=sample_id, category=tier, turns=(prompt,), sub_category=sub_category))
    return PromptSet(samples=tuple(samples), source="generated", bench=bench, categories=TIERS)
