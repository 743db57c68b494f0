"""History: load and analyse a 10,000-point history (the files `history add` writes, the analysis `show` runs)."""

from __future__ import annotations

import math
import random
import time
from pathlib import Path
from typing import Any

from measures.common import CATEGORIES, TARGETS, Measured, Row, judge

WORKLOADS = ("grounded:ngram-mod", "qualitative:ngram-mod")


def synthetic_points(count: int, seed: int = 36) -> list[Any]:
    """`count` points over two workloads (count/2 commits each): every category and overall, four metrics."""
    from bench.records import HISTORY_METRICS, HistoryPoint, Machine, PointRow, point_table

    rng = random.Random(seed)
    machine = Machine("perf", "5eed5eed5eed", "perf CPU", 2, "perf engine", "perf.gguf", "0" * 12)
    points = []
    for index in range(count):
        workload = WORKLOADS[index % len(WORKLOADS)]
        commit = f"{index // len(WORKLOADS):08x}"
        rows = []
        for category in (*CATEGORIES, "overall"):
            for metric in HISTORY_METRICS:
                se = rng.uniform(0.01, 0.05)
                value = math.exp(rng.gauss(0.3, se))
                rows.append(PointRow(category, metric, value, value * math.exp(-2 * se), value * math.exp(2 * se),
                                     se, 3.0, 4))
        when = f"2026-01-01T00:00:00+00:00/{index:06d}"
        points.append(HistoryPoint(commit, "main", when, when, workload, machine, "", f"{index:012d}",
                                   "speedbench perf", point_table(rows)))
    return points


def history_time(workdir: Path, count: int) -> tuple[float, dict[str, float]]:
    """Seconds to load `count` point files from a history folder and find every series' change points."""
    from bench.analysis import analyse_history
    from bench.records import load_history, write_points

    folder = workdir / "history"
    write_points(folder, synthetic_points(count))
    steps: dict[str, float] = {}
    start, cpu = time.perf_counter(), time.process_time()
    points = load_history(folder)
    loaded = time.perf_counter()
    steps["load_history"] = loaded - start
    analysis = analyse_history(points)
    steps[f"analyse_history ({len(analysis.series)} series)"] = time.perf_counter() - loaded
    steps["CPU time of both"] = time.process_time() - cpu  # what the process itself spent, whatever the load
    return time.perf_counter() - start, steps


def history_rows(count: int, measured: tuple[float, dict[str, float]]) -> Measured:
    """The history row and its note (the time of each step)."""
    total, steps = measured
    row = Row(f"load+analyse {count:,}-point history (s)", f"{total:.2f}", f"<= {TARGETS['history_s']:g}",
              judge(total, TARGETS["history_s"], at_least=False), "-", "-")
    note = (f"history: {count:,} point files (two workloads x {count // 2:,} commits, {len(CATEGORIES)} categories and "
            "overall x 4 metrics each) loaded from a history folder and analysed (series, change points); "
            + ", ".join(f"{name} {sec:.2f}s" for name, sec in steps.items()) + ".")
    return Measured([row], [note])
