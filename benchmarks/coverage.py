"""Measure speedbench's intervals and decisions on synthetic truth (docs/statistics.md quotes the tables).

    .venv/bin/python benchmarks/coverage.py [--trials 2000] [--bootstrap] [--section all|interval|family|gate|
                                            crossover|stalls|repeats|sequential|accept|abba-strata|...]

Sections other than `interval` go through the decision code the CLI uses: `family_estimates` (every category
table: compare, bench, report, sweep cells), `gate_frames` (regress, on per-sample frames), `crossover` (sweep),
`flag_outliers` and Yuen's interval, `repeat_log_mean` (repeats), `SequentialTest` (sampling until decided) and
`accept_rate_log_mean` (the gate's accept rate); `--section cli` repeats the family and gate figures through
`compare` and `gate` on run records, exactly as the CLI calls them. Seeded: the same command prints the same tables.

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
import pandas as pd

from bench.analysis import (
    ONE_SAMPLE_RULES,
    Estimate,
    LogMean,
    RequestTiming,
    SequentialTest,
    Slo,
    accept_rate_log_mean,
    compare,
    crossover,
    family_estimates,
    flag_outliers,
    gate,
    gate_frames,
    geomean_t_intervals,
    log_mean,
    paired_goodput,
    paired_speedups,
    repeat_log_mean,
    stratified_log_mean,
    yuen_log_mean,
)
from bench.records import Run, SampleResult, summarize

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


CATEGORIES = 11
SIGMA = 0.2
"""Per-sample sd of log speedups (the issue's planning figure); latency logs add sd 0.05 to decode's."""


def _table_logs(rng: np.random.Generator, n: int, truth: float) -> dict[tuple[str, str], object]:
    """One synthetic comparison table's log means: 11 categories x n samples, and the pooled overall row."""
    logs: dict[tuple[str, str], object] = {}
    pooled_decode, pooled_latency = [], []
    for index in range(CATEGORIES):
        decode = np.log(truth) + rng.normal(0.0, SIGMA, n)
        latency = decode + rng.normal(0.0, 0.05, n)
        pooled_decode.append(decode)
        pooled_latency.append(latency)
        logs[(f"c{index}", "decode_speedup")] = log_mean(decode)
        logs[(f"c{index}", "latency_speedup")] = log_mean(latency)
    logs[("overall", "decode_speedup")] = log_mean(np.concatenate(pooled_decode))
    logs[("overall", "latency_speedup")] = log_mean(np.concatenate(pooled_latency))
    return logs


def _called(estimate: Estimate) -> bool:
    return estimate.verdict in ("better", "worse")


def family_section(trials: int, seed: int) -> list[str]:
    """A/A: how often any category row is called faster/slower (Holm vs unadjusted 95%); power at 1.3x, n = 30."""
    rng = np.random.default_rng(seed)
    lines = ["| n per category | tables with any false category verdict (Holm) | unadjusted 95% (before) | "
             "false verdicts per table (Holm) | overall row false |", "|---|---|---|---|---|"]
    for n in (5, 10, 20):
        any_holm = any_plain = total = overall = 0
        for _ in range(trials):
            logs = _table_logs(rng, n, 1.0)
            table = family_estimates(logs, threshold=THRESHOLD)
            categories = [key for key in table if key[0] != "overall"]
            holm = [_called(table[key]) for key in categories]
            plain = []
            for key in categories:
                point, low, high = logs[key].interval(0.95)  # type: ignore[attr-defined]
                plain.append((low > 1 and point > 1 + THRESHOLD) or (high < 1 and point < 1 / (1 + THRESHOLD)))
            any_holm += any(holm)
            any_plain += any(plain)
            total += sum(holm)
            overall += _called(table[("overall", "decode_speedup")])
        lines.append(f"| {n} | {any_holm / trials:.1%} | {any_plain / trials:.1%} | {total / trials:.3f} | "
                     f"{overall / trials:.1%} |")
    hits = rows = 0
    for _ in range(trials):
        table = family_estimates(_table_logs(rng, 30, 1.3), threshold=THRESHOLD)
        for key, estimate in table.items():
            if key[0] != "overall" and key[1] == "decode_speedup":
                rows += 1
                hits += estimate.verdict == "better"
    lines.append(f"\nTrue 1.30x, n = 30 per category: {hits / rows:.1%} of category decode rows called faster "
                 f"({trials} tables).")
    return lines


def _gate_frame(rng: np.random.Generator, n: int, speedup: float, accept: float) -> pd.DataFrame:
    """Per-sample frame of one comparison (what `gate` builds from a baseline and a speculative run)."""
    ids = [f"c{index}-{sample:03d}" for index in range(CATEGORIES) for sample in range(n)]
    categories = [f"c{index}" for index in range(CATEGORIES) for _ in range(n)]
    decode = np.log(speedup) + rng.normal(0.0, SIGMA, len(ids))
    return pd.DataFrame({"id": ids, "category": categories, "decode_speedup": np.exp(decode),
                         "latency_speedup": np.exp(decode + rng.normal(0.0, 0.05, len(ids))),
                         "draft_n": np.full(len(ids), 100.0),
                         "accepted": rng.binomial(100, accept, len(ids)).astype(float)})


GATE_SIZES = (5, 10, 20)


def gate_section(trials: int, seed: int) -> list[str]:
    """regress on A/A comparison frames (false alarms) and on a 10% decode regression (detection)."""
    rng = np.random.default_rng(seed)
    lines = ["| n per category | A/A fails the job | 10% decode regression fails the job | A/A rows non-inferior "
             "(overall decode) |", "|---|---|---|---|"]
    for n in GATE_SIZES:
        false_alarms = caught = proven = 0
        for _ in range(trials):
            reference = _gate_frame(rng, n, 1.5, 0.6)
            same = gate_frames("comparison", reference, _gate_frame(rng, n, 1.5, 0.6))
            false_alarms += same.failed()
            proven += any(row.category == "overall" and row.metric.key == "decode_speedup"
                          and row.status == "non-inferior" for row in same.rows)
            caught += gate_frames("comparison", reference, _gate_frame(rng, n, 1.5 * 0.9, 0.6)).failed()
        lines.append(f"| {n} | {false_alarms / trials:.1%} | {caught / trials:.1%} | {proven / trials:.1%} |")
    return lines


def _overall_estimate(logs: np.ndarray) -> Estimate:
    return family_estimates({("overall", "decode_speedup"): log_mean(logs)}, threshold=THRESHOLD)[
        ("overall", "decode_speedup")]


def crossover_section(trials: int, seed: int) -> list[str]:
    """Sweeps at `make sweep` size (20 samples per level): never-crossing and crossing truths."""
    rng = np.random.default_rng(seed)
    levels = [1, 2, 4, 8, 16]
    truths = {"never crosses (1.40x -> 1.05x)": [1.4, 1.3, 1.2, 1.1, 1.05],
              "crosses between 8 and 16 (1.40x -> 0.90x)": [1.4, 1.3, 1.15, 1.05, 0.9],
              "crosses between 2 and 4 (1.30x -> 0.80x)": [1.3, 1.1, 0.95, 0.85, 0.8]}
    lines = ["| truth | crossover claimed | claimed at a level whose truth pays (> 1.02x) | claimed where it stops "
             "paying | undetermined |", "|---|---|---|---|---|"]
    for name, curve in truths.items():
        claimed = false = right = undetermined = 0
        for _ in range(trials):
            estimates = [_overall_estimate(np.log(truth) + rng.normal(0.0, SIGMA, 20)) for truth in curve]
            found = crossover(levels, estimates, margin=THRESHOLD)
            if found.stops_at is None:
                undetermined += 1
                continue
            claimed += 1
            if curve[levels.index(found.stops_at)] > 1 + THRESHOLD:
                false += 1
            else:
                right += 1
        lines.append(f"| {name} | {claimed / trials:.1%} | {false / trials:.1%} | {right / trials:.1%} | "
                     f"{undetermined / trials:.1%} |")
    return lines


def stalls_section(trials: int, seed: int) -> list[str]:
    """5% of the speculative arm's requests stall 3-10x: verdicts, coverage, and how many stalls are named."""
    rng = np.random.default_rng(seed)
    lines = ["| n per category | truth | t: slower | t: faster | t covers | Yuen covers | Yuen: slower | "
             "stalled samples named |", "|---|---|---|---|---|---|---|---|"]
    for n, truth in ((10, 1.0), (30, 1.0), (10, 1.2), (30, 1.2)):
        slower = faster = covers = robust_covers = robust_slower = named = stalls = 0
        for _ in range(trials):
            pooled = []
            for _ in range(CATEGORIES):
                base = rng.normal(3.0, 0.3, n)
                spec = base + np.log(truth) + rng.normal(0.0, SIGMA, n)
                stalled = rng.random(n) < 0.05
                spec = spec - stalled * np.log(rng.uniform(3.0, 10.0, n))
                ratio = spec - base
                flagged = flag_outliers([str(i) for i in range(n)], ratio, base, spec, metric="decode")
                stalls += int(stalled.sum())
                named += sum(stalled[int(item.id)] and item.arm == "speculative" for item in flagged)
                pooled.append(ratio)
            logs = np.concatenate(pooled)
            table = family_estimates({("overall", "decode_speedup"): log_mean(logs)}, threshold=THRESHOLD,
                                     robust={("overall", "decode_speedup"): yuen_log_mean(logs)})
            estimate = table[("overall", "decode_speedup")]
            slower += estimate.verdict == "worse"
            faster += estimate.verdict == "better"
            covers += estimate.low <= truth <= estimate.high
            assert estimate.robust is not None
            robust_covers += estimate.robust[1] <= truth <= estimate.robust[2]
            robust_slower += estimate.robust_verdict == "worse"
        lines.append(f"| {n} | {truth:.2f}x | {slower / trials:.1%} | {faster / trials:.1%} | {covers / trials:.1%} | "
                     f"{robust_covers / trials:.1%} | {robust_slower / trials:.1%} | "
                     f"{named / max(stalls, 1):.1%} |")
    lines.append("\n(Yuen covers: the 20%-trimmed interval against the stall-free truth.)")
    return lines


def repeats_section(trials: int, seed: int) -> list[str]:
    """The repeat-aware interval: n = 110 samples (11 x 10), noise sd 0.2, sample effects sd 0.1."""
    rng = np.random.default_rng(seed)
    lines = ["| repeats | drift per repeat (not shared by the arms) | coverage | interval given | power at 1.10x |",
             "|---|---|---|---|---|"]
    for drift in (0.0, 0.05):
        for repeats in (1, 2, 3, 5):
            covered = given = power = 0
            for _ in range(trials):
                for truth in (0.0, np.log(1.1)):
                    matrix = (truth + rng.normal(0, 0.1, (110, 1)) + rng.normal(0, drift, (1, repeats))
                              + rng.normal(0, SIGMA, (110, repeats)))
                    estimate = log_mean(matrix[:, 0]) if repeats == 1 else repeat_log_mean(matrix)
                    if estimate is None or estimate.withheld is not None:
                        continue
                    _, low, high = estimate.interval(0.95)
                    if truth == 0.0:
                        given += 1
                        covered += low <= 1.0 <= high
                    else:
                        power += low > 1.0
            lines.append(f"| {repeats} | {'none (shared)' if drift == 0 else f'sd {drift:.0%}'} | "
                         f"{covered / max(given, 1):.1%} | {given / trials:.1%} | {power / trials:.1%} |")
    return lines


def sequential_section(trials: int, seed: int) -> list[str]:
    """Sampling until decided: 11 categories, one sample per category a round, limit 10 per category."""
    rng = np.random.default_rng(seed)
    lines = ["| truth | faster | slower | equivalent | undecided at the limit | mean samples at the stop |",
             "|---|---|---|---|---|---|"]
    for truth in (1.0, 1.1, 1.5):
        counts: dict[str, int] = {}
        stops = []
        for _ in range(trials):
            test = SequentialTest(max_samples=CATEGORIES * 10, threshold=THRESHOLD)
            logs = np.empty((CATEGORIES, 0))
            for _ in range(10):
                logs = np.column_stack([logs, np.log(truth) + rng.normal(0.0, SIGMA, CATEGORIES)])
                look = test.look(stratified_log_mean(list(logs)))  # the overall row's estimator, as the CLI's
                if test.decided:
                    break
            counts[look.decision] = counts.get(look.decision, 0) + 1
            stops.append(look.n)
        share = {key: counts.get(key, 0) / trials for key in ("faster", "slower", "equivalent", "undecided")}
        lines.append(f"| {truth:.2f}x | {share['faster']:.1%} | {share['slower']:.1%} | {share['equivalent']:.1%} | "
                     f"{share['undecided']:.1%} | {np.mean(stops):.1f} of 110 |")
    return lines


def budget_section(trials: int, seed: int) -> list[str]:
    """`make bench --until-decided` budgets: 11 categories, limit 2, 3, 4 rounds."""
    rng = np.random.default_rng(seed)
    lines = ["| limit (rounds) | truth | false verdict (A/A) or decided faster | mean samples at the stop |",
             "|---|---|---|---|"]
    for limit in (2, 3, 4):
        for truth in (1.0, 1.2, 1.5):
            hits, stops = 0, []
            for _ in range(trials):
                test = SequentialTest(max_samples=CATEGORIES * limit, threshold=THRESHOLD)
                logs = np.empty((CATEGORIES, 0))
                for _ in range(limit):
                    logs = np.column_stack([logs, np.log(truth) + rng.normal(0.0, SIGMA, CATEGORIES)])
                    look = test.look(stratified_log_mean(list(logs)))
                    if test.decided:
                        break
                hits += look.decision in (("faster", "slower") if truth == 1.0 else ("faster",))
                stops.append(look.n)
            lines.append(f"| {limit} | {truth:.2f}x | {hits / trials:.1%} | "
                         f"{np.mean(stops):.1f} of {CATEGORIES * limit} |")
    return lines


def accept_section(trials: int, seed: int) -> list[str]:
    """Coverage of the gate's accept-rate interval (delta method, t with n - 1 df) on binomial truth."""
    rng = np.random.default_rng(seed)
    lines = ["| n | coverage (95%) |", "|---|---|"]
    for n in (5, 10, 20):
        covered = 0
        for _ in range(trials):
            drafted = rng.integers(20, 200, size=(2, n))
            rates = np.clip(0.6 + rng.normal(0, 0.15, n), 0.05, 0.95)
            accepted = rng.binomial(drafted, rates)
            estimate = accept_rate_log_mean(accepted[0], drafted[0], accepted[1], drafted[1])
            assert estimate is not None
            _, low, high = estimate.interval(0.95)
            covered += low <= 1.0 <= high
        lines.append(f"| {n} | {covered / trials:.1%} |")
    return lines


def _runs(rng: np.random.Generator, n: int, speedup: float) -> tuple[Run, Run]:
    """A baseline and a speculative run (11 categories x n) as record objects, for the sections through `compare`
    and `gate` exactly as the CLI calls them."""
    arms: tuple[list[SampleResult], list[SampleResult]] = ([], [])
    for index in range(CATEGORIES):
        for sample in range(n):
            rate = 20.0 * float(np.exp(rng.normal(0.0, 0.3)))
            spec = rate * speedup * float(np.exp(rng.normal(0.0, SIGMA)))
            for results, value in zip(arms, (rate, spec), strict=True):
                results.append(SampleResult(id=f"c{index}-{sample:03d}", category=f"c{index}", ok=True, turns=1,
                                            latency_s=64.0 / value, predicted_per_second=value,
                                            prompt_per_second=500.0, outputs=("same",)))
    return tuple(Run(config={}, selected_samples=len(results), results=tuple(results),  # type: ignore[return-value]
                     summary=tuple(summarize(results))) for results in arms)


def cli_section(trials: int, seed: int) -> list[str]:
    """The family and gate figures again through `compare` and `gate` on run records (as `speedbench compare
    --stats` and `speedbench regress` call them), n = 10 per category."""
    rng = np.random.default_rng(seed)
    any_false = overall_false = alarms = caught = 0
    for _ in range(trials):
        rows = compare(*_runs(rng, 10, 1.0)).stats
        any_false += any(row.decode.verdict in ("better", "worse") or row.latency.verdict in ("better", "worse")
                         for row in rows if row.category != "overall")
        overall_false += rows[-1].decode.verdict in ("better", "worse")
        reference = _runs(rng, 10, 1.5)
        alarms += gate(reference, _runs(rng, 10, 1.5)).failed()
        caught += gate(reference, _runs(rng, 10, 1.5 * 0.9)).failed()
    return ["| through | A/A tables with any false category verdict | A/A overall false | regress A/A fails | "
            "regress catches a 10% decode regression |", "|---|---|---|---|---|",
            f"| compare / gate on runs, n = 10 | {any_false / trials:.1%} | {overall_false / trials:.1%} | "
            f"{alarms / trials:.1%} | {caught / trials:.1%} |"]


STRATA_TRUTHS = {
    "categories differ (coding 2.5x, math 1.8x, rag 1.4x, 8 at 1.1x)": (2.5, 1.8, 1.4, *(1.1,) * 8),
    "categories cancel (overall truth 1.00x)": (1.3, 1 / 1.3, 1.15, 1 / 1.15, 1.05, 1 / 1.05, *(1.0,) * 5),
    "all equal (1.20x)": (1.2,) * 11,
}
STRATA_SPREADS = {"within sd 0.15 in every category": (0.15,) * 11,
                  "within sd 0.05-0.25 by category": tuple(np.linspace(0.05, 0.25, 11))}
STRATA_ESTIMATORS = ("stratified, Welch 1947 df (as shipped)", "classic Welch-Satterthwaite df", "pool-within df N-K",
                     "pooled t (before)")


def _strata_estimates(strata: list[np.ndarray]) -> list[object]:
    """The overall estimate four ways: as the CLI computes it, with the classic Welch-Satterthwaite df, with the
    pooled-within variance on N - K df, and the pooled t the overall row used before."""
    shipped = stratified_log_mean(strata)
    classic = stratified_log_mean(strata, df_rule="satterthwaite")
    assert shipped is not None and classic is not None
    sizes = np.array([len(values) for values in strata])
    pooled = log_mean(np.concatenate(strata))
    if (sizes >= 2).all():
        within = float(sum((len(v) - 1) * np.var(v, ddof=1) for v in strata)) / float((sizes - 1).sum())
        weights = sizes / sizes.sum()
        se = float(np.sqrt((weights**2 * within / sizes).sum()))
        pool_within = LogMean(shipped.mean, se, float((sizes - 1).sum()), int(sizes.sum()))
    else:
        pool_within = pooled
    return [shipped, classic, pool_within, pooled]


def stratified_section(trials: int, seed: int) -> list[str]:
    """Coverage of the overall interval at 1, 2, 4, 10 samples a category (11 categories), three estimators."""
    rng = np.random.default_rng(seed)
    lines = ["| truth | within-category spread | n per category | " + " | ".join(
        f"{name} covers" for name in STRATA_ESTIMATORS) + " | half-width, shipped / before |",
        "|---|---|---|" + "---|" * len(STRATA_ESTIMATORS) + "---|"]
    for truth_name, truths in STRATA_TRUTHS.items():
        for spread_name, spreads in STRATA_SPREADS.items():
            target = float(np.mean(np.log(truths)))
            for n in (1, 2, 4, 10):
                covered = [0] * len(STRATA_ESTIMATORS)
                widths = [0.0, 0.0]
                for _ in range(trials):
                    strata = [np.log(t) + rng.normal(0.0, sd, n) for t, sd in zip(truths, spreads, strict=True)]
                    found = _strata_estimates(strata)
                    for index, estimate in enumerate(found):
                        _, low, high = estimate.interval(0.95)  # type: ignore[attr-defined]
                        covered[index] += np.log(low) <= target <= np.log(high)
                    widths[0] += found[0].half_width(0.95)  # type: ignore[attr-defined]
                    widths[1] += found[3].half_width(0.95)  # type: ignore[attr-defined]
                lines.append(f"| {truth_name} | {spread_name} | {n} | " + " | ".join(
                    f"{count / trials:.1%}" for count in covered)
                    + f" | {widths[0] / trials:.3f} / {widths[1] / trials:.3f} |")
    return lines


def mixed_section(trials: int, seed: int) -> list[str]:
    """A category with one sample among categories of more (a failed sample): the two one-sample rules."""
    rng = np.random.default_rng(seed)
    lines = ["| truth | others' n | one-sample categories | pool-within covers | pooled fallback covers | "
             "half-width pool-within / pooled |", "|---|---|---|---|---|---|"]
    truths = STRATA_TRUTHS["categories differ (coding 2.5x, math 1.8x, rag 1.4x, 8 at 1.1x)"]
    spreads = STRATA_SPREADS["within sd 0.05-0.25 by category"]
    for n in (2, 4, 10):
        for singles in (1, 3):
            sizes = [1] * singles + [n] * (len(truths) - singles)
            target_weights = np.array(sizes) / sum(sizes)
            target = float((target_weights * np.log(truths)).sum())
            covered, widths = [0, 0], [0.0, 0.0]
            for _ in range(trials):
                strata = [np.log(t) + rng.normal(0.0, sd, size) for t, sd, size in zip(truths, spreads, sizes,
                                                                                      strict=True)]
                for index, rule in enumerate(ONE_SAMPLE_RULES):
                    estimate = stratified_log_mean(strata, one_sample_rule=rule)
                    assert estimate is not None
                    _, low, high = estimate.interval(0.95)
                    covered[index] += np.log(low) <= target <= np.log(high)
                    widths[index] += estimate.half_width(0.95)
            lines.append(f"| differ | {n} | {singles} | {covered[0] / trials:.1%} | {covered[1] / trials:.1%} | "
                         f"{widths[0] / trials:.3f} / {widths[1] / trials:.3f} |")
    return lines


SEED_TABLES = {
    "seed table 1": (1.76, 1.07, 1.16, 1.06, 1.26, 1.06, 1.07, 1.00, 1.09, 1.09, 1.00),
    "seed table 2": (3.10, 2.02, 2.26, 2.08, 2.49, 1.98, 1.99, 2.18, 2.12, 1.91, 2.04),
    "seed table 3": (2.09, 1.83, 2.03, 1.77, 2.28, 1.83, 1.83, 1.90, 2.00, 1.82, 1.84),
}
"""Per-category decode speedups of the three tables in the seed pull request (shared/seeds/000_*.txt): only their
spread across categories is used (each is shifted so that the overall truth is 1.20x)."""


def _sample_run_spread() -> tuple[str, tuple[float, ...]] | None:
    """The per-category decode speedups of the committed `make bench` sample run (results/sample), if present."""
    from pathlib import Path

    from bench.analysis import compare
    from bench.records import load_run

    folder = Path(__file__).resolve().parents[1] / "results" / "sample"
    if not (folder / "baseline.json").exists():
        return None
    rows = compare(load_run(folder / "baseline.json"), load_run(folder / "speculative.json")).stats
    return "make bench sample run (results/sample)", tuple(row.decode.point for row in rows if not row.primary)


def _power(rng: np.random.Generator, trials: int, means: np.ndarray, sigma: float, n: int, stratified: bool) -> float:
    """Share of trials whose overall row, as `family_estimates` decides it, calls the true overall faster."""
    hits = 0
    for _ in range(trials):
        strata = [mean + rng.normal(0.0, sigma, n) for mean in means]
        estimate = stratified_log_mean(strata) if stratified else log_mean(np.concatenate(strata))
        table = family_estimates({("overall", "decode_speedup"): estimate}, threshold=THRESHOLD)
        hits += table[("overall", "decode_speedup")].verdict == "better"
    return hits / trials


def cost_section(trials: int, seed: int) -> list[str]:
    """Samples for 80% power on a true 1.20x overall, stratified vs pooled, at the seed's between-category spreads."""
    rng = np.random.default_rng(seed)
    lines = ["| between-category spread | sd across categories | per-prompt sd | predicted saving (within + "
             "between) / within | measured variance ratio pooled / stratified (n = 10 a category) | n a category for "
             "80% power at 1.20x: stratified / pooled | the same at 1.05x |", "|---|---|---|---|---|---|---|"]
    tables = dict(SEED_TABLES)
    sample = _sample_run_spread()
    if sample is not None:
        tables[sample[0]] = sample[1]
    for name, speedups in tables.items():
        logs = np.log(np.asarray(speedups, dtype=float))
        means = logs - logs.mean() + np.log(1.2)
        between = float(np.var(means))  # per-prompt weights, equal n: the spread the pooled interval adds
        for sigma in (0.15, 0.10):
            predicted = (sigma**2 + between) / sigma**2
            ratios = []
            for _ in range(trials):
                strata = [mean + rng.normal(0.0, sigma, 10) for mean in means]
                shipped, pooled = stratified_log_mean(strata), log_mean(np.concatenate(strata))
                assert shipped is not None and pooled is not None
                ratios.append((pooled.se**2, shipped.se**2))
            measured = float(np.mean([r[0] for r in ratios]) / np.mean([r[1] for r in ratios]))
            needed = []
            for effect in (1.2, 1.05):
                shifted = means - np.log(1.2) + np.log(effect)
                for stratified in (True, False):
                    n = 1
                    while n < 80 and _power(rng, max(200, trials // 4), shifted, sigma, n, stratified) < 0.8:
                        n += 1
                    needed.append(n)
            lines.append(f"| {name} | {np.sqrt(between):.3f} | {sigma:.2f} | {predicted:.2f}x | {measured:.2f}x | "
                         f"{needed[0]} / {needed[1]} | {needed[2]} / {needed[3]} |")
    return lines


def _strata_gate_frame(rng: np.random.Generator, n: int, truths: np.ndarray, prompt: np.ndarray, noise: float,
                       accept: float, slower: dict[int, float] | None = None) -> pd.DataFrame:
    """Per-sample frame of one comparison: category truths, each prompt's own effect (shared by every comparison
    of that prompt) and run noise; `slower` scales some categories' speedups."""
    categories = np.repeat(np.arange(len(truths)), n)
    logs = np.log(truths)[categories] + prompt + rng.normal(0.0, noise, categories.size)
    for index, factor in (slower or {}).items():
        logs[categories == index] += np.log(factor)
    return pd.DataFrame({"id": [f"c{c}-{i:03d}" for c in range(len(truths)) for i in range(n)],
                         "category": [f"c{c}" for c in categories], "decode_speedup": np.exp(logs),
                         "latency_speedup": np.exp(logs + rng.normal(0.0, 0.02, categories.size)),
                         "draft_n": np.full(categories.size, 100.0),
                         "accepted": rng.binomial(100, accept, categories.size).astype(float)})


def _before(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with one category: `gate_frames` then computes the pooled overall rows it computed before."""
    return frame.assign(category="all")


def gate_categories_section(trials: int, seed: int) -> list[str]:
    """regress with category rows gated: A/A false failures, a category 20% slower, a 10% overall regression."""
    rng = np.random.default_rng(seed)
    truths = np.array(STRATA_TRUTHS["categories differ (coding 2.5x, math 1.8x, rag 1.4x, 8 at 1.1x)"])
    lines = ["| n a category | run noise sd | A/A fails (categories gated) | A/A fails (--gate overall) | coding 20% "
             "slower fails | 10% overall regression fails: categories gated / before (pooled, overall only) |",
             "|---|---|---|---|---|---|"]
    for n in (5, 10, 20):
        for noise in (0.05, 0.10):
            counts = [0, 0, 0, 0, 0]
            for _ in range(trials):
                prompt = rng.normal(0.0, 0.15, n * len(truths))
                reference = _strata_gate_frame(rng, n, truths, prompt, noise, 0.6)
                same = _strata_gate_frame(rng, n, truths, prompt, noise, 0.6)
                counts[0] += gate_frames("comparison", reference, same).failed()
                counts[1] += gate_frames("comparison", reference, same, gate_categories=False).failed()
                coding = _strata_gate_frame(rng, n, truths, prompt, noise, 0.6, {0: 0.8})
                counts[2] += gate_frames("comparison", reference, coding).failed()
                worse = _strata_gate_frame(rng, n, truths, prompt, noise, 0.6,
                                           dict.fromkeys(range(len(truths)), 0.9))
                counts[3] += gate_frames("comparison", reference, worse).failed()
                counts[4] += gate_frames("comparison", _before(reference), _before(worse),
                                         gate_categories=False).failed()
            share = [count / trials for count in counts]
            lines.append(f"| {n} | {noise:.2f} | {share[0]:.1%} | {share[1]:.1%} | {share[2]:.1%} | "
                         f"{share[3]:.1%} / {share[4]:.1%} |")
    return lines


def sequential_strata_section(trials: int, seed: int) -> list[str]:
    """Sampling until decided on the stratified estimate: 11 categories that differ or cancel, a round = one sample
    a category, limit 10 rounds; A/A (overall truth 1.00x) false verdicts and decisions at 1.20x."""
    rng = np.random.default_rng(seed)
    lines = ["| categories | overall truth | faster | slower | equivalent | undecided | mean samples at the stop |",
             "|---|---|---|---|---|---|---|"]
    shapes = {"cancel": np.log(STRATA_TRUTHS["categories cancel (overall truth 1.00x)"]),
              "equal": np.zeros(CATEGORIES)}
    differ = np.log(STRATA_TRUTHS["categories differ (coding 2.5x, math 1.8x, rag 1.4x, 8 at 1.1x)"])
    shapes["differ"] = differ - differ.mean()
    for name, shape in shapes.items():
        for truth in (1.0, 1.2):
            means = shape - shape.mean() + np.log(truth)
            counts: dict[str, int] = {}
            stops = []
            for _ in range(trials):
                test = SequentialTest(max_samples=CATEGORIES * 10, threshold=THRESHOLD)
                strata: list[list[float]] = [[] for _ in means]
                for _ in range(10):
                    for index, mean in enumerate(means):
                        strata[index].append(mean + rng.normal(0.0, 0.15))
                    look = test.look(stratified_log_mean(strata))
                    if test.decided:
                        break
                counts[look.decision] = counts.get(look.decision, 0) + 1
                stops.append(look.n)
            share = {key: counts.get(key, 0) / trials for key in ("faster", "slower", "equivalent", "undecided")}
            lines.append(f"| {name} | {truth:.2f}x | {share['faster']:.1%} | {share['slower']:.1%} | "
                         f"{share['equivalent']:.1%} | {share['undecided']:.1%} | {np.mean(stops):.1f} of 110 |")
    return lines


def fixed_aa_section(trials: int, seed: int) -> list[str]:
    """A/A at fixed sizes through `compare` on run records: false overall verdicts with categories that differ."""
    rng = np.random.default_rng(seed)
    lines = ["| n a category | categories | false overall verdict |", "|---|---|---|"]
    for n in (1, 2, 4, 10):
        false = 0
        for _ in range(trials):
            table = _strata_runs(rng, n)
            false += table.decode.verdict in ("better", "worse")
        lines.append(f"| {n} | differ, overall truth 1.00x | {false / trials:.1%} |")
    return lines


def _strata_runs(rng: np.random.Generator, n: int) -> object:
    """The overall row of `compare` on a baseline and a speculative run whose categories differ, overall truth 1.00x."""
    differ = np.log(STRATA_TRUTHS["categories differ (coding 2.5x, math 1.8x, rag 1.4x, 8 at 1.1x)"])
    means = differ - differ.mean()
    arms: tuple[list[SampleResult], list[SampleResult]] = ([], [])
    for index, mean in enumerate(means):
        for sample in range(n):
            rate = 20.0 * float(np.exp(rng.normal(0.0, 0.3)))
            spec = rate * float(np.exp(mean + rng.normal(0.0, 0.15)))
            for results, value in zip(arms, (rate, spec), strict=True):
                results.append(SampleResult(id=f"c{index}-{sample:03d}", category=f"c{index}", ok=True, turns=1,
                                            latency_s=64.0 / value, predicted_per_second=value, outputs=("same",)))
    runs = [Run(config={}, selected_samples=len(results), results=tuple(results), summary=tuple(summarize(results)))
            for results in arms]
    return compare(runs[0], runs[1]).stats[-1]


ABBA_BLOCKS = (6, 12, 24)
"""Blocks of an open-loop ABBA run (8 requests each; `MIN_BLOCKS` = 6 is the fewest a by-block interval prints at)."""
ABBA_ATTAINMENT = {
    "categories differ (coding 2.5x, math 1.8x, rag 1.4x, 8 at 1.1x)": ((0.5, 0.6, 0.7) + (0.9,) * 8,
                                                                         (0.9, 0.85, 0.8) + (0.9,) * 8),
    "categories cancel (overall truth 1.00x)": ((0.6, 0.9, 0.7, 0.9, 0.8, 0.9) + (0.8,) * 5,
                                                (0.9, 0.6, 0.9, 0.7, 0.9, 0.8) + (0.8,) * 5),
    "all equal (1.20x)": ((0.7,) * 11, (0.8,) * 11),
}
"""Per-category SLO attainment of the baseline and the candidate, paired with the speedup truths by row."""


def _abba_pairs(rng: np.random.Generator, blocks: int, truths: tuple[float, ...],
                shares: tuple[tuple[float, ...], tuple[float, ...]]) -> tuple[list[RequestTiming], list[RequestTiming]]:
    """Two arms of an ABBA run: 8 requests a block, categories dealt round-robin then shuffled over the blocks (so a
    block's mix varies), decode speedup truth_c x a block drift (sd 0.05, shared by the block) x per-request noise
    (sd 0.15); each request meets the e2e SLO (1 s) with its category's probability per arm."""
    n = 8 * blocks
    categories = rng.permutation(np.arange(n) % len(truths))
    drift = rng.normal(0.0, 0.05, blocks)
    arms: tuple[list[RequestTiming], list[RequestTiming]] = ([], [])
    for index, category in enumerate(categories):
        block = index // 8
        rates = (100.0, 100.0 * truths[category] * float(np.exp(drift[block] + rng.normal(0.0, 0.15))))
        for arm, rate in enumerate(rates):
            e2e = 0.5 if rng.random() < shares[arm][category] else 2.0
            arms[arm].append(RequestTiming(
                id=f"p{index}", repeat=0, category=f"c{category:02d}", ok=True, scheduled_s=index * 0.1,
                sent_s=index * 0.1, first_token_s=None, end_s=index * 0.1 + e2e, ttft_s=None, tpot_s=None,
                e2e_s=e2e, output_tokens=32, block=block, decode_t_s=rate))
    return arms


def abba_strata_section(trials: int, seed: int) -> list[str]:
    """Open-loop ABBA runs: coverage of the overall decode speedup, attainment change and goodput ratio by block,
    stratified by category with blocks as units (as `paired_speedups` / `paired_goodput` print them), against the
    t over block means the rows used before."""
    rng = np.random.default_rng(seed)
    slo = Slo(e2e_s=1.0)
    lines = ["| truth | blocks | decode covers | before covers | half-width, shipped / before | "
             "attainment change covers | goodput ratio covers |", "|---|---|---|---|---|---|---|"]
    for (truth_name, truths), shares in zip(STRATA_TRUTHS.items(), ABBA_ATTAINMENT.values(), strict=True):
        for blocks in ABBA_BLOCKS:
            covered = [0, 0, 0, 0]
            widths = [0.0, 0.0]
            for _ in range(trials):
                base, spec = _abba_pairs(rng, blocks, truths, shares)
                index = np.array([int(r.category[1:]) for r in base])
                target = float(np.mean(np.log(np.asarray(truths))[index]))
                decode = next(item for item in paired_speedups(list(zip(base, spec, strict=True)))
                              if item.primary and item.metric.key == "decode_speedup").by_block
                covered[0] += np.log(decode.low) <= target <= np.log(decode.high)
                widths[0] += (np.log(decode.high) - np.log(decode.low)) / 2
                logs = np.log([b.decode_t_s / a.decode_t_s for a, b in zip(base, spec, strict=True)])
                means = logs.reshape(blocks, 8).mean(axis=1)
                _, low, high = geomean_t_intervals(means[None, :])
                covered[1] += np.log(low[0]) <= target <= np.log(high[0])
                widths[1] += (np.log(high[0]) - np.log(low[0])) / 2
                paired = paired_goodput(base, spec, slo)
                p, q = np.asarray(shares[0])[index], np.asarray(shares[1])[index]
                difference = paired.difference_by_block
                covered[2] += difference.low <= float((q - p).mean()) <= difference.high
                ratio = paired.goodput_ratio
                covered[3] += ratio.low <= float(q.sum() / p.sum()) <= ratio.high
            lines.append(f"| {truth_name} | {blocks} | {covered[0] / trials:.1%} | {covered[1] / trials:.1%} | "
                         f"{widths[0] / trials:.3f} / {widths[1] / trials:.3f} | {covered[2] / trials:.1%} | "
                         f"{covered[3] / trials:.1%} |")
    return lines


SECTIONS = {"stratified": stratified_section, "mixed": mixed_section, "cost": cost_section,
            "gate-categories": gate_categories_section, "sequential-strata": sequential_strata_section,
            "fixed-aa": fixed_aa_section, "abba-strata": abba_strata_section, "family": family_section,
            "gate": gate_section,
            "crossover": crossover_section,
            "stalls": stalls_section, "repeats": repeats_section, "sequential": sequential_section,
            "accept": accept_section, "budget": budget_section, "cli": cli_section}


def main() -> None:
    """Print the chosen tables as Markdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--bootstrap", action="store_true", help="also measure the old percentile bootstrap")
    parser.add_argument("--section", default="all", choices=["all", "interval", "rest", *SECTIONS],
                        help="all: every section but cli (slow: ~1 s a trial); cli: only when named")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--gate-sizes", default="5,10,20", help="samples per category of the gate section")
    args = parser.parse_args()
    global GATE_SIZES
    GATE_SIZES = tuple(int(size) for size in args.gate_sizes.split(","))
    if args.section in ("all", "interval", "rest"):
        extra = " percentile bootstrap |" if args.bootstrap else ""
        print(f"| n | noise | sigma | t-interval coverage | A/A unchanged |{extra}")
        print("|---|---|---|---|---|" + ("---|" if args.bootstrap else ""))
        for cell in coverage_table(trials=args.trials, bootstrap=args.bootstrap, seed=args.seed):
            boot = f" {cell.bootstrap_coverage:.1%} |" if cell.bootstrap_coverage is not None else ""
            print(f"| {cell.n} | {cell.noise} | {cell.sigma} | {cell.coverage:.1%} | {cell.aa_unchanged:.1%} |{boot}")
    for name, section in SECTIONS.items():
        rest = args.section == "rest" and name not in ("cli", "family", "gate")
        if args.section == name or rest or (args.section == "all" and name != "cli"):
            print(f"\n### {name} ({args.trials} trials, seed {args.seed})\n")
            print("\n".join(section(args.trials, args.seed)), flush=True)


if __name__ == "__main__":
    main()
