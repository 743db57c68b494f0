"""Shards: the I-th of N deterministic slices of a run's schedule, for one run spread over machines.

A run's schedule is its samples in order, each sent `repeat` times (every sample once, then again), with an
arrival offset per (sample, repeat) when the run is open-loop. Shard I of N takes the samples at positions
I, I + N, I + 2N, ... of the full, already selected and seeded prompt set: every shard loads the same prompts
with the same seed and keeps its own positions, so the N slices are disjoint, cover the run, and mix the
categories alike. A sample stays whole in its shard: all its repeats, and in an interleaved comparison both
arms' requests for it (the pair), are sent by the same process. Arrival offsets are the full schedule's,
counted from a start time all shards share, so the merged shards offer the load the unsharded run would.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from bench._errors import BenchError
from bench.prompts._sets import PromptSet, Sample

_T = TypeVar("_T")
_SHARD = re.compile(r"\s*(\d{1,9})\s*/\s*(\d{1,9})\s*")
"""I/N with at most 9 digits each: a longer number is no shard count (and would pass Python's int digit limit)."""


@dataclass(frozen=True, slots=True)
class Shard:
    """The `index`-th (from 0) of `count` slices of a run's schedule."""

    index: int
    count: int

    def __post_init__(self) -> None:
        """Refuse a shard outside 0 <= index < count."""
        if self.count < 1 or not 0 <= self.index < self.count:
            raise BenchError(f"--shard {self.index}/{self.count}: needs 0 <= I < N (I counts from 0)")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """Read `I/N` (I from 0, as Kubernetes' JOB_COMPLETION_INDEX and a Slurm array 0-(N-1) give it)."""
        match = _SHARD.fullmatch(text)
        if match is None:
            shown = text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"
            raise BenchError(f"--shard {shown!r}: expected I/N with at most 9 digits each, such as 0/4 (I counts "
                             "from 0)")
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        """`I/N`."""
        return f"{self.index}/{self.count}"

    def positions(self, total: int) -> range:
        """The positions of a `total`-long schedule this shard owns."""
        return range(self.index, total, self.count)

    def select(self, items: Sequence[_T]) -> list[_T]:
        """This shard's items of a sequence in schedule order (I, I + N, ...)."""
        return [items[position] for position in self.positions(len(items))]

    def prompts(self, prompts: PromptSet) -> PromptSet:
        """The prompt set with only this shard's samples; refused when it would hold none."""
        if len(prompts.samples) < self.count:
            raise BenchError(
                f"--shard {self}: {len(prompts.samples)} samples cannot fill {self.count} shards; use N <= "
                f"{len(prompts.samples)}"
            )
        return replace(prompts, samples=tuple(self.select(prompts.samples)))

    def position(self, local: int) -> int:
        """The position in the full schedule of this shard's `local`-th sample."""
        return local * self.count + self.index

    def arrivals(self, offsets: Sequence[float], samples: int, repeats: int) -> list[float]:
        """This shard's arrival offsets, in its own schedule order, from the full schedule's `offsets`.

        The full schedule sends repeat r of sample k at `offsets[r * samples + k]`; the shard sends its samples
        in the same order, so its job j = (r, k-th own sample) keeps the offset the full run gave it.
        """
        if len(offsets) != samples * repeats:
            raise ValueError(f"{len(offsets)} arrival offsets for {samples} samples x {repeats} repeats")
        own = self.positions(samples)
        return [offsets[repeat * samples + position] for repeat in range(repeats) for position in own]


def shard_schedule(
    samples: Sequence[Sample], repeats: int, shard: Shard, offsets: Sequence[float] | None = None
) -> list[tuple[Sample, int, float | None]]:
    """(sample, repeat, arrival offset or None) of every job of the shard, in the order it sends them."""
    own = shard.select(samples)
    times = shard.arrivals(offsets, len(samples), repeats) if offsets is not None else None
    jobs = [(sample, repeat) for repeat in range(repeats) for sample in own]
    return [(sample, repeat, times[index] if times is not None else None)
            for index, (sample, repeat) in enumerate(jobs)]
