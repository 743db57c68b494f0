"""How many client processes a run gets: the count given, or `--workers auto`'s, from a measured per-process limit.

`auto` keeps one process unless the load asked for exceeds what one process was measured to drive on the
2-core VM of `benchmarks/RESULTS.md`; then it takes as many processes as that load needs, at most one per core.
The load asked for is the requests in flight (closed loop: `--concurrency`; open loop: `--max-concurrency`)
or, for an open loop without a cap, the arrival rate.
"""

from __future__ import annotations

import math
import os

from bench._errors import BenchError

AUTO = "auto"
"""`--workers auto`: choose the count from the load (the default)."""

PER_PROCESS_IN_FLIGHT = 256
"""Requests in flight one client process keeps and times within its targets. Source: the streaming row
`256x100/s (25,600)` of `make perf` (`.venv/bin/python benchmarks/perf.py --streaming-only` runs it alone):
256 streams at 100 chunks/s, ITL error p99 0.019-0.025 ms in 6 of 6 quiet runs on the 2-core VM
(benchmarks/RESULTS.md, 2026-12-02), while with two cores busy (`--busy 2`) the same point missed its target."""

PER_PROCESS_REQUESTS_PER_S = 3_986
"""Requests per second one client process drives. Source: `make perf`'s row `requests/s, concurrency 64`,
3,986-5,735 in 6 quiet runs on the 2-core VM (benchmarks/RESULTS.md, 2026-12-02): the lowest of them."""


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def choose_workers(
    requested: int | None, *, concurrency: int, request_rate: float | None = None, open_loop: bool = False,
    max_concurrency: int | None = None, single: str | None = None,
) -> tuple[int, str | None]:
    """(workers, why auto chose them or None when `requested` is a count).

    `single` names what needs one process (a shard, a sequential test); `auto` then chooses 1 and a count above
    1 is refused in one line.
    """
    if requested is not None:
        if requested > 1 and single is not None:
            raise BenchError(f"--workers {requested}: {single} runs in one process; drop --workers")
        return requested, None
    if single is not None:
        return 1, f"auto: 1 process ({single} runs in one)"
    if open_loop and max_concurrency is None:
        if request_rate is None:
            return 1, "auto: 1 process (a replayed trace without --max-concurrency: its load is unknown ahead)"
        needed = math.ceil(request_rate / PER_PROCESS_REQUESTS_PER_S)
        load = f"{request_rate:g} requests/s against {PER_PROCESS_REQUESTS_PER_S:,} per process"
    else:
        in_flight = max_concurrency if open_loop and max_concurrency is not None else concurrency
        needed = -(-in_flight // PER_PROCESS_IN_FLIGHT)  # integer ceiling: any int, however large, divides
        load = f"{in_flight} in flight against {PER_PROCESS_IN_FLIGHT} per process"
    chosen = max(1, min(cores(), needed))  # needed <= the requests in flight: each worker gets one
    return chosen, f"auto: {chosen} process{'es' if chosen > 1 else ''} ({load}, {cores()} cores)"


def worker_shares(concurrency: int, workers: int) -> list[int]:
    """The closed-loop concurrency of each of `workers` processes, summing to `concurrency`."""
    if workers < 1:
        raise BenchError(f"--workers must be >= 1 (got {workers})")
    if workers > concurrency:
        raise BenchError(f"--workers {workers} exceeds --concurrency {concurrency}: each worker needs a request "
                         "in flight")
    return [concurrency // workers + (1 if index < concurrency % workers else 0) for index in range(workers)]
