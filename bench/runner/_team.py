"""Worker processes in step: every worker starts each turn of a run (its start, an arm's batch or block) together.

A `Team` is one cross-process barrier and one shared clock reading. When the last worker reaches the barrier,
that worker reads the machine's monotonic clock (`time.perf_counter`, the same clock in every process) into
shared memory, and every worker starts the turn at that time. So the workers of an interleaved comparison run
each batch on one arm at a time, as one process would, and their records count from one origin. A worker that
stops breaks the barrier, which stops the others at their next turn: nothing in flight is cut short by it.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from dataclasses import dataclass
from typing import Any

from bench.runner._stop import Stop


def _stamp(clock: Any) -> None:
    """The barrier's action, run by the last worker to arrive: the turn's shared start time."""
    clock.value = time.perf_counter()


@dataclass
class Team:
    """The barrier and shared start time of `size` worker processes; `batch` is the whole run's lock-step batch."""

    size: int
    barrier: Any
    clock: Any
    batch: int = 1

    @classmethod
    def create(cls, size: int, batch: int = 1, context: Any = None) -> Team:
        """A team of `size` processes (made before they are forked)."""
        context = context or multiprocessing.get_context("fork")
        clock = context.Value("d", 0.0, lock=False)
        return cls(size, context.Barrier(size, action=lambda: _stamp(clock)), clock, batch)

    def abort(self) -> None:
        """Break the barrier: every worker waiting at it, or arriving later, stops."""
        self.barrier.abort()

    async def turn(self, stop: Stop) -> float | None:
        """Wait until every worker is here; the turn's shared start (perf_counter), or None when the run stops.

        The wait runs in a thread, so the loop (and its lag monitor) keeps going; a stop request here breaks
        the barrier for the others, and a broken barrier is a stop request here.
        """
        if stop.requested.is_set():
            self.abort()
            return None
        waiting = asyncio.ensure_future(asyncio.to_thread(self._wait))
        stopped = asyncio.ensure_future(stop.requested.wait())
        await asyncio.wait([waiting, stopped], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not waiting.done():
            self.abort()
        arrived = await asyncio.gather(waiting, return_exceptions=True)
        if arrived[0] is not True:
            if not stop.requested.is_set():
                stop.signal()  # another worker stopped: end this one's run the same way
            return None
        return float(self.clock.value)

    def _wait(self) -> bool:
        """Block on the barrier; whether every worker arrived (False: it was broken)."""
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            return False
        return True
