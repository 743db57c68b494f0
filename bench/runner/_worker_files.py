"""The files of worker processes: each worker's run files joined into the run's one run file and one journal.

Each worker writes ordinary shard run files (with journals) in a private folder beside the output. When the
workers end, however they end, `join_outputs` builds each output from them: a worker's run file, or its journal
when it was killed before it wrote one, so no finished sample is lost. The output's journal is written anew
with every result in the run's schedule order under a header of the whole run, so `--resume` continues it with
any number of processes: `split_journal` cuts it into one journal per worker again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench._inputs import read_input_text
from bench._types import JsonObject, JsonValue
from bench.prompts import PromptSet, Shard
from bench.records import (
    SHARD_KEY,
    Journal,
    Run,
    RunMeta,
    journal_path,
    load_run,
    merge_shards,
    read_journal,
    save_run,
)
from bench.runner._arm import _check_resumable, prompts_digest, shard_header
from bench.runner._config import RunConfig

MARKER = "outputs.json"
"""The file in a workers' folder naming the outputs it is for and each arm's whole-run config, so a run whose
parent process was killed before it joined them can be joined by `--resume`."""
WORKER_VARY = frozenset({"label", "concurrency", "max_concurrency"})
"""Config keys a run's workers differ in: each has its share of the concurrency (or open-loop cap)."""


def worker_file(folder: Path, index: int, name: str) -> Path:
    """Worker `index`'s run file of arm `name` in the workers' private folder."""
    return folder / f"worker-{index}" / f"{name}.json"


@dataclass(frozen=True)
class WorkersMarker:
    """A workers' folder's marker: the output each arm's workers write, and each arm's whole-run recorded config."""

    outputs: Mapping[str, str]
    """Each arm's output (its run file), as an absolute path."""
    configs: Mapping[str, JsonObject]
    """Each arm's whole-run recorded config (`RunConfig.recorded`, with the workers' count)."""

    def to_dict(self) -> JsonObject:
        """The marker file's JSON object."""
        return {"outputs": dict(self.outputs), "configs": dict(self.configs)}

    @classmethod
    def from_mapping(cls, data: JsonValue) -> WorkersMarker | None:
        """The marker a file holds, None when it is none (no `outputs` object); entries of other kinds are left out."""
        if not isinstance(data, dict):
            return None
        outputs, configs = data.get("outputs"), data.get("configs")
        if not isinstance(outputs, dict):
            return None
        return cls(outputs={name: path for name, path in outputs.items() if isinstance(path, str)},
                   configs={name: config for name, config in configs.items() if isinstance(config, dict)}
                   if isinstance(configs, dict) else {})


def mark_folder(folder: Path, outputs: Mapping[str, str], configs: Mapping[str, JsonObject]) -> None:
    """Name in `folder` the output of each arm its workers write and the arm's whole-run recorded config."""
    marker = WorkersMarker({name: str(Path(path).resolve()) for name, path in outputs.items()}, configs)
    (folder / MARKER).write_text(json.dumps(marker.to_dict()), encoding="utf-8")


def _marker(folder: Path) -> WorkersMarker | None:
    """The folder's marker, or None when it has none or it cannot be read."""
    try:
        return WorkersMarker.from_mapping(json.loads(read_input_text(folder / MARKER)))
    except (OSError, ValueError):
        return None


def left_workers(output: str | os.PathLike[str]) -> Path | None:
    """The newest workers' folder beside `output` that a killed parent left unjoined (None when there is none)."""
    target = str(Path(output).resolve())
    found = [folder for folder in Path(output).parent.glob(".workers-*")
             if folder.is_dir() and target in (marker.outputs.values() if (marker := _marker(folder)) else ())]
    return max(found, key=lambda folder: folder.stat().st_mtime, default=None)


def join_left_workers(folder: Path, output: str | os.PathLike[str], name: str, prompts: PromptSet,
                      config: RunConfig) -> str:
    """Join arm `name`'s work a killed parent's workers left in `folder` into `output` (run file and journal,
    interrupted); a one-line notice of what was joined from where. The caller removes the folder."""
    marker = _marker(folder)
    count = len([path for path in folder.glob("worker-*") if path.is_dir()])
    paths = [worker_file(folder, index, name) for index in range(count)]
    recorded = marker.configs.get(name) if marker is not None else None
    run = join_outputs(paths, output, prompts, config, interrupted=True, recorded=recorded)
    finished = len(run.results) if run is not None else 0
    return (f"joined {finished} finished samples from {folder}, the {count} workers' folder of a run whose "
            f"parent process ended before it joined them")


