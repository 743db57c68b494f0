"""The one arm lifecycle, shared by single and interleaved runs: lock, signals, transport, journal, lag, run files.

`arms_lifecycle` holds every arm's output lock, routes SIGINT/SIGTERM to one `Stop`, opens a transport per arm and
connects it (engine, settings, warm-up), opens the journals, starts progress and the loop-lag monitor, awaits
the caller's timed part, then concludes each arm, closes the journals and writes each arm's run file.
"""

from __future__ import annotations

import contextlib
import resource
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from bench._errors import BenchError
from bench.records import Acceptance, Run, SampleResult, output_lock
from bench.runner._arm import (
    ArmRun,
    RunStopped,
    build_run,
    close_journal,
    conclude_arm,
    connect_arm,
    open_journal,
    read_start,
)
from bench.runner._lag import LagMonitor
from bench.runner._progress import Progress
from bench.runner._stop import Stop, signals_to
from bench.runner._transport import Transport

FILES_BESIDES_CONNECTIONS = 64
"""Open files a run needs besides its connections: journals, locks, probes, the interpreter's own."""


def ensure_file_limit(connections: int, *, workers: int = 1, whole: int | None = None) -> None:
    """Make sure the process may open `connections` sockets and its own files: raise the soft limit on open files
    up to the hard one when needed; when even that is too low, a one-line BenchError before anything is sent.
    With `workers` (processes that inherit the limit) `connections` is each one's and `whole` the run's.

    Without this, the sockets past the limit fail as "Too many open files" and are recorded as the server's
    connect errors.
    """
    needed = connections + FILES_BESIDES_CONNECTIONS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard == resource.RLIM_INFINITY or hard >= needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
        return
    spread = f", up to {connections} in each of its {workers} client processes" if workers > 1 else ""
    raise BenchError(
        f"this run opens up to {whole or connections} connections at once (--concurrency, times each --url"
        f"{', times each arm' if workers > 1 else ''}){spread}, about {needed} files "
        f"{'each ' if workers > 1 else ''}with its own, but a process may open only {soft} (ulimit -n, hard limit "
        f"{hard}): raise the limit (ulimit -n {needed}) or lower --concurrency"
    )


@dataclass
class Session:
    """What the timed part of a run gets: the shared stop, the start time and each arm's open transport; `notes`
    are warnings the timed part found (recorded in every arm's run file)."""

    stop: Stop
    started: float
    transports: dict[str, Transport] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


async def _connect(arms: Mapping[str, ArmRun], session: Session, stack: contextlib.AsyncExitStack,
                   connections: int) -> None:
    """Open each arm's transport (held by `stack`), read every server's start before any arm's first request, then
    connect each arm: engine, settings, warm-up."""
    for name, arm in arms.items():
        config = arm.config
        session.transports[name] = await stack.enter_async_context(
            Transport(timeout=config.timeout, connections=connections * len(arm.base_urls),
                      headers=config.request_headers(), max_body_bytes=config.max_response_bytes,
                      stamped=config.stream)
        )
        await read_start(arm, session.transports[name], session.stop)  # before any arm's first request
    for name, arm in arms.items():
        await connect_arm(arm, session.transports[name], session.stop)


async def _conclude(arms: Mapping[str, ArmRun], session: Session, lag: LagMonitor, progress: Progress
                    ) -> dict[str, tuple[list[SampleResult], Acceptance | None, list[str]]]:
    """Each arm's conclusion (results, acceptance, notes); the loop-lag notes said once for every arm."""
    concluded = {}
    said: dict[str, None] = {}
    for name, arm in arms.items():
        lag_notes = [*lag.notes(arm.new_results), *session.notes]
        said.update(dict.fromkeys(lag_notes))
        concluded[name] = await conclude_arm(arm, session.transports[name], progress, session.stop, lag_notes)
    for note in said:  # one loop for every arm: each note once per run, recorded in every run file
        progress.message(f"speedbench: warning: {note}")
    return concluded


async def arms_lifecycle(
    arms: Mapping[str, ArmRun],
    timed: Callable[[Session], Awaitable[None]],
    *,
    progress: Progress,
    title: str,
    connections: int,
    resume: bool,
    install_signal_handlers: bool,
) -> tuple[dict[str, Run], bool]:
    """Run `timed(session)` between every arm's set-up and conclusion; return the runs by name and `interrupted`.

    `connections` is the pool size per server URL. A journal that cannot be written stops every arm (the
    finished samples are kept) and raises `RunStopped` for the first arm after all run files were written.
    """
    ensure_file_limit(sum(connections * len(arm.base_urls) for arm in arms.values()))
    stop = Stop()
    lag = LagMonitor(progress, streamed=any(arm.config.stream for arm in arms.values()))
    with contextlib.ExitStack() as held:
        for arm in arms.values():
            if arm.output is not None:
                held.enter_context(output_lock(arm.output))
        started = time.perf_counter()
        session = Session(stop, started)
        try:
            with signals_to(stop, install_signal_handlers):
                async with contextlib.AsyncExitStack() as stack:
                    await _connect(arms, session, stack, connections)
                    for arm in arms.values():
                        open_journal(arm, resume=resume)
                    progress.start(sum(len(arm.plan.jobs) for arm in arms.values()), title)
                    lag.start()
                    try:
                        await timed(session)
                    finally:
                        await lag.stop()
                    progress.finish()
                    concluded = await _conclude(arms, session, lag, progress)
        finally:
            for arm in arms.values():
                close_journal(arm, stop)
        interrupted = stop.requested.is_set()
        elapsed = time.perf_counter() - started
        runs = {
            name: build_run(arm, *concluded[name], interrupted=interrupted, elapsed_s=elapsed, stop=stop,
                            client_lag=lag.summary())
            for name, arm in arms.items()
        }
    if stop.fatal is not None:
        raise RunStopped(next(iter(runs.values())), stop.fatal)
    return runs, interrupted
