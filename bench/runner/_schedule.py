"""Release schedules: when each job of one drive is released, apart from how it is sent and recorded.

A strategy's `run(count, send, stop)` calls `await send(index, scheduled_at)` for the job indexes 0..count-1 in
order, each at the strategy's time; `scheduled_at` is the perf_counter time the job became due and `send`
returns the perf_counter time the job was done. No job is released once `stop.requested` is set.

- `ClosedLoop(concurrency)`: that many workers; a job is due when a worker's previous job is done.
- `OpenLoop(offsets_s, max_concurrency)`: job i is due `offsets_s[i]` seconds after the start (sleep, then the
  concurrency gate); a job held at the gate postpones every later arrival by as long as it was held, so the
  gaps after it are kept and no burst catches up. Each job is still reported due at its own offset, so
  the hold and the postponement count in its latency.
"""

from __future__ import annotations

import abc
import asyncio
import hashlib
import itertools
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence

from bench.runner._stop import Stop

Send = Callable[[int, float], Awaitable[float]]
"""Send job `index`, due at `scheduled_at`; return the perf_counter time it was done."""

class Schedule(abc.ABC):
    """When the jobs of one arm are released: the one interface every strategy implements."""

    @abc.abstractmethod
    async def run(self, count: int, send: Send, stop: Stop) -> None:
        """Call `send(index, scheduled_at)` for jobs 0..count-1 in order, at this strategy's times, until stopped."""

    @abc.abstractmethod
    def max_in_flight(self, count: int) -> int:
        """The most of `count` jobs this strategy can have in flight at once (the connection pool's size)."""


class ClosedLoop(Schedule):
    """`concurrency` workers; each takes the next job as soon as its previous one is done."""

    def __init__(self, concurrency: int) -> None:
        """Set the number of workers (at least 1)."""
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1 (got {concurrency})")
        self.concurrency = concurrency

    async def run(self, count: int, send: Send, stop: Stop) -> None:
        """Run the jobs with the workers; the first wave is due at the start, later jobs when a slot frees."""
        began = time.perf_counter()
        indexes = iter(range(count))

        async def worker() -> None:
            free_at = began
            while not stop.requested.is_set():
                index = next(indexes, None)
                if index is None:
                    return
                free_at = await send(index, free_at)

        await _run_all([asyncio.create_task(worker()) for _ in range(min(self.concurrency, max(1, count)))])

    def max_in_flight(self, count: int) -> int:
        """`concurrency`: one job per worker."""
        return self.concurrency


class OpenLoop(Schedule):
    """Jobs released at precomputed offsets (seconds since the start), optionally at most `max_concurrency` at once."""

    def __init__(self, offsets_s: Sequence[float], max_concurrency: int | None = None,
                 start: float | None = None) -> None:
        """Check the offsets (finite, >= 0, non-decreasing) and the cap (>= 1 or None); `start` is the perf_counter
        time the offsets count from (None: when `run` begins), such as a start shared by worker processes."""
        offsets = [float(offset) for offset in offsets_s]
        if any(not math.isfinite(offset) or offset < 0 for offset in offsets):
            raise ValueError("arrival offsets must be finite and >= 0")
        if any(later < earlier for earlier, later in itertools.pairwise(offsets)):
            raise ValueError("arrival offsets must not decrease")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1 (got {max_concurrency})")
        self.offsets_s = tuple(offsets)
        self.max_concurrency = max_concurrency
        self.start = start

    def max_in_flight(self, count: int) -> int:
        """The cap, or every job when there is none (arrivals never wait for a connection)."""
        return self.max_concurrency or max(1, count)

    async def run(self, count: int, send: Send, stop: Stop) -> None:
        """Sleep until each job's arrival, pass the gate, start it; then wait for every started job."""
        if count > len(self.offsets_s):
            raise ValueError(f"{count} jobs but only {len(self.offsets_s)} arrival offsets")
        began = time.perf_counter() if self.start is None else self.start
        gate = asyncio.Semaphore(self.max_concurrency) if self.max_concurrency else None
        shift = 0.0
        started: list[asyncio.Task[None]] = []

        async def one(index: int, due: float) -> None:
            try:
                await send(index, due)
            finally:
                if gate is not None:
                    gate.release()

        try:
            for index in range(count):
                due = began + self.offsets_s[index] + shift
                await _sleep_unless_stopped(due - time.perf_counter(), stop)
                if stop.requested.is_set():
                    break
                if gate is not None:
                    full, before = gate.locked(), time.perf_counter()
                    if not await _acquire_unless_stopped(gate, stop):
                        break
                    if full:  # held at the gate: later arrivals keep their gaps from this one
                        shift += time.perf_counter() - before
                # recorded as due at its own offset: time held at the gate (and the postponement it causes) counts
                # in its latency, so a capped client cannot hide the queue it builds (no coordinated omission)
                started.append(asyncio.create_task(one(index, began + self.offsets_s[index])))
            await asyncio.gather(*started, return_exceptions=True)
        finally:
            await _cancel_all(started)


def seeded_order(seed: int, keys: Sequence[str], names: Sequence[str]) -> list[str]:
    """The seeded random order in which `names` run the batch of jobs named by `keys` (the same on resume)."""
    digest = hashlib.sha256(f"{seed}|{'|'.join(keys)}".encode()).digest()
    order = list(names)
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
    return order


async def _run_all(tasks: list[asyncio.Task[None]]) -> None:
    """Wait for every task (their exceptions are not raised); cancel them all if the wait is cancelled."""
    try:
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await _cancel_all(tasks)


async def _cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


async def _sleep_unless_stopped(seconds: float, stop: Stop) -> None:
    """Sleep `seconds` (nothing when <= 0), ending early on a stop request."""
    if seconds <= 0:
        return
    try:
        await asyncio.wait_for(stop.requested.wait(), seconds)
    except TimeoutError:
        pass


async def _acquire_unless_stopped(gate: asyncio.Semaphore, stop: Stop) -> bool:
    """Acquire `gate` unless a stop request comes first; whether it was acquired."""
    if not gate.locked():
        await gate.acquire()
        return True
    acquire = asyncio.ensure_future(gate.acquire())
    stopped = asyncio.ensure_future(stop.requested.wait())
    await asyncio.wait([acquire, stopped], return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if acquire.done() and not acquire.cancelled():
        if stop.requested.is_set():
            gate.release()
            return False
        return True
    acquire.cancel()
    await asyncio.gather(acquire, stopped, return_exceptions=True)
    return False
