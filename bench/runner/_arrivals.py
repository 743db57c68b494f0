"""Open-loop arrival schedules: seeded poisson, gamma and constant offsets, or offsets replayed from a trace file.

A schedule is a non-decreasing sequence of offsets in seconds from the start of a run, one per request. The
gaps between arrivals are drawn as vLLM's `bench serve` draws them (gamma with shape `burstiness` and scale
1 / (rate * burstiness); shape 1 is poisson) and then scaled so that n arrivals take exactly n / rate seconds,
so the offered rate is the requested one and only the client can miss it (vLLM normalises its delays the same
way). Pure code: no clock, no I/O beyond reading a trace.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench._errors import BenchError
from bench._inputs import read_input_text

ARRIVAL_PROCESSES = ("poisson", "gamma", "constant")
"""The generated arrival processes (`--arrival`); a trace file is the fourth source."""

TRACE = "trace"
"""The process name of a schedule replayed from a `--trace` file."""

_TRACE_KEYS = frozenset({"offset_s", "prompt_id"})


@dataclass(frozen=True)
class ArrivalSchedule:
    """When each request of an open-loop run is due: offsets from the run's start, with what made them."""

    offsets_s: tuple[float, ...]
    process: str
    """poisson, gamma, constant or trace."""
    rate: float | None = None
    """Requested arrivals per second (None for a trace)."""
    burstiness: float | None = None
    """Gamma shape (1 = poisson; below 1 burstier, above 1 more regular); None for constant and trace."""
    seed: int | None = None
    prompt_ids: tuple[str | None, ...] | None = None
    """From a trace: the prompt id each arrival asks for (None entries: the run's next prompt)."""
    source: str | None = None
    """The trace file a replayed schedule came from."""

    def __len__(self) -> int:
        """Number of arrivals."""
        return len(self.offsets_s)

    @property
    def duration_s(self) -> float:
        """Offset of the last arrival (0 for an empty schedule)."""
        return self.offsets_s[-1] if self.offsets_s else 0.0

    @property
    def offered_rate(self) -> float | None:
        """Arrivals per second the schedule offers: n over the last offset (None when it spans no time)."""
        return len(self.offsets_s) / self.duration_s if self.duration_s > 0 else None

    def gaps_s(self) -> tuple[float, ...]:
        """Inter-arrival gaps: the first offset, then each offset minus the one before."""
        return tuple(b - a for a, b in zip((0.0, *self.offsets_s[:-1]), self.offsets_s, strict=True))


