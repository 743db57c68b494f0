"""Coverage of the attainment interval and false alarms of the drafter-state check, on synthetic truth.

Run: .venv/bin/python benchmarks/goodput_coverage.py   (about a minute; docs/traffic.md quotes its output)
"""

from __future__ import annotations

import math
import statistics

import numpy as np

from bench.analysis import attainment_interval, drafter_state, wilson_interval
from bench.records import Run, SampleResult, summarize

REPLICATIONS = 1000


def _correlated(rng: np.random.Generator, n: int, phi: float, share: float) -> list[bool]:
    """Outcomes below a threshold of an AR(1) Gaussian series with lag-1 correlation `phi`."""
    latent = np.empty(n)
    latent[0] = rng.normal()
    noise = rng.normal(size=n) * math.sqrt(1 - phi * phi)
    for index in range(1, n):
        latent[index] = phi * latent[index - 1] + noise[index]
    return list(latent < statistics.NormalDist().inv_cdf(share))


def attainment_coverage() -> None:
    """Print the coverage of the 95% attainment interval (and of Wilson's alone) per truth and size."""
    rng = np.random.default_rng(1)
    print("truth                        n  printed  covered-when-printed  wilson-alone")
    for phi in (0.0, 0.5, 0.8):
        for share in (0.5, 0.8, 0.9, 0.97):
            for n in (20, 50, 300):
                ours = wilson = printed = 0
                for _ in range(REPLICATIONS):
                    flags = list(rng.random(n) < share) if phi == 0 else _correlated(rng, n, phi, share)
                    interval = attainment_interval(flags)
                    printed += interval.has_interval
                    ours += interval.low <= share <= interval.high
                    low, high = wilson_interval(sum(flags), n)
                    wilson += low <= share <= high
                kind = "independent" if phi == 0 else f"AR(1) lag-1 {phi}"
                covered = f"{ours / printed:.3f}" if printed else "-"
                print(f"{kind:18s} {share:4.0%}  {n:4d}  {printed / REPLICATIONS:6.1%}  {covered:>20s}  "
                      f"{wilson / REPLICATIONS:12.3f}")


def drafter_false_alarms(runs: int = 500) -> None:
    """Print how often a noisy stateless drafter (20 samples x 3 repeats) is flagged as remembering."""
    rng = np.random.default_rng(2)
    alarms = 0
    for _ in range(runs):
        results = []
        for sample in range(20):
            base = int(rng.integers(5, 40))
            for repeat in range(3):
                accepted = max(0, base + int(rng.integers(-4, 5)))
                results.append(SampleResult(id=f"s{sample}", category="qa", ok=True, turns=1, latency_s=1.0,
                                            repeat=repeat, draft_n=accepted + 10, draft_n_accepted=accepted))
        run = Run(config={}, selected_samples=20, results=tuple(results), summary=tuple(summarize(results)))
        alarms += drafter_state(run).remembers
    print(f"stateless drafter flagged as remembering: {alarms} of {runs} runs")


if __name__ == "__main__":
    attainment_coverage()
    drafter_false_alarms()
