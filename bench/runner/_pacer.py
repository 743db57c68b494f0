"""The pacer: tasks waiting on it go through one per event-loop iteration, so sockets are read in between."""

from __future__ import annotations

import asyncio
import collections


class Pacer:
    """Lets waiting tasks through one per event-loop iteration, so the loop reads its sockets in between.

    asyncio runs every task that became ready before it polls the sockets again. When many streams start,
    parse or end at once (256 streams finishing in the same 10 ms), their requests, parses and records would
    run back to back for up to a few hundred milliseconds while the other streams' chunks queue up unread; a
    late read merges chunks and loses their separate arrival times. Through the pacer the same work is
    spread over iterations, one task's step each, with a poll of the sockets between steps. Reads are never
    paced: a stream whose turn is late only has more to parse when it comes.
    """

    def __init__(self) -> None:
        """No task waiting."""
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._releasing = False

    async def turn(self) -> None:
        """Wait until it is this task's turn (the next iteration when nobody else waits)."""
        future = asyncio.get_running_loop().create_future()
        self.admit(future)
        await future

    def admit(self, future: asyncio.Future[None]) -> None:
        """Queue `future`: its result is set at its turn (skipped if it is done by then, e.g. cancelled)."""
        self._waiters.append(future)
        if not self._releasing:
            self._releasing = True
            future.get_loop().call_soon(self._release, future.get_loop())

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        """Let the first task still waiting through; come back next iteration while others wait."""
        while self._waiters:
            future = self._waiters.popleft()
            if not future.done():
                future.set_result(None)
                break
        if self._waiters:
            loop.call_soon(self._release, loop)
        else:
            self._releasing = False
