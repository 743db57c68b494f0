"""`speedbench sweep`: speculative arms against one baseline across concurrency levels."""

from __future__ import annotations

import argparse

from bench._constants import DEFAULT_THRESHOLD
from bench._errors import BenchError
from bench._types import Writer
from bench.commands._common import SERVER_MODEL_HELP, WORKERS_HELP, progress_display, worker_count
from bench.commands._options import add_open_loop_options, add_run_settings_options, add_seed_options, run_settings

HELP = "speculative arms against one baseline across concurrency levels (interleaved)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `speedbench sweep`: the run settings (its own --concurrency levels and --request-rate list),
    then the servers and the sweep's own options."""
    add_run_settings_options(parser, levels=True)
    parser.add_argument("--concurrency", default="1,2,4", help="comma-separated concurrency levels")
    parser.add_argument("--spec", default="ngram-mod:draft_max=8,ngram-mod:draft_max=16",
                        help="embedded arms: comma-separated MODE[:draft_max=N] (ngram-mod, ngram-simple, draft; "
                             "vLLM: ngram, draft)")
    parser.add_argument("--base-url", default=None, help="your baseline server (default: start the embedded one)")
    parser.add_argument("--spec-url", action="append", default=[], metavar="NAME=URL",
                        help="your speculative server, repeatable (default: the embedded --spec arms)")
    parser.add_argument("--server-model", default=None, help=SERVER_MODEL_HELP)
    parser.add_argument("--draft", default=None, help="draft GGUF for draft arms (default: the served model)")
    parser.add_argument("--threads", type=int, default=1, help="embedded server CPU threads")
    parser.add_argument("--results-dir", default="results", help="folder that receives <UTC time>-<label>/")
    parser.add_argument("--label", default=None, help="suffix of the sweep folder's name (default: sweep)")
    parser.add_argument("--resume", default=None, metavar="FOLDER",
                        help="continue an interrupted sweep in FOLDER (complete levels are kept) (default: a new one)")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                        help="smallest change that counts (0.02 = 2%%)")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    add_open_loop_options(parser, rates=True)
    add_seed_options(parser, "order", "arrival")
    parser.add_argument("--block-size", type=int, default=None,
                        help="requests per A/B block with --request-rate (default: ~5 s of arrivals, 4-30)")
    parser.add_argument("--workers", type=worker_count, default=None, metavar="N|auto",
                        help=WORKERS_HELP + "; a count above a level's concurrency gives that level one per request")


def run(args: argparse.Namespace, out: Writer) -> int:
    """`speedbench sweep`: speculative arms against one baseline across concurrency levels, interleaved per cell."""
    from bench.pipeline import ComparisonJob, SweepConfig, parse_embedded_arms, parse_levels, parse_url_arms, run_sweep
    from bench.runner import RunConfig

    if args.spec_url and not args.base_url:
        raise BenchError("--spec-url needs --base-url (the baseline server of your own)")
    levels = parse_levels(args.concurrency)
    settings = run_settings(args, concurrency=levels[0], request_rate=None)
    job = ComparisonJob.build(**settings.values(), base_url=args.base_url, server_model=args.server_model,
                              draft=args.draft, threads=args.threads, results_dir=args.results_dir, label=args.label,
                              resume=args.resume, order_seed=args.order_seed, threshold=args.threshold,
                              workers=args.workers, block_size=args.block_size, slo=args.slo)
    arms = (parse_url_arms(args.spec_url) if args.spec_url
            else parse_embedded_arms(args.spec, job.embedded_engine))
    if not args.spec_url or not args.base_url:
        job.check_sides()
    config = SweepConfig(job=job, arms=arms, levels=levels)
    if args.request_rate is not None:
        from bench.analysis import parse_slo
        from bench.pipeline import RateSweepConfig, parse_rates, run_rate_sweep

        if args.slo:
            parse_slo(args.slo)
        if not 0 < args.slo_target <= 1:
            raise BenchError(f"--slo-target must be a share in (0, 1] (got {args.slo_target})")
        RunConfig.from_settings(settings, request_rate=1.0, workers=args.workers or 1).validate()
        rates = RateSweepConfig(sweep=config, rates=parse_rates(args.request_rate), slo_target=args.slo_target)
        return run_rate_sweep(rates, out=out, progress=progress_display(args.quiet))
    return run_sweep(config, out=out, progress=progress_display(args.quiet))
