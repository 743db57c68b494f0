"""Worker processes: one run, or one interleaved comparison, spread over N client processes on this machine.

Each worker is a shard of the run (`Shard(i, N)`: samples i, i + N, ... with all their repeats, and in a
comparison both arms' requests for them, so every pair stays in one process) with its own event loop,
connections, kernel receive times and loop-lag monitor, on the machine's one monotonic clock. The workers
move in step (`Team`): they start together after their set-up, and in a comparison they run the whole run's
lock-step batches or open-loop blocks in its order, one arm at a time, each sending its own part. A closed
loop's concurrency is split over them (C // N each, the first C % N one more); an open loop keeps the whole
run's seeded schedule (each request at its offset) and splits its cap, if any, the same way.

Every worker journals to its own files in a private folder beside the output; when all have ended, however
they ended, each output is joined from them with one journal in schedule order (`join_outputs`), which
`compare` reads like any run and `--resume` continues with any number of workers.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Protocol

from bench._errors import BenchError
from bench.prompts import PromptSet, Shard
from bench.records import Run, SampleResult, journal_path, output_lock
from bench.runner._config import Arm, RunConfig
from bench.runner._lifecycle import ensure_file_limit
from bench.runner._progress import Progress, SilentProgress
from bench.runner._stop import stop_at_once_when_orphaned
from bench.runner._team import Team
from bench.runner._worker_count import worker_shares
from bench.runner._worker_files import (
    join_left_workers,
    join_outputs,
    left_workers,
    mark_folder,
    split_journal,
    worker_file,
)

Body = Callable[[Shard, Team, list[Arm], Progress], None]
"""What one worker process runs: its shard, the team, its own arm specs (configs with its share, files) and the
progress it reports to."""
SHOW_EVERY_S = 0.5
"""How often the parent shows what the workers finished."""


def _worker_config(config: RunConfig, share: int | None) -> RunConfig:
    """One worker's config: its share of the concurrency (an open loop: of its cap), one process."""
    if config.open_loop:
        return replace(config, max_concurrency=share, workers=1)
    return replace(config, concurrency=share or 1, workers=1)


def _shares(config: RunConfig, workers: int) -> list[int | None]:
    """Each worker's share: of the closed loop's concurrency, or of the open loop's cap (None: uncapped)."""
    if config.open_loop:
        if config.max_concurrency is None:
            return [None] * workers
        return list(worker_shares(config.max_concurrency, workers))
    return list(worker_shares(config.concurrency, workers))


class _Counts(Protocol):
    """Counters in memory shared with the worker processes: a fixed number of whole numbers."""

    def __getitem__(self, index: int, /) -> int:
        """One counter."""

    def __setitem__(self, index: int, value: int, /) -> None:
        """Set one counter."""

    def __len__(self) -> int:
        """How many counters there are."""


class _Tally:
    """A worker's progress: finished and failed counts in memory shared with the parent, which shows them."""

    def __init__(self, counts: _Counts, index: int) -> None:
        """Count into slots 2 * index (finished) and 2 * index + 1 (failed) of `counts`."""
        self.counts, self.slot = counts, 2 * index

    def start(self, total: int, description: str) -> None:
        """The parent shows the whole run."""

    def advance(self, result: SampleResult) -> None:
        """One sample of this worker finished."""
        self.counts[self.slot] += 1
        self.counts[self.slot + 1] += 0 if result.ok else 1

    def message(self, text: str) -> None:
        """Notices are recorded in the worker's run file and said by the parent once the files are joined."""

    def finish(self) -> None:
        """The parent ends the display."""


def _show(counts: _Counts, shown: list[int], progress: Progress) -> None:
    """Advance the parent's display by what the workers finished since it was last shown."""
    for index in range(0, len(shown), 2):
        done, failed = counts[index], counts[index + 1]
        for _ in range(done - shown[index]):
            ok = failed <= shown[index + 1]
            shown[index + 1] += 0 if ok else 1
            progress.advance(SampleResult(id=f"worker {index // 2}", category="", ok=ok, turns=0, latency_s=0.0))
        shown[index] = done


