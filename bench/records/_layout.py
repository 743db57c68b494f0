"""The results-folder layout, the one place that names its files and folders.

A run file `<run>.json` has its journal `<run>.json.jsonl` and its writer's lock `<run>.json.lock` beside it.
A comparison folder (`speedbench bench`) holds `baseline.json`, `speculative.json`, `comparison.{txt,md,json}`
and `plots/`; `speedbench report` adds `report.md`. A sweep folder holds one `c<level>/` folder per concurrency
level, each with `baseline.json` and one `<arm>.json` per speculative arm, and `sweep.{txt,md,json}` beside them.
A `bench --config` folder holds `pairs.json` (the pairs' names, in order), one comparison folder per pair named
after it, and `report.md` over all of them.
New folders are `<results dir>/<UTC time>-<label>`.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from pathlib import Path

from bench._errors import BenchError
from bench.records._names import file_label

BASELINE = "baseline"
"""The baseline arm's name (its run file is `baseline.json`)."""
SPECULATIVE = "speculative"
"""The speculative arm's name in a comparison folder."""
RUN_SUFFIX = ".json"
JOURNAL_SUFFIX = ".jsonl"
LOCK_SUFFIX = ".lock"
LEVEL_PREFIX = "c"
RATE_PREFIX = "r"
REPORT_FILE = "report.md"
PAIRS_FILE = "pairs.json"
"""A `bench --config` folder's record of its pairs (`bench.records._pairs`)."""
SAMPLE_FOLDER = "sample"
"""A results folder of this name holds a committed example, never the newest run."""


def run_file(folder: str | os.PathLike[str], arm: str) -> Path:
    """The run file of `arm` in a comparison folder or sweep cell: `<folder>/<arm>.json`."""
    return Path(folder) / f"{arm}{RUN_SUFFIX}"


def run_files(folder: str | os.PathLike[str]) -> list[Path]:
    """Every run file of a folder (`*.json`, journals aside), sorted by name."""
    return sorted(Path(folder).glob(f"*{RUN_SUFFIX}"))


def cell_name(level: int | str, arm: str) -> str:
    """How a sweep cell's run file is named beside its folder: `c<level>/<arm>.json` (`level` as a number or `c4`)."""
    level_name = level if isinstance(level, str) else f"{LEVEL_PREFIX}{level}"
    return f"{level_name}/{arm}{RUN_SUFFIX}"


def traffic_files(folder: str | os.PathLike[str]) -> list[Path]:
    """A comparison's traffic renderings: `traffic.txt/.md/.json`."""
    return [Path(folder) / f"traffic.{kind}" for kind in ("txt", "md", "json")]


def round_folder(folder: str | os.PathLike[str], round_index: int) -> Path:
    """The run files of one round of sampling until decided: `<folder>/rounds/<k>/`."""
    return Path(folder) / "rounds" / str(round_index)


def journal_path(output: str | os.PathLike[str]) -> Path:
    """Where the journal of a run file lives: `<output>.jsonl`."""
    return Path(f"{output}{JOURNAL_SUFFIX}")


def lock_path(output: str | os.PathLike[str]) -> Path:
    """Where the lock of a run file lives: `<output>.lock`, beside the run file and its journal."""
    return Path(f"{output}{LOCK_SUFFIX}")


def is_journal(path: str | os.PathLike[str]) -> bool:
    """Whether `path` names a journal rather than a run file."""
    return str(path).endswith(JOURNAL_SUFFIX)


def stamped_name(label: str) -> str:
    """`<UTC time>-<label>`: the name of a new results folder or default run file (the label made one safe file-name
    part by `file_label`: a label is a name, never a path)."""
    return f"{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%SZ')}-{file_label(label, 'run')}"


def default_run_file(label: str | None, results_dir: str = "results") -> str:
    """`results/<UTC time>-<label>.json`: where `speedbench run` writes without --output."""
    return os.path.join(results_dir, stamped_name(label or "run") + RUN_SUFFIX)


def new_results_folder(results_dir: str | os.PathLike[str], label: str) -> Path:
    """Create and return a new `<results dir>/<UTC time>-<label>` folder (never an existing one)."""
    folder = Path(results_dir) / stamped_name(label)
    folder.mkdir(parents=True, exist_ok=False)
    return folder


def resumed_or_new_folder(resume: str | None, results_dir: str | os.PathLike[str], label: str, kind: str) -> Path:
    """The folder a `--resume` names (it must exist: `no <kind> folder to resume` otherwise), else a new one."""
    if resume:
        folder = Path(resume)
        if not folder.is_dir():
            raise BenchError(f"{folder}: no {kind} folder to resume")
        return folder
    return new_results_folder(results_dir, label)


def comparison_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The comparison's text, Markdown and JSON renderings in a comparison folder."""
    return [Path(folder) / f"comparison.{kind}" for kind in ("txt", "md", "json")]


def plots_folder(folder: str | os.PathLike[str]) -> Path:
    """Where a comparison folder's plots go."""
    return Path(folder) / "plots"


def sweep_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The sweep summary's text, Markdown and JSON renderings in a sweep folder."""
    return [Path(folder) / f"sweep.{kind}" for kind in ("txt", "md", "json")]


