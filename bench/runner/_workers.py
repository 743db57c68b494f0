"""Worker processes: one run spread over N client processes on this machine, merged into one run file.

Each worker is a shard of the run (`Shard(i, N)`: samples i, i + N, ... with all their repeats) with its own
event loop, connections and kernel receive times, on the machine's one monotonic clock. The run's closed-loop
concurrency is split over the workers (C // N each, the first C % N one more), so the run keeps C requests in
flight. Every worker journals to its own file beside the output; when all have finished their run files are
merged (`merge_shards`) into the output, which `compare` reads like any run. `meta.workers` keeps each
worker's own record: its loop lag, times and acceptance counters.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench._errors import BenchError
from bench.prompts import PromptSet, Shard
from bench.records import Run, load_run, merge_shards, save_run
from bench.runner._config import RunConfig
from bench.runner._progress import Progress, SilentProgress
from bench.runner._runner import run_benchmark


def worker_shares(concurrency: int, workers: int) -> list[int]:
    """The closed-loop concurrency of each of `workers` processes, summing to `concurrency`."""
    if workers < 1:
        raise BenchError(f"--workers must be >= 1 (got {workers})")
    if workers > concurrency:
        raise BenchError(f"--workers {workers} exceeds --concurrency {concurrency}: each worker needs a request "
                         "in flight")
    return [concurrency // workers + (1 if index < concurrency % workers else 0) for index in range(workers)]


def _worker(prompts: PromptSet, config: RunConfig, shard: Shard, output: str) -> None:
    """One worker process: its shard of the run, written to `output`; SIGINT/SIGTERM stop it as they stop a run."""
    run_benchmark(prompts, config, output=output, progress=SilentProgress(), install_signal_handlers=True,
                  force=True, shard=shard)


def run_workers(
    prompts: PromptSet,
    config: RunConfig,
    *,
    output: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> tuple[Run, bool]:
    """Run the prompt set over `config.workers` processes and merge their runs; (run, interrupted)."""
    progress = progress or SilentProgress()
    shares = worker_shares(config.concurrency, config.workers)
    if len(prompts.samples) < config.workers:
        raise BenchError(f"--workers {config.workers}: {len(prompts.samples)} samples cannot fill that many workers")
    if output is not None and Path(output).exists() and not force:
        raise BenchError(f"{output}: exists; pass --force to overwrite it")
    if output is not None:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".workers-", dir=Path(output).parent if output is not None else None))
    context = multiprocessing.get_context("fork")
    paths = [str(folder / f"worker-{index}.json") for index in range(config.workers)]
    processes = [
        context.Process(target=_worker, args=(prompts, replace(config, concurrency=share, workers=1),
                                              Shard(index, config.workers), path), daemon=True)
        for index, (share, path) in enumerate(zip(shares, paths, strict=True))
    ]
    progress.start(len(prompts.samples) * config.repeat, f"{config.label or 'speedbench'} ({config.workers} workers)")
    interrupted = False
    try:
        for process in processes:
            process.start()
        for process in processes:
            process.join()
    except KeyboardInterrupt:  # each worker stops as an interrupted run does: what finished is written
        interrupted = True
        for process in processes:
            if process.pid is not None and process.exitcode is None:
                os.kill(process.pid, signal.SIGTERM)
        for process in processes:
            process.join()
    progress.finish()
    failed = [index for index, process in enumerate(processes) if process.exitcode != 0]
    if failed:
        raise BenchError(f"worker(s) {', '.join(map(str, failed))} of {config.workers} failed (exit "
                         f"{processes[failed[0]].exitcode}); their journals are in {folder}")
    merged = merge_shards([load_run(path) for path in paths], vary=frozenset({"label", "concurrency"}), part="worker")
    meta: dict[str, Any] = dict(merged.meta)
    meta["interrupted"] = bool(meta.get("interrupted")) or interrupted
    config_out = {**merged.config, "workers": config.workers}
    if config.label is not None:
        config_out["label"] = config.label
    run = Run(config=config_out, selected_samples=merged.selected_samples, results=merged.results,
              summary=merged.summary, meta=meta, path=str(output) if output is not None else None)
    if output is not None:
        save_run(run, output, force=True)
    shutil.rmtree(folder, ignore_errors=True)
    return run, bool(meta["interrupted"])
