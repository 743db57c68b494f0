"""Worker processes in step: every worker starts each turn of a run (its start, an arm's batch or block) together.

A `Team` is a pipe from each worker to the parent process, which keeps the turns: a worker says it has
arrived and waits; when every worker has arrived, the parent reads the machine's monotonic clock
(`time.perf_counter`, the same clock in every process) and sends that time to all of them as the turn's start.
So the workers of an interleaved comparison run each batch on one arm at a time, as one process would, and
their records count from one origin. A worker that stops, or dies, stops the others at their next turn:
nothing in flight is cut short by it. (A pipe, not a shared-memory barrier: a killed worker cannot leave a
lock held that the others would wait on forever.)
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeAlias

from bench.runner._stop import Stop

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.context import BaseContext

ARRIVE, GO, STOP = "arrive", "go", "stop"
Message: TypeAlias = "str | tuple[str, float]"
"""What a team's pipes carry: `ARRIVE` or `STOP`, or (`GO`, the turn's start)."""
PipeEnd: TypeAlias = "Connection[Message, Message]"
"""One end of a worker's pipe."""


@dataclass
class Team:
    """`size` worker processes moving in step; `batch` is the whole run's lock-step batch."""

    size: int
    batch: int
    ends: list[tuple[PipeEnd, PipeEnd]]
    """(the parent's end, the worker's end) of each worker's pipe."""
    index: int | None = None
    """This worker's index (None in the parent)."""
    arrived: set[int] = field(default_factory=set)
    stopped: bool = False

    @classmethod
    def create(cls, size: int, batch: int = 1, context: BaseContext | None = None) -> Team:
        """A team of `size` processes (made before they are forked)."""
        context = context or multiprocessing.get_context("fork")
        return cls(size, batch, [context.Pipe(duplex=True) for _ in range(size)])

    def member(self, index: int) -> Team:
        """The team as worker `index` sees it."""
        return replace(self, index=index, arrived=set())

    def keep_only(self, index: int) -> None:
        """In worker `index` after the fork: close every pipe end but its own, so the parent's death is an EOF."""
        for position, (parent, worker) in enumerate(self.ends):
            parent.close()
            if position != index:
                worker.close()

    def close_worker_ends(self) -> None:
        """In the parent once every worker is started: close the workers' ends, so a dead worker is an EOF."""
        for _, worker in self.ends:
            worker.close()

    # the parent's side

    def connections(self) -> list[PipeEnd]:
        """The parent's ends, to wait on beside the workers' sentinels."""
        return [parent for parent, _ in self.ends]

    def handle(self, ready: Sequence[object]) -> None:
        """Answer the workers whose messages are ready: a turn starts when all arrived; a stop stops them all."""
        for index, (parent, _) in enumerate(self.ends):
            if parent not in ready:
                continue
            try:
                message = parent.recv()
            except (EOFError, OSError):
                continue
            if message == STOP:
                self.abort()
            elif self.stopped:
                self._send(index, STOP)
            else:
                self.arrived.add(index)
                if len(self.arrived) == self.size:
                    started = time.perf_counter()
                    for waiting in sorted(self.arrived):
                        self._send(waiting, (GO, started))
                    self.arrived.clear()

    def abort(self) -> None:
        """Stop the team: in the parent, every worker waiting now or arriving later; in a worker, tell the parent."""
        if self.index is not None:
            with contextlib.suppress(OSError):
                self.ends[self.index][1].send(STOP)
            return
        self.stopped = True
        for waiting in sorted(self.arrived):
            self._send(waiting, STOP)
        self.arrived.clear()

    def _send(self, index: int, message: Message) -> None:
        with contextlib.suppress(OSError):
            self.ends[index][0].send(message)

    # a worker's side

    async def turn(self, stop: Stop) -> float | None:
        """Wait until every worker is here; the turn's shared start (perf_counter), or None when the run stops.

        The wait runs in a thread, so the loop (and its lag monitor) keeps going; a stop request here stops the
        others, and a stop from the team is a stop request here.
        """
        if self.index is None:
            raise RuntimeError("Team.turn is for a worker: use Team.member(index)")
        if stop.requested.is_set():
            self.abort()
            return None
        pipe = self.ends[self.index][1]
        try:
            pipe.send(ARRIVE)
        except OSError:  # the parent is gone
            stop.signal()
            return None
        waiting = asyncio.ensure_future(asyncio.to_thread(pipe.recv))
        stopped = asyncio.ensure_future(stop.requested.wait())
        await asyncio.wait([waiting, stopped], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not waiting.done():
            self.abort()  # the parent answers with a stop, which ends the wait
        reply = (await asyncio.gather(waiting, return_exceptions=True))[0]
        if isinstance(reply, tuple) and reply[0] == GO:
            return float(reply[1])
        if not stop.requested.is_set():
            stop.signal()  # another worker stopped: end this one's run the same way
        return None
