"""Prompt-cache hygiene: which first turns were served from the server's prompt cache, and do the arms differ?

A warm cache shortens prompt processing and so latency: if one arm found its prompts cached and the
other did not, a latency speedup says more about the cache than about speculative decoding.
llama.cpp reports `timings.cache_n`, the prompt tokens reused from the cache (`SampleResult.cache_n`).
A cold server still reports a token or two for every request (the BOS token, a shared chat-template
prefix: cache_n = 1 on every cold single-turn sample of `make bench`), so a first turn counts as
*served from the cache* when cache_n > 0 covers at least `CACHED_SHARE` of its prompt tokens.
A multi-turn sample's cache_n sums its turns (later turns reuse the history by design), so its
first turn cannot be told apart; such samples count only in the comparison between the arms.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench._constants import OVERALL
from bench.records import Run, SampleResult

CACHED_SHARE = 0.5
"""A first turn counts as served from the cache when cache_n covers at least this share of its prompt tokens."""

DIFFER_SHARE = 0.25
"""A sample's cache use differs between the arms when their cached shares of the prompt differ by this much."""


@dataclass(frozen=True)
class ArmCache:
    """One arm in one category: first turns whose cache use is known, and those served from the cache."""

    known: int
    cached: int
    cached_ids: tuple[str, ...]
    cached_tokens: int
    prompt_tokens: int

    @property
    def cell(self) -> str:
        """`2/5` (first turns served from the cache / first turns known), or `n/a`."""
        return f"{self.cached}/{self.known}" if self.known else "n/a"


@dataclass(frozen=True)
class CategoryCache:
    """Cache use of both arms in one category (or overall), and the samples whose cache use differs."""

    category: str
    baseline: ArmCache
    speculative: ArmCache
    differing: tuple[str, ...]

    @property
    def differs(self) -> bool:
        """The arms found different shares of some prompt in the cache."""
        return bool(self.differing) or self.baseline.cached != self.speculative.cached


@dataclass(frozen=True)
class CacheUse:
    """Per category then overall: first turns served from the prompt cache in each arm, and whether they differ."""

    categories: tuple[CategoryCache, ...]
    known: bool

    @property
    def overall(self) -> CategoryCache:
        """The row that pools every category."""
        return self.categories[-1]

    @property
    def differs(self) -> bool:
        """The arms' cache use differs somewhere."""
        return self.known and self.overall.differs

    @property
    def message(self) -> str:
        """One line for the stats table and the report."""
        if not self.known:
            return "prompt cache: no cache_n recorded, cache use unknown"
        overall = self.overall
        counts = f"baseline {overall.baseline.cell}, speculative {overall.speculative.cell}"
        if not self.differs:
            return f"prompt cache: first turns served from the cache: {counts}; the arms match"
        categories = [row.category for row in self.categories[:-1] if row.differs]
        shown = ", ".join(overall.differing[:3]) + (", ..." if len(overall.differing) > 3 else "")
        samples = f" (samples {shown})" if overall.differing else ""
        return (
            f"prompt cache use differs between the arms{samples}: first turns served from the cache: {counts}; "
            f"latency speedups in {', '.join(categories)} reflect the cache, not only speculative decoding"
        )


def served_from_cache(result: SampleResult) -> bool | None:
    """Was this sample's first turn served from the prompt cache? None when unknown (no cache_n, or several turns)."""
    if not result.ok or result.cache_n is None or result.turns != 1:
        return None
    if result.cache_n <= 0:
        return False
    return result.prompt_tokens <= 0 or result.cache_n >= CACHED_SHARE * result.prompt_tokens


def _share(result: SampleResult) -> float | None:
    if not result.ok or result.cache_n is None:
        return None
    if result.prompt_tokens <= 0:
        return 1.0 if result.cache_n > 0 else 0.0
    return min(1.0, result.cache_n / result.prompt_tokens)


def _arm(results: Iterable[SampleResult]) -> ArmCache:
    known, cached_ids, cached_tokens, prompt_tokens = 0, [], 0, 0
    for result in results:
        flag = served_from_cache(result)
        if flag is None:
            continue
        known += 1
        cached_tokens += result.cache_n or 0
        prompt_tokens += result.prompt_tokens
        if flag:
            cached_ids.append(result.id)
    return ArmCache(known, len(cached_ids), tuple(cached_ids), cached_tokens, prompt_tokens)


def cache_use(baseline: Run, speculative: Run) -> CacheUse:
    """Per category and overall: first turns served from the prompt cache in each arm, and samples that differ."""
    base = baseline.latest
    spec = speculative.latest
    base_by_key = {result.key: result for result in base}
    differing: list[tuple[str, str]] = []
    for result in spec:
        other = base_by_key.get(result.key)
        if other is None:
            continue
        share_spec, share_base = _share(result), _share(other)
        if share_spec is not None and share_base is not None and abs(share_spec - share_base) >= DIFFER_SHARE:
            differing.append((result.category, result.id))
    order = list(dict.fromkeys([result.category for result in spec] + [result.category for result in base]))
    rows = []
    for category in [*order, OVERALL]:
        def pick(results: Sequence[SampleResult], category: str = category) -> Sequence[SampleResult]:
            return results if category == OVERALL else [r for r in results if r.category == category]

        ids = tuple(dict.fromkeys(sample for cat, sample in differing if category in (OVERALL, cat)))
        rows.append(CategoryCache(category, _arm(pick(base)), _arm(pick(spec)), ids))
    known = any(result.cache_n is not None for result in (*base, *spec) if result.ok)
    return CacheUse(categories=tuple(rows), known=known)
