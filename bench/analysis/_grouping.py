"""Groupings the analysis uses: each category in first-seen order, then `overall`; and a section's pair of arms."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

import pandas as pd

from bench._constants import OVERALL

Item = TypeVar("Item")


def each_category(frame: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """(category, rows) for each category of a frame's `category` column, then (`overall`, every row)."""
    for category in dict.fromkeys(frame["category"]):
        yield category, frame[frame["category"] == category]
    yield OVERALL, frame


def each_category_of(items: Iterable[Item], category_of: Callable[[Item], str]) -> Iterator[tuple[str, list[Item]]]:
    """(category, items) for each category in first-seen order, then (`overall`, every item)."""
    everything = list(items)
    groups: dict[str, list[Item]] = {}
    for item in everything:
        groups.setdefault(category_of(item), []).append(item)
    yield from groups.items()
    yield OVERALL, everything


Section = TypeVar("Section")


@dataclass(frozen=True, slots=True)
class ArmPair(Generic[Section]):
    """One section of a comparison computed for each arm: the baseline's and the speculative run's."""

    baseline: Section
    speculative: Section

    def items(self) -> tuple[tuple[str, Section], tuple[str, Section]]:
        """(arm name, section) for the baseline, then the speculative arm: the order every output shows them in."""
        return ("baseline", self.baseline), ("speculative", self.speculative)
