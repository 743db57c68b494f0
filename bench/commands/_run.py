"""`speedbench run`: one endpoint, one prompt set, the summary table and a run file."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._constants import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from bench._redact import one_line, redact
from bench.commands._common import (
    add_open_loop_options,
    add_run_options,
    progress_display,
    traffic_report,
    worker_count,
)

HELP = "run a prompt set against one endpoint"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `speedbench run`."""
    add_run_options(parser)
    add_open_loop_options(parser)
    parser.add_argument("--output", default=None, help="run file (JSON); default: results/<UTC time>-<label>.json")
    parser.add_argument("--label", default=None, help="a name for the run, shown in progress and the default file name "
                     "(default: run)")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run from its journal")
    parser.add_argument("--force", action="store_true", help="overwrite an existing output file")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument("--shard", default=None, metavar="I/N",
                        help="run only the I-th (from 0) of N slices of the run; join them with `speedbench merge` "
                             "(default: the whole run)")
    parser.add_argument("--start-at", type=start_time, default=None, metavar="TIME",
                        help="start sending at this wall-clock time (ISO 8601 with a zone, or epoch seconds), after "
                             "the set-up: the shards' shared start (default: at once)")
    parser.add_argument("--workers", type=worker_count, default=None, metavar="N|auto",
                        help="client processes sharing the run (its concurrency, or open-loop cap, split over them), "
                             "joined into one run file and journal (default: auto, one process until the load "
                             "exceeds a measured per-process limit; see docs/scaling.md)")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default=None,
                        help="the client's event loop (default: $SPEEDBENCH_LOOP, else asyncio)")


def run(args: argparse.Namespace, out: Callable[[str], Any]) -> int:
    """`speedbench run`: one endpoint, one prompt set, the summary table and a run file."""
    from bench.prompts import HUB_REVISION, Shard, load_prompts
    from bench.render import summary_text
    from bench.runner import RunConfig, RunStopped, choose_workers, run_benchmark

    single = "--shard" if args.shard is not None else "--start-at" if args.start_at is not None else None
    workers, why = choose_workers(args.workers, concurrency=args.concurrency, request_rate=args.request_rate,
                                  open_loop=args.request_rate is not None or args.trace is not None,
                                  max_concurrency=args.max_concurrency, single=single)

    config = RunConfig(
        url=",".join(args.url or ["localhost:8080"]), model=args.model, bench=args.bench, category=args.category,
        osl=args.osl,
        extra_inputs=args.extra_inputs, concurrency=args.concurrency, limit=args.limit, timeout=args.timeout,
        dataset=args.dataset, revision=args.revision, repeat=args.repeat, warmup=args.warmup, stream=args.stream,
        engine=args.engine, api=args.api, retries=args.retries, label=args.label,
        chat_template_kwargs=args.chat_template_kwargs, max_response_bytes=args.max_response_bytes,
        logprobs=args.logprobs, workers=workers, workers_auto=why, loop=args.loop,
        api_key=args.api_key or os.environ.get("OPENAI_API_KEY"), headers=dict(args.header),
        request_rate=args.request_rate, arrival=args.arrival, burstiness=args.burstiness,
        max_concurrency=args.max_concurrency, seed=args.seed, trace=args.trace,
    )
    config.validate()
    if args.slo:
        from bench.analysis import parse_slo

        parse_slo(args.slo)  # a malformed --slo fails before anything is sent
    shard = Shard.parse(args.shard) if args.shard is not None else None
    count_tokens = None
    if args.dataset == "categories" and args.bench.startswith("throughput_"):
        from bench.runner import server_token_counter

        count_tokens = server_token_counter(config.urls()[0], headers=config.request_headers())
        out("speedbench: sizing prompts with " + ("the server's /tokenize\n" if count_tokens else
                                                  "an estimate (the server has no /tokenize)\n"))
    prompts = load_prompts(
        args.dataset, bench=args.bench, category=args.category, limit=args.limit,
        revision=args.revision or HUB_REVISION, count_tokens=count_tokens,
    )
    if prompts.skipped:
        out(f"speedbench: skipped {prompts.skipped} rows without usable turns\n")
    out(f"speedbench: loaded {len(prompts.samples)} samples from bench={args.bench} category={args.category}\n")
    output = args.output or _default_output(args.label)
    try:
        run, interrupted = run_benchmark(prompts, config, output=output, progress=progress_display(args.quiet),
                                         resume=args.resume, force=args.force, shard=shard, start_at=args.start_at)
    except RunStopped as exc:  # the journal could not be written: what finished is kept, the run is not done
        sys.stderr.write(f"speedbench: error: {redact(str(exc))}\n")
        return EXIT_FAILED
    out(f"\nSummary (elapsed={run.info.elapsed_s or 0.0:.2f}s)\n")
    out(summary_text(run.summary))
    _extra_run_tables(run, out)
    stem = Path(output)
    traffic_report(run, out, slo_text=args.slo, plot_dir=(stem.parent, stem.stem + ".timeline"))
    out(f"\nspeedbench: wrote {output}\n")
    if interrupted:
        out(f"speedbench: interrupted; {len(run.results)} samples saved, continue with --resume --output {output}\n")
        return EXIT_INTERRUPTED
    if run.failed_samples:
        first_error = next((result.error for result in run.results if result.error), None)
        sys.stderr.write(f"speedbench: {run.failed_samples} samples failed\n")
        if first_error:
            sys.stderr.write(f"first error: {one_line(first_error)}\n")
        return EXIT_FAILED
    if len(run.results) < run.selected_samples:  # a sample that never finished is never reported as done
        sys.stderr.write(
            f"speedbench: error: only {len(run.results)} of {run.selected_samples} selected samples finished; "
            f"continue with --resume --output {output}\n"
        )
        return EXIT_FAILED
    return EXIT_OK


def _extra_run_tables(run: Any, out: Callable[[str], Any]) -> None:
    """Streaming percentiles and run-to-run variation, when the run has them."""
    if not run.config.get("stream") and int(run.config.get("repeat") or 1) < 2:
        return  # nothing to show: do not load the analysis stack (numpy, pandas) for nothing
    from bench.analysis import repeat_cv, stream_latency_stats
    from bench.render import cv_text, stream_text

    streaming = stream_latency_stats(run)
    if streaming:
        out("\n" + stream_text(streaming))
    variation = repeat_cv(run)
    if variation:
        out("\n" + cv_text(variation))


def _default_output(label: str | None) -> str:
    from bench.records import default_run_file

    return default_run_file(label)


def start_time(text: str) -> float:
    """`--start-at`: epoch seconds, or an ISO 8601 time with its zone (`2026-12-02T15:00:00Z`)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither epoch seconds nor an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone (add Z for UTC)")
    return moment.timestamp()