def is_comparison_folder(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a finished comparison folder (both run files there)."""
    return all(run_file(path, arm).exists() for arm in (BASELINE, SPECULATIVE))


def has_journal(folder: str | os.PathLike[str], arms: tuple[str, ...] = (BASELINE, SPECULATIVE)) -> bool:
    """Whether any of `arms` left a journal in `folder` (an interrupted comparison to resume)."""
    return any(journal_path(run_file(folder, arm)).exists() for arm in arms)


def workload_folders(folder: str | os.PathLike[str]) -> list[Path]:
    """The comparison folders inside a `bench --bench a,b` folder, one per workload, in the order they ran."""
    return sorted(path for path in Path(folder).glob("*") if path.is_dir() and is_comparison_folder(path))


def latest_comparison_folder(results_dir: str | os.PathLike[str]) -> Path | None:
    """The newest comparison folder under `results_dir` (names sort by time), the committed sample aside; a folder
    of several workloads' comparisons counts as one."""
    folders = sorted(
        path for path in Path(results_dir).glob("*")
        if (is_comparison_folder(path) or workload_folders(path)) and path.name != SAMPLE_FOLDER
    )
    return folders[-1] if folders else None


def is_rate_sweep_layout(path: str | os.PathLike[str]) -> bool:
    """Whether `path` holds a rate sweep (an `r<rate>/` folder with a baseline run file)."""
    root = Path(path)
    return root.is_dir() and any(folder_rate(cell) is not None and run_file(cell, BASELINE).exists()
                                 for cell in root.iterdir())


def latest_results_folder(results_dir: str | os.PathLike[str]) -> Path | None:
    """The newest results folder of any kind under `results_dir` (a comparison, a several-workload `bench`, a
    concurrency sweep or a rate sweep; names sort by time), the committed sample aside."""
    folders = sorted(
        path for path in Path(results_dir).glob("*")
        if path.is_dir() and path.name != SAMPLE_FOLDER
        and (is_comparison_folder(path) or workload_folders(path) or is_sweep_folder(path)
             or is_rate_sweep_layout(path) or (path / PAIRS_FILE).is_file())
    )
    return folders[-1] if folders else None


def comparison_inputs(folder: str | os.PathLike[str]) -> list[tuple[str, Path, Path]]:
    """Every (name, baseline run file, speculative run file) a results folder holds, in order: a comparison folder
    (`baseline.json`, `speculative.json`), a `bench --bench a,b` folder (one per workload), a folder of
    `baseline.json` and one other run file (the README's `spec.json`), or a sweep (one per level and arm).

    Anything else is a one-line `BenchError` that says what the folder holds and what would be read."""

    root = Path(folder)
    if not root.is_dir():
        raise BenchError(f"{root}: no such folder (give a results folder, or a baseline and a speculative run file)")
    if is_comparison_folder(root):
        return [(root.name, run_file(root, BASELINE), run_file(root, SPECULATIVE))]
    workloads = workload_folders(root)
    if workloads:
        return [(path.name.split("-", 1)[-1], run_file(path, BASELINE), run_file(path, SPECULATIVE))
                for path in workloads]
    if is_sweep_folder(root):
        return [(f"{arm} at {level}", sweep_cell_file(root, level, BASELINE), sweep_cell_file(root, level, arm))
                for level, arm in sweep_cells(root)]
    others = sorted(path for path in root.glob(f"*{RUN_SUFFIX}") if path.name != f"{BASELINE}{RUN_SUFFIX}"
                    and not path.name.startswith(("comparison", "sweep", "rate_sweep")))
    if run_file(root, BASELINE).exists() and len(others) == 1:
        return [(root.name, run_file(root, BASELINE), others[0])]
    found = ", ".join(path.name for path in sorted(root.glob(f"*{RUN_SUFFIX}"))) or "no run files"
    raise BenchError(f"{root}: not a comparison ({found}): expected baseline.json with speculative.json or one other "
                     "run file, a make bench folder of workloads, or a sweep; or name the two run files")


def level_folder(folder: str | os.PathLike[str], level: int) -> Path:
    """A sweep's folder for one concurrency level: `<folder>/c<level>`."""
    return Path(folder) / f"{LEVEL_PREFIX}{level}"


def is_sweep_folder(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a sweep folder (a `c<level>/baseline.json` in it)."""
    return Path(path).is_dir() and any(Path(path).glob(f"{LEVEL_PREFIX}*/{BASELINE}{RUN_SUFFIX}"))


def sweep_cells(folder: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """Every (level folder name, speculative arm name) with a run file in a sweep folder, sorted."""
    cells = sorted(Path(folder).glob(f"{LEVEL_PREFIX}*/*{RUN_SUFFIX}"))
    return [(cell.parent.name, cell.stem) for cell in cells if cell.stem != BASELINE]


def sweep_cell_file(folder: str | os.PathLike[str], level_name: str, arm: str) -> Path:
    """The run file of `arm` in the level folder `level_name` of a sweep folder."""
    return run_file(Path(folder) / level_name, arm)


def report_file(folder: str | os.PathLike[str]) -> Path:
    """A results folder's PR-ready report: `<folder>/report.md`."""
    return Path(folder) / REPORT_FILE


def rate_folder(folder: str | os.PathLike[str], rate: float) -> Path:
    """A rate sweep's folder for one arrival rate: `<folder>/r<rate>`."""
    return Path(folder) / f"{RATE_PREFIX}{rate:g}"


def folder_rate(path: str | os.PathLike[str]) -> float | None:
    """The arrival rate an `r<rate>` folder of a rate sweep stands for, else None."""
    name = Path(path).name
    if not name.startswith(RATE_PREFIX) or not Path(path).is_dir():
        return None
    try:
        rate = float(name[len(RATE_PREFIX):])
    except ValueError:
        return None
    return rate if math.isfinite(rate) and rate > 0 else None


def rate_sweep_files(folder: str | os.PathLike[str]) -> list[Path]:
    """A rate sweep's text, Markdown and JSON renderings: `rate_sweep.txt/.md/.json`."""
    return [Path(folder) / f"rate_sweep.{kind}" for kind in ("txt", "md", "json")]
