"""Driving an arm's jobs: a schedule releases them, each is sent and recorded (memory, journal, progress) as it ends.

On a stop request, jobs in flight get `GRACE_PERIOD_S` to finish (a second stop ends them at once).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Sequence
from dataclasses import replace

from bench._redact import one_line
from bench.prompts import Sample
from bench.records import SampleResult
from bench.runner._arm import ArmRun
from bench.runner._progress import Progress
from bench.runner._sample import run_sample
from bench.runner._schedule import Schedule, Send
from bench.runner._stop import GRACE_PERIOD_S, Stop
from bench.runner._transport import Transport


async def drive(
    transport: Transport,
    arm: ArmRun,
    jobs: Sequence[tuple[Sample, int]],
    schedule: Schedule,
    stop: Stop,
    progress: Progress,
    *,
    origin: float | None = None,
    batch: int | None = None,
) -> list[SampleResult]:
    """Run `jobs` (sample, repeat) of `arm` as `schedule` releases them; return the results in the order they ended.

    `origin` is the perf_counter time records count from (the drive's start by default); `batch` (interleaved
    arms) and the arm's `server_state` (how the server's state was set) are recorded on every result before it
    is journalled. Job i goes to `arm.settings[i % len(arm.settings)]`.
    """
    engine, settings, journal, meter, server_state = arm.engine, arm.settings, arm.journal, arm.meter, arm.server_state
    origin = time.perf_counter() if origin is None else origin
    results: list[SampleResult] = []
    loop = asyncio.get_running_loop()
    flush_due = False

    def flush_journal() -> None:
        """Hand the lines of the samples that finished in this loop iteration to the OS, in one write."""
        nonlocal flush_due
        flush_due = False
        if journal is not None:
            try:
                journal.flush()
            except OSError as exc:  # disk full, I/O error: stop the run, keep what finished
                stop.fail(exc)

    async def send(index: int, scheduled_at: float) -> float:
        nonlocal flush_due
        sample, repeat = jobs[index]
        one = functools.partial(run_sample, transport, engine, sample, settings[index % len(settings)], repeat=repeat,
                                scheduled_at=scheduled_at, origin=origin)
        try:
            result = await (meter.measure(one) if meter is not None else one())
        except Exception as exc:
            result = _internal_failure(sample, repeat, exc)
        done_at = time.perf_counter()
        result = _marked(result, batch, server_state)
        results.append(result)  # kept in memory first: a journal failure never loses a finished sample
        if journal is not None:
            try:
                journal.append(result, flush=False)
            except OSError as exc:  # disk full, I/O error: stop the run, keep what finished
                stop.fail(exc)
            if not flush_due:
                flush_due = True
                loop.call_soon(flush_journal)
        progress.advance(result)
        return done_at

    await release(schedule, len(jobs), send, stop, progress)
    return results


def _internal_failure(sample: Sample, repeat: int, exc: Exception) -> SampleResult:
    """The failed result of a sample whose send raised (a harness fault, recorded, never lost)."""
    return SampleResult(
        id=sample.id, category=sample.category, ok=False, turns=len(sample.turns), latency_s=0.0,
        error=one_line(f"{exc.__class__.__name__}: {exc}"), error_kind="internal", repeat=repeat,
        sub_category=sample.sub_category,
    )


def _marked(result: SampleResult, batch: int | None, server_state: str | None) -> SampleResult:
    """The result with the turn's batch and the server's state recorded (unchanged when there are none)."""
    if batch is None and server_state is None:
        return result
    return replace(result, batch=batch if batch is not None else result.batch,
                   server_state=server_state or result.server_state)


async def release(schedule: Schedule, count: int, send: Send, stop: Stop, progress: Progress) -> None:
    """Run `schedule` over `count` jobs; on a stop request give the jobs in flight `GRACE_PERIOD_S` to end."""
    running = asyncio.ensure_future(schedule.run(count, send, stop))
    stop_wait = asyncio.create_task(stop.requested.wait())
    await asyncio.wait([running, stop_wait], return_when=asyncio.FIRST_COMPLETED)
    if stop.requested.is_set() and not running.done():
        if stop.fatal is None:
            progress.message(f"speedbench: interrupted; waiting up to {GRACE_PERIOD_S:.0f}s for requests in flight")
        hard_wait = asyncio.create_task(stop.hard.wait())
        await asyncio.wait([running, hard_wait], timeout=GRACE_PERIOD_S, return_when=asyncio.FIRST_COMPLETED)
        hard_wait.cancel()
        running.cancel()
    stop_wait.cancel()
    await asyncio.gather(running, stop_wait, return_exceptions=True)
    failure = None if running.cancelled() else running.exception()
    if failure is not None:
        raise failure  # a schedule that cannot run these jobs (e.g. too few arrival offsets)
