"""How much of the speculative output came from accepted drafts, and the acceptance length, per category and overall."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bench._constants import OVERALL
from bench.analysis._grouping import each_category_of
from bench.records import Run, SampleResult

NOTHING_DRAFTED = "nothing drafted"
"""The verdict of a row whose speculative samples proposed no draft token: its speedups are noise, not effect."""


@dataclass(frozen=True, slots=True)
class Drafted:
    """Draft tokens of one row of the speculative run: proposed, accepted, and the output they are part of.

    `reported` is False when the server told nothing about drafting (no per-request draft counts, no
    counter deltas): zero drafts then means unknown, not none.
    """

    proposed: int
    accepted: int
    output_tokens: int
    reported: bool

    @property
    def share(self) -> float | None:
        """Output tokens that came from accepted drafts / output tokens (None when unknown or no output)."""
        if not self.reported or self.output_tokens <= 0:
            return None
        return self.accepted / self.output_tokens

    @property
    def nothing_drafted(self) -> bool:
        """Whether the server reported drafting and proposed no draft token for this row."""
        return self.reported and self.proposed == 0


def _counted(result: SampleResult, key: str) -> int:
    """A counter delta the runner recorded for one sample (0 when absent)."""
    value = result.spec.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def reports_drafting(results: Iterable[SampleResult]) -> bool:
    """Whether a run's server reported drafting at all: a drafted sample, or counter deltas on any sample."""
    return any(result.draft_n > 0 or "drafts" in result.spec or "draft_tokens" in result.spec
               for result in results)


def drafted_by_category(run: Run, keys: Iterable[tuple[str, int]] | None = None) -> dict[str, Drafted]:
    """Per category and overall: draft tokens proposed and accepted and output tokens of the run's successful
    samples (only those whose (id, repeat) is in `keys` when given, e.g. the paired ones)."""
    wanted = None if keys is None else set(keys)
    results = [result for result in run.latest if result.ok and (wanted is None or result.key in wanted)]
    reported = reports_drafting(results)
    # per-request counts when the server gives them; else the counter deltas (server-wide under concurrency)
    per_request = any(result.draft_n > 0 for result in results)
    return {
        category: Drafted(
            proposed=sum(result.draft_n if per_request else _counted(result, "draft_tokens") for result in group),
            accepted=sum(result.draft_n_accepted if per_request else _counted(result, "accepted")
                         for result in group),
            output_tokens=sum(result.completion_tokens for result in group),
            reported=reported,
        )
        for category, group in each_category_of(results, lambda result: result.category)
    }


def acceptance_length_by_category(run: Run) -> dict[str, float]:
    """Acceptance length per category: tokens per verify step, from per-sample counter deltas or engine data."""
    sums: dict[str, list[float]] = {}
    for result in run.results:
        counted = result.verify_steps() if result.ok else None
        if counted is None:
            continue
        tokens, steps = counted
        for category in (result.category, OVERALL):
            pair = sums.setdefault(category, [0.0, 0.0])
            pair[0] += tokens
            pair[1] += steps
    lengths = {category: total / steps for category, (total, steps) in sums.items() if steps}
    run_wide = run.info.acceptance
    if OVERALL not in lengths and run_wide is not None and run_wide.acceptance_length:
        lengths[OVERALL] = run_wide.acceptance_length
    return lengths
