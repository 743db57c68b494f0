"""Requests/s at concurrency 1 and 64, client overhead and streamed chunks parsed/s: the runner against nginx."""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from measures.common import (
    OSL,
    SERVER_TIME_S,
    SSE_CHUNKS,
    TARGETS,
    Measured,
    Row,
    Sizes,
    fmt,
    judge,
    percentile,
    prompt_set,
    ratio,
)


def run_runner(
    url: str, count: int, concurrency: int, workdir: Path, *, stream: bool = False, **settings: Any
) -> tuple[Any, float]:
    """One `run_benchmark` call (temp output, silent, no signal handlers); the run and its wall time.

    `settings` are further RunConfig fields (such as `workers`), passed only when given.
    """
    from bench.runner import RunConfig, SilentProgress, run_benchmark

    tag = f"{'sse' if stream else 'plain'}-c{concurrency}-n{count}"
    config = RunConfig(url=url, osl=OSL, concurrency=concurrency, stream=stream, label=tag, timeout=60.0, **settings)
    output = workdir / f"{tag}-{time.monotonic_ns()}.json"
    start = time.perf_counter()
    run, interrupted = run_benchmark(prompt_set(count, tag), config, output=output, progress=SilentProgress(),
                                     install_signal_handlers=False, force=True)
    wall = time.perf_counter() - start
    if interrupted or run.failed_samples:
        first = next((result.error for result in run.results if result.error), None)
        raise RuntimeError(f"{tag}: {run.failed_samples} failed samples; first error: {first}")
    return run, wall


@dataclass
class Series:
    """What a series of runner runs leaves behind: per-run elapsed_s, wall time and content chunks; latencies;
    per-run request windows (first request sent to last answer done)."""

    elapsed: list[float]
    walls: list[float]
    chunks: list[int]
    latencies: list[float]
    windows: list[float] = field(default_factory=list)

    def rate(self, count: int) -> float:
        """Median requests per second over the runs' elapsed_s."""
        return statistics.median(count / elapsed for elapsed in self.elapsed)

    def wall_rate(self, count: int) -> float:
        """Median requests per second over the runs' wall time (writing the run file included)."""
        return statistics.median(count / wall for wall in self.walls)


def request_window(results: list[Any]) -> float:
    """Seconds from the first request sent to the last answer done, over the results that have both times."""
    timed = [result for result in results if result.sent_s is not None]
    return max(result.sent_s + result.latency_s for result in timed) - min(result.sent_s for result in timed)


def runner_series(
    url: str, count: int, concurrency: int, workdir: Path, repeats: int, *, stream: bool = False, **settings: Any
) -> Series:
    """`repeats` runner runs of `count` samples, keeping only their figures (gc between runs, outside timing)."""
    series = Series([], [], [], [])
    for _ in range(repeats):
        gc.collect()
        run, wall = run_runner(url, count, concurrency, workdir, stream=stream, **settings)
        series.elapsed.append(run.meta["elapsed_s"])
        series.walls.append(wall)
        series.chunks.append(sum(result.completion_tokens for result in run.results))
        series.latencies.extend(result.latency_s for result in run.results)
        series.windows.append(request_window(run.results))
        del run
    return series


REFERENCE_MULTIPLE = 5.0
"""speedbench's requests/s at concurrency 64 is to reach this multiple of the reference client's."""


