"""`speedbench regress`: the CI gate over two comparisons, run files or sweeps."""

from __future__ import annotations

import argparse
import os

from bench._constants import DEFAULT_GATE_THRESHOLD, EXIT_FAILED, EXIT_OK
from bench._types import Writer
from bench.commands._common import gate_threshold

HELP = "CI gate: exit 1 on a significant regression over the threshold, or on lost samples, categories or levels"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `speedbench regress`."""
    parser.add_argument("--reference", default=None,
                        help="comparison folder, run file, folder of >= 3 run files (run-vs-run drift) or sweep folder "
                             "(default: none; needed unless --history)")
    parser.add_argument("--history", default=None, metavar="DIR",
                        help="gate the candidate against the recent window of this history instead of one reference "
                             "(default: none)")
    parser.add_argument("--window", type=int, default=20,
                        help="with --history: the last N commits of each series (since its last change point)")
    parser.add_argument("--candidate", required=True, help="comparison folder, run file or sweep folder")
    parser.add_argument("--threshold", type=gate_threshold, default=DEFAULT_GATE_THRESHOLD,
                      help="default for every metric (0.05 = 5%%)")
    for metric in ("decode", "latency", "accept"):
        parser.add_argument(f"--threshold-{metric}", type=gate_threshold, default=None,
                          help=f"threshold of the {metric} metric (default: --threshold)")
    parser.add_argument("--allow-mismatch", action="store_true",
                      help="gate runs whose prompts, osl, concurrency or dataset differ (the differences are printed)")
    parser.add_argument("--gate", choices=("categories", "overall"), default="categories",
                        help="rows that can fail the job: overall and every category as one family (default), or "
                             "only the overall rows (categories reported)")
    parser.add_argument("--allow-partial", action="store_true",
                        help="pass a candidate that lost samples, categories or sweep levels the reference has")


def run(args: argparse.Namespace, out: Writer) -> int:
    """`speedbench regress`: exit 1 on a gated regression, or when the candidate lost part of the reference."""
    from bench.pipeline import GateJob, gate_thresholds, run_gate
    from bench.render import gate_markdown, gate_text

    thresholds = gate_thresholds(args.threshold, decode=args.threshold_decode, latency=args.threshold_latency,
                                 accept=args.threshold_accept)
    result = run_gate(GateJob(candidate=args.candidate, thresholds=thresholds, reference=args.reference,
                              history=args.history, window=args.window, allow_mismatch=args.allow_mismatch,
                              gate_categories=args.gate == "categories"))
    out(gate_text(result, allow_partial=args.allow_partial))
    _step_summary(gate_markdown(result, allow_partial=args.allow_partial))
    return EXIT_FAILED if result.failed(allow_partial=args.allow_partial) else EXIT_OK


def _step_summary(markdown: str) -> None:
    """Append to $GITHUB_STEP_SUMMARY when set."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        from bench.records import write_text_file

        write_text_file(summary, markdown + "\n", append=True)
