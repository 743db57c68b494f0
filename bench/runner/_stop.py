"""Stopping a run and the loop it runs on: the stop state, signal routing and the collector policy."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import threading
import time
from collections.abc import Coroutine, Iterator
from types import FrameType
from typing import TypeVar

from bench.runner._loops import choose_loop, loop_factory

_T = TypeVar("_T")

GRACE_PERIOD_S = 5.0
"""After a stop request, requests in flight get this long to finish."""
STOPPING_PROBE_S = 1.0
"""After a stop request, the closing /metrics scrape gets at most this long."""
_orphaned_when: list[int] = []
"""The parent whose death makes any stop here a hard one (set in a worker: `stop_at_once_when_orphaned`)."""


def stop_at_once_when_orphaned(parent: int) -> None:
    """In a worker: a stop that arrives once `parent` is gone stops at once, with no grace for requests in flight.

    Nobody is left to wait for them, and the process must end within its bound; what finished is in its journal.
    """
    _orphaned_when[:] = [parent]


def _orphaned() -> bool:
    return bool(_orphaned_when) and os.getppid() != _orphaned_when[0]


class Stop:
    """Interrupt state shared by the signal handler, the workers and the server probes."""

    def __init__(self) -> None:
        """No stop requested yet."""
        self.requested = asyncio.Event()
        self.hard = asyncio.Event()
        self.count = 0
        self.fatal: BaseException | None = None

    def signal(self) -> None:
        """A SIGINT/SIGTERM: the first asks for a stop, the second stops at once (so does any in an orphaned worker)."""
        self.count += 1
        self.requested.set()
        if self.count >= 2 or _orphaned():
            self.hard.set()

    def fail(self, exc: BaseException) -> None:
        """Stop the run because something the run cannot continue without failed (e.g. the journal)."""
        if self.fatal is None:
            self.fatal = exc
        self.requested.set()

    async def guard(self, coro: Coroutine[object, None, _T], default: _T, *, closing: bool = False) -> _T:
        """Await `coro` unless a stop arrives first (then cancel it and return `default`).

        Before a stop request any stop ends it. Once a stop was requested only a `closing` probe
        (the final /metrics scrape, which completes what was measured) still runs, for at most
        STOPPING_PROBE_S and until a second Ctrl-C; any other is skipped.
        """
        stopping = self.requested.is_set()
        if (stopping and not closing) or self.hard.is_set():
            coro.close()
            return default
        task = asyncio.ensure_future(coro)
        waiter = asyncio.ensure_future((self.hard if stopping else self.requested).wait())
        try:
            await asyncio.wait(
                [task, waiter], timeout=STOPPING_PROBE_S if stopping else None, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            waiter.cancel()
            if not task.done():
                task.cancel()
            await asyncio.gather(task, waiter, return_exceptions=True)
        if task.cancelled():
            return default
        return task.result()


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""What stops a run as Ctrl-C does: an interrupt, a termination request, a hang-up (unless ignored: `nohup`)."""


def _routed(signums: tuple[int, ...]) -> list[int]:
    """The signals of `signums` to handle: a hang-up that was ignored (`nohup`) stays ignored."""
    return [signum for signum in signums
            if not (signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN)]


@contextlib.contextmanager
def signals_to(stop: Stop, install: bool) -> Iterator[None]:
    """Route SIGINT, SIGTERM and SIGHUP to `stop` while the block runs (when `install`), then give each back the
    handler it had before (asyncio alone would leave it at the default: a later signal would kill the process)."""
    loop = asyncio.get_running_loop()
    previous = {signum: signal.getsignal(signum) for signum in _routed(STOP_SIGNALS)} if install else {}
    for signum in previous:
        loop.add_signal_handler(signum, stop.signal)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            loop.remove_signal_handler(signum)
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def stopped_like_ctrl_c() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt while the block runs, as Ctrl-C does (on the main thread).

    For a job that starts servers and runs several comparisons (tune, bench with its servers): a stop signal at
    any moment, between runs too, unwinds through every `finally`, so the servers are ended and finished files
    kept. During a run the run's own handlers (`signals_to`) take over and give these back after it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = {signum: signal.signal(signum, interrupt) for signum in _routed((signal.SIGTERM, signal.SIGHUP))}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


FULL_COLLECTIONS_HELD = 1_000_000_000
"""The collector's third threshold during a run: that many young collections before a full one, i.e. none."""


def run_loop(coroutine: Coroutine[object, None, _T], loop: str | None = None) -> _T:
    """asyncio.run(coroutine) on the named loop, the objects made before it frozen, its result handed back outside.

    The loop is `choose_loop(loop)`'s: the name given, else $SPEEDBENCH_LOOP, else asyncio's.

    On the main thread asyncio.run swaps the SIGINT handler for one that holds the main task, and Python
    builds the repr of that handler (task, result and all) when it is swapped back: for a run's result that
    is every record, 0.3 s of CPU at 512 streamed samples.
    """
    box: list[_T] = []

    async def main() -> None:
        box.append(await coroutine)

    # What exists before the run (modules, prompts, previous runs' records) is moved out of the collector's
    # reach for its duration: a full collection walks all of it, a pause on a streamed run's loop during which
    # every stream read gets merged chunks (one arrival time for several). Full (generation 2) collections are
    # also held back until the run ends: one would walk every record the run has made so far, a pause that
    # grows with the run, and a pause longer than the gap between chunks merges them. Young collections go on,
    # so short-lived cycles (futures, exceptions) are still freed during the run.
    gc.collect()
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], FULL_COLLECTIONS_HELD)
    try:
        with asyncio.Runner(loop_factory=loop_factory(choose_loop(loop))) as runner:
            runner.run(main())
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
    return box[0]


async def sleep_until(epoch_s: float, stop: Stop) -> None:
    """Sleep until the wall clock reads `epoch_s` (at once when it has passed), ending early on a stop request."""
    remaining = epoch_s - time.time()
    if remaining <= 0:
        return
    try:
        await asyncio.wait_for(stop.requested.wait(), remaining)
    except TimeoutError:
        pass
