"""`speedbench report`: a PR-ready report.md with plots, for a comparison or a sweep."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from bench._constants import DEFAULT_THRESHOLD, EXIT_OK
from bench._errors import BenchError
from bench._types import Writer

if TYPE_CHECKING:
    from bench.analysis import Comparison

HELP = "write a PR-ready report.md with plots"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `speedbench report`."""
    for arm in ("baseline", "speculative"):
        parser.add_argument(f"--{arm}", default=None,
                            help=f"the {arm} run file (default: {arm}.json of --latest; needed without it)")
    parser.add_argument("--out", default=None, help="output folder (default with --latest: that folder)")
    parser.add_argument("--title", default=None,
                        help="the report's heading (default: 'Speculative decoding benchmark')")
    parser.add_argument("--latest", default=None, metavar="RESULTS_DIR",
                        help="use the newest make-bench or make-sweep folder under RESULTS_DIR and write there "
                        "(default: none; give --baseline, --speculative and --out instead)")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                        help="smallest change that counts (0.02 = 2%%)")
    parser.add_argument("--sweep", default=None, metavar="FOLDER",
                        help="report on a sweep folder instead (written there unless --out) (default: none)")
    parser.add_argument("--allow-mismatch", action="store_true",
                        help="report on runs whose prompts, osl, concurrency or dataset differ (named in the report)")
    parser.add_argument("--allow-partial", action="store_true",
                        help="report on an interrupted or partial run (flagged in the report)")
    parser.add_argument("--history", default=None, metavar="DIR",
                        help="add a one-line trend per workload from this history folder (default: none)")


def run(args: argparse.Namespace, out: Writer) -> int:
    """`speedbench report`: a PR-ready report.md with plots."""
    from bench.records import BASELINE, SPECULATIVE, run_file
    from bench.render import write_report

    if args.latest and not (args.baseline or args.speculative):
        from bench.records import is_pairs_folder, is_rate_sweep_layout, is_sweep_folder

        newest = _latest_results(args.latest)
        if is_pairs_folder(newest):  # `bench --config` ran last: one report over its pairs
            return _pairs_report(args, newest, out)
        if is_sweep_folder(newest) or is_rate_sweep_layout(newest):  # `make sweep` ran last: its report
            args.sweep = str(newest)
    if args.sweep:
        from pathlib import Path

        from bench.pipeline import is_rate_sweep_folder, load_rate_sweep, load_sweep
        from bench.render import write_rate_sweep_report, write_sweep_report

        if is_rate_sweep_folder(args.sweep):
            report = write_rate_sweep_report(load_rate_sweep(args.sweep, threshold=args.threshold),
                                             Path(args.out or args.sweep), title=args.title)
            out(f"speedbench: wrote {report}\n")
            return EXIT_OK
        report = write_sweep_report(load_sweep(args.sweep, threshold=args.threshold), Path(args.out or args.sweep),
                                    title=args.title)
        out(f"speedbench: wrote {report}\n")
        return EXIT_OK
    if args.latest:
        from bench.records import workload_folders

        folders = workload_folders(_latest_results(args.latest))
        if folders:  # a `bench --bench a,b` folder: one report over every workload
            comparisons = [_comparison(args, *(str(run_file(folder, arm)) for arm in (BASELINE, SPECULATIVE)))
                           for folder in folders]
            report = write_report(comparisons, args.out or folders[0].parent, title=args.title,
                                  trends=_trends(args, comparisons))
            out(f"speedbench: wrote {report}\n")
            return EXIT_OK
    baseline_path, speculative_path = _report_inputs(args)
    comparison = _comparison(args, baseline_path, speculative_path)
    report = write_report(comparison, args.out, title=args.title, trends=_trends(args, [comparison]))
    out(f"speedbench: wrote {report}\n")
    return EXIT_OK


def _pairs_report(args: argparse.Namespace, folder: Path, out: Writer) -> int:
    """Rewrite a `bench --config` folder's report.md from its pairs' run files (the recorded title unless --title)."""
    from bench.pipeline import pair_comparisons
    from bench.records import read_pairs_file
    from bench.render import write_pairs_report

    record = read_pairs_file(folder)
    if record is None:
        raise BenchError(f"{folder}: no pairs.json")
    comparisons = pair_comparisons(folder, record.names, args.threshold)
    if not comparisons:
        raise BenchError(f"{folder}: no pair has finished yet (continue it with bench --config FILE --resume FOLDER)")
    report = write_pairs_report(comparisons, args.out or folder, title=args.title or record.title)
    out(f"speedbench: wrote {report}\n")
    return EXIT_OK


def _trends(args: argparse.Namespace, comparisons: list[Comparison]) -> list[str]:
    """With --history: one trend line per compared workload, else none."""
    from bench.pipeline import report_trends

    return report_trends(args.history, comparisons)


def _comparison(args: argparse.Namespace, baseline_path: str, speculative_path: str) -> Comparison:
    """The vetted comparison of two run files."""
    from bench.pipeline import vetted_comparison

    return vetted_comparison(baseline_path, speculative_path, threshold=args.threshold,
                             allow_mismatch=args.allow_mismatch, allow_partial=args.allow_partial)


def _report_inputs(args: argparse.Namespace) -> tuple[str, str]:
    from bench.records import BASELINE, SPECULATIVE, run_file

    if args.latest:
        folder = _latest_results(args.latest)
        args.out = args.out or str(folder)
        return str(run_file(folder, BASELINE)), str(run_file(folder, SPECULATIVE))
    if not (args.baseline and args.speculative and args.out):
        raise BenchError("report needs --baseline, --speculative and --out (or --latest RESULTS_DIR)")
    return args.baseline, args.speculative


def _latest_results(results_dir: str) -> Path:
    """The newest results folder of any kind (comparison, workloads, sweep, rate sweep) under `results_dir`."""
    from bench.records import latest_results_folder

    folder = latest_results_folder(results_dir)
    if folder is None:
        raise BenchError(f"{results_dir}: no benchmark results yet; run 'make bench' (or 'make sweep') first")
    return folder
