"""What a second client process buys: requests/s at concurrency 64 and streamed chunks/s, workers = 1 and 2.

The two settings run interleaved (1, 2, 1, 2, ...) against the same nginx, so drift of a shared machine
lands on both. Without the runner's `workers` setting in this build the rows say so and carry no figure.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from measures.common import SSE_CHUNKS, Measured, Row, Sizes, fmt
from measures.loops import runner_takes
from measures.throughput import Series, runner_series

WORKER_COUNTS = (1, 2)


def measure_workers(url: str, sse_url: str, sizes: Sizes, workdir: Path) -> dict[int, tuple[Series, Series]] | None:
    """{workers: (c=64 series, streamed c=64 series)}, the settings interleaved repeat by repeat; None without it."""
    if not runner_takes("workers"):
        return None
    found: dict[int, tuple[Series, Series]] = {
        count: (Series([], [], [], []), Series([], [], [], [])) for count in WORKER_COUNTS
    }
    for _ in range(sizes.repeats):
        for count in WORKER_COUNTS:
            plain = runner_series(url, sizes.workers_c64, 64, workdir, 1, workers=count)
            streamed = runner_series(sse_url, sizes.stream, 64, workdir, 1, stream=True, workers=count)
            for into, series in zip(found[count], (plain, streamed), strict=True):
                into.elapsed += series.elapsed
                into.walls += series.walls
                into.chunks += series.chunks
    return found


def workers_rows(sizes: Sizes, found: dict[int, tuple[Series, Series]] | None) -> Measured:
    """Rows for workers = 1 and 2 (n/a with the reason when this build has no worker processes)."""
    if found is None:
        rows = [Row(f"requests/s, c=64, workers={count}", "n/a") for count in WORKER_COUNTS]
        rows += [Row(f"stream chunks/s, c=64, workers={count}", "n/a") for count in WORKER_COUNTS]
        return Measured(rows, ["workers: n/a - this build's runner has no `workers` setting (one process)."])
    rows = []
    rates = {count: found[count][0].rate(sizes.workers_c64) for count in WORKER_COUNTS}
    chunks = {
        count: statistics.median(n / elapsed for n, elapsed in zip(found[count][1].chunks, found[count][1].elapsed,
                                                                   strict=True))
        for count in WORKER_COUNTS
    }
    for count in WORKER_COUNTS:
        gain = f"{rates[count] / rates[1]:.2f}x of workers=1" if count != 1 else "-"
        rows.append(Row(f"requests/s, c=64, workers={count}", f"{rates[count]:,.0f}", "-", "-", "-", gain))
    for count in WORKER_COUNTS:
        gain = f"{chunks[count] / chunks[1]:.2f}x of workers=1" if count != 1 else "-"
        rows.append(Row(f"stream chunks/s, c=64, workers={count}", fmt(chunks[count], ",.0f"), "-", "-", "-", gain))
    note = (f"workers: median of {sizes.repeats} runs per setting, workers=1 and 2 interleaved; n = "
            f"{sizes.workers_c64:,} requests (c=64) and {sizes.stream} x {SSE_CHUNKS}-chunk streams (c=64) per run, "
            "over the runner's elapsed_s; the ratio column is against workers=1 of the same run.")
    return Measured(rows, [note])
