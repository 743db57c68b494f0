"""Progress hooks: the runner reports to this small interface and never imports a UI library."""

from __future__ import annotations

import math
import time
from typing import Protocol

from bench._types import Writer
from bench.records import SampleResult


class Progress(Protocol):
    """What the runner calls while a run goes on."""

    def start(self, total: int, description: str) -> None:
        """A run of `total` requests begins."""

    def advance(self, result: SampleResult) -> None:
        """One sample finished (ok or failed)."""

    def message(self, text: str) -> None:
        """A one-line notice for the user (a warning, a server event)."""

    def finish(self) -> None:
        """The run ended (completed or interrupted)."""


class SilentProgress:
    """Reports nothing."""

    def start(self, total: int, description: str) -> None:
        """Ignore the start."""

    def advance(self, result: SampleResult) -> None:
        """Ignore a result."""

    def message(self, text: str) -> None:
        """Ignore a notice."""

    def finish(self) -> None:
        """Ignore the end."""


ETA_AFTER_SHARE = 0.1
ETA_AFTER_SAMPLES = 3
"""A line gives an ETA once this share of the samples, and at least this many, are done."""


class LineProgress:
    """Plain progress lines (for logs and pipes): at most one every `interval_s`, and one at the end."""

    def __init__(self, write: Writer, interval_s: float = 5.0) -> None:
        """Write lines through `write` (e.g. `sys.stderr.write`)."""
        self._write = write
        self._interval = interval_s
        self._total = 0
        self._done = 0
        self._failed = 0
        self._started = 0.0
        self._last = 0.0
        self._description = ""

    def start(self, total: int, description: str) -> None:
        """Remember the size of the run."""
        self._total, self._description = total, description
        self._done = self._failed = 0
        self._started = self._last = time.monotonic()

    def _line(self) -> str:
        elapsed = time.monotonic() - self._started
        return (
            f"{self._description}: {self._done}/{self._total} done, {self._failed} failed, "
            f"elapsed {elapsed:.1f}s, eta {self._eta(elapsed)}\n"
        )

    def _eta(self, elapsed: float) -> str:
        """Seconds left at the pace so far, once a tenth of the run (at least 3 samples) is done: the first
        samples are one category's and carry the warm-up, so an earlier guess can be off by half."""
        if self._done >= self._total:
            return "0.0s"
        if self._done < max(ETA_AFTER_SAMPLES, math.ceil(ETA_AFTER_SHARE * self._total)):
            return "n/a (too early)"
        return f"{elapsed / self._done * (self._total - self._done):.1f}s"

    def advance(self, result: SampleResult) -> None:
        """Count a result and print a line when the interval has passed."""
        self._done += 1
        self._failed += 0 if result.ok else 1
        now = time.monotonic()
        if now - self._last >= self._interval and self._done < self._total:
            self._last = now
            self._write(self._line())

    def message(self, text: str) -> None:
        """Print a notice."""
        self._write(text.rstrip("\n") + "\n")

    def finish(self) -> None:
        """Print the final count."""
        self._write(self._line())
