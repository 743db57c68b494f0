"""`speedbench compare`: the reference's comparison table, optionally with paired statistics."""

from __future__ import annotations

import argparse

from bench._constants import DEFAULT_THRESHOLD, EXIT_OK
from bench._types import Writer

HELP = "compare a baseline run with a speculative run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `speedbench compare`."""
    parser.add_argument("--baseline", required=True, help="the baseline run file (no speculative decoding)")
    parser.add_argument("--speculative", required=True, help="the speculative run file")
    parser.add_argument("--format", choices=["text", "markdown", "json"], default="text", help="output format")
    parser.add_argument("--stats", action="store_true",
                         help="add paired per-sample statistics: geometric means with 95%% CIs")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                         help="smallest change that counts (0.02 = 2%%)")
    parser.add_argument("--min-pairs", type=int, default=2, help="refuse with fewer matched samples")
    parser.add_argument("--target-effect", type=float, default=0.10,
                        help="rows that cannot detect this change say how many samples it needs (0.10 = 10%%)")
    parser.add_argument("--allow-mismatch", action="store_true",
                         help="compare runs whose prompts, osl, concurrency or dataset differ (shown above the table)")


def run(args: argparse.Namespace, out: Writer) -> int:
    """`speedbench compare`: the reference's comparison table, optionally with paired statistics."""
    from bench.analysis import compare
    from bench.pipeline import vet
    from bench.records import load_run
    from bench.render import render_json, render_markdown, render_text

    baseline = load_run(args.baseline)
    speculative = load_run(args.speculative)
    checked = vet(baseline, speculative, allow_mismatch=args.allow_mismatch)
    comparison = compare(
        baseline, speculative, stats=args.stats, threshold=args.threshold,
        min_pairs=args.min_pairs, baseline_label=args.baseline, speculative_label=args.speculative, strict=True,
        comparability=checked, target_effect=args.target_effect,
    )
    render = {"json": render_json, "markdown": render_markdown, "text": render_text}[args.format]
    out(render(comparison))
    return EXIT_OK
