"""The one run path: arms prepared, a strategy's turns driven in order, every arm's run file written.

`execute(prompts, arms, strategy, options)` runs in this process; `run_arms` is its synchronous wrapper, which
starts the arms' embedded servers and, with `--workers N`, spreads the same path over N processes (each a shard
with its share of the strategy, moving in step as a `Team`). Compared arms run interleaved: their servers stay
up and the strategy takes turns between them, so drift of the machine lands on every arm alike. Each arm writes
an ordinary run file with its own journal (resumable).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from bench._errors import BenchError
from bench.prompts import PromptSet, Shard
from bench.records import Run
from bench.runner._arm import ArmRun, prepare_arm, shard_run
from bench.runner._config import Arm, RunConfig
from bench.runner._drive import drive
from bench.runner._lifecycle import Session, arms_lifecycle
from bench.runner._progress import Progress, SilentProgress
from bench.runner._schedule import ClosedLoop, OpenLoop, Schedule
from bench.runner._stop import run_loop, sleep_until
from bench.runner._strategies import Plan, Strategy, Turn, Work, job_key, strategy_for
from bench.runner._team import Team
from bench.runner._workers import spread

LATE_START_S = 1.0
"""A shard whose schedule starts more than this many seconds after `--start-at` says so in its run file."""


def late_start_note(late_s: float, start_at: float) -> str:
    """The warning of a shard that started `late_s` seconds after the shared start `start_at` (epoch seconds)."""
    when = dt.datetime.fromtimestamp(start_at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (f"started {late_s:.1f} s after --start-at {when} (its set-up ended late): this shard's schedule did not "
            "start with the others', so the shards did not add up to one run's load; give a later --start-at")


@dataclass(frozen=True)
class RunOptions:
    """How a run is carried out, apart from what it measures: progress, resume, and the slice a process sends."""

    progress: Progress | None = None
    resume: bool = False
    force: bool = False
    install_signal_handlers: bool = True
    shard: Shard | None = None
    """Send only this slice of the run (`Shard.prompts`); the run file carries the marker `merge` checks."""
    team: Team | None = None
    """This process is one of a run's worker processes: each turn starts together in all of them."""
    start_at: float | None = None
    """Epoch seconds at which the run starts after its set-up (the shards' shared start)."""


def _prepare(prompts: PromptSet, arms: Sequence[Arm], strategy: Strategy, options: RunOptions
             ) -> tuple[dict[str, ArmRun], Plan]:
    """Every arm prepared (resume checked, jobs planned) and the strategy's plan over what is left."""
    names = tuple(arm.name for arm in arms)
    if len(set(names)) != len(names) or (len(names) < 2 if strategy.comparison else len(names) != 1):
        needs = "at least two arms with distinct names" if strategy.comparison else "one arm"
        raise ValueError(f"{strategy} runs {needs}")
    first = arms[0].config
    own, marker = shard_run(prompts, first.repeat, options.shard)
    if options.start_at is not None:
        marker["start_at"] = options.start_at
    prepared = {arm.name: prepare_arm(own, arm.settings(), arm.output, resume=options.resume, force=options.force,
                                      header_extra=marker) for arm in arms}
    for arm in arms:
        prepared[arm.name].server_state = arm.server_state
    work = Work(names, prompts, own, first.repeat, {name: arm.plan.jobs for name, arm in prepared.items()},
                options.shard, options.team is not None)
    plan = strategy.plan(work)
    if plan.marker is not None:
        for name, run in prepared.items():
            partners = [other for other in names if other != name]
            run.header["interleaved"] = {**plan.marker, "partner": partners[0] if len(partners) == 1 else partners}
    return prepared, plan


def _title(strategy: Strategy, arms: Sequence[Arm]) -> str:
    """How progress names the run: a comparison by its strategy and arms, one arm by its label."""
    return strategy.title([arm.name for arm in arms]) if strategy.comparison else arms[0].config.label or "speedbench"


async def _wait_for_start(start_at: float, session: Session) -> None:
    """Sleep until the shards' shared start; a start more than `LATE_START_S` late is noted in the run files."""
    await sleep_until(start_at, session.stop)
    late = time.time() - start_at
    if late > LATE_START_S:
        session.notes.append(late_start_note(late, start_at))


def _release(turn: Turn, picked: Sequence[int], began: float) -> Schedule:
    """How a turn's jobs still to send are released: a closed loop, or each at its offset from `began`."""
    if turn.offsets_s is None:
        return ClosedLoop(turn.concurrency)
    return OpenLoop([turn.offsets_s[index] for index in picked], turn.max_concurrency, start=began)