def request_rows(
    sizes: Sizes,
    floor: float,
    c1: Series,
    c64: Series,
    ref1: dict[str, Any] | None,
    ref64: dict[str, Any] | None,
    reference_skipped: bool = False,
) -> Measured:
    """The request rows (speedbench beside the reference where it has a figure) and their notes.

    Requests/s at concurrency 64 is judged twice: against its absolute target and against `REFERENCE_MULTIPLE`
    times the reference's; the second reads `-` when the reference was skipped on purpose (`--no-reference`)
    and n/a (a missed target) when it could not be had.
    """
    rps1, rps64 = c1.rate(sizes.c1), c64.rate(sizes.c64)
    latencies = c1.latencies
    mean_ms = statistics.mean(latencies) * 1000
    over_p50 = (percentile(latencies, 0.5) - SERVER_TIME_S) * 1000
    over_p99 = (percentile(latencies, 0.99) - SERVER_TIME_S) * 1000
    ref_rps1 = ref1["requests"] / ref1["elapsed_s"] if ref1 else None
    ref_rps64 = ref64["requests"] / ref64["elapsed_s"] if ref64 else None

    def ref_ms(key: str, minus: float = 0.0) -> float | None:
        """A reference c=1 latency figure in ms (less `minus` seconds), or None."""
        return (ref1[key] - minus) * 1000 if ref1 and ref1.get(key) is not None else None

    ref_mean = ref_ms("mean_latency_s")
    ref_p50, ref_p99 = ref_ms("p50_latency_s", SERVER_TIME_S), ref_ms("p99_latency_s", SERVER_TIME_S)
    multiple = rps64 / ref_rps64 if ref_rps64 else None
    multiple_status = "-" if reference_skipped else judge(multiple, REFERENCE_MULTIPLE, at_least=True)
    rows = [
        Row("requests/s, concurrency 1", f"{rps1:,.0f}", ">= 2,500", judge(rps1, TARGETS["rps_c1"], at_least=True),
            fmt(ref_rps1, ",.0f"), ratio(rps1, ref_rps1)),
        Row("requests/s, concurrency 64", f"{rps64:,.0f}", ">= 5,000",
            judge(rps64, TARGETS["rps_c64"], at_least=True), fmt(ref_rps64, ",.0f"), ratio(rps64, ref_rps64)),
        Row("requests/s, c=64, speedbench/reference", fmt(multiple, ".2f") + ("x" if multiple else ""),
            f">= {REFERENCE_MULTIPLE:g}x", multiple_status, "-", "-"),
        Row("mean latency_s, c=1 (ms)", f"{mean_ms:.3f}", "-", "-", fmt(ref_mean, ".3f"), ratio(mean_ms, ref_mean)),
        Row("client overhead p50, c=1 (ms)", f"{over_p50:.3f}", "<= 0.4",
            judge(over_p50, TARGETS["overhead_p50_ms"], at_least=False), fmt(ref_p50, ".3f"),
            ratio(over_p50, ref_p50)),
        Row("client overhead p99, c=1 (ms)", f"{over_p99:.3f}", "-", "-", fmt(ref_p99, ".3f"),
            ratio(over_p99, ref_p99)),
    ]
    notes = [
        f"req/s: median of {sizes.repeats} run_benchmark runs (n = {sizes.c1:,} at c=1, {sizes.c64:,} at c=64), "
        f"over the runner's elapsed_s (its `Summary (elapsed=...)`); over wall time incl. writing the run file: "
        f"{c1.wall_rate(sizes.c1):,.0f}/s and {c64.wall_rate(sizes.c64):,.0f}/s; each c=64 run: "
        + ", ".join(f"{sizes.c64 / elapsed:,.0f}" for elapsed in c64.elapsed) + ".",
        f"client overhead = latency_s of the c=1 run records (all {len(latencies):,}) minus nginx's own time, "
        f"taken as 0 (a static `return 200`; its $request_time reads 0.000); loopback and kernel stay in it: a "
        f"minimal blocking keep-alive socket client's p50 round trip to the same nginx is {floor * 1e6:.0f} us.",
    ]
    return Measured(rows, notes)


def parse_rows(sizes: Sizes, sse: Series) -> Measured:
    """Streamed chunks parsed per second at concurrency 1 (one 1,000-chunk response after another)."""
    chunks_per_s = statistics.median(
        chunks / elapsed for chunks, elapsed in zip(sse.chunks, sse.elapsed, strict=True)
    )
    row = Row(f"stream chunks parsed/s ({SSE_CHUNKS}/response)", f"{chunks_per_s:,.0f}", ">= 50,000",
              judge(chunks_per_s, TARGETS["chunks_per_s"], at_least=True), "-", "-")
    note = (f"chunks/s: median of {sizes.repeats} run_benchmark runs of {sizes.stream} x {SSE_CHUNKS}-chunk "
            f"streams at concurrency 1, over the runner's elapsed_s.")
    return Measured([row], [note])
