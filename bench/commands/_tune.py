"""`speedbench tune`: which draft length to ship, per category and per load, proven and predicted."""

from __future__ import annotations

import argparse

from bench._constants import DEFAULT_THRESHOLD
from bench._types import Writer
from bench.commands._common import SERVER_MODEL_HELP, bounded_number, progress_display
from bench.commands._options import add_run_settings_options, add_seed_options, run_settings

HELP = "which draft length to ship: one interleaved comparison per configuration, a proven pick and a schedule"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `speedbench tune`: the run settings (its own --concurrency levels), then the servers and the
    pick's own options."""
    add_run_settings_options(parser, levels=True)
    parser.add_argument("--spec", default="ngram-mod",
                        help="embedded drafter: ngram-mod, ngram-simple or draft (vLLM: ngram, draft)")
    parser.add_argument("--draft-max", default="1-16", help="draft lengths to consider: a list (2,4,8,16) or range")
    parser.add_argument("--concurrency", default="1", help="comma-separated load levels, one pick (and schedule "
                        "span) each")
    parser.add_argument("--base-cmd", default=None,
                        help="your baseline server's command, started per configuration ({port}, {concurrency}, "
                             "{api_key}) (default: the embedded server)")
    parser.add_argument("--base-url", default=None, help="your running baseline server instead (default: none)")
    parser.add_argument("--spec-cmd", default=None,
                        help="your speculative server's command with {port} and {draft_max} (and {concurrency}, "
                             "{api_key}) (default: the embedded --spec server)")
    parser.add_argument("--ready-timeout", type=bounded_number("--ready-timeout"), default=120.0,
                        help="seconds a command's server has to answer /health or /v1/models")
    parser.add_argument("--until-decided", action="store_true",
                        help="each configuration samples rounds until its overall verdict is decided (at most --limit)")
    parser.add_argument("--full-grid", action="store_true",
                        help="measure every draft length (default: the model-guided budget where the model holds)")
    parser.add_argument("--tie-margin", type=float, default=DEFAULT_THRESHOLD,
                        help="leaders shown within this (relative) are tied; the smaller draft length wins")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="smallest speedup that counts")
    parser.add_argument("--server-model", default=None, help=SERVER_MODEL_HELP)
    parser.add_argument("--draft", default=None, help="draft GGUF for --spec draft (default: the served model)")
    parser.add_argument("--threads", type=int, default=1, help="embedded server CPU threads")
    add_seed_options(parser, "order")
    parser.add_argument("--results-dir", default="results", help="folder that receives <UTC time>-<label>/")
    parser.add_argument("--label", default=None, help="suffix of the tune folder's name (default: tune-<spec>)")
    parser.add_argument("--resume", default=None, metavar="FOLDER",
                        help="continue an interrupted tune in FOLDER, finished configurations kept (default: new)")
    parser.add_argument("--quiet", action="store_true", help="no progress display")


def run(args: argparse.Namespace, out: Writer) -> int:
    """`speedbench tune`: configurations measured as the plan asks, then the pick, tune.json, tune.md and the plot."""
    from bench.pipeline import ComparisonJob, TuneConfig, parse_grid, parse_levels, run_tune

    levels = parse_levels(args.concurrency)
    job = ComparisonJob.build(
        **run_settings(args, concurrency=levels[0]).values(), base_url=args.base_url, base_cmd=args.base_cmd,
        spec_cmd=args.spec_cmd, spec=args.spec, server_model=args.server_model, draft=args.draft,
        threads=args.threads, ready_timeout=args.ready_timeout, results_dir=args.results_dir, label=args.label,
        resume=args.resume, order_seed=args.order_seed, threshold=args.threshold, until_decided=args.until_decided,
    )
    config = TuneConfig(job=job, grid=parse_grid(args.draft_max), levels=levels, full_grid=args.full_grid,
                        tie_margin=args.tie_margin)
    return run_tune(config, out=out, progress=progress_display(args.quiet))
