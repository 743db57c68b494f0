"""Progress lines: no ETA extrapolated from the first few samples, a sane one once a tenth of the run is done."""

from __future__ import annotations

import re

from bench.records import SampleResult
from bench.runner import LineProgress


def _result() -> SampleResult:
    return SampleResult(id="s", category="c", ok=True, turns=1, latency_s=1.0)


def test_the_first_lines_give_no_eta_and_later_ones_do() -> None:
    lines: list[str] = []
    progress = LineProgress(lines.append, interval_s=0.0)
    progress.start(44, "interleaved baseline vs speculative")
    for _ in range(4):
        progress.advance(_result())
    assert all("eta n/a (too early)" in line for line in lines)  # 4 of 44: under a tenth
    progress.advance(_result())
    assert re.search(r"5/44 done, 0 failed, elapsed [\d.]+s, eta [\d.]+s$", lines[-1].strip())
    for _ in range(39):
        progress.advance(_result())
    progress.finish()
    assert lines[-1].strip().endswith("eta 0.0s")
