"""`make perf`: speedbench's own client overhead against static loopback servers, in one table.

Each measurement is one module of `benchmarks/measures/`: the static nginx and its floor (`nginx`), requests
and stream parsing (`throughput`), start-up (`startup`), peak RSS (`rss`), analysis of 100,000 records
(`analysis`), a 10,000-point history loaded and analysed (`history`), the reference client llama.cpp's
`speed_bench.py` (`reference`), the streaming load against a schedule server beside an epoll floor
(`streaming`), vLLM's `bench serve` client (`vllm_client`), worker processes (`workers`), and asyncio against
uvloop (`loop_compare`, with `--compare-loops`). This file starts the servers, calls them, and prints the table
and its notes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

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
from measures.history import history_rows, history_time
from measures.loop_compare import compare_loops, loop_table
from measures.loops import LOOPS, event_loop, loop_settings, loop_unavailable
from measures.nginx import Nginx, raw_round_trips
from measures.reference import reference_note, reference_setup, run_reference
from measures.rss import peak_rss_mb, rss_rows
from measures.startup import startup_rows, startup_time
from measures.streaming import STREAM_TARGETS, Load, Outcome, measure_streaming, stream_table
from measures.throughput import parse_rows, request_rows, run_runner, runner_series
from measures.vllm_client import measure_vllm_rows
from measures.workers import measure_workers, workers_rows

__all__ = ["STREAM_TARGETS", "Load", "Outcome", "Row", "busy_cores", "main", "missed_targets", "stream_table"]


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    """Turn SIGTERM into SystemExit so `finally` blocks stop the servers."""
    raise SystemExit(128 + signum)


PARTS = ("requests", "parse", "vllm", "workers", "startup", "rss", "analysis", "history", "streaming", "loops")
"""The row groups `--only` selects: requests/s at c=1 and c=64 beside the reference (and the client overhead),
stream parsing at c=1, streamed chunks/s at c=64 beside vLLM's `bench serve`, worker processes, start-up, peak
RSS, analysis time, the 10,000-point history's load and analysis, the streaming load table, and the
asyncio-against-uvloop table (its own table; only when asked for)."""
DEFAULT_PARTS = tuple(part for part in PARTS if part != "loops")
NGINX_PARTS = frozenset({"requests", "parse", "vllm", "workers", "startup", "rss"})


def parse_parts(text: str) -> tuple[str, ...]:
    """`--only`'s comma-separated row groups, in the table's order; ValueError naming an unknown one."""
    asked = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in asked if name not in PARTS]
    if unknown or not asked:
        raise ValueError(f"unknown row group {', '.join(unknown) or repr(text)}; choose from {', '.join(PARTS)}")
    return tuple(part for part in PARTS if part in asked)


def measure(sizes: Sizes, parts: tuple[str, ...], use_reference: bool, loop: str) -> list[Measured]:
    """Take the figures of the selected row groups (nginx started only when one needs it); rows and notes each."""
    settings = loop_settings(loop)
    found: dict[str, Measured] = {}
    with tempfile.TemporaryDirectory(prefix="speedbench-perf-") as temp:
        workdir = Path(temp)
        os.chmod(workdir, 0o755)
        if NGINX_PARTS.intersection(parts):
            server = Nginx(workdir / "nginx", SSE_CHUNKS)
            server.dir.mkdir()
            try:
                server.start()
                log(f"nginx on 127.0.0.1:{server.port} (logged :{server.logged_port})")
                found.update(_against_nginx(server, sizes, parts, use_reference, workdir, settings))
            finally:
                server.stop()
        if "analysis" in parts:
            found["analysis"] = analysis_rows(
                sizes.records, timed("analysis", lambda: analysis_time(workdir, sizes.records))
            )
        if "history" in parts:
            found["history"] = history_rows(
                sizes.history_points, timed("history", lambda: history_time(workdir, sizes.history_points))
            )
    return [found[part] for part in parts if part in found]


def _against_nginx(
    server: Nginx, sizes: Sizes, parts: tuple[str, ...], use_reference: bool, workdir: Path, settings: dict[str, Any]
) -> dict[str, Measured]:
    """The row groups measured against the running nginx."""
    url, sse_url = server.url(), server.url(sse=True)
    found: dict[str, Measured] = {}
    if "requests" in parts or "parse" in parts:
        timed("warm-up", lambda: run_runner(url, 300, 1, workdir, **settings))
    if "requests" in parts:
        floor = percentile(raw_round_trips(server.port, 3000), 0.5)
        c1 = timed("c=1", lambda: runner_series(url, sizes.c1, 1, workdir, sizes.repeats, **settings))
        c64 = timed("c=64", lambda: runner_series(url, sizes.c64, 64, workdir, sizes.repeats, **settings))
        ref1 = ref64 = None
        setup = timed("reference setup", reference_setup) if use_reference else None
        if setup is not None:
            ref1 = timed("reference c=1", lambda: run_reference(setup, url, sizes.ref_c1, 1))
            ref64 = timed("reference c=64", lambda: run_reference(setup, url, sizes.ref_c64, 64))
        found["requests"] = request_rows(sizes, floor, c1, c64, ref1, ref64, reference_skipped=not use_reference)
        found["requests"].notes.append(
            "reference: skipped (--no-reference)" if not use_reference else reference_note(sizes, ref1)
        )
    if "parse" in parts:
        sse = timed("stream", lambda: runner_series(sse_url, sizes.stream, 1, workdir, sizes.repeats, stream=True,
                                                    **settings))
        found["parse"] = parse_rows(sizes, sse)
    if "vllm" in parts:
        found["vllm"] = measure_vllm_rows(sse_url, sizes, workdir, settings)
    if "workers" in parts:
        found["workers"] = workers_rows(sizes, timed("workers", lambda: measure_workers(url, sse_url, sizes, workdir)))
    if "startup" in parts:
        found["startup"] = startup_rows(sizes.startup_runs,
                                        timed("start-up", lambda: startup_time(server, workdir, sizes.startup_runs)))
    if "rss" in parts:
        found["rss"] = rss_rows(sizes.rss, timed("rss", lambda: peak_rss_mb(server, workdir, sizes.rss)))
    return found


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
    parser.add_argument("--only", type=_parts_arg, default=None, metavar="GROUP[,GROUP...]",
                        help=f"only these row groups ({', '.join(PARTS)}); default: all but loops")
    parser.add_argument("--streaming-only", action="store_true", help="the same as --only streaming")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="keep N cores busy with busy-loop processes during the streaming load (a loaded "
                             "machine; default: 0)")
    parser.add_argument("--stream-workers", type=int, default=1, metavar="N",
                        help="speedbench's worker processes (`run --workers N`) in the streaming load rows "
                             "(default: 1)")
    parser.add_argument("--loop", choices=LOOPS, default=None,
                        help="the event loop of the in-process runs (default: the runner's own choice)")
    parser.add_argument("--compare-loops", action="store_true", help="the same as --only loops")
    parser.add_argument("--setup-reference", action="store_true",
                        help="only fetch the reference client into .cache/reference/ (for the parity tests)")
    args = parser.parse_args(argv)
    if args.busy < 0:
        parser.error(f"--busy must be >= 0 (got {args.busy})")
    if args.stream_workers < 1:
        parser.error(f"--stream-workers must be >= 1 (got {args.stream_workers})")
    aliases = [name for name, given in (("--streaming-only", args.streaming_only),
                                        ("--compare-loops", args.compare_loops)) if given]
    if len(aliases) > 1 or (aliases and args.only is not None):
        parser.error(f"{' and '.join(aliases + ['--only'] * (args.only is not None))} select different rows: "
                     "give one of them")
    args.parts = (("streaming",) if args.streaming_only else ("loops",) if args.compare_loops
                  else args.only or DEFAULT_PARTS)
    for name in (LOOPS if "loops" in args.parts else (args.loop,) if args.loop else ()):
        reason = loop_unavailable(name)
        if reason:
            parser.error(reason)
    return args


def _parts_arg(text: str) -> tuple[str, ...]:
    """argparse type of `--only`."""
    try:
        return parse_parts(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def heading(argv: list[str], stamp: str, load: tuple[float, float, float]) -> str:
    """The first line of the output: the command, the date, the machine and its load average at the start."""
    command = " ".join(["perf", *argv]) if argv else "perf"
    return (f"speedbench {command} ({stamp}; {machine_line()}; load average {load[0]:.2f} {load[1]:.2f} "
            f"{load[2]:.2f} at the start)")


def main(argv: list[str] | None = None) -> int:
    """Measure the selected row groups, print the tables and notes; exit 1 when a target is missed."""
    args = parse_args(argv)
    if args.setup_reference:
        setup = reference_setup()
        print(f"reference: {setup[1] if setup else 'unavailable (the parity tests will skip, or fail under CI=true)'}")
        return 0 if setup else 1
    signal.signal(signal.SIGTERM, _raise_exit)
    started = time.perf_counter()
    sizes = QUICK if args.quick else Sizes()
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    first_line = heading(sys.argv[1:] if argv is None else argv, stamp, os.getloadavg())
    loop = args.loop or "asyncio"
    parts = args.parts
    loops_text = None
    streaming: list[tuple[Load, Outcome, Outcome]] = []
    with event_loop(loop):
        measured = measure(sizes, parts, not args.no_reference, loop)
        if "streaming" in parts:
            with tempfile.TemporaryDirectory(prefix="speedbench-perf-") as temp:
                workers = {"workers": args.stream_workers} if args.stream_workers > 1 else {}
                streaming = measure_streaming(sizes, Path(temp), args.busy, **loop_settings(loop), **workers)
    if "loops" in parts:
        with busy_cores(args.busy):
            loops_text = loops_report(sizes, LOOPS)
    rows = [row for part in measured for row in part.rows]
    notes = [note for part in measured for note in part.notes]
    if args.busy:
        notes.append(f"streaming load measured with {args.busy} busy-loop processes beside it (--busy {args.busy})")
    if args.loop:
        notes.append(f"event loop of the in-process runs: {args.loop} (--loop)")
    if args.stream_workers > 1 and "streaming" in parts:
        notes.append(f"streaming load: speedbench over {args.stream_workers} worker processes (--stream-workers; "
                     "CPU cores count them all)")
    print(first_line)
    if rows:
        print(render(rows), end="")
    stream_missed: list[str] = []
    if "streaming" in parts:
        streams_text, stream_notes, stream_missed = stream_table(streaming)
        if rows:
            print()
        print("streaming load: client ITL error against the server's own send gaps")
        print(streams_text, end="")
        notes.extend(stream_notes)
    if loops_text is not None:
        if rows or streaming:
            print()
        print("asyncio against uvloop, interleaved")
        print(loops_text, end="")
    for note in notes:
        print(f"- {note}")
    failed = missed_targets(rows, stream_missed)
    judged = sum(row.status in ("PASS", "FAIL") for row in rows) + len(streaming)
    print(f"targets: {judged - len(failed)} PASS, {len(failed)} FAIL{': ' + ', '.join(failed) if failed else ''}; "
          f"load average {os.getloadavg()[0]:.2f} at the end; total {time.perf_counter() - started:.0f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