async def execute(
    prompts: PromptSet, arms: Sequence[Arm], strategy: Strategy, options: RunOptions | None = None,
) -> tuple[dict[str, Run], bool]:
    """Run the prompt set against every arm as `strategy` releases it; return the runs by arm name and whether
    the run was interrupted. Results are journalled as they finish.

    Each arm's output is locked for one writer; a journal that cannot be written stops every arm (the finished
    samples are kept) and raises `RunStopped` for the first arm, after the run files were written (or could not
    be). With a `team` every turn starts in all worker processes together and records count from the first.
    """
    options = options or RunOptions()
    progress = options.progress or SilentProgress()
    team = options.team
    prepared, plan = _prepare(prompts, arms, strategy, options)
    todo = {name: {job_key(job) for job in arm.plan.jobs} for name, arm in prepared.items()}
    elapsed = {name: 0.0 for name in prepared}

    async def turn(session: Session, step: Turn, origin: float | None) -> float | None:
        """One arm's turn; the run's origin, or None when the team stopped the run at the turn's start or end."""
        picked = [index for index, job in enumerate(step.jobs) if job_key(job) in todo[step.arm]]
        began = time.perf_counter() if team is None else await team.turn(session.stop)
        if began is None:
            return None
        origin = began if origin is None else origin
        arm = prepared[step.arm]
        if picked:
            arm.new_results += await drive(
                session.transports[step.arm], arm, [step.jobs[index] for index in picked],
                _release(step, picked, began), session.stop, progress,
                origin=began - elapsed[step.arm] if plan.own_clock else origin, batch=step.batch,
            )
        if plan.own_clock:
            ended = time.perf_counter() if team is None else await team.turn(session.stop)  # the slowest's end
            if ended is None:
                return None
            elapsed[step.arm] += ended - began
        return origin

    async def timed(session: Session) -> None:
        origin: float | None = session.started if team is None else None
        finished = False
        try:
            if options.start_at is not None:
                await _wait_for_start(options.start_at, session)
            for step in plan.turns:
                if session.stop.requested.is_set():
                    return
                if team is None and not any(job_key(job) in todo[step.arm] for job in step.jobs):
                    continue
                origin = await turn(session, step, origin)
                if origin is None:
                    return
            finished = True
        finally:
            if team is not None and not finished:
                team.abort()  # the others stop at their next turn instead of waiting for this worker

    return await arms_lifecycle(prepared, timed, progress=progress, title=_title(strategy, arms),
                          connections=plan.connections, resume=options.resume,
                          install_signal_handlers=options.install_signal_handlers)


def _serve(arm: Arm, stack: contextlib.ExitStack) -> Arm:
    """The arm with its embedded server started (held until `stack` closes); the arm itself when it names none."""
    if arm.server is None:
        return arm
    from bench.server import ServerError, make_server, server_tags

    try:
        server = make_server(arm.server)
        server.start()
    except (ServerError, ValueError) as exc:
        raise BenchError(str(exc)) from None
    stack.callback(server.stop)
    config = replace(arm.config, url=server.url, tags={**arm.config.tags, **server_tags(server)})
    return replace(arm, config=config, server=None, server_state=arm.server_state or "restart")


def run_arms(
    prompts: PromptSet, arms: Sequence[Arm], strategy: Strategy, options: RunOptions | None = None,
) -> tuple[dict[str, Run], bool]:
    """Synchronous `execute`: the arms' servers started, then this process (on the event loop the first arm's
    settings name) or `config.workers` processes, each a shard with its share of the strategy, in step."""
    options = options or RunOptions()
    with contextlib.ExitStack() as stack:
        arms = [_serve(arm, stack) for arm in arms]
        workers = arms[0].config.workers if arms else 1
        if workers <= 1 or options.team is not None:
            return run_loop(execute(prompts, arms, strategy, options), arms[0].config.loop if arms else None)
        shares = strategy.split(workers)

        def body(shard: Shard, team: Team, mine: list[Arm], tally: Progress) -> None:
            run_arms(prompts, mine, shares[shard.index],
                replace(options, progress=tally, force=True, install_signal_handlers=True, shard=shard, team=team))

        return spread(prompts, arms, workers, body, progress=options.progress, resume=options.resume,
                      force=options.force, title=_title(strategy, arms))


def run_benchmark(
    prompts: PromptSet, config: RunConfig, *, output: str | os.PathLike[str] | None = None,
    progress: Progress | None = None, resume: bool = False, force: bool = False,
    install_signal_handlers: bool = True, shard: Shard | None = None, team: Team | None = None,
    start_at: float | None = None,
) -> tuple[Run, bool]:
    """One endpoint's run as its settings ask (closed or open loop, over `config.workers` processes): `run_arms`
    with one arm; the keywords after `output` are `RunOptions`'."""
    options = RunOptions(progress=progress, resume=resume, force=force, install_signal_handlers=install_signal_handlers,
                         shard=shard, team=team, start_at=start_at)
    runs, interrupted = run_arms(prompts, [Arm("run", config, output)], strategy_for(config), options)
    return runs["run"], interrupted
