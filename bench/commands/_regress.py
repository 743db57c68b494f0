"""`speedbench regress`: the CI gate over two comparisons, run files or sweeps."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable
from typing import Any

from bench._constants import DEFAULT_GATE_THRESHOLD, EXIT_FAILED, EXIT_OK
from bench._errors import BenchError

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
    parser.add_argument("--threshold", type=float, default=DEFAULT_GATE_THRESHOLD,
                      help="default for every metric (0.05 = 5%%)")
    for metric in ("decode", "latency", "accept"):
        parser.add_argument(f"--threshold-{metric}", type=float, default=None,
                          help=f"threshold of the {metric} metric (default: --threshold)")
    parser.add_argument("--allow-mismatch", action="store_true",
                      help="gate runs whose prompts, osl, concurrency or dataset differ (the differences are printed)")
    parser.add_argument("--gate", choices=("categories", "overall"), default="categories",
                        help="rows that can fail the job: overall and every category as one family (default), or "
                             "only the overall rows (categories reported)")
    parser.add_argument("--allow-partial", action="store_true",
                        help="pass a candidate that lost samples, categories or sweep levels the reference has")


def run(args: argparse.Namespace, out: Callable[[str], Any]) -> int:
    """`speedbench regress`: exit 1 on a gated regression, or when the candidate lost part of the reference."""
    from bench.analysis import gate
    from bench.pipeline import vet
    from bench.render import gate_markdown, gate_text

    thresholds = {
        "decode_speedup": args.threshold_decode, "decode_rate": args.threshold_decode,
        "latency_speedup": args.threshold_latency, "latency": args.threshold_latency,
        "accept_rate": args.threshold_accept,
    }
    thresholds = {key: (value if value is not None else args.threshold) for key, value in thresholds.items()}
    if args.history:
        if args.reference:
            raise BenchError("give --reference or --history, not both")
        result = _gate_history(args, thresholds)
    elif not args.reference:
        raise BenchError("regress needs --reference (or --history DIR)")
    elif _is_sweep(args.reference) and _is_sweep(args.candidate):
        result = _gate_sweeps(args, thresholds)
    else:
        reference, candidate = _gate_side(args.reference), _gate_side(args.candidate)
        if isinstance(reference, tuple) and isinstance(candidate, tuple):
            pairs: Any = zip(reference, candidate, strict=True)
        elif isinstance(candidate, tuple) or isinstance(reference, tuple):
            pairs = []  # a folder against a file: gate refuses
        else:
            pairs = [(run, candidate) for run in (reference if isinstance(reference, list) else [reference])]
        pairs = list(pairs)
        said: set[str] = set()
        warnings: list[str] = []
        arms = ("baseline", "speculative") if len(pairs) == 2 and isinstance(reference, tuple) else ("",) * len(pairs)
        # the speculative arms first: a refusal names the drafter's state before the baseline's prompt cache
        for (first, second), arm in reversed(list(zip(pairs, arms, strict=True))):
            vet(first, second, allow_mismatch=args.allow_mismatch, gate=True, said=said, collect=warnings, arm=arm)
        failures = []
        for first, second in pairs:
            change = speculation_change(first, second)
            if change is not None:
                lost, line = change
                (failures if lost else warnings).append(line)
                if not lost:
                    sys.stderr.write(f"speedbench: warning: {line}\n")
        result = dataclasses.replace(gate(reference, candidate, thresholds=thresholds,
                                          gate_categories=args.gate == "categories"), failures=tuple(failures),
                                     warnings=tuple(warnings))
    out(gate_text(result, allow_partial=args.allow_partial))
    _step_summary(gate_markdown(result, allow_partial=args.allow_partial))
    return EXIT_FAILED if result.failed(allow_partial=args.allow_partial) else EXIT_OK


def speculation_change(reference: Any, candidate: Any) -> tuple[bool, str] | None:
    """(lost, sentence) when one of two gated runs drafted and the other did not, else None. Lost: the reference
    drafted and the candidate none (speculation switched off or lost, a regression); otherwise the candidate
    drafted and the reference none (a baseline reference, or --reference and --candidate swapped)."""
    from bench._constants import OVERALL
    from bench.analysis import drafted_by_category

    drafted = [drafted_by_category(run).get(OVERALL) for run in (reference, candidate)]
    counts = [item.proposed if item is not None else 0 for item in drafted]
    if bool(counts[0]) == bool(counts[1]):
        return None
    plain_run, plain_drafted = (candidate, drafted[1]) if counts[0] else (reference, drafted[0])
    if not (plain_drafted is not None and plain_drafted.reported) and plain_run.settings.tags.get("mode") != "baseline":
        return None  # the other server says nothing about drafting: it may have drafted unseen
    if counts[0]:
        return True, (f"speculation lost: the reference drafted {counts[0]:,} tokens and the candidate none, so its "
                      "accept rate cannot be gated; the candidate's server was started without speculation or lost "
                      "its draft model (check its flags and log: --spec, --draft-model, -md, --spec-type)")
    return False, (f"the candidate drafted {counts[1]:,} tokens and the reference none: this gates a speculative run "
                   "against a baseline one, so its changes measure speculation itself; are --reference and "
                   "--candidate swapped, or was the reference recorded without speculation?")


def _is_sweep(path: str) -> bool:
    from bench.records import is_sweep_folder

    return is_sweep_folder(path)


def _gate_side(path: str) -> Any:
    """A comparison folder as (baseline, speculative), a folder of run files as a list (reference runs), or a run."""
    from pathlib import Path

    from bench.records import load_comparison_folder, load_run

    folder = Path(path)
    if folder.is_dir() and not (folder / "baseline.json").exists() and sorted(folder.glob("*.json")):
        return [load_run(file) for file in sorted(folder.glob("*.json"))]
    return load_comparison_folder(path) if folder.is_dir() else load_run(path)


def _gate_sweeps(args: argparse.Namespace, thresholds: dict[str, float]) -> Any:
    """The gate over every cell (level, arm) of the reference sweep; rows named `c<level>/<arm>: <category>`, and
    cells the candidate lacks named as missing."""
    import dataclasses

    from bench.analysis import Gate, gate
    from bench.pipeline import vet
    from bench.records import BASELINE, load_run, sweep_cell_file, sweep_cells

    rows, missing, notes, warnings = [], [], [], []
    for level, arm in sweep_cells(args.reference):
        cell, twin = (sweep_cell_file(folder, level, arm) for folder in (args.reference, args.candidate))
        name = f"{level}/{arm}"
        if not twin.exists() or not sweep_cell_file(args.candidate, level, BASELINE).exists():
            missing.append(f"sweep cell {name}: missing from the candidate")
            continue
        pairs = [(load_run(sweep_cell_file(args.reference, level, BASELINE)), load_run(cell)),
                 (load_run(sweep_cell_file(args.candidate, level, BASELINE)), load_run(twin))]
        said: set[str] = set()
        for (first, second), side in zip(zip(*pairs, strict=True), (BASELINE, arm), strict=True):
            vet(first, second, allow_mismatch=args.allow_mismatch, gate=True, said=said, collect=warnings,
                arm=f"{name} {side}")
        found = gate(pairs[0], pairs[1], thresholds=thresholds, gate_categories=args.gate == "categories")
        rows += [dataclasses.replace(row, category=f"{name}: {row.category}") for row in found.rows]
        missing += [f"{name}: {item}" for item in found.missing]
        notes += [f"{name}: {item}" for item in found.notes]
    if not rows:
        raise BenchError(f"{args.reference} and {args.candidate} share no sweep cell (c<level>/<arm>.json)")
    return Gate(tuple(rows), tuple(missing), tuple(notes), warnings=tuple(warnings), method=found.method)


def _gate_history(args: argparse.Namespace, thresholds: dict[str, float]) -> Any:
    """The candidate's comparisons (one per workload) gated against the history's recent window of each series."""
    import dataclasses

    from bench.analysis import Gate, history_gate
    from bench.commands._history import load_analysis
    from bench.pipeline import CommitContext, history_points

    if args.window < 2:
        raise BenchError(f"--window {args.window}: needs at least 2 commits")
    analysis = load_analysis(args.history)
    points = history_points([args.candidate], CommitContext("candidate", None, ""), None)
    rows: list[Any] = []
    notes: list[str] = []
    for point in points:
        found = history_gate(analysis, point.rows, point.workload, point.machine.fingerprint, thresholds=thresholds,
                             window=args.window)
        if not found.rows:
            raise BenchError(f"{args.history}: no series of workload {point.workload} on machine "
                             f"{point.machine.fingerprint} with >= 2 commits to gate against")
        prefix = f"{point.workload}: " if len(points) > 1 else ""
        rows += [dataclasses.replace(row, category=prefix + row.category) for row in found.rows]
        notes += [note for note in found.notes if note not in notes]
    return Gate(tuple(rows), notes=tuple(notes))


def _step_summary(markdown: str) -> None:
    """Append to $GITHUB_STEP_SUMMARY when set."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        from bench.records import write_text_file

        write_text_file(summary, markdown + "\n", append=True)
