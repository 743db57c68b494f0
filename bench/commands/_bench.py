"""`speedbench bench`: baseline and speculative runs, comparison, lossless check and plots; `--config FILE.toml`
runs several pairs, one report."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from bench._constants import DEFAULT_THRESHOLD
from bench._types import Writer
from bench.commands._common import SERVER_MODEL_HELP, WORKERS_HELP, bounded_number, progress_display, worker_count
from bench.commands._options import (
    add_open_loop_options,
    add_run_settings_options,
    add_seed_options,
    run_settings,
    track_given_options,
)

if TYPE_CHECKING:
    from bench.pipeline import PipelineConfig

HELP = "baseline vs speculative, interleaved: on embedded servers, your commands or two URLs (or pairs from a file)"
COMPARISON_LOGPROBS = True
"""A comparison asks for top-2 log-probabilities unless --no-logprobs: its lossless check classifies each divergence
by them."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `speedbench bench`: the run settings, then the servers and the comparison's own options."""
    add_run_settings_options(parser, logprobs=COMPARISON_LOGPROBS)
    add_open_loop_options(parser)
    add_seed_options(parser, "arrival", "order")
    parser.add_argument("--spec", default="ngram-mod",
                        help="embedded speculative mode: ngram-mod, ngram-simple or draft (vLLM: ngram-mod/ngram, "
                             "draft)")
    parser.add_argument("--server-model", default=None, help=SERVER_MODEL_HELP)
    parser.add_argument("--draft", default=None, help="draft GGUF for --spec draft (default: the served model)")
    parser.add_argument("--base-url", default=None, help="your running baseline server (default: start one)")
    parser.add_argument("--spec-url", default=None, help="your running speculative server (default: start one)")
    parser.add_argument("--base-cmd", default=None,
                        help="your baseline server's command, started fresh per workload: {port} (chosen here), "
                             "{concurrency}, {api_key} (--api-key) (default: the embedded server)")
    parser.add_argument("--spec-cmd", default=None,
                        help="your speculative server's command, started fresh per workload: {port}, "
                             "{draft_max} (--draft-max), {concurrency}, {api_key} (default: the embedded server)")
    parser.add_argument("--draft-max", type=int, default=None,
                        help="draft length: fills {draft_max} of --spec-cmd and sets the embedded drafter's "
                             "(default: the drafter's own)")
    parser.add_argument("--ready-timeout", type=bounded_number("--ready-timeout"), default=120.0,
                        help="seconds a command's server has to answer /health or /v1/models")
    parser.add_argument("--threads", type=int, default=1, help="embedded server CPU threads")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                        help="smallest change that counts (0.02 = 2%%)")
    parser.add_argument("--results-dir", default="results", help="folder that receives <UTC time>-<label>/")
    parser.add_argument("--label", default=None,
                        help="suffix of the result folder's name (default: the --spec mode, or 'external')")
    parser.add_argument("--title", default=None, help="the report's title (default: a generic one)")
    parser.add_argument(
        "--resume", default=None, metavar="FOLDER",
        help="continue an interrupted comparison in FOLDER (each side resumes its own run file; with --config, "
             "finished pairs are kept) (default: a new one)",
    )
    parser.add_argument("--config", default=None, metavar="FILE.toml",
                        help="run the pairs of a TOML file in turn, one report.md (docs: examples/; command-line "
                             "options override the file) (default: none)")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument("--verbose", action="store_true",
                        help="print every table of each comparison (default: a screen's worth; the rest is in "
                             "comparison.txt)")
    parser.add_argument("--sequential", action="store_true",
                        help="run the baseline, then the speculative server (default: interleaved per sample)")
    parser.add_argument("--until-decided", action="store_true",
                        help="interleaved rounds of one sample per category until the overall decode verdict is "
                             "decided (faster, slower or equivalent; group-sequential, 5%%) or --limit rounds ran")
    parser.add_argument("--block-size", type=int, default=None,
                        help="requests per A/B block with --request-rate (default: ~5 s of arrivals, 4-30)")
    parser.add_argument("--workers", type=worker_count, default=None, metavar="N|auto", help=WORKERS_HELP)
    track_given_options(parser)


def pipeline_config(args: argparse.Namespace) -> PipelineConfig:
    """The pipeline of `bench`'s option values (parsed, or a config file's pair merged with the command line)."""
    from bench._errors import BenchError
    from bench.pipeline import PipelineConfig

    if args.trace:
        raise BenchError("bench --trace is not supported: use --request-rate (run replays traces)")
    if args.slo:
        from bench.analysis import parse_slo

        parse_slo(args.slo)  # a malformed --slo fails before a server starts
    settings = run_settings(args)
    own = ("base_url", "base_cmd", "spec_url", "spec_cmd", "server_model", "spec", "draft", "threads", "draft_max",
           "ready_timeout", "results_dir", "label", "resume", "threshold", "order_seed", "workers", "block_size",
           "slo", "until_decided")
    return PipelineConfig.build(interleave=not args.sequential, title=args.title,
                                **settings.values(), **{key: getattr(args, key) for key in own})


def run(args: argparse.Namespace, out: Writer) -> int:
    """`speedbench bench`: baseline and speculative runs, comparison, lossless check, plots, under results/."""
    if args.config:
        from bench.commands._bench_file import read_pairs
        from bench.pipeline import run_pairs

        pairs = read_pairs(args, pipeline_config, add_arguments)
        return run_pairs(pairs, out=out, progress=progress_display(args.quiet))
    from bench.pipeline import run_pipeline

    return run_pipeline(pipeline_config(args), out=out, progress=progress_display(args.quiet),
                        verbose=args.verbose)
