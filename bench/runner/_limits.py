"""The ranges of the numeric options, checked once before anything runs: finite, and bounded where a library
(asyncio's timers, the arrival draws, the clock) would overflow or wait for ever."""

from __future__ import annotations

import math
import time

from bench._errors import BenchError

NUMBER_RANGES: dict[str, tuple[float, float, bool, str]] = {
    "--timeout": (0.0, 1e6, False, "seconds"),
    "--ready-timeout": (0.0, 1e6, False, "seconds"),
    "--request-rate": (1e-6, 1e6, True, "requests/s"),
    "--burstiness": (1e-3, 1e3, True, "(the gamma shape)"),
}
"""Per option: (lowest, highest, whether the lowest itself is allowed, the unit said in the refusal)."""
MAX_START_AHEAD_S = 30 * 86400.0
"""`--start-at` at most this far ahead (30 days): a later time is a typo that would wait for ever."""


def checked_number(option: str, value: float) -> float:
    """`value` of `option` when finite and within its range (`NUMBER_RANGES`); else a one-line BenchError."""
    low, high, closed, unit = NUMBER_RANGES[option]
    number = not isinstance(value, bool) and isinstance(value, int | float)
    inside = number and math.isfinite(value) and (low <= value if closed else low < value) and value <= high
    if not inside:
        bounds = f"{'[' if closed else '('}{low:g}, {high:g}]"
        raise BenchError(f"{option} must be a finite number in {bounds} {unit} (got {value!r})")
    return value


def checked_start(epoch_s: float) -> float:
    """A `--start-at` time (epoch seconds): finite, not before 1970, at most `MAX_START_AHEAD_S` ahead."""
    if not math.isfinite(epoch_s) or epoch_s < 0 or epoch_s > time.time() + MAX_START_AHEAD_S:
        raise BenchError(f"--start-at must be a time within the next {MAX_START_AHEAD_S / 86400:g} days "
                         f"(got {epoch_s!r})")
    return epoch_s
