"""Measure the coverage of speedbench's 95% geometric-mean interval on synthetic truth (the README's table).

    .venv/bin/python benchmarks/coverage.py [--trials 2000] [--bootstrap]

Each cell draws `trials` sets of n per-sample ratios whose true geometric mean is known: lognormal noise
(sigma 0.05, 0.2, 0.5), or lognormal sigma 0.2 with 10% outliers (x3 or x1/3, half each, so the true geometric
mean is unchanged). It reports how often the interval covers the truth (truth 1.05) and how often an A/A
comparison (truth 1.00) is called "no significant change" by the two-gate verdict (2% threshold). Uses the
public API only (`bench.analysis.geomean_t_intervals`, the vectorised form of `bootstrap_geomean_ci`).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from bench.analysis import geomean_t_intervals

SIZES = (5, 8, 12, 20, 80)
NOISES = (("lognormal", 0.05, 0.0), ("lognormal", 0.2, 0.0), ("lognormal", 0.5, 0.0), ("10% outliers", 0.2, 0.1))
THRESHOLD = 0.02


@dataclass(frozen=True)
class Cell:
    """One row of the coverage table."""

    n: int
    noise: str
    sigma: float
    coverage: float
    aa_unchanged: float
    bootstrap_coverage: float | None = None


def draw_logs(rng: np.random.Generator, trials: int, n: int, truth: float, sigma: float, outliers: float) -> np.ndarray:
    """Logs of `trials` x `n` ratios: lognormal around `truth`, a share `outliers` multiplied by 3 or 1/3."""
    logs = np.log(truth) + rng.normal(0.0, sigma, size=(trials, n))
    if outliers:
        hit = rng.random((trials, n)) < outliers
        logs += hit * np.where(rng.random((trials, n)) < 0.5, np.log(3.0), -np.log(3.0))
    return logs


def percentile_bootstrap_coverage(rng: np.random.Generator, logs: np.ndarray, truth: float, resamples: int) -> float:
    """Coverage of the percentile bootstrap (the old method), vectorised over trials."""
    trials, n = logs.shape
    index = rng.integers(0, n, size=(trials, resamples, n))
    means = np.take_along_axis(logs[:, None, :].repeat(resamples, axis=1), index, axis=2).mean(axis=2)
    low, high = np.quantile(means, [0.025, 0.975], axis=1)
    return float(((low <= np.log(truth)) & (np.log(truth) <= high)).mean())


def coverage_table(
    *, trials: int = 2000, sizes: tuple[int, ...] = SIZES, seed: int = 12, bootstrap: bool = False
) -> Iterator[Cell]:
    """Yield one measured Cell per (n, noise) pair."""
    rng = np.random.default_rng(seed)
    for n in sizes:
        for noise, sigma, outliers in NOISES:
            logs = draw_logs(rng, trials, n, 1.05, sigma, outliers)
            _, low, high = geomean_t_intervals(logs)
            coverage = float(((low <= 1.05) & (1.05 <= high)).mean())
            point, low, high = geomean_t_intervals(draw_logs(rng, trials, n, 1.0, sigma, outliers))
            called = ((low > 1) & (point > 1 + THRESHOLD)) | ((high < 1) & (point < 1 / (1 + THRESHOLD)))
            boot = None
            if bootstrap:
                boot = percentile_bootstrap_coverage(rng, logs[: min(trials, 1000)], 1.05, 1000)
            yield Cell(n, noise, sigma, coverage, float(1 - called.mean()), boot)


def main() -> None:
    """Print the coverage table as Markdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--bootstrap", action="store_true", help="also measure the old percentile bootstrap")
    args = parser.parse_args()
    extra = " percentile bootstrap |" if args.bootstrap else ""
    print(f"| n | noise | sigma | t-interval coverage | A/A unchanged |{extra}")
    print("|---|---|---|---|---|" + ("---|" if args.bootstrap else ""))
    for cell in coverage_table(trials=args.trials, bootstrap=args.bootstrap):
        boot = f" {cell.bootstrap_coverage:.1%} |" if cell.bootstrap_coverage is not None else ""
        print(f"| {cell.n} | {cell.noise} | {cell.sigma} | {cell.coverage:.1%} | {cell.aa_unchanged:.1%} |{boot}")


if __name__ == "__main__":
    main()
