"""`speedbench history`: add bench outputs to a history, show its series and change points, check it in CI, draw it."""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING

from bench._constants import DEFAULT_GATE_THRESHOLD, EXIT_FAILED, EXIT_OK
from bench._errors import BenchError
from bench._types import Writer
from bench.commands._common import gate_threshold

if TYPE_CHECKING:
    from bench.analysis import HistoryAnalysis

HELP = "track speedups across commits: add points, show series and change points, check for regressions, draw a page"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommands of `speedbench history` and their flags."""
    actions = parser.add_subparsers(dest="history_command", required=True, metavar="{add,show,check,html}")
    add = actions.add_parser("add", help="record bench output folders as points of the history",
                             description="record bench output folders as points of the history",
                             formatter_class=parser.formatter_class)
    add.add_argument("folders", nargs="+", metavar="FOLDER",
                     help="a comparison folder or a make-bench folder of workloads")
    _history_option(add)
    add.add_argument("--commit", default=None,
                     help="the commit measured (default: $GITHUB_SHA, else git rev-parse HEAD)")
    add.add_argument("--branch", default=None, help="its branch (default: $GITHUB_REF_NAME, else git's branch)")
    add.add_argument("--machine", default=None,
                     help="a name for the machine (default: '<CPU model>, <cores> cores'); the series key is "
                          "always the fingerprint of CPU model, cores, engine build and model digest")
    add.add_argument("--time", default=None,
                     help="the commit's time, ISO 8601 (default: git's commit time, else now); orders the points")
    for name, text in (("show", "print every series and its change points"),
                       ("check", "CI: exit 1 when the newest commit lies after a proven, unrecovered regression"),
                       ("html", "write one self-contained HTML page of the history")):
        child = actions.add_parser(name, help=text, description=text, formatter_class=parser.formatter_class)
        _history_option(child)
        child.add_argument("--branch", default=None, help="only the points of this branch (default: every point)")
        child.add_argument("--alpha", type=float, default=0.05,
                           help="family-wise false-alarm rate over the whole history")
        if name == "show":
            child.add_argument("--format", choices=["text", "markdown", "json"], default="text",
                               help="output format")
        if name == "check":
            child.add_argument("--threshold", type=gate_threshold, default=DEFAULT_GATE_THRESHOLD,
                               help="smallest regression that fails (0.05 = 5%%)")
        if name == "html":
            child.add_argument("--out", required=True, help="the HTML file to write")
            child.add_argument("--title", default="speedbench history", help="the page's heading")


def _history_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--history", required=True, metavar="DIR", help="the history folder")


def run(args: argparse.Namespace, out: Writer) -> int:
    """`speedbench history add|show|check|html`."""
    if not 0.0 < getattr(args, "alpha", 0.05) < 1.0:
        raise BenchError(f"--alpha {args.alpha}: must lie between 0 and 1")
    if args.history_command == "add":
        return _add(args, out)
    from bench.pipeline import load_history_analysis

    if not os.path.isdir(args.history):  # a mistyped path is bad input, not an empty history
        raise BenchError(f"{args.history}: no history folder (speedbench history add FOLDER --history DIR makes one)")
    analysis = load_history_analysis(args.history, alpha=args.alpha, branch=args.branch)
    if args.history_command == "show":
        from bench.render import history_json, history_markdown, history_text

        if args.format == "json":
            out(json.dumps(history_json(analysis), indent=1, allow_nan=False) + "\n")
        else:
            out((history_markdown if args.format == "markdown" else history_text)(analysis))
        return EXIT_OK
    if args.history_command == "check":
        return _check(args, analysis, out)
    from bench.records import write_text_file
    from bench.render import history_html

    write_text_file(args.out, history_html(analysis, title=args.title))
    out(f"speedbench: wrote {args.out}\n")
    return EXIT_OK


def _add(args: argparse.Namespace, out: Writer) -> int:
    from bench.pipeline import add_to_history
    from bench.render import terminal_lines

    for point, path, new in add_to_history(args.folders, args.history, commit=args.commit, branch=args.branch,
                                           machine=args.machine, time=args.time):
        said = "added" if new else "already there"
        out(terminal_lines([f"speedbench: {said}: {path} ({point.workload} at {point.commit[:12]}, machine "
                            f"{point.machine.fingerprint})"]))
    return EXIT_OK


def _check(args: argparse.Namespace, analysis: HistoryAnalysis, out: Writer) -> int:
    from bench.analysis import open_regressions
    from bench.render import check_markdown, check_text

    if not analysis.series:
        raise BenchError(f"{args.history}: no history points to check (speedbench history add first)")
    found = open_regressions(analysis, threshold=args.threshold)
    out(check_text(found, analysis, args.threshold))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        from bench.records import write_text_file

        write_text_file(summary, check_markdown(found, analysis, args.threshold) + "\n", append=True)
    return EXIT_FAILED if found else EXIT_OK
