"""The runner's own event-loop lag, sampled during a run: a saturated client must not pass for a slow server."""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import Iterable, Sequence

from bench.records import ClientLag, SampleResult
from bench.runner._progress import Progress

LAG_INTERVAL_S = 0.01
"""How often the loop is asked to wake up; lag is how late it did."""
LAG_WARN_S = 0.010
"""A wake-up later than this is a stall: counted, and said once at the end of the run with what to do."""
STALL_SHARE = 0.01
"""Stalls are said only when together they took at least this share of the run's time."""
BURST_GAP_S = 0.001
"""Chunks closer than this came back to back from the server (one step's tokens), not one step each."""


class LagMonitor:
    """Sleeps `interval_s` at a time on the run's loop and records how late each wake-up came."""

    def __init__(
        self, progress: Progress, *, interval_s: float = LAG_INTERVAL_S, warn_s: float = LAG_WARN_S,
        streamed: bool = False,
    ) -> None:
        """Sample on the run's loop; `streamed` words the end-of-run note for a run whose answers were streamed.

        Nothing is printed during the run: stalls are counted and `notes` says them once, with the action."""
        self.progress = progress
        self.interval_s = interval_s
        self.warn_s = warn_s
        self.streamed = streamed
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Begin sampling on the running loop."""
        self._task = asyncio.get_running_loop().create_task(self._sample())

    async def stop(self) -> None:
        """Stop sampling."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _sample(self) -> None:
        """The sampling loop."""
        clock = time.perf_counter
        while True:
            due = clock() + self.interval_s
            await asyncio.sleep(self.interval_s)
            self.lags.append(max(0.0, clock() - due))

    def summary(self) -> ClientLag | None:
        """p50/p99/max lag in ms, samples, the threshold and how many samples exceeded it; None without samples."""
        if not self.lags:
            return None
        ordered = sorted(self.lags)

        def rank(fraction: float) -> float:
            return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]

        return {
            "interval_ms": self.interval_s * 1000,
            "samples": len(ordered),
            "p50_ms": round(rank(0.5) * 1000, 3),
            "p99_ms": round(rank(0.99) * 1000, 3),
            "max_ms": round(ordered[-1] * 1000, 3),
            "threshold_ms": self.warn_s * 1000,
            "over_threshold": sum(lag > self.warn_s for lag in ordered),
        }

    def warning(self) -> str | None:
        """One note for the whole run when the loop's stalls took a share of the run's time that can move its
        latencies (at least STALL_SHARE): how often, how long, what to do. Streamed answers are timed by the kernel's
        receive time, so a late loop does not delay them: `merge_warning` says what it can do to them instead."""
        summary = self.summary()
        if self.streamed or summary is None or not summary["over_threshold"]:
            return None
        stalled_s = sum(lag for lag in self.lags if lag > self.warn_s)
        share = stalled_s / (len(self.lags) * self.interval_s + sum(self.lags))
        if share < STALL_SHARE:
            return None  # a few stalls in a long run: no latency moves by more than a fraction of a percent
        return (
            f"the client's event loop stalled {summary['over_threshold']} times over {summary['threshold_ms']:.0f} ms "
            f"during the run (max {summary['max_ms']:.1f} ms, p99 {summary['p99_ms']:.1f} ms, {share:.1%} of the "
            "run's time): each request's latency and decode time can include that much of the client's own delay; "
            "run the client on a less busy machine or lower --concurrency"
        )

    def merge_warning(self, chunk_gaps_s: Sequence[float]) -> str | None:
        """For a streamed run: a warning when the loop's p99 lag exceeded the median gap between server steps.

        Reads are timed by the kernel's receive time, so a late loop does not delay them; but a read later than
        the gap to the next chunk finds both chunks merged by the kernel under the newer one's time. Gaps under
        BURST_GAP_S are chunks the server sent back to back (a speculative step's accepted drafts): merging them
        loses nothing, so the median is taken over the other gaps (none: nothing to warn about).
        """
        steps = [gap for gap in chunk_gaps_s if gap >= BURST_GAP_S]
        if not self.lags or not steps:
            return None
        summary = self.summary()
        gap_s = statistics.median(steps)
        if summary is None or summary["p99_ms"] <= gap_s * 1000:
            return None
        late = sum(lag > gap_s for lag in self.lags)
        return (
            f"the client's event loop was later than the median gap between streamed chunks ({gap_s * 1000:.1f} ms) "
            f"in {late} of {len(self.lags)} samples (p99 {summary['p99_ms']:.1f} ms): chunks that reach a socket "
            "read that late share one receive time, so some ITL entries merge two gaps into one; lower "
            "--concurrency for exact ITL"
        )

    def notes(self, results: Iterable[SampleResult]) -> list[str]:
        """The end-of-run warnings about the client's own lag for a run with these results (none when it kept up):
        the stall count, and for streamed answers whether chunks can have merged."""
        gaps = [gap for result in results if result.ok for gap in result.itl_s]
        return [note for note in (self.warning(), self.merge_warning(gaps) if gaps else None) if note]
