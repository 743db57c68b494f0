"""A single run: the prompt set sent to one endpoint as a schedule releases it, every sample recorded."""

from __future__ import annotations

import datetime as dt
import os
import time

from bench.prompts import PromptSet, Shard
from bench.records import Run
from bench.runner._arm import prepare_arm, shard_run
from bench.runner._config import RunConfig
from bench.runner._drive import drive
from bench.runner._lifecycle import Session, run_arms
from bench.runner._open_loop import open_loop, shard_open_loop
from bench.runner._progress import Progress, SilentProgress
from bench.runner._schedule import ClosedLoop, OpenLoop, Schedule
from bench.runner._stop import run_loop, sleep_until
from bench.runner._team import Team

LATE_START_S = 1.0
"""A shard whose schedule starts more than this many seconds after `--start-at` says so in its run file."""


def late_start_note(late_s: float, start_at: float) -> str:
    """The warning of a shard that started `late_s` seconds after the shared start `start_at` (epoch seconds)."""
    when = dt.datetime.fromtimestamp(start_at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (f"started {late_s:.1f} s after --start-at {when} (its set-up ended late): this shard's schedule did not "
            "start with the others', so the shards did not add up to one run's load; give a later --start-at")


async def execute(
    prompts: PromptSet,
    config: RunConfig,
    *,
    output: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    resume: bool = False,
    force: bool = False,
    install_signal_handlers: bool = True,
    schedule: Schedule | None = None,
    shard: Shard | None = None,
    start_at: float | None = None,
    team: Team | None = None,
) -> tuple[Run, bool]:
    """Run the prompt set; return the run and whether it was interrupted. Results are journalled as they finish.

    With `shard` only that slice of the run is sent (`Shard.prompts`), an open-loop schedule keeps the full
    schedule's arrival offsets (`Shard.arrivals`), and the run file carries the shard marker `merge` checks.
    With `start_at` (epoch seconds, the shards' shared start) the schedule starts then, after the set-up.
    With `team` (worker processes of one run) every worker starts its schedule at the same moment, after all
    of them set up, and records times from it.

    `schedule` releases the jobs (by default an open loop when the config has a rate or a trace, else a closed
    loop of `config.concurrency` workers) and sizes the
    connection pool (`Schedule.max_in_flight`), so no arrival waits for a connection. The output is
    locked for one writer for the whole run. A journal that cannot be written (a full disk) stops the run like
    an interrupt: the finished samples are kept and `RunStopped` is raised after the run file was written (or
    could not be).
    """
    progress = progress or SilentProgress()
    full = prompts
    prompts, schedule, marker = shard_run(prompts, config, schedule, shard)
    if start_at is not None:
        marker["start_at"] = start_at
    arm = prepare_arm(prompts, config, output, resume=resume, force=force, header_extra=marker)
    if schedule is None and config.open_loop:
        if shard is None:
            arm.plan.jobs, schedule, _ = open_loop(config, arm.plan.jobs)
        else:  # the whole run's schedule, of which this shard sends its own arrivals
            arm.plan.jobs, schedule = shard_open_loop(config, full, shard, arm.plan.jobs)
    strategy = schedule or ClosedLoop(config.concurrency)

    async def timed(session: Session) -> None:
        origin: float | None = session.started
        releases = strategy
        if team is not None:
            origin = await team.turn(session.stop)
            if origin is None:
                return
            if isinstance(strategy, OpenLoop):  # every worker's arrivals count from the shared start
                releases = OpenLoop(strategy.offsets_s, strategy.max_concurrency, start=origin)
        if start_at is not None:
            await sleep_until(start_at, session.stop)
            late = time.time() - start_at
            if late > LATE_START_S:
                session.notes.append(late_start_note(late, start_at))
        arm.new_results = await drive(
            session.transports["run"], arm.engine, arm.plan.jobs, arm.settings, releases, session.stop,
            progress, arm.journal, arm.meter, origin=origin,
        )

    runs, interrupted = await run_arms(
        {"run": arm}, timed, progress=progress, title=config.label or "speedbench",
        connections=strategy.max_in_flight(len(arm.plan.jobs)), resume=resume,
        install_signal_handlers=install_signal_handlers,
    )
    return runs["run"], interrupted


def run_benchmark(
    prompts: PromptSet,
    config: RunConfig,
    *,
    output: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    resume: bool = False,
    force: bool = False,
    install_signal_handlers: bool = True,
    schedule: Schedule | None = None,
    shard: Shard | None = None,
    start_at: float | None = None,
    team: Team | None = None,
) -> tuple[Run, bool]:
    """Synchronous wrapper of `execute`, on the event loop `config.loop` names."""
    return run_loop(
        execute(
            prompts, config, output=output, progress=progress, resume=resume, force=force,
            install_signal_handlers=install_signal_handlers, schedule=schedule, shard=shard, start_at=start_at,
            team=team,
        ),
        config.loop,
    )