def arrival_schedule(
    count: int, rate: float, *, process: str = "poisson", burstiness: float = 1.0, seed: int = 0,
) -> ArrivalSchedule:
    """`count` seeded arrival offsets at `rate` requests/s: poisson, gamma (shape `burstiness`) or constant."""
    if process not in ARRIVAL_PROCESSES:
        raise BenchError(f"unknown arrival process {process!r}; expected one of: {', '.join(ARRIVAL_PROCESSES)}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise BenchError(f"an arrival schedule needs at least 1 request (got {count!r})")
    from bench.runner._limits import checked_number

    checked_number("--request-rate", rate)
    checked_number("--burstiness", burstiness)
    if process == "poisson" and burstiness != 1.0:
        raise BenchError("--burstiness is the gamma shape: use it with --arrival gamma (poisson is burstiness 1)")
    shape = 1.0 if process == "poisson" else burstiness
    if process == "constant":
        gaps = [1.0 / rate] * count
    else:
        draw = random.Random(seed)
        gaps = [draw.gammavariate(shape, 1.0 / (rate * shape)) for _ in range(count)]
        total = math.fsum(gaps)
        if total <= 0:  # every draw underflowed (tiny shapes): fall back to even spacing
            gaps = [1.0 / rate] * count
        else:
            scale = (count / rate) / total
            gaps = [gap * scale for gap in gaps]
    offsets: list[float] = []
    elapsed = 0.0
    for gap in gaps:
        elapsed += gap
        offsets.append(elapsed)
    return ArrivalSchedule(
        offsets_s=tuple(offsets), process=process, rate=float(rate),
        burstiness=None if process == "constant" else shape, seed=None if process == "constant" else seed,
    )


MAX_TRACE_BYTES = 256 * 2**20
"""The largest trace file read (256 MiB: millions of arrivals)."""
MAX_TRACE_LINE = 4096
"""The longest trace line: an offset and a prompt id fit many times over; a longer one is not a trace line."""


def load_trace(path: str | Path) -> ArrivalSchedule:
    """Arrival offsets (and optional prompt ids) from a JSONL trace: one {"offset_s": s, "prompt_id": id} a line."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_TRACE_BYTES:
            raise BenchError(f"--trace {path}: larger than {MAX_TRACE_BYTES // 2**20} MiB; no trace of arrivals "
                             "needs that")
        text = read_input_text(path, limit=MAX_TRACE_BYTES)
    except FileNotFoundError:
        raise BenchError(f"--trace: no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"--trace: cannot read {path}: {exc}") from None
    offsets: list[float] = []
    prompt_ids: list[str | None] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"--trace {path}:{number}"
        if len(line) > MAX_TRACE_LINE:
            raise BenchError(f"{where}: longer than {MAX_TRACE_LINE} characters; a line holds offset_s and "
                             "optionally prompt_id")
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchError(f"{where}: not JSON ({exc.msg})") from None
        except (ValueError, RecursionError):  # a number past Python's digit limit, or nesting past the stack
            raise BenchError(f"{where}: not a trace line (a number too long or nesting too deep)") from None
        if not isinstance(row, dict):
            raise BenchError(f'{where}: each line must be a JSON object such as {{"offset_s": 0.5}}')
        unknown = sorted(set(row) - _TRACE_KEYS)
        if unknown:
            raise BenchError(f"{where}: unknown key {unknown[0]!r}; a line holds offset_s and optionally prompt_id")
        offset = row.get("offset_s")
        if isinstance(offset, bool) or not isinstance(offset, int | float) or not math.isfinite(offset) or offset < 0:
            raise BenchError(f"{where}: offset_s must be a finite number of seconds >= 0 (got {offset!r})")
        if offsets and offset < offsets[-1]:
            raise BenchError(f"{where}: offset_s {offset} is earlier than the line before ({offsets[-1]}); "
                             "sort the trace by offset")
        prompt_id = row.get("prompt_id")
        if prompt_id is not None and (not isinstance(prompt_id, str) or not prompt_id):
            raise BenchError(f"{where}: prompt_id must be a non-empty string (got {prompt_id!r})")
        offsets.append(float(offset))
        prompt_ids.append(prompt_id)
    if not offsets:
        raise BenchError(f"--trace {path}: no arrivals in the file")
    return ArrivalSchedule(
        offsets_s=tuple(offsets), process=TRACE,
        prompt_ids=tuple(prompt_ids) if any(item is not None for item in prompt_ids) else None, source=str(path),
    )


def inter_arrival_cv(offsets_s: Sequence[float]) -> float:
    """Coefficient of variation of the gaps between consecutive offsets (1 for poisson, 0 for constant)."""
    ordered = sorted(offsets_s)
    gaps = [b - a for a, b in itertools.pairwise(ordered)]
    if len(gaps) < 2:
        raise BenchError("the coefficient of variation needs at least 3 arrivals")
    mean = math.fsum(gaps) / len(gaps)
    if mean <= 0:
        return math.nan
    variance = math.fsum((gap - mean) ** 2 for gap in gaps) / (len(gaps) - 1)
    return math.sqrt(variance) / mean


def _positive(value: object) -> bool:
    """Whether a value is a finite positive number (no bool)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value) and value > 0


BLOCK_SECONDS = 5.0
"""Default length of one A/B block of an open-loop comparison, in scheduled seconds."""
BLOCK_REQUESTS = (4, 30)
"""Fewest and most requests of a default A/B block."""


def default_block_size(rate: float | None) -> int:
    """Requests per A/B block: about `BLOCK_SECONDS` of arrivals at `rate`, within `BLOCK_REQUESTS`."""
    fewest, most = BLOCK_REQUESTS
    if rate is None or not _positive(rate):
        return most
    return max(fewest, min(most, math.ceil(BLOCK_SECONDS * rate)))


@dataclass(frozen=True)
class Block:
    """One block of an A/B run at one schedule: a contiguous slice of arrivals every arm runs in turn."""

    index: int
    start: int
    stop: int
    order: tuple[str, ...]
    """The arms in the order they run this block: forward in even blocks, reversed in odd ones (ABBA...)."""


def block_plan(count: int, block_size: int, names: Sequence[str], seed: int = 0) -> tuple[Block, ...]:
    """Cut `count` arrivals into blocks of `block_size`; arms alternate ABBA..., the first arm chosen by `seed`."""
    if block_size < 1:
        raise BenchError(f"--block-size must be >= 1 (got {block_size})")
    if not names:
        raise BenchError("an A/B run needs at least one arm")
    order = list(names)
    random.Random(seed).shuffle(order)
    blocks = []
    for index, start in enumerate(range(0, count, block_size)):
        turn = tuple(order) if index % 2 == 0 else tuple(reversed(order))
        blocks.append(Block(index=index, start=start, stop=min(count, start + block_size), order=turn))
    return tuple(blocks)


def block_offsets(schedule: ArrivalSchedule, block: Block) -> tuple[float, ...]:
    """The block's arrival offsets from the block's own start: each keeps its gap, the first its gap before it."""
    offsets = schedule.offsets_s
    before = offsets[block.start - 1] if block.start > 0 else 0.0
    return tuple(offset - before for offset in offsets[block.start:block.stop])
