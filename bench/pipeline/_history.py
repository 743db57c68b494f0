"""`history add`: a `bench` output folder's comparisons as points of a history, with their commit and machine.

The commit, branch and time come from the flags, else from `GITHUB_SHA` / `GITHUB_REF_NAME`, else from git in the
current folder; the commit time from git when it knows the commit, else now. Every comparison is compared and
checked before any point is written, so bad input writes nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench._errors import BenchError
from bench._version import __version__
from bench.records import (
    BASELINE,
    SPECULATIVE,
    HistoryPoint,
    Machine,
    Run,
    check_commit,
    cpu_model,
    digest_files,
    load_comparison_folder,
    load_history,
    machine_fingerprint,
    point_table,
    run_file,
    utc_time,
    workload_folders,
    write_points,
)

if TYPE_CHECKING:
    from bench.analysis import HistoryAnalysis


@dataclass(frozen=True, slots=True)
class CommitContext:
    """Which commit a point measures: its id, branch and time (ISO 8601, UTC)."""

    commit: str
    branch: str | None
    time: str


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def _iso(text: str) -> str:
    """An ISO 8601 time as UTC (a one-line BenchError when it is not one)."""
    try:
        return utc_time(text, "--time")
    except ValueError:
        raise BenchError(f"--time {text!r}: not an ISO 8601 time (e.g. 2026-12-03T12:00:00Z)") from None


def commit_context(commit: str | None, branch: str | None, time: str | None) -> CommitContext:
    """The commit, branch and time of a point: flags first, then GitHub Actions' variables, then git."""
    sha = commit or os.environ.get("GITHUB_SHA") or _git("rev-parse", "HEAD")
    if not sha:
        raise BenchError("no commit: give --commit SHA (or run inside a git checkout, or set GITHUB_SHA)")
    check_commit(sha)
    name = branch or os.environ.get("GITHUB_REF_NAME") or _git("rev-parse", "--abbrev-ref", "HEAD")
    when = _iso(time) if time else None
    if when is None:
        committed = _git("show", "-s", "--format=%cI", sha)
        when = _iso(committed) if committed else _now()
    return CommitContext(sha, None if name in (None, "HEAD") else name, when)


def comparison_folders(folders: Sequence[str]) -> list[Path]:
    """Every comparison folder the arguments name: a comparison folder itself, or the workloads of a `make bench`
    folder (a one-line BenchError for anything else)."""
    found = []
    for folder in folders:
        path = Path(folder)
        if not path.is_dir():
            raise BenchError(f"{folder}: not a folder (give a bench output folder)")
        if all(run_file(path, arm).exists() for arm in (BASELINE, SPECULATIVE)):
            found.append(path)
            continue
        inner = workload_folders(path)
        if not inner:
            raise BenchError(f"{folder}: neither a comparison folder (baseline.json and speculative.json) nor a "
                             "make-bench folder of workloads")
        found += inner
    return found


def workload_name(speculative: Run) -> str:
    """A comparison's workload: its prompt set, and the speculative configuration when the run names one."""
    bench = speculative.settings.bench or "workload"
    mode = speculative.settings.tags.get("mode")
    return f"{bench}:{mode}" if mode else bench


def describe_machine(baseline: Run, speculative: Run, name: str | None) -> Machine:
    """The machine of a comparison: this CPU's model, the runs' cores, the engine build and the model's digest."""
    info = speculative.info
    cores = info.machine.get("cpu_count") or os.cpu_count() or 0
    tags = speculative.settings.tags
    engine_build = info.server.build or tags.get("server") or info.engine or "unknown engine"
    model = info.server.model or tags.get("model") or speculative.settings.model or "unknown model"
    digest_source = info.extra.get("model_sha256") if isinstance(info.extra.get("model_sha256"), str) else model
    model_digest = hashlib.sha256(str(digest_source).encode()).hexdigest()[:12]
    cpu = cpu_model()
    fingerprint = machine_fingerprint(cpu, int(cores), engine_build, model_digest)
    return Machine(name or f"{cpu}, {cores} cores", fingerprint, cpu, int(cores), engine_build, model, model_digest)


def history_points(folders: Sequence[str], context: CommitContext, machine: str | None) -> list[HistoryPoint]:
    """The points of the folders' comparisons at one commit (comparisons that cannot be compared refused)."""
    from bench.analysis import check_comparable, compare, history_rows

    points = []
    added = _now()
    for folder in comparison_folders(folders):
        baseline, speculative = load_comparison_folder(folder)
        checked = check_comparable(baseline, speculative)
        if checked.errors:
            raise BenchError(f"{folder}: the runs are not comparable: "
                             + "; ".join(difference.message for difference in checked.errors))
        comparison = compare(baseline, speculative, comparability=checked)
        if not comparison.has_stats:
            raise BenchError(f"{folder}: no paired statistics ({comparison.stats_note or 'too few samples'})")
        rows = history_rows(comparison)
        digest = digest_files([run_file(folder, BASELINE), run_file(folder, SPECULATIVE)])
        points.append(HistoryPoint(
            commit=context.commit, branch=context.branch, time=context.time, added_at=added,
            workload=workload_name(speculative), machine=describe_machine(baseline, speculative, machine),
            source_folder=str(folder), source_digest=digest, harness=f"speedbench {__version__}",
            table=point_table(rows)))
    return points


def add_to_history(folders: Sequence[str], history: str, *, commit: str | None = None, branch: str | None = None,
                   machine: str | None = None, time: str | None = None) -> list[tuple[HistoryPoint, Path, bool]]:
    """Record the folders' comparisons in `history`: each point, its file and whether it was new."""
    points = history_points(folders, commit_context(commit, branch, time), machine)
    written = write_points(history, points)
    return [(point, path, new) for point, (path, new) in zip(points, written, strict=True)]


def load_history_analysis(history: str, *, alpha: float = 0.05, branch: str | None = None) -> HistoryAnalysis:
    """A history folder's points, analysed (its series and their change points)."""
    from bench.analysis import analyse_history, checked_intervals

    return analyse_history(checked_intervals(load_history(history)), alpha=alpha, branch=branch)
