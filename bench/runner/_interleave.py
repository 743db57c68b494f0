"""Interleaved A/B: both arms' servers stay up and each sample goes to both back to back, in a seeded random order.

Drift of the machine (other load, thermal state, caches) then lands on both arms alike instead of entirely on the
arm that happened to run second. At concurrency c the arms take turns on batches of c samples (lock-step). Each
arm writes an ordinary run file with its own journal (resumable) and records `meta.interleaved`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from bench.prompts import PromptSet, Sample
from bench.records import Run, output_lock
from bench.runner._lag import LagMonitor
from bench.runner._progress import Progress, SilentProgress
from bench.runner._runner import (
    RunConfig,
    RunStopped,
    _Arm,
    _build_run,
    _close_journal,
    _conclude_arm,
    _connect_arm,
    _drive,
    _open_journal,
    _prepare_arm,
    _Stop,
    run_loop,
    signals_to,
)
from bench.runner._transport import Transport

DEFAULT_SEED = 0


@dataclass(frozen=True)
class ArmSpec:
    """One arm of an interleaved comparison: its name (`baseline`, `speculative`), run config and output file."""

    name: str
    config: RunConfig
    output: str | os.PathLike[str] | None = None


def arm_order(seed: int, jobs: Sequence[tuple[Sample, int]], names: Sequence[str]) -> list[str]:
    """The seeded random order in which `names` run a batch of (sample, repeat) jobs (same on resume)."""
    key = "|".join(f"{sample.id}#{repeat}" for sample, repeat in jobs)
    digest = hashlib.sha256(f"{seed}|{key}".encode()).digest()
    order = list(names)
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
    return order


def _batches(
    prompts: PromptSet, repeats: int, batch: int
) -> list[list[tuple[Sample, int]]]:
    """Every (sample, repeat) in the runner's order (all samples, then again), cut into batches of `batch`."""
    jobs = [(sample, repeat) for repeat in range(repeats) for sample in prompts.samples]
    return [jobs[start:start + batch] for start in range(0, len(jobs), batch)]


async def execute_interleaved(
    prompts: PromptSet,
    arms: Sequence[ArmSpec],
    *,
    seed: int = DEFAULT_SEED,
    progress: Progress | None = None,
    resume: bool = False,
    force: bool = False,
    install_signal_handlers: bool = True,
) -> tuple[dict[str, Run], bool]:
    """Run the prompt set against every arm, sample by sample in seeded random arm order; return runs by name.

    Each arm's output is locked for one writer; a journal that cannot be written stops every arm (the
    finished samples are kept) and raises `RunStopped` for the first arm that hit it.
    """
    progress = progress or SilentProgress()
    names = [arm.name for arm in arms]
    if len(set(names)) != len(names) or len(arms) < 2:
        raise ValueError("interleaving needs at least two arms with distinct names")
    batch = arms[0].config.concurrency
    repeats = arms[0].config.repeat
    prepared: dict[str, _Arm] = {}
    for spec in arms:
        partners = [name for name in names if name != spec.name]
        marker = {"seed": seed, "partner": partners[0] if len(partners) == 1 else partners, "batch": batch}
        prepared[spec.name] = _prepare_arm(
            prompts, spec.config, spec.output, resume=resume, force=force, header_extra={"interleaved": marker}
        )
    done = {name: {(sample.id, repeat) for sample, repeat in _all_jobs(prompts, repeats)} -
            {(sample.id, repeat) for sample, repeat in arm.plan.jobs} for name, arm in prepared.items()}
    stop = _Stop()
    concluded = {}
    lag = LagMonitor(progress)
    with contextlib.ExitStack() as held:
        for arm in prepared.values():
            if arm.output is not None:
                held.enter_context(output_lock(arm.output))
        started = time.perf_counter()
        try:
            with signals_to(stop, install_signal_handlers):
                async with contextlib.AsyncExitStack() as stack:
                    transports: dict[str, Transport] = {}
                    for name, arm in prepared.items():
                        transports[name] = await stack.enter_async_context(
                            Transport(timeout=arm.config.timeout, connections=batch * len(arm.base_urls),
                                      headers=arm.config.request_headers(),
                                      max_body_bytes=arm.config.max_response_bytes)
                        )
                        await _connect_arm(arm, transports[name], stop)
                    for arm in prepared.values():
                        _open_journal(arm, resume=resume)
                    progress.start(sum(len(arm.plan.jobs) for arm in prepared.values()),
                                   "interleaved " + " vs ".join(names))
                    lag.start()
                    try:
                        for index, jobs in enumerate(_batches(prompts, repeats, batch)):
                            for name in arm_order(seed, jobs, names):
                                if stop.requested.is_set():
                                    break
                                arm = prepared[name]
                                todo = [job for job in jobs if (job[0].id, job[1]) not in done[name]]
                                if todo:
                                    arm.new_results += await _drive(
                                        transports[name], arm.engine, todo, arm.settings, batch, stop, progress,
                                        arm.journal, arm.meter, origin=started, batch=index,
                                    )
                            if stop.requested.is_set():
                                break
                    finally:
                        await lag.stop()
                    progress.finish()
                    for name, arm in prepared.items():
                        concluded[name] = await _conclude_arm(
                            arm, transports[name], progress, stop, lag.notes(arm.new_results)
                        )
        finally:
            for arm in prepared.values():
                _close_journal(arm, stop)
        interrupted = stop.requested.is_set()
        elapsed = time.perf_counter() - started
        runs = {
            name: _build_run(prepared[name], *concluded[name], interrupted=interrupted, elapsed_s=elapsed, stop=stop,
                             client_lag=lag.summary())
            for name in names
        }
    if stop.fatal is not None:
        raise RunStopped(next(iter(runs.values())), stop.fatal)
    return runs, interrupted and stop.fatal is None


def _all_jobs(prompts: PromptSet, repeats: int) -> list[tuple[Sample, int]]:
    return [(sample, repeat) for repeat in range(repeats) for sample in prompts.samples]


def run_interleaved(
    prompts: PromptSet,
    arms: Sequence[ArmSpec],
    *,
    seed: int = DEFAULT_SEED,
    progress: Progress | None = None,
    resume: bool = False,
    force: bool = False,
    install_signal_handlers: bool = True,
) -> tuple[dict[str, Run], bool]:
    """Synchronous wrapper of `execute_interleaved`."""
    return run_loop(
        execute_interleaved(
            prompts, arms, seed=seed, progress=progress, resume=resume, force=force,
            install_signal_handlers=install_signal_handlers,
        )
    )
