"""`bench --config`: several baseline/speculative pairs in turn, each interleaved on fresh servers into
`<results>/<UTC time>-<label>/<pair name>/`, resumable per pair, then one report over all of them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from bench._constants import DEFAULT_THRESHOLD, EXIT_INTERRUPTED, EXIT_OK
from bench._errors import BenchError
from bench._types import Writer
from bench.analysis import Comparison, compare
from bench.pipeline._bench import PipelineConfig, check_pipeline, run_comparison, workloads
from bench.pipeline._servers import ended_on_signals
from bench.records import (
    BASELINE,
    SPECULATIVE,
    has_journal,
    is_comparison_folder,
    load_run,
    new_results_folder,
    read_pairs_file,
    run_file,
    runs_complete,
    write_pairs_file,
)
from bench.runner import Progress, left_workers


@dataclass(frozen=True)
class Pair:
    """One pair of a config file: its name (its folder's) and its comparison."""

    name: str
    config: PipelineConfig


@dataclass(frozen=True)
class PairsConfig:
    """What `bench --config` runs: the pairs in order, the report's title, the results folder's label and parent,
    and a folder to resume."""

    pairs: tuple[Pair, ...]
    title: str | None = None
    label: str = "pairs"
    results_dir: str = "results"
    resume: str | None = None


def _finished(folder: Path) -> bool:
    """Whether a pair's folder holds a finished comparison (both run files with every sample in)."""
    return runs_complete(folder, (BASELINE, SPECULATIVE))


def _interrupted(folder: Path) -> bool:
    """Whether a pair's folder holds an interrupted comparison to continue."""
    return has_journal(folder) or any(left_workers(run_file(folder, arm)) for arm in (BASELINE, SPECULATIVE))


def _top_folder(config: PairsConfig) -> Path:
    """The folder of the whole file: the one `--resume` names (it must hold the same pairs), else a new one."""
    names = [pair.name for pair in config.pairs]
    if config.resume is None:
        return new_results_folder(config.results_dir, config.label)
    folder = Path(config.resume)
    recorded = read_pairs_file(folder)
    if recorded is None:
        raise BenchError(f"{folder}: no bench --config folder to resume (no pairs.json)")
    if recorded.names != tuple(names):
        raise BenchError(f"{folder}: holds the pairs {', '.join(recorded.names)}, the file names {', '.join(names)}")
    return folder


def pair_comparisons(folder: Path, names: tuple[str, ...], threshold: float = DEFAULT_THRESHOLD
                     ) -> list[tuple[str, Comparison]]:
    """(name, comparison) of each finished pair in `folder`, recomputed from its run files."""
    found = []
    for name in names:
        where = folder / name
        if is_comparison_folder(where):
            baseline, speculative = (load_run(run_file(where, arm)) for arm in (BASELINE, SPECULATIVE))
            found.append((name, compare(baseline, speculative, threshold=threshold)))
    return found


def run_pairs(config: PairsConfig, *, out: Writer, progress: Progress) -> int:
    """Every pair checked, then each run in turn on fresh servers (finished ones kept on `--resume`), then one
    report.md over all of them."""
    for pair in config.pairs:
        try:
            if len(workloads(pair.config)) > 1:
                raise BenchError("one prompt set per pair (--bench): give each its own pair")
            check_pipeline(pair.config)
        except BenchError as exc:
            raise BenchError(f"pair {pair.name!r}: {exc}") from None
    folder = _top_folder(config)
    names = tuple(pair.name for pair in config.pairs)
    threshold = config.pairs[0].config.job.threshold
    write_pairs_file(folder, names, title=config.title, threshold=threshold)
    code = EXIT_OK
    with ended_on_signals():
        try:
            for pair in config.pairs:
                where = folder / pair.name
                if _finished(where):
                    out(f"speedbench: pair {pair.name}: already finished in {where}\n")
                    continue
                out(f"speedbench: pair {pair.name}\n")
                job = dataclasses.replace(pair.config.job, resume=str(where) if _interrupted(where) else None)
                one_code, comparisons = run_comparison(dataclasses.replace(pair.config, job=job), out=out,
                                                       progress=progress, folder=where)
                code = code or one_code
                if not comparisons:
                    out(f"speedbench: stopped in pair {pair.name}; continue with --resume {folder}\n")
                    return code
        except KeyboardInterrupt:
            out(f"speedbench: interrupted; the servers started are stopped; continue with --resume {folder}\n")
            return EXIT_INTERRUPTED
    from bench.render import decision_text, write_pairs_report

    finished = pair_comparisons(folder, names, threshold)
    out(f"speedbench: wrote {write_pairs_report(finished, folder, title=config.title)}\n")
    for name, comparison in finished:
        out(f"speedbench: {name}: {decision_text([comparison])}\n")
    return code
