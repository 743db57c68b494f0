"""The `regress` job: gate a candidate against a reference (comparison folder, run files, sweep) or a history."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bench._constants import OVERALL
from bench._errors import BenchError
from bench.analysis import Gate, GateRow, drafted_by_category, gate, history_gate
from bench.pipeline._history import CommitContext, history_points, load_history_analysis
from bench.pipeline._vet import vet
from bench.records import (
    BASELINE,
    Run,
    is_sweep_folder,
    load_comparison_folder,
    load_run,
    sweep_cell_file,
    sweep_cells,
)


@dataclass(frozen=True)
class GateJob:
    """What `regress` gates: the candidate, against a reference or a history's recent window, and how."""

    candidate: str
    thresholds: Mapping[str, float]
    reference: str | None = None
    history: str | None = None
    window: int = 20
    allow_mismatch: bool = False
    gate_categories: bool = True


def gate_thresholds(default: float, *, decode: float | None, latency: float | None,
                    accept: float | None) -> dict[str, float]:
    """Each gated metric's threshold: its own where given, else the default."""
    thresholds = {
        "decode_speedup": decode, "decode_rate": decode, "latency_speedup": latency, "latency": latency,
        "accept_rate": accept,
    }
    chosen = {key: (value if value is not None else default) for key, value in thresholds.items()}
    for value in chosen.values():
        if not 0.0 < value < 1.0:  # NaN fails both comparisons
            raise BenchError(f"threshold {value!r}: a threshold lies between 0 and 1 (0.05 = 5%)")
    return chosen


def run_gate(job: GateJob) -> Gate:
    """The gate of the candidate against its reference or history; a BenchError when they cannot be gated."""
    if job.history:
        if job.reference:
            raise BenchError("give --reference or --history, not both")
        return _gate_history(job)
    if not job.reference:
        raise BenchError("regress needs --reference (or --history DIR)")
    if is_sweep_folder(job.reference) and is_sweep_folder(job.candidate):
        return _gate_sweeps(job, job.reference)
    return _gate_runs(job, job.reference)


def speculation_change(reference: Run, candidate: Run) -> tuple[bool, str] | None:
    """(lost, sentence) when one of two gated runs drafted and the other did not, else None. Lost: the reference
    drafted and the candidate none (speculation switched off or lost, a regression); otherwise the candidate
    drafted and the reference none (a baseline reference, or --reference and --candidate swapped)."""
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
                      "its draft model (check its flags and log: --spec, --spec-type, --spec-draft-model)")
    return False, (f"the candidate drafted {counts[1]:,} tokens and the reference none: this gates a speculative run "
                   "against a baseline one, so its changes measure speculation itself; are --reference and "
                   "--candidate swapped, or was the reference recorded without speculation?")


def _gate_runs(job: GateJob, reference_path: str) -> Gate:
    """The gate of two comparison folders, two run files, or a folder of reference runs against one run."""
    reference, candidate = _gate_side(reference_path), _gate_side(job.candidate)
    if isinstance(candidate, list):
        raise BenchError("give one candidate run (several reference runs are allowed)")
    if isinstance(reference, tuple) and isinstance(candidate, tuple):
        pairs: Iterable[tuple[Run, Run]] = zip(reference, candidate, strict=True)
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
        vet(first, second, allow_mismatch=job.allow_mismatch, gate=True, said=said, collect=warnings, arm=arm)
    failures: list[str] = []
    for first, second in pairs:
        change = speculation_change(first, second)
        if change is not None:
            lost, line = change
            (failures if lost else warnings).append(line)
            if not lost:
                sys.stderr.write(f"speedbench: warning: {line}\n")
    found = gate(reference, candidate, thresholds=dict(job.thresholds), gate_categories=job.gate_categories)
    return dataclasses.replace(found, failures=tuple(failures), warnings=tuple(warnings))


def _gate_side(path: str) -> Run | tuple[Run, Run] | list[Run]:
    """A comparison folder as (baseline, speculative), a folder of run files as a list (reference runs), or a run."""
    folder = Path(path)
    if folder.is_dir() and not (folder / "baseline.json").exists() and sorted(folder.glob("*.json")):
        return [load_run(file) for file in sorted(folder.glob("*.json"))]
    return load_comparison_folder(path) if folder.is_dir() else load_run(path)


def _gate_sweeps(job: GateJob, reference: str) -> Gate:
    """The gate over every cell (level, arm) of the reference sweep; rows named `c<level>/<arm>: <category>`, and
    cells the candidate lacks named as missing."""
    candidate = job.candidate
    rows: list[GateRow] = []
    missing: list[str] = []
    notes: list[str] = []
    warnings: list[str] = []
    for level, arm in sweep_cells(reference):
        cell, twin = (sweep_cell_file(folder, level, arm) for folder in (reference, candidate))
        name = f"{level}/{arm}"
        if not twin.exists() or not sweep_cell_file(candidate, level, BASELINE).exists():
            missing.append(f"sweep cell {name}: missing from the candidate")
            continue
        pairs = [(load_run(sweep_cell_file(reference, level, BASELINE)), load_run(cell)),
                 (load_run(sweep_cell_file(candidate, level, BASELINE)), load_run(twin))]
        said: set[str] = set()
        for (first, second), side in zip(zip(*pairs, strict=True), (BASELINE, arm), strict=True):
            vet(first, second, allow_mismatch=job.allow_mismatch, gate=True, said=said, collect=warnings,
                arm=f"{name} {side}")
        found = gate(pairs[0], pairs[1], thresholds=dict(job.thresholds), gate_categories=job.gate_categories)
        rows += [dataclasses.replace(row, category=f"{name}: {row.category}") for row in found.rows]
        missing += [f"{name}: {item}" for item in found.missing]
        notes += [f"{name}: {item}" for item in found.notes]
    if not rows:
        raise BenchError(f"{reference} and {candidate} share no sweep cell (c<level>/<arm>.json)")
    return Gate(tuple(rows), tuple(missing), tuple(notes), warnings=tuple(warnings), method=found.method)


def _gate_history(job: GateJob) -> Gate:
    """The candidate's comparisons (one per workload) gated against the history's recent window of each series."""
    history = str(job.history)
    if job.window < 2:
        raise BenchError(f"--window {job.window}: needs at least 2 commits")
    analysis = load_history_analysis(history)
    points = history_points([job.candidate], CommitContext("candidate", None, ""), None)
    rows: list[GateRow] = []
    notes: list[str] = []
    for point in points:
        found = history_gate(analysis, point.rows, point.workload, point.machine.fingerprint,
                             thresholds=dict(job.thresholds), window=job.window)
        if not found.rows:
            raise BenchError(f"{history}: no series of workload {point.workload} on machine "
                             f"{point.machine.fingerprint} with >= 2 commits to gate against")
        prefix = f"{point.workload}: " if len(points) > 1 else ""
        rows += [dataclasses.replace(row, category=prefix + row.category) for row in found.rows]
        notes += [note for note in found.notes if note not in notes]
    return Gate(tuple(rows), notes=tuple(notes))
