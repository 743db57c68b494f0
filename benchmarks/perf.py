"""`make perf`: speedbench's own client overhead against static loopback servers, in one table.

Each measurement is one module of `benchmarks/measures/`: the static nginx and its floor (`nginx`), requests
and stream parsing (`throughput`), start-up (`startup`), peak RSS (`rss`), analysis of 100,000 records
(`analysis`), the reference client llama.cpp's `speed_bench.py` (`reference`), the streaming load against
a schedule server beside an epoll floor (`streaming`), vLLM's `bench serve` client (`vllm_client`), worker
processes (`workers`), and asyncio against uvloop (`loop_compare`, with `--compare-loops`). This file
starts the servers, calls them, and prints the table and its notes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measures.analysis import analysis_rows, analysis_time
from measures.common import (
    QUICK,
    SSE_CHUNKS,
    Measured,
    Row,
    Sizes,
    busy_cores,
    log,
    machine_line,
    missed_targets,
    percentile,
    render,
    timed,
)
from measures.loop_compare import compare_loops, loop_table
from measures.loops import LOOPS, event_loop, loop_settings, loop_unavailable
from measures.nginx import Nginx, raw_round_trips
from measures.reference import reference_note, reference_setup, run_reference
from measures.rss import peak_rss_mb, rss_rows
from measures.startup import startup_rows, startup_time
from measures.streaming import STREAM_TARGETS, Load, Outcome, measure_streaming, stream_table
from measures.throughput import run_runner, runner_series, throughput_rows
from measures.vllm_client import measure_vllm, vllm_rows
from measures.workers import measure_workers, workers_rows

__all__ = ["STREAM_TARGETS", "Load", "Outcome", "Row", "busy_cores", "main", "missed_targets", "stream_table"]


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    """Turn SIGTERM into SystemExit so `finally` blocks stop the servers."""
    raise SystemExit(128 + signum)


def measure(sizes: Sizes, use_reference: bool, loop: str) -> list[Measured]:
    """Start nginx, take every figure that uses it (and the analysis), stop it; each measurement's rows and notes."""
    settings = loop_settings(loop)
    with tempfile.TemporaryDirectory(prefix="speedbench-perf-") as temp:
        workdir = Path(temp)
        os.chmod(workdir, 0o755)
        server = Nginx(workdir / "nginx", SSE_CHUNKS)
        server.dir.mkdir()
        try:
            server.start()
            log(f"nginx on 127.0.0.1:{server.port} (logged :{server.logged_port})")
            url, sse_url = server.url(), server.url(sse=True)
            floor = percentile(raw_round_trips(server.port, 3000), 0.5)
            timed("warm-up", lambda: run_runner(url, 300, 1, workdir, **settings))
            c1 = timed("c=1", lambda: runner_series(url, sizes.c1, 1, workdir, sizes.repeats, **settings))
            c64 = timed("c=64", lambda: runner_series(url, sizes.c64, 64, workdir, sizes.repeats, **settings))
            sse = timed("stream", lambda: runner_series(sse_url, sizes.stream, 1, workdir, sizes.repeats, stream=True,
                                                        **settings))
            sse64 = timed("stream c=64", lambda: runner_series(sse_url, sizes.stream_c64, 64, workdir, sizes.repeats,
                                                               stream=True, **settings))
            vllm, vllm_how = timed("vllm bench serve", lambda: measure_vllm(server.url(sse=True), sizes, workdir))
            workers = timed("workers", lambda: measure_workers(url, sse_url, sizes, workdir))
            startup = timed("start-up", lambda: startup_time(server, workdir, sizes.startup_runs))
            rss = timed("rss", lambda: peak_rss_mb(server, workdir, sizes.rss))
            ref1 = ref64 = None
            setup = timed("reference setup", reference_setup) if use_reference else None
            if setup is not None:
                ref1 = timed("reference c=1", lambda: run_reference(setup, url, sizes.ref_c1, 1))
                ref64 = timed("reference c=64", lambda: run_reference(setup, url, sizes.ref_c64, 64))
        finally:
            server.stop()
        analysis = timed("analysis", lambda: analysis_time(workdir, sizes.records))
    streamed64 = statistics.median(chunks / elapsed for chunks, elapsed in zip(sse64.chunks, sse64.elapsed,
                                                                               strict=True))
    throughput = throughput_rows(sizes, floor, c1, c64, sse, ref1, ref64)
    throughput.notes.append(reference_note(sizes, ref1))
    return [
        throughput,
        vllm_rows(streamed64, vllm, vllm_how, sizes.stream_c64),
        workers_rows(sizes, workers),
        startup_rows(sizes.startup_runs, startup),
        rss_rows(sizes.rss, rss),
        analysis_rows(sizes.records, analysis),
    ]


