"""Calibration of `speedbench history`'s change points on synthetic histories, beside asv's and Otava's methods.

Each synthetic history is a list of `HistoryPoint`s, one per commit, built as `history add` builds them from a
comparison: per category a paired-sample mean of log speedups with its t standard error (n samples, df n - 1),
the overall row as the stratified mean of the categories, plus a commit-level shift shared by every category
(what interleaving does not cancel). speedbench's verdicts come from `analyse_history`, the function `history
show`, `check` and `html` call; asv's and Otava's from their methods implemented in bench.analysis._change_points,
run on the same series. Targets: A/A false change point in <= 5% of histories; a 15% step in one
category found in >= 90% and located within 2 commits; a 10% overall step found in >= 90%; a drift of 0.5% a
commit flagged within 20 commits.

    .venv/bin/python benchmarks/history_calibration.py [--histories 200] [--peers 40] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.analysis import analyse_history, asv_change_points, otava_change_points
from bench.records import HistoryPoint, Machine, PointRow, point_table

CATEGORIES = ("coding", "extraction", "humanities", "math", "multilingual", "qa", "rag", "reasoning", "roleplay",
              "stem", "writing")
METRICS = {"decode": (math.log(1.34), 0.08), "latency": (math.log(1.25), 0.10), "accept_rate": (math.log(0.55), 0.06)}
"""Per metric: the true level (log) and the per-sample spread (sd of a sample's log) of one category."""
SAMPLES = 4
"""Samples per category per commit (LIMIT=4)."""
COMMIT_SD = 0.004
"""The commit-level shift shared by a commit's categories (log sd): drift that interleaving does not cancel."""
MACHINE = Machine("synthetic", "000000000000", "synthetic CPU", 2, "synthetic", "synthetic", "0" * 12)


@dataclass(frozen=True)
class Scenario:
    """A synthetic truth: per commit index and category, the log shift of each metric."""

    name: str
    shift: Callable[[int, str, str], float]
    change_at: int | None = None


def synthetic_history(rng: np.random.Generator, commits: int, shift: Callable[[int, str, str], float]) -> list:
    """One history: `commits` points of 11 categories and the overall row, 3 metrics each."""
    points = []
    for index in range(commits):
        rows = []
        for metric, (level, spread) in METRICS.items():
            common = rng.normal(0.0, COMMIT_SD)
            logs, ses = [], []
            for category in CATEGORIES:
                samples = rng.normal(level + shift(index, category, metric) + common, spread, SAMPLES)
                mean, se = float(samples.mean()), float(samples.std(ddof=1) / math.sqrt(SAMPLES))
                logs.append(mean)
                ses.append(se)
                rows.append(_row(category, metric, mean, se, SAMPLES))
            overall_se = math.sqrt(sum(se * se for se in ses)) / len(ses)
            rows.append(_row("overall", metric, float(np.mean(logs)), overall_se, SAMPLES * len(CATEGORIES)))
        commit = f"c{index:05d}"
        when = f"2026-01-01T00:00:00+00:00#{index:05d}"
        points.append(HistoryPoint(commit, "main", when, when, "synthetic", MACHINE, "", commit, "", point_table(rows)))
    return points


def _row(category: str, metric: str, log_mean: float, se: float, n: int) -> PointRow:
    half = 1.96 * se
    return PointRow(category, metric, math.exp(log_mean), math.exp(log_mean - half), math.exp(log_mean + half), se,
                    n - 1.0, n)


def _speedbench_changes(points: list) -> dict[tuple[str, str], list[int]]:
    analysis = analyse_history(points)
    return {(series.category, series.name): [change.index for change in series.change_points]
            for series in analysis.series}


def _peer_changes(points: list, method: str, only: tuple[str, str] | None = None) -> dict[tuple[str, str], list[int]]:
    series: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for point in points:
        for row in point.rows:
            if only is not None and (row.category, row.metric) != only:
                continue
            values = series.setdefault((row.category, row.metric), ([], []))
            values[0].append(math.log(row.estimate))
            values[1].append(row.log_se)
    found = {}
    for key, (values, ses) in series.items():
        found[key] = list(asv_change_points(values, ses) if method == "asv" else otava_change_points(values))
    return found


METHODS: dict[str, Callable[[list], dict[tuple[str, str], list[int]]]] = {
    "speedbench": _speedbench_changes,
    "asv": lambda points: _peer_changes(points, "asv"),
    "otava": lambda points: _peer_changes(points, "otava"),
}


def scenarios(commits: int) -> list[Scenario]:
    """A/A, a 15% step in one category's decode, a 10% step overall (every category's decode)."""
    at = commits // 2
    return [
        Scenario("A/A", lambda index, category, metric: 0.0),
        Scenario("15% step, one category", lambda index, category, metric: math.log(0.85)
                 if index >= at and category == "math" and metric == "decode" else 0.0, at),
        Scenario("10% step overall", lambda index, category, metric: math.log(0.90)
                 if index >= at and metric == "decode" else 0.0, at),
    ]


def score(scenario: Scenario, found: dict[tuple[str, str], list[int]]) -> tuple[bool, bool]:
    """(any change point anywhere, the true change found in its series within 2 commits)."""
    anything = any(found.values())
    if scenario.change_at is None:
        return anything, False
    key = ("math", "decode") if "one category" in scenario.name else ("overall", "decode")
    located = any(abs(index - scenario.change_at) <= 2 for index in found.get(key, []))
    return anything, located


def drift_delay(rng: np.random.Generator, method: str, before: int, limit: int = 30) -> int | None:
    """Commits of a 0.5%-a-commit drift (every category's decode) until the method flags a change point."""
    drift = math.log(0.995)
    points = synthetic_history(rng, before + limit, lambda index, category, metric:
                               drift * (index - before + 1) if index >= before and metric == "decode" else 0.0)
    for extra in range(1, limit + 1):
        # the peers read only the overall decode series here (their other series are the A/A rows' business);
        # speedbench reads every series, as its family needs them all
        found = (METHODS[method](points[:before + extra]) if method == "speedbench"
                 else _peer_changes(points[:before + extra], method, ("overall", "decode")))
        if any(index >= before - 2 for indices in found.values() for index in indices):
            return extra
    return None


def main() -> int:
    """Run every scenario at 30, 100 and 300 commits for each method; print a Markdown table (and JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--histories", type=int, default=200, help="histories per cell for speedbench's method")
    parser.add_argument("--peers", type=int, default=40, help="histories per cell for asv's and Otava's methods")
    parser.add_argument("--drift", type=int, default=None, help="histories per drift cell (default: --peers)")
    parser.add_argument("--lengths", default="30,100,300", help="history lengths in commits")
    parser.add_argument("--methods", default="speedbench,asv,otava")
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--json", default=None, help="also write the figures as JSON here")
    args = parser.parse_args()
    started = time.time()
    rows = []
    for commits in (int(item) for item in args.lengths.split(",")):
        for method in args.methods.split(","):
            count = args.histories if method == "speedbench" else args.peers
            for number, scenario in enumerate(scenarios(commits)):
                rng = np.random.default_rng([args.seed, commits, number])
                anything = located = 0
                for _ in range(count):
                    flags = score(scenario, METHODS[method](synthetic_history(rng, commits, scenario.shift)))
                    anything += flags[0]
                    located += flags[1]
                rows.append({"commits": commits, "method": method, "scenario": scenario.name, "histories": count,
                             "any_change_point": anything / count,
                             "found_within_2": located / count if scenario.change_at is not None else None})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            rng = np.random.default_rng([args.seed, commits, 7])
            drift_count = args.drift or (args.histories if method == "speedbench" else args.peers)
            delays = [drift_delay(rng, method, commits - 20) for _ in range(max(1, drift_count // 2))]
            within = sum(delay is not None and delay <= 20 for delay in delays) / len(delays)
            flagged = sorted(delay for delay in delays if delay is not None)
            rows.append({"commits": commits, "method": method, "scenario": "drift 0.5%/commit",
                         "histories": len(delays), "flagged_within_20": within,
                         "median_delay": flagged[len(flagged) // 2] if flagged else None})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(_markdown(rows))
    print(f"\n{platform.processor() or platform.machine()}, {sys.version.split()[0]}, "
          f"{time.strftime('%Y-%m-%d', time.gmtime())}, {time.time() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def _markdown(rows: list[dict]) -> str:
    lines = ["| commits | method | scenario | histories | any change point | true change found (±2) | drift flagged "
             "<= 20 | median delay |", "|---:|---|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        cells = [_cell(row.get(key)) for key in ("any_change_point", "found_within_2", "flagged_within_20",
                                                  "median_delay")]
        lines.append(f"| {row['commits']} | {row['method']} | {row['scenario']} | {row['histories']} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: object) -> str:
    return "" if value is None else f"{value:.1%}" if isinstance(value, float) else str(value)


if __name__ == "__main__":
    raise SystemExit(main())
