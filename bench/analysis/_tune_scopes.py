"""Whether each scope's pick is proven: its predicted best and that best's grid neighbours were measured in it.

A scope (overall, a category, a concurrency level) is planned for and proven on its own configurations. Its pick is
proven when the configurations the scope's own model calls best, and the best's neighbours on the grid, were
measured for that scope (or, where the model does not hold, the whole grid was). Otherwise the pick is only the best
measured: it is printed as "best measured; predicted best K=... not measured" and kept out of the schedule and the
flags.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from bench.analysis._predict import Prediction

NOT_MEASURED = "best measured; predicted best K={best} not measured"
"""How an unproven pick is worded in tune.md, tune.txt and tune.json alike."""
GRID_NOT_MEASURED = "best measured; the model does not predict here and K={missing} not measured"
"""An unproven pick where the model does not hold and the grid was not measured in full."""


@dataclass(frozen=True, slots=True)
class ScopeProof:
    """Whether one scope's pick is proven, and what was missing when it is not."""

    proven: bool
    predicted_best: int | None = None
    missing: tuple[int, ...] = ()

    @property
    def wording(self) -> str | None:
        """The reader's words for an unproven pick (None when proven)."""
        if self.proven:
            return None
        if self.predicted_best is not None:
            return NOT_MEASURED.format(best=self.predicted_best)
        return GRID_NOT_MEASURED.format(missing=",".join(map(str, self.missing)))


def predicted_best(grid: Sequence[int], prediction: Prediction | None) -> int | None:
    """The grid's draft length the scope's model predicts best (ties to the smaller), None where it cannot say."""
    if prediction is None or not prediction.holds:
        return None
    scored = {k: prediction.speedup(k) for k in sorted(set(grid))}
    known = {k: value for k, value in scored.items() if value is not None}
    if not known:
        return None
    return max(known, key=lambda k: (known[k], -k))


def wanted_for_proof(grid: Sequence[int], prediction: Prediction | None) -> tuple[int, ...]:
    """What a scope must have measured for its pick to be proven: the predicted best and its grid neighbours, or the
    whole grid where the model does not predict (including a step cost that does not follow its line)."""
    ordered = sorted(set(grid))
    best = predicted_best(ordered, prediction)
    if best is None:
        return tuple(ordered)
    index = ordered.index(best)
    return tuple(ordered[i] for i in (index - 1, index, index + 1) if 0 <= i < len(ordered))


def prove(grid: Sequence[int], measured: Iterable[int], prediction: Prediction | None) -> ScopeProof:
    """Whether a scope that measured `measured` proves its pick under its own model `prediction`."""
    done = set(measured)
    wanted = wanted_for_proof(grid, prediction)
    missing = tuple(k for k in wanted if k not in done)
    if not missing:
        return ScopeProof(True, predicted_best(grid, prediction))
    return ScopeProof(False, predicted_best(grid, prediction), missing)


def cover_scopes(
    grid: Sequence[int], measured: Iterable[int], predictions: Mapping[str, Prediction | None]
) -> dict[str, tuple[int, ...]]:
    """Per scope of one level, the configurations still to measure for its pick to be proven (scopes done left
    out); the plan measures their union, beyond the budget if need be, and says so."""
    done = set(measured)
    wanted = {}
    for scope, prediction in predictions.items():
        missing = tuple(k for k in wanted_for_proof(grid, prediction) if k not in done)
        if missing:
            wanted[scope] = missing
    return wanted
