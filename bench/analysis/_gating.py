"""The CI gate's inputs assembled from paths: comparison folders, run files, folders of reference runs or sweeps.

`gate_paths` reads both sides, has every pair the gate compares checked by the caller (`check_pair`: the
comparability vet, which prints and may refuse) and gates them; a sweep is gated cell by cell (level, arm),
its rows named `c<level>/<arm>: <category>` and the cells the candidate lacks named as missing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench._constants import OVERALL
from bench._errors import BenchError
from bench.analysis._drafted import drafted_by_category
from bench.analysis._regress import Gate, gate
from bench.records import (
    BASELINE,
    Run,
    cell_name,
    is_sweep_folder,
    load_comparison_folder,
    load_run,
    run_file,
    run_files,
    sweep_cell_file,
    sweep_cells,
)

CheckPair = Callable[[Run, Run], Any]
"""Checks one (reference, candidate) pair before it is gated; raises to refuse it."""
GATED_METRICS = {"decode": ("decode_speedup", "decode_rate"), "latency": ("latency_speedup", "latency"),
                 "accept": ("accept_rate",)}
"""The gate's metrics by the name of their `--threshold-<name>` option."""


def gate_thresholds(default: float, **by_metric: float | None) -> dict[str, float]:
    """Each gated metric's threshold: its own (`decode=`, `latency=`, `accept=`) where given, else `default`."""
    given = {name: value for name, value in by_metric.items() if value is not None}
    return {key: given.get(name, default) for name, keys in GATED_METRICS.items() for key in keys}


def gate_side(path: str | Path) -> tuple[Run, Run] | list[Run] | Run:
    """A comparison folder as (baseline, speculative), a folder of run files as a list (reference runs), or a run."""
    folder = Path(path)
    if folder.is_dir() and not run_file(folder, BASELINE).exists() and run_files(folder):
        return [load_run(file) for file in run_files(folder)]
    return load_comparison_folder(path) if folder.is_dir() else load_run(path)


def _pairs(reference: Any, candidate: Any) -> list[tuple[Run, Run]]:
    """The (reference, candidate) run pairs the gate compares; none for a folder against a file (it refuses)."""
    if isinstance(reference, tuple) and isinstance(candidate, tuple):
        return list(zip(reference, candidate, strict=True))
    if isinstance(candidate, tuple) or isinstance(reference, tuple):
        return []
    return [(run, candidate) for run in (reference if isinstance(reference, list) else [reference])]


def gate_paths(reference: str, candidate: str, thresholds: Mapping[str, float], check_pair: CheckPair,
               warn: Callable[[str], Any]) -> Gate:
    """The gate of the candidate against the reference, both read from their paths; each pair checked first and
    a baseline gated against a speculative run said through `warn`."""
    if is_sweep_folder(reference) and is_sweep_folder(candidate):
        return _gate_sweeps(reference, candidate, thresholds, check_pair)
    sides = gate_side(reference), gate_side(candidate)
    pairs = _pairs(*sides)
    for first, second in pairs:
        check_pair(first, second)
    for first, second in pairs:
        line = drafting_mismatch(first, second)
        if line:
            warn(line)
    return gate(sides[0], sides[1], thresholds=thresholds)


def _gate_sweeps(reference: str, candidate: str, thresholds: Mapping[str, float], check_pair: CheckPair) -> Gate:
    """The gate over every cell (level, arm) of the reference sweep."""
    rows, missing, notes = [], [], []
    for level, arm in sweep_cells(reference):
        cell, twin = (sweep_cell_file(folder, level, arm) for folder in (reference, candidate))
        name = f"{level}/{arm}"
        if not twin.exists() or not sweep_cell_file(candidate, level, BASELINE).exists():
            missing.append(f"sweep cell {name}: missing from the candidate")
            continue
        pairs: Sequence[tuple[Run, Run]] = [
            (load_run(sweep_cell_file(reference, level, BASELINE)), load_run(cell)),
            (load_run(sweep_cell_file(candidate, level, BASELINE)), load_run(twin))]
        for first, second in zip(*pairs, strict=True):
            check_pair(first, second)
        found = gate(pairs[0], pairs[1], thresholds=thresholds)
        rows += [dataclasses.replace(row, category=f"{name}: {row.category}") for row in found.rows]
        missing += [f"{name}: {item}" for item in found.missing]
        notes += [f"{name}: {item}" for item in found.notes]
    if not rows:
        raise BenchError(f"{reference} and {candidate} share no sweep cell ({cell_name('<level>', '<arm>')})")
    return Gate(tuple(rows), tuple(missing), tuple(notes))


def drafting_mismatch(reference: Run, candidate: Run) -> str | None:
    """A sentence when one of two gated runs drafted and the other did not: the gate then measures speculation
    itself (a baseline against a speculative run), not a regression of one configuration."""
    drafted = [drafted_by_category(run).get(OVERALL) for run in (reference, candidate)]
    counts = [item.proposed if item is not None else 0 for item in drafted]
    if bool(counts[0]) == bool(counts[1]):
        return None
    plain_run, plain_drafted = (candidate, drafted[1]) if counts[0] else (reference, drafted[0])
    if not (plain_drafted is not None and plain_drafted.reported) and plain_run.settings.tags.get("mode") != "baseline":
        return None  # the other server says nothing about drafting: it may have drafted unseen
    speculative, plain = ("reference", "candidate") if counts[0] else ("candidate", "reference")
    return (f"the {speculative} drafted {max(counts)} tokens and the {plain} none: this gates a baseline run "
            "against a speculative one, so its changes measure speculation itself, not a regression")