def loops_report(sizes: Sizes, loops: tuple[str, ...]) -> str:
    """The asyncio-against-uvloop table, its loops interleaved against one nginx and the schedule servers."""
    with tempfile.TemporaryDirectory(prefix="speedbench-perf-") as temp:
        workdir = Path(temp)
        os.chmod(workdir, 0o755)
        server = Nginx(workdir / "nginx", SSE_CHUNKS)
        server.dir.mkdir()
        try:
            server.start()
            for name in loops:
                with event_loop(name):
                    timed(f"warm-up {name}", lambda: run_runner(server.url(), 300, 1, workdir))
            found = compare_loops(server.url(), server.url(sse=True), sizes, workdir, loops)
        finally:
            server.stop()
    return loop_table(found, loops)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (one-line errors, exit 2, for bad values)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run, not for RESULTS.md)")
    parser.add_argument("--no-reference", action="store_true", help="skip the reference client")
    parser.add_argument("--streaming-only", action="store_true",
                        help="only the streaming load rows, not the request, start-up and analysis rows")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="keep N cores busy with busy-loop processes during the streaming load (a loaded "
                             "machine; default: 0)")
    parser.add_argument("--loop", choices=LOOPS, default=None,
                        help="the event loop of the in-process runs (default: the runner's own choice)")
    parser.add_argument("--compare-loops", action="store_true",
                        help="only asyncio against uvloop on the request, parse and streaming rows, interleaved")
    parser.add_argument("--setup-reference", action="store_true",
                        help="only fetch the reference client into .cache/reference/ (for the parity tests)")
    args = parser.parse_args(argv)
    if args.busy < 0:
        parser.error(f"--busy must be >= 0 (got {args.busy})")
    for name in (LOOPS if args.compare_loops else (args.loop,) if args.loop else ()):
        reason = loop_unavailable(name)
        if reason:
            parser.error(reason)
    return args


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table and notes."""
    args = parse_args(argv)
    if args.setup_reference:
        setup = reference_setup()
        print(f"reference: {setup[1] if setup else 'unavailable (the parity tests will skip, or fail under CI=true)'}")
        return 0 if setup else 1
    signal.signal(signal.SIGTERM, _raise_exit)
    started = time.perf_counter()
    sizes = QUICK if args.quick else Sizes()
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    if args.compare_loops:
        with busy_cores(args.busy):
            text = loops_report(sizes, LOOPS)
        print(f"speedbench perf --compare-loops ({stamp}; {machine_line()})")
        print(text, end="")
        if args.busy:
            print(f"- measured with {args.busy} busy-loop processes beside it (--busy {args.busy})")
        print(f"total {time.perf_counter() - started:.0f}s")
        return 0
    loop = args.loop or "asyncio"
    with event_loop(loop):
        measured: list[Measured] = []
        if not args.streaming_only:
            measured = measure(sizes, not args.no_reference, loop)
        with tempfile.TemporaryDirectory(prefix="speedbench-perf-") as temp:
            streaming = measure_streaming(sizes, Path(temp), args.busy, **loop_settings(loop))
    rows = [row for part in measured for row in part.rows]
    notes = [note for part in measured for note in part.notes]
    if args.busy:
        notes.append(f"streaming load measured with {args.busy} busy-loop processes beside it (--busy {args.busy})")
    if args.loop:
        notes.append(f"event loop of the in-process runs: {args.loop} (--loop)")
    print(f"speedbench perf ({stamp}; {machine_line()})")
    if rows:
        print(render(rows), end="")
    streams_text, stream_notes, stream_missed = stream_table(streaming)
    print()
    print("streaming load: client ITL error against the server's own send gaps")
    print(streams_text, end="")
    for note in [*notes, *stream_notes]:
        print(f"- {note}")
    failed = missed_targets(rows, stream_missed)
    judged = sum(row.status in ("PASS", "FAIL") for row in rows) + len(streaming)
    print(f"targets: {judged - len(failed)} PASS, {len(failed)} FAIL{': ' + ', '.join(failed) if failed else ''}; "
          f"total {time.perf_counter() - started:.0f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