def _stop_with_parent(parent: int) -> None:
    """Have the kernel send this worker a SIGTERM when its parent dies (Linux): a stop at once, what finished kept."""
    stop_at_once_when_orphaned(parent)
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the request above was made
        os.kill(os.getpid(), signal.SIGTERM)


def _child(index: int, body: Callable[[], None], parent: int, team: Team) -> None:
    """A worker process: only its own pipe end, out of the terminal's process group (the parent forwards one
    stop), stopped when the parent dies, errors in one line."""
    team.keep_only(index)
    os.setpgid(0, 0)
    _stop_with_parent(parent)
    try:
        body()
    except BenchError as exc:
        sys.stderr.write(f"speedbench: error: worker {index}: {exc}\n")
        sys.exit(2)


def _work(body: Body, shard: Shard, team: Team, mine: list[Arm], counts: _Counts) -> None:
    """A worker process's body: its shard, its member of the team, its own arms, its progress tally."""
    body(shard, team.member(shard.index), mine, _Tally(counts, shard.index))


def _launch(bodies: Sequence[Callable[[], None]], team: Team, progress: Progress, title: str, total: int,
            counts: _Counts) -> tuple[list[int | None], bool]:
    """Start one process per body and wait for all; (exit codes, whether the parent was asked to stop).

    This process keeps the team's turns. SIGINT/SIGTERM to it are forwarded to every worker as one SIGTERM (a
    second one stops them at once); a worker that fails stops the team, so the others stop at their next turn.
    """
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_child, args=(index, body, os.getpid(), team), daemon=True)
                 for index, body in enumerate(bodies)]
    asked = {"stop": False}

    def forward(signum: int, frame: FrameType | None) -> None:
        asked["stop"] = True
        for process in processes:
            if process.pid is not None and process.exitcode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)

    main = threading.current_thread() is threading.main_thread()
    previous = {signum: signal.signal(signum, forward) for signum in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        for process in processes:
            process.start()
        team.close_worker_ends()
        progress.start(total, title)
        alive = list(processes)
        shown = [0] * len(counts)
        while alive:
            ready = multiprocessing.connection.wait([*team.connections(), *(process.sentinel for process in alive)],
                                                    timeout=SHOW_EVERY_S)
            team.handle(ready)
            _show(counts, shown, progress)
            for process in [process for process in alive if process.sentinel in ready]:
                process.join()
                alive.remove(process)
                if process.exitcode != 0:
                    team.abort()
        progress.finish()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return [process.exitcode for process in processes], asked["stop"]


def _join_left(specs: Sequence[Arm], prompts: PromptSet, progress: Progress) -> None:
    """Join into each output what the workers of a parent killed before it joined them left beside it, and say so."""
    left = {spec.name: left_workers(spec.output) for spec in specs if spec.output is not None}
    for spec in specs:
        folder = left.get(spec.name)
        if folder is not None and spec.output is not None:
            progress.message(f"speedbench: {spec.output}: "
                             f"{join_left_workers(folder, spec.output, spec.name, prompts, spec.config)}")
    for folder in set(left.values()):
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def spread(
    prompts: PromptSet, specs: Sequence[Arm], workers: int, body: Body, *, progress: Progress | None = None,
    resume: bool = False, force: bool = False, batch: int = 1, title: str = "speedbench",
) -> tuple[dict[str, Run], bool]:
    """Run `body` in `workers` processes, each on its shard, and join each arm's files into its output.

    Returns the runs by arm name and whether the run was interrupted. What finished is kept in the outputs
    however the workers end; a worker that failed is then a one-line BenchError naming it.
    """
    progress = progress or SilentProgress()
    config = specs[0].config
    if len(prompts.samples) < workers:
        raise BenchError(f"--workers {workers}: {len(prompts.samples)} samples cannot fill that many workers")
    shares = _shares(config, workers)
    whole = config.max_concurrency if config.open_loop else config.concurrency
    if whole is not None:  # else (an uncapped open loop) each worker checks its own arrivals
        per_run = len(config.urls()) * len(specs)
        ensure_file_limit(max(share or 1 for share in shares) * per_run, workers=workers, whole=whole * per_run)
    outputs = _checked_outputs(specs, resume=resume, force=force)
    shards = [Shard(index, workers) for index in range(workers)]
    team = Team.create(workers, batch)
    counts: _Counts = multiprocessing.get_context("fork").Array("q", 2 * workers, lock=False)
    with contextlib.ExitStack() as held:
        for output in outputs:
            held.enter_context(output_lock(output))
        if resume:
            _join_left(specs, prompts, progress)
        folder = Path(tempfile.mkdtemp(prefix=".workers-", dir=Path(outputs[0]).parent if outputs else None))
        mark_folder(folder, {spec.name: str(spec.output) for spec in specs if spec.output is not None},
                    {spec.name: {**spec.config.recorded(), "workers": workers} for spec in specs})
        own = [[replace(spec, config=_worker_config(spec.config, share),
                        output=str(worker_file(folder, index, spec.name))) for spec in specs]
               for index, share in enumerate(shares)]
        if resume:
            try:
                for position, spec in enumerate(specs):
                    if spec.output is not None:
                        split_journal(spec.output, prompts, spec.config, shards,
                                      [mine[position].config for mine in own],
                                      [Path(str(mine[position].output)) for mine in own])
            except BenchError:
                shutil.rmtree(folder, ignore_errors=True)  # nothing ran: the output's journal is as it was
                raise
        codes, stopped = _launch(
            [partial(_work, body, shard, team, mine, counts) for shard, mine in zip(shards, own, strict=True)],
            team, progress, f"{title} ({workers} workers)", len(prompts.samples) * config.repeat * len(specs), counts,
        )
        try:
            runs = {spec.name: join_outputs([Path(str(mine[position].output)) for mine in own], spec.output, prompts,
                                            spec.config, interrupted=stopped)
                    for position, spec in enumerate(specs)}
        except BenchError as exc:
            raise BenchError(f"{exc}; the workers' own files are kept in {folder}") from None
    shutil.rmtree(folder, ignore_errors=True)
    return _outcome(runs, codes, stopped, outputs, progress)


def _checked_outputs(specs: Sequence[Arm], *, resume: bool, force: bool) -> list[str | os.PathLike[str]]:
    """The arms' outputs, each refused in one line when it cannot be resumed or would be overwritten."""
    outputs = [spec.output for spec in specs if spec.output is not None]
    for output in outputs:
        if resume and not journal_path(output).exists() and left_workers(output) is None:
            raise BenchError(f"{journal_path(output)}: no journal to resume from (and no workers' folder beside it)")
        if not resume and not force and (Path(output).exists() or journal_path(output).exists()):
            raise BenchError(f"{output}: exists; pass --force to overwrite it or --resume to continue it")
        Path(output).parent.mkdir(parents=True, exist_ok=True)
    return outputs


def _outcome(runs: dict[str, Run | None], codes: list[int | None], stopped: bool,
             outputs: Sequence[str | os.PathLike[str]], progress: Progress) -> tuple[dict[str, Run], bool]:
    """The joined runs and whether the run was interrupted, the workers' notes said once; a one-line BenchError
    naming the workers that failed (what finished is kept in the outputs)."""
    said: dict[str, None] = {}
    for run in runs.values():
        said.update(dict.fromkeys(run.info.warnings if run is not None else ()))
    for note in said:
        progress.message(f"speedbench: warning: {note}")
    # a worker ended by the stop this process forwarded (before its own handlers were up) was interrupted
    failed = [index for index, code in enumerate(codes) if code != 0 and not (stopped and code == -signal.SIGTERM)]
    if failed:
        kept = f"; what finished is in {', '.join(map(str, outputs))}" if outputs else ""
        raise BenchError(f"worker(s) {', '.join(map(str, failed))} of {len(codes)} failed "
                         f"(exit {codes[failed[0]]}){kept}")
    if any(run is None for run in runs.values()):
        raise BenchError(f"none of the {len(codes)} workers recorded anything")
    done = {name: run for name, run in runs.items() if run is not None}
    return done, stopped or any(run.info.interrupted for run in done.values())
