"""A history point's intervals checked against its estimates: what a point file draws is what its precision implies.

A point stores each row's estimate with its log standard error and degrees of freedom, and the 95% interval they
give (`estimate * exp(+-t * log_se)`, a share's upper end cut at 1). The interval is drawn on the page and printed
by `history show`; an edited one (narrower, or moved away from its estimate) would be shown as given. Each is
recomputed from the estimate and its precision on reading and the point refused when they differ beyond the
7 significant digits a point file keeps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

from bench._errors import BenchError
from bench.analysis._intervals import t_quantile
from bench.records import HistoryPoint

_SHARES = frozenset({"accept_rate", "drafted_share"})
"""Metrics that never exceed 1: their stored upper end is cut there."""
_TOLERANCE = 1e-4
"""Relative difference allowed between a stored and a recomputed end (the file keeps 7 significant digits of the
estimate, the log standard error and the degrees of freedom each)."""


@lru_cache(maxsize=4096)
def _t975(df: float) -> float:
    return t_quantile(0.975, df)


def expected_interval(metric: str, estimate: float, log_se: float, df: float) -> tuple[float, float] | None:
    """The 95% interval a row's estimate and precision imply; None when they imply none (no precision)."""
    if not (math.isfinite(log_se) and log_se >= 0 and math.isfinite(df) and df > 0 and estimate > 0):
        return None
    half = _t975(float(df)) * log_se
    high = estimate * math.exp(half)
    return estimate * math.exp(-half), min(1.0, high) if metric in _SHARES else high


def _close(stored: float, expected: float) -> bool:
    return math.isclose(stored, expected, rel_tol=_TOLERANCE, abs_tol=1e-12)


def checked_intervals(points: Sequence[HistoryPoint]) -> Sequence[HistoryPoint]:
    """The points as given, once every row's interval is the one its estimate and precision imply; a one-line
    BenchError naming the point file and the row otherwise."""
    for point in points:
        table = point.table
        for index in range(len(table)):
            estimate, low, high = float(table.estimate[index]), float(table.low[index]), float(table.high[index])
            expected = expected_interval(table.metric[index], estimate, float(table.log_se[index]),
                                         float(table.df[index]))
            stored = (low, high) if math.isfinite(low) and math.isfinite(high) else None
            if expected is None and stored is None:
                continue
            if expected is None or stored is None or not all(map(_close, stored, expected)):
                implied = "none" if expected is None else f"[{expected[0]:.7g}, {expected[1]:.7g}]"
                given = "none" if stored is None else f"[{low:.7g}, {high:.7g}]"
                raise BenchError(f"{point.path or point.commit}: row {table.category[index]!r} {table.metric[index]}: "
                                 f"interval {given} is not the {implied} its estimate {estimate:.7g} and precision "
                                 "imply")
    return points
