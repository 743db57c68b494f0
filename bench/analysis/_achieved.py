"""The load each concurrency level achieved: every arm's in-flight mean beside the level asked for, and its flags.

A level is flagged when the arms of one interleaved comparison ran at in-flight means more than 10% apart (the
faster arm drains sooner, so its requests ran at a lower batch), or when the prompts are fewer than the level (the
asked concurrency was never reached).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.records import Load

ARMS_APART = 0.10
"""Arms of one comparison whose achieved in-flight means differ by more than this (relative) are flagged."""


@dataclass(frozen=True, slots=True)
class LevelLoad:
    """One concurrency level: the load asked for, each arm's achieved in-flight mean, and the flags raised."""

    asked: int
    arms: tuple[tuple[str, float | None], ...]
    flags: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """`in flight: baseline 7.9, draft_max-8 7.4` (the mean over the level's comparisons of each arm name)."""
        cells = ", ".join(f"{name} {'n/a' if value is None else f'{value:.1f}'}" for name, value in self.arms)
        return f"in flight: {cells}"

    def to_json(self) -> dict[str, object]:
        """The level's load as tune.json and sweep.json hold it."""
        return {"asked": self.asked, "in_flight_mean": dict(self.arms), "flags": list(self.flags)}


def level_load(asked: int, comparisons: Sequence[Mapping[str, Load]]) -> LevelLoad:
    """A level's achieved load from its interleaved comparisons (each: arm name -> its run's load)."""
    sums: dict[str, list[float]] = {}
    flags: list[str] = []
    fewest = None
    for arms in comparisons:
        for name, load in arms.items():
            values = sums.setdefault(name, [])
            if load.achieved is not None:
                values.append(load.achieved)
            fewest = load.requests if fewest is None else min(fewest, load.requests)
        achieved = {name: load.achieved for name, load in arms.items() if load.achieved is not None}
        if len(achieved) >= 2:
            low, high = min(achieved, key=achieved.__getitem__), max(achieved, key=achieved.__getitem__)
            if achieved[high] > achieved[low] * (1.0 + ARMS_APART):
                flags.append(f"concurrency {asked}: arms ran at different loads, {high} {achieved[high]:.1f} "
                             f"against {low} {achieved[low]:.1f} in flight (more than {ARMS_APART:.0%} apart)")
    if fewest is not None and fewest < asked:
        flags.append(f"concurrency {asked}: {fewest} requests cannot fill {asked} slots; the level asked for was "
                     "never reached")
    arms_mean = tuple((name, sum(values) / len(values) if values else None) for name, values in sums.items())
    return LevelLoad(asked, arms_mean, tuple(flags))

