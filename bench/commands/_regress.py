"""`speedbench regress`: the CI gate over two comparisons, run files or sweeps."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from bench._constants import DEFAULT_GATE_THRESHOLD, EXIT_FAILED, EXIT_OK
from bench._errors import BenchError
from bench.commands._common import vet

HELP = "CI gate: exit 1 on a significant regression over the threshold"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `speedbench regress`."""
    parser.add_argument("--reference", required=True, help="comparison folder, run file or sweep folder")
    parser.add_argument("--candidate", required=True, help="comparison folder, run file or sweep folder")
    parser.add_argument("--threshold", type=float, default=DEFAULT_GATE_THRESHOLD,
                      help="default for every metric (0.05 = 5%%)")
    for metric in ("decode", "latency", "accept"):
        parser.add_argument(f"--threshold-{metric}", type=float, default=None,
                          help=f"threshold of the {metric} metric (default: --threshold)")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--allow-mismatch", action="store_true",
                      help="gate runs whose prompts, osl, concurrency or dataset differ (the differences are printed)")


def run(args: argparse.Namespace, out: Callable[[str], Any]) -> int:
    """`speedbench regress`: exit 1 when a metric got significantly worse by more than its threshold."""
    from bench.analysis import regress
    from bench.render import gate_markdown, gate_text

    thresholds = {
        "decode_speedup": args.threshold_decode, "decode_rate": args.threshold_decode,
        "latency_speedup": args.threshold_latency, "latency": args.threshold_latency,
        "accept_rate": args.threshold_accept,
    }
    thresholds = {key: (value if value is not None else args.threshold) for key, value in thresholds.items()}
    if _is_sweep(args.reference) and _is_sweep(args.candidate):
        rows = _gate_sweeps(args, thresholds)
        out(gate_text(rows))
        _step_summary(gate_markdown(rows))
        return EXIT_FAILED if any(row.status == "REGRESSED" for row in rows) else EXIT_OK
    reference, candidate = _gate_side(args.reference), _gate_side(args.candidate)
    if isinstance(reference, tuple) == isinstance(candidate, tuple):  # a folder against a file: regress refuses
        pairs = zip(reference, candidate, strict=True) if isinstance(reference, tuple) else [(reference, candidate)]
        for first, second in pairs:
            vet(first, second, allow_mismatch=args.allow_mismatch, gate=True)
    rows = regress(reference, candidate, thresholds=thresholds, resamples=args.resamples, seed=args.seed)
    out(gate_text(rows))
    _step_summary(gate_markdown(rows))
    return EXIT_FAILED if any(row.status == "REGRESSED" for row in rows) else EXIT_OK


def _is_sweep(path: str) -> bool:
    from bench.records import is_sweep_folder

    return is_sweep_folder(path)


def _gate_side(path: str) -> Any:
    """A comparison folder as (baseline, speculative), or one run file."""
    from pathlib import Path

    from bench.records import load_comparison_folder, load_run

    return load_comparison_folder(path) if Path(path).is_dir() else load_run(path)


def _gate_sweeps(args: argparse.Namespace, thresholds: dict[str, float]) -> list[Any]:
    """The gate over every cell (level, arm) two sweep folders share; rows named `c<level>/<arm>: <category>`."""
    import dataclasses

    from bench.analysis import regress
    from bench.records import BASELINE, load_run, sweep_cell_file, sweep_cells

    rows = []
    for level, arm in sweep_cells(args.reference):
        cell, twin = (sweep_cell_file(folder, level, arm) for folder in (args.reference, args.candidate))
        if not twin.exists():
            continue
        pairs = [(load_run(sweep_cell_file(args.reference, level, BASELINE)), load_run(cell)),
                 (load_run(sweep_cell_file(args.candidate, level, BASELINE)), load_run(twin))]
        for first, second in zip(*pairs, strict=True):
            vet(first, second, allow_mismatch=args.allow_mismatch, gate=True)
        name = f"{level}/{arm}"
        gate = regress(pairs[0], pairs[1], thresholds=thresholds, resamples=args.resamples, seed=args.seed)
        rows += [dataclasses.replace(row, category=f"{name}: {row.category}") for row in gate]
    if not rows:
        raise BenchError(f"{args.reference} and {args.candidate} share no sweep cell (c<level>/<arm>.json)")
    return rows


def _step_summary(markdown: str) -> None:
    """Append to $GITHUB_STEP_SUMMARY when set."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        from bench.records import write_text_file

        write_text_file(summary, markdown + "\n", append=True)
