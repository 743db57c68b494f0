"""The runner's own event-loop lag, sampled during a run: a saturated client must not pass for a slow server."""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import Iterable, Sequence
from typing import Any

from bench.records import SampleResult
from bench.runner._progress import Progress

LAG_INTERVAL_S = 0.01
"""How often the loop is asked to wake up; lag is how late it did."""
LAG_WARN_S = 0.010
"""A wake-up later than this is a stall a streamed ITL or TTFT would absorb: warn (live, and at the end on p99)."""
BURST_GAP_S = 0.001
"""Chunks closer than this came back to back from the server (one step's tokens), not one step each."""
LIVE_WARN_EVERY_S = 10.0
"""At most one live warning per this many seconds."""


class LagMonitor:
    """Sleeps `interval_s` at a time on the run's loop and records how late each wake-up came."""

    def __init__(self, progress: Progress, *, interval_s: float = LAG_INTERVAL_S, warn_s: float = LAG_WARN_S) -> None:
        """Report live warnings through `progress.message` (never printing directly)."""
        self.progress = progress
        self.interval_s = interval_s
        self.warn_s = warn_s
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self._last_warned = -math.inf

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
            now = clock()
            lag = max(0.0, now - due)
            self.lags.append(lag)
            if lag > self.warn_s and now - self._last_warned >= LIVE_WARN_EVERY_S:
                self._last_warned = now
                self.progress.message(
                    f"speedbench: warning: the client's event loop stalled {lag * 1000:.1f} ms (threshold "
                    f"{self.warn_s * 1000:.0f} ms): latencies not timed at the socket (non-streamed answers) absorb "
                    "the client's own delay, and streamed chunks read that late share one arrival time"
                )

    def summary(self) -> dict[str, Any] | None:
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
        """The end-of-run warning when the lag's p99 exceeded the threshold, else None."""
        summary = self.summary()
        if summary is None or summary["p99_ms"] <= summary["threshold_ms"]:
            return None
        return (
            f"the client's event loop lagged {summary['p99_ms']:.1f} ms at p99 (max {summary['max_ms']:.1f} ms, "
            f"threshold {summary['threshold_ms']:.0f} ms): the client was saturated; latencies not timed at the "
            "socket (non-streamed answers) include its own delay; lower --concurrency or run the client on a less "
            "busy machine"
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
        """The end-of-run warnings about the client's own lag for a run with these results (none when it kept up)."""
        gaps = [gap for result in results if result.ok for gap in result.itl_s]
        return [note for note in (self.warning(), self.merge_warning(gaps)) if note]
