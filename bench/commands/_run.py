"""`speedbench run`: one endpoint, one prompt set, the summary table and a run file."""

from __future__ import annotations

import argparse
import datetime as dt

from bench._errors import BenchError
from bench._types import Writer
from bench.commands._common import (
    progress_display,
    worker_count,
)
from bench.commands._options import add_open_loop_options, add_run_options, add_seed_options, run_settings

HELP = "run a prompt set against one endpoint"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `speedbench run`."""
    add_run_options(parser)
    add_open_loop_options(parser)
    add_seed_options(parser, "arrival")
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


def run(args: argparse.Namespace, out: Writer) -> int:
    """`speedbench run`: one endpoint, one prompt set, the summary table and a run file."""
    from bench.pipeline import RunJob, run_one
    from bench.runner import RunConfig

    config = RunConfig.from_settings(run_settings(args), url=",".join(args.url or ["localhost:8080"]), workers=1,
                                     label=args.label, trace=args.trace, loop=args.loop)
    job = RunJob(config, workers=args.workers, output=args.output, resume=args.resume, force=args.force,
                 shard=args.shard, start_at=args.start_at, slo=args.slo)
    return run_one(job, out=out, progress=progress_display(args.quiet))


def start_time(text: str) -> float:
    """`--start-at`: epoch seconds, or an ISO 8601 time with its zone (`2026-12-02T15:00:00Z`), within the next
    30 days (`checked_start`)."""
    from bench.runner import checked_start

    try:
        epoch_s = float(text)
    except ValueError:
        try:
            moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is neither epoch seconds nor an ISO 8601 time") from None
        if moment.tzinfo is None:
            raise argparse.ArgumentTypeError(f"{text!r} has no time zone (add Z for UTC)") from None
        epoch_s = moment.timestamp()
    try:
        return checked_start(epoch_s)
    except BenchError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--start-at ")) from None
