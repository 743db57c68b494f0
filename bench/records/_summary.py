"""The reference's per-category summary of a run (pure Python: running a benchmark never loads numpy or pandas)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from bench._constants import OVERALL
from bench._types import JsonMapping, JsonObject, JsonValue
from bench.records._results import SampleResult


def _mean(values: Sequence[float]) -> float | None:
    return statistics.mean(values) if values else None


SUMMARY_KEYS = ("category", "requests", "turns", "failed", "avg_prompt_t_s", "avg_pred_t_s", "avg_latency",
                "draft_n", "accepted", "accept_rate")
"""The keys of a summary row, in the reference's order."""


@dataclass(frozen=True, slots=True, eq=False)
class SummaryRow(Mapping[str, JsonValue]):
    """One row of the reference's per-category summary of a run.

    As a read-only mapping it is the row's JSON object (what the reference's tables and compare read);
    keys of other tools are kept in `extra`, and a row read from a file writes back the keys it had. A row
    `summarize` computes holds a count in each count; one read from a file holds its figures as written, so
    any of them may be a float or null.
    """

    category: str
    requests: float | None = 0
    turns: float | None = 0
    failed: float | None = 0
    avg_prompt_t_s: float | None = None
    avg_pred_t_s: float | None = None
    avg_latency: float | None = None
    draft_n: float | None = 0
    accepted: float | None = 0
    accept_rate: float | None = None
    extra: JsonMapping = field(default_factory=dict)
    """Keys of other tools' rows, written back as read."""
    written: frozenset[str] = frozenset(SUMMARY_KEYS)

    @classmethod
    def from_mapping(cls, row: JsonMapping) -> SummaryRow:
        """Read a run file's summary row (its numbers checked by `check_summary_row` when loaded)."""
        if isinstance(row, SummaryRow):
            return row
        present = {key: _figure(row[key]) for key in SUMMARY_KEYS if key in row and key != "category"}
        return cls(category=str(row["category"]), **present,
                   extra={key: value for key, value in row.items() if key not in SUMMARY_KEYS},
                   written=frozenset(SUMMARY_KEYS).intersection(row))

    def to_dict(self) -> JsonObject:
        """The row as the run file writes it."""
        return {**self.extra, **{key: getattr(self, key) for key in SUMMARY_KEYS if key in self.written}}

    def __getitem__(self, key: str) -> JsonValue:
        """The value of one key of the row's JSON object."""
        if key in self.written:
            return getattr(self, key)
        return self.extra[key]

    def __iter__(self) -> Iterator[str]:
        """The keys of the row's JSON object."""
        return iter(self.to_dict())

    def __len__(self) -> int:
        """How many keys the row's JSON object has."""
        return len(self.written) + len(self.extra)


def _figure(value: JsonValue) -> float | None:
    """A summary figure as read: a number, or None for null (`check_summary_row` refuses any other value)."""
    return value if isinstance(value, int | float) else None


def summarize_group(category: str, results: Sequence[SampleResult]) -> SummaryRow:
    """One summary row with the reference's aggregation (plain means over successful samples, pooled rate)."""
    ok = [result for result in results if result.ok]
    draft_n = sum(result.draft_n for result in ok)
    accepted = sum(result.draft_n_accepted for result in ok)
    return SummaryRow(
        category=category,
        requests=len(ok),
        turns=sum(result.turns for result in ok),
        failed=len(results) - len(ok),
        avg_prompt_t_s=_mean([r.prompt_per_second for r in ok if r.prompt_per_second is not None]),
        avg_pred_t_s=_mean([r.predicted_per_second for r in ok if r.predicted_per_second is not None]),
        avg_latency=_mean([result.latency_s for result in ok]),
        draft_n=draft_n,
        accepted=accepted,
        accept_rate=(accepted / draft_n) if draft_n > 0 else None,
    )


def summarize(results: Iterable[SampleResult], categories: Sequence[str] | None = None) -> list[SummaryRow]:
    """Per-category summary rows in first-seen order, then `overall`, as `speed_bench.py` computes them."""
    results = list(results)
    order = list(categories) if categories is not None else list(dict.fromkeys(r.category for r in results))
    groups: dict[str, list[SampleResult]] = {category: [] for category in order}
    for result in results:
        groups.setdefault(result.category, []).append(result)
    rows = [summarize_group(category, group) for category, group in groups.items()]
    rows.append(summarize_group(OVERALL, results))
    return rows
