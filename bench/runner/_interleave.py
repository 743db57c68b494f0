"""Interleaved A/B: both arms' servers stay up and each sample goes to both back to back, in a seeded random order.

Drift of the machine (other load, thermal state, caches) then lands on both arms alike instead of entirely on the
arm that happened to run second. At concurrency c the arms take turns on batches of c samples (`LockStep`). Each
arm writes an ordinary run file with its own journal (resumable) and records `meta.interleaved`. Worker processes
(a `Team`, each with its shard) run the whole run's batches in the whole run's order, each sending its own
samples of every batch, and start every turn together: the same batches, arm orders and pairs as one process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.prompts import PromptSet, Sample, Shard
from bench.records import Run
from bench.runner._arm import Arm, prepare_arm, shard_run
from bench.runner._config import RunConfig
from bench.runner._drive import drive
from bench.runner._lifecycle import Session, run_arms
from bench.runner._progress import Progress, SilentProgress
from bench.runner._schedule import ClosedLoop, LockStep, seeded_order
from bench.runner._stop import run_loop
from bench.runner._team import Team

DEFAULT_SEED = 0


@dataclass(frozen=True)
class ArmSpec:
    """One arm of an interleaved comparison: its name (`baseline`, `speculative`), run config and output file."""

    name: str
    config: RunConfig
    output: str | os.PathLike[str] | None = None


def _job_key(job: tuple[Sample, int]) -> str:
    return f"{job[0].id}#{job[1]}"


def arm_order(seed: int, jobs: Sequence[tuple[Sample, int]], names: Sequence[str]) -> list[str]:
    """The seeded random order in which `names` run a batch of (sample, repeat) jobs (same on resume)."""
    return seeded_order(seed, [_job_key(job) for job in jobs], names)


async def execute_interleaved(
    prompts: PromptSet,
    arms: Sequence[ArmSpec],
    *,
    seed: int = DEFAULT_SEED,
    progress: Progress | None = None,
    resume: bool = False,
    force: bool = False,
    install_signal_handlers: bool = True,
    server_states: Mapping[str, str] | None = None,
    shard: Shard | None = None,
    team: Team | None = None,
) -> tuple[dict[str, Run], bool]:
    """Run the prompt set against every arm, sample by sample in seeded random arm order; return runs by name.

    `server_states` (by arm name) is recorded on every result: how the pipeline set that server's state.

    Each arm's output is locked for one writer; a journal that cannot be written stops every arm (the
    finished samples are kept) and raises `RunStopped` for the first arm that hit it. With `shard` each arm
    sends that slice of the run: a sample's pair stays in one shard. With `team` (worker processes, each with its
    shard) the batches are the whole run's, of `team.batch` jobs, and every worker starts each turn together.
    """
    progress = progress or SilentProgress()
    names = [arm.name for arm in arms]
    if len(set(names)) != len(names) or len(arms) < 2:
        raise ValueError("interleaving needs at least two arms with distinct names")
    full = prompts
    prompts, _, shard_extra = shard_run(prompts, arms[0].config, None, shard)
    lockstep = LockStep(team.batch if team is not None else arms[0].config.concurrency, seed, names)
    repeats = arms[0].config.repeat
    prepared: dict[str, Arm] = {}
    for spec in arms:
        partners = [name for name in names if name != spec.name]
        marker = {"seed": seed, "partner": partners[0] if len(partners) == 1 else partners, "batch": lockstep.batch}
        prepared[spec.name] = prepare_arm(
            prompts, spec.config, spec.output, resume=resume, force=force,
            header_extra={"interleaved": marker, **shard_extra},
        )
    every_job = [(sample, repeat) for repeat in range(repeats) for sample in (full if team else prompts).samples]
    todo = {name: {_job_key(job) for job in arm.plan.jobs} for name, arm in prepared.items()}
    own = {sample.id for sample in prompts.samples}
    connections = lockstep.batch if team is None else max(
        [1, *(sum(job[0].id in own for job in jobs) for _, _, jobs in lockstep.turns(every_job, _job_key))])

    async def timed(session: Session) -> None:
        origin: float | None = session.started if team is None else None
        finished = False
        try:
            for index, name, jobs in lockstep.turns(every_job, _job_key):
                if session.stop.requested.is_set():
                    return
                arm = prepared[name]
                left = [job for job in jobs if _job_key(job) in todo[name]]
                if team is not None:  # every worker starts this arm's turn on this batch together
                    began = await team.turn(session.stop)
                    if began is None:
                        return
                    origin = began if origin is None else origin
                if left:
                    arm.new_results += await drive(
                        session.transports[name], arm.engine, left, arm.settings,
                        lockstep.schedule() if team is None else ClosedLoop(len(left)), session.stop,
                        progress, arm.journal, arm.meter, origin=origin, batch=index,
                        server_state=(server_states or {}).get(name),
                    )
            finished = True
        finally:
            if team is not None and not finished:
                team.abort()  # the others stop at their next turn instead of waiting for this worker

    return await run_arms(
        prepared, timed, progress=progress, title="interleaved " + " vs ".join(names),
        connections=connections, resume=resume, install_signal_handlers=install_signal_handlers,
    )


def run_interleaved(
    prompts: PromptSet,
    arms: Sequence[ArmSpec],
    *,
    seed: int = DEFAULT_SEED,
    progress: Progress | None = None,
    resume: bool = False,
    force: bool = False,
    install_signal_handlers: bool = True,
    server_states: Mapping[str, str] | None = None,
    shard: Shard | None = None,
    team: Team | None = None,
) -> tuple[dict[str, Run], bool]:
    """Synchronous wrapper of `execute_interleaved`, on the event loop the first arm's config names."""
    return run_loop(
        execute_interleaved(
            prompts, arms, seed=seed, progress=progress, resume=resume, force=force,
            install_signal_handlers=install_signal_handlers, shard=shard, server_states=server_states, team=team,
        ),
        arms[0].config.loop if arms else None,
    )
