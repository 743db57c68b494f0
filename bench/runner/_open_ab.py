"""Arms compared at one arrival schedule: the same seeded arrivals and prompt sequence in alternating blocks.

The schedule is cut into blocks of a few seconds of arrivals; every arm runs each block in turn (ABBA...: forward
order in even blocks, reversed in odd ones, the first arm chosen by the seed), each block's arrivals keeping
their gaps. A block drains before the next arm's turn, so the arms never share the machine. Each arm keeps its
own clock (the time spent in its own blocks), so its run file reads like one open-loop run of its own: its
requests are due at the schedule's offsets and the block they ran in is recorded on every result (`batch`).
Worker processes (a `Team`, each with its shard) draw the whole run's schedule and blocks, each sends its own
arrivals of every block at their offsets, and every block's turn starts and ends together in all of them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from bench.prompts import PromptSet, Sample, Shard
from bench.records import Run
from bench.runner._arm import Arm, prepare_arm, shard_run
from bench.runner._arrivals import block_offsets, block_plan, default_block_size
from bench.runner._drive import drive
from bench.runner._interleave import ArmSpec
from bench.runner._lifecycle import Session, run_arms
from bench.runner._open_loop import open_loop
from bench.runner._progress import Progress, SilentProgress
from bench.runner._schedule import OpenLoop
from bench.runner._stop import run_loop
from bench.runner._team import Team


def _key(job: tuple[Sample, int]) -> str:
    return f"{job[0].id}#{job[1]}"


async def execute_open_ab(
    prompts: PromptSet,
    arms: Sequence[ArmSpec],
    *,
    block_size: int | None = None,
    progress: Progress | None = None,
    resume: bool = False,
    force: bool = False,
    install_signal_handlers: bool = True,
    server_states: Mapping[str, str] | None = None,
    shard: Shard | None = None,
    team: Team | None = None,
) -> tuple[dict[str, Run], bool]:
    """Run every arm on the first arm's arrival schedule (rate or trace), block by block in ABBA order.

    `server_states` (by arm name) is recorded on every result: how the pipeline set that server's state. With
    `shard` and `team` (worker processes) each worker sends its shard's arrivals of the whole run's schedule.
    """
    progress = progress or SilentProgress()
    names = [arm.name for arm in arms]
    if len(set(names)) != len(names) or len(arms) < 2:
        raise ValueError("an A/B at one schedule needs at least two arms with distinct names")
    config = arms[0].config
    every_job = [(sample, repeat) for repeat in range(config.repeat) for sample in prompts.samples]
    prompts, _, shard_extra = shard_run(prompts, config, None, shard)
    ordered, _, schedule = open_loop(config, every_job)
    size = block_size or default_block_size(config.request_rate)
    blocks = block_plan(len(ordered), size, names, config.seed)
    prepared: dict[str, Arm] = {}
    for spec in arms:
        partners = [name for name in names if name != spec.name]
        marker = {"seed": config.seed, "partner": partners[0] if len(partners) == 1 else partners,
                  "block_size": size, "blocks": len(blocks), "schedule": "open loop"}
        prepared[spec.name] = prepare_arm(prompts, spec.config, spec.output, resume=resume, force=force,
                                          header_extra={"interleaved": marker, **shard_extra})
    todo = {name: {_key(job) for job in arm.plan.jobs} for name, arm in prepared.items()}
    elapsed = dict.fromkeys(names, 0.0)

    async def turn(session: Session, name: str, left: list[tuple[tuple[Sample, int], float]], index: int) -> bool:
        """One arm's turn on one block; False when the team stopped the run at the turn's start or end."""
        began = time.perf_counter() if team is None else await team.turn(session.stop)
        if began is None:
            return False
        arm = prepared[name]
        if left:
            arm.new_results += await drive(
                session.transports[name], arm.engine, [job for job, _ in left], arm.settings,
                OpenLoop([offset for _, offset in left], arm.config.max_concurrency, start=began), session.stop,
                progress,
                arm.journal, arm.meter, origin=began - elapsed[name], batch=index,
                server_state=(server_states or {}).get(name),
            )
        ended = time.perf_counter() if team is None else await team.turn(session.stop)  # the slowest worker's end
        if ended is None:
            return False
        elapsed[name] += ended - began
        return True

    async def timed(session: Session) -> None:
        finished = False
        try:
            for block in blocks:
                offsets = block_offsets(schedule, block)
                jobs = ordered[block.start:block.stop]
                for name in block.order:
                    if session.stop.requested.is_set():
                        return
                    left = [(job, offset) for job, offset in zip(jobs, offsets, strict=True)
                            if _key(job) in todo[name]]
                    if (left or team is not None) and not await turn(session, name, left, block.index):
                        return
            finished = True
        finally:
            if team is not None and not finished:
                team.abort()  # the others stop at their next turn instead of waiting for this worker

    cap = config.max_concurrency or size
    return await run_arms(
        prepared, timed, progress=progress, title="open loop " + " vs ".join(names), connections=cap,
        resume=resume, install_signal_handlers=install_signal_handlers,
    )


def run_open_ab(
    prompts: PromptSet,
    arms: Sequence[ArmSpec],
    *,
    block_size: int | None = None,
    progress: Progress | None = None,
    resume: bool = False,
    force: bool = False,
    install_signal_handlers: bool = True,
    server_states: Mapping[str, str] | None = None,
    shard: Shard | None = None,
    team: Team | None = None,
) -> tuple[dict[str, Run], bool]:
    """Synchronous wrapper of `execute_open_ab`, on the event loop the first arm's config names."""
    return run_loop(
        execute_open_ab(
            prompts, arms, block_size=block_size, progress=progress, resume=resume, force=force,
            install_signal_handlers=install_signal_handlers, server_states=server_states, shard=shard, team=team,
        ),
        arms[0].config.loop if arms else None,
    )