def _gather(paths: Sequence[Path]) -> list[Run]:
    """Each worker's run: its run file, or its journal (then interrupted) when it ended before writing one."""
    runs: list[Run] = []
    for path in paths:
        if path.exists():
            runs.append(load_run(path))
        elif journal_path(path).exists():
            recovered = load_run(journal_path(path))
            runs.append(replace(recovered, meta=RunMeta.from_mapping({**recovered.meta, "interrupted": True}),
                                path=str(path)))
    engine = next((run.meta.get("engine") for run in runs if run.meta.get("engine")), None)
    return [run if run.meta.get("engine") or engine is None
            else replace(run, meta=RunMeta.from_mapping({**run.meta, "engine": engine})) for run in runs]


def join_outputs(
    paths: Sequence[Path], output: str | os.PathLike[str] | None, prompts: PromptSet, config: RunConfig, *,
    interrupted: bool, recorded: JsonObject | None = None,
) -> Run | None:
    """The run the workers' files of one output make (None when no worker recorded anything), saved with its
    journal at `output`. Its config is the whole run's (`recorded`, else `config`'s), with the workers' count."""
    runs = _gather(paths)
    if not runs:
        return None
    merged = merge_shards(runs, vary=WORKER_VARY, part="worker", allow_missing=True)
    meta: JsonObject = dict(merged.meta)
    meta["interrupted"] = bool(meta.get("interrupted")) or interrupted or len(runs) < len(paths)
    whole = recorded if recorded is not None else config.recorded()
    run = Run(config={**whole, "workers": len(paths)}, selected_samples=merged.selected_samples,
              results=merged.results, summary=merged.summary, meta=RunMeta.from_mapping(meta),
              path=str(output) if output is not None else None)
    if output is not None:
        _write_journal(run, paths, output, [sample.id for sample in prompts.samples])
        save_run(run, output, force=True)
    return run


def _write_journal(run: Run, paths: Sequence[Path], output: str | os.PathLike[str], sample_ids: list[str]) -> None:
    """The output's one journal: a header of the whole run, then every result in schedule order; atomically."""
    header: JsonObject = {}  # the workers' header as read, its keys of the whole run set anew below
    for path in paths:
        if journal_path(path).exists():
            header = read_journal(journal_path(path))[0]
            break
    header = {key: value for key, value in header.items() if key not in ("type", "schema_version", SHARD_KEY)}
    header.update(config=dict(run.config), selected_samples=run.selected_samples,
                  prompts_sha256=run.meta["prompts_sha256"], sample_ids=list[JsonValue](sample_ids),
                  started_at=run.meta.get("started_at"))
    target = journal_path(output)
    building = target.with_name(target.name + ".joining")
    journal = Journal(building, header)
    try:
        for result in run.results:
            journal.append(result, flush=False)  # one file written at once: close() flushes and syncs it
    finally:
        journal.close()
    os.replace(building, target)


def split_journal(
    output: str | os.PathLike[str], prompts: PromptSet, config: RunConfig, shards: Sequence[Shard],
    configs: Sequence[RunConfig], paths: Sequence[Path],
) -> None:
    """Continue `output`'s journal with these workers: checked against the whole run asked for now, then cut into
    one journal per worker (its own samples' results, under a header of its slice) for each to resume."""
    source = journal_path(output)
    header, previous = read_journal(source)
    _check_resumable(header, prompts, config, str(source))
    for shard, own_config, path in zip(shards, configs, paths, strict=True):
        own = shard.prompts(prompts)
        ids = [sample.id for sample in own.samples]
        own_header = {key: value for key, value in header.items() if key not in ("type", "schema_version")}
        own_header.update(
            config=own_config.recorded(), sample_ids=list[JsonValue](ids),
            prompts_sha256=prompts_digest(own), selected_samples=len(own.samples) * config.repeat,
        )
        own_header[SHARD_KEY] = shard_header(shard, prompts, own, config.repeat)
        own_ids = set(ids)
        journal = Journal(journal_path(path), own_header)
        try:
            for result in previous:
                if result.id in own_ids:
                    journal.append(result, flush=False)
        finally:
            journal.close()
