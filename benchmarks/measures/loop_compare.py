"""asyncio's event loop against uvloop's on `make perf`'s rows, interleaved (`perf.py --compare-loops`).

Each repeat runs every figure once per loop, the loops in a seeded random order per repeat, against the same
nginx (requests/s at c=1 and 64, client overhead, stream chunks parsed/s at c=1 and 64) and, per streaming load
point, one floor and then the runner once under each loop against fresh schedule servers. Medians over the
repeats; the ratio is uvloop over asyncio.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from measures.common import SSE_CHUNKS, Sizes, percentile, timed
from measures.loops import event_loop, loop_settings
from measures.streaming import STREAM_TARGETS, Load, Outcome, measure_client, measure_floor
from measures.throughput import runner_series


@dataclass
class LoopFigures:
    """Every figure one loop produced, a list per figure (one value per repeat)."""

    figures: dict[str, list[float]] = field(default_factory=dict)
    merge_warnings: int = 0

    def add(self, name: str, value: float) -> None:
        """Append one repeat's value of a figure."""
        self.figures.setdefault(name, []).append(value)


def loop_orders(loops: tuple[str, ...], repeats: int, seed: int) -> list[list[str]]:
    """The seeded order of the loops in each repeat (every loop once per repeat)."""
    rng = random.Random(seed)
    orders = []
    for _ in range(repeats):
        order = list(loops)
        rng.shuffle(order)
        orders.append(order)
    return orders


def compare_loops(
    url: str, sse_url: str, sizes: Sizes, workdir: Path, loops: tuple[str, ...], seed: int = 0
) -> dict[str, LoopFigures]:
    """{loop: its figures}, the loops interleaved repeat by repeat (request, parse and streaming-load figures)."""
    found = {name: LoopFigures() for name in loops}
    for repeat, order in enumerate(loop_orders(loops, sizes.repeats, seed)):
        for name in order:
            settings = loop_settings(name)
            with event_loop(name):
                c1 = runner_series(url, sizes.c1, 1, workdir, 1, **settings)
                c64 = runner_series(url, sizes.c64, 64, workdir, 1, **settings)
                sse1 = runner_series(sse_url, sizes.stream, 1, workdir, 1, stream=True, **settings)
                sse64 = runner_series(sse_url, sizes.stream_c64, 64, workdir, 1, stream=True, **settings)
            figures = found[name]
            figures.add("requests/s, c=1", c1.rate(sizes.c1))
            figures.add("requests/s, c=64", c64.rate(sizes.c64))
            figures.add("client overhead p50, c=1 (ms)", percentile(c1.latencies, 0.5) * 1000)
            figures.add(f"stream chunks parsed/s, c=1 ({SSE_CHUNKS}/response)", sse1.chunks[0] / sse1.elapsed[0])
            figures.add(f"stream chunks parsed/s, c=64 ({SSE_CHUNKS}/response)", sse64.chunks[0] / sse64.elapsed[0])
        for (streams, rate), chunks in zip(STREAM_TARGETS, sizes.stream_chunks, strict=True):
            load = Load(streams, rate, chunks, sizes.stream_waves)
            tag = f"{repeat}-{load.streams}"
            floor = timed(f"floor {load.label}", lambda load=load, tag=tag: measure_floor(load, workdir, f"f{tag}"))
            for name in order:
                with event_loop(name):
                    client = timed(f"{name} {load.label}", lambda load=load, name=name, tag=tag:
                                   measure_client(load, workdir, f"{name}{tag}", **loop_settings(name)))
                add_stream_figures(found[name], load, floor, client)
    return found


def add_stream_figures(figures: LoopFigures, load: Load, floor: Outcome, client: Outcome) -> None:
    """A streaming load point's ITL error p99 (and its multiple of the floor's), chunks/s and lost chunks."""
    p99 = percentile(client.errors_ms, 0.99) if client.errors_ms else float("nan")
    floor_p99 = percentile(floor.errors_ms, 0.99) if floor.errors_ms else float("nan")
    figures.add(f"ITL error p99, {load.label} (ms)", p99)
    figures.add(f"ITL error p99 / floor's, {load.label}", p99 / floor_p99 if floor_p99 else float("nan"))
    figures.add(f"chunks/s received, {load.label}", client.chunks_per_s)
    figures.add(f"chunks lost, {load.label}", float(client.lost))
    figures.merge_warnings += int(client.merge_warned)


def loop_table(found: dict[str, LoopFigures], loops: tuple[str, ...]) -> str:
    """figure | median per loop | last loop over the first, as text."""
    header = ["figure", *loops, f"{loops[-1]}/{loops[0]}" if len(loops) > 1 else "-", "runs"]
    table = [header]
    for name in found[loops[0]].figures:
        medians = [statistics.median(found[loop].figures[name]) for loop in loops]
        spread = " ".join(
            f"{loop}: " + ", ".join(f"{value:,.3g}" for value in found[loop].figures[name]) for loop in loops
        )
        change = f"{medians[-1] / medians[0]:.2f}x" if medians[0] and len(loops) > 1 else "-"
        table.append([name, *(f"{value:,.3f}" if value < 100 else f"{value:,.0f}" for value in medians), change,
                      spread])
    table.append(["runs that warned of merged chunks", *(str(found[loop].merge_warnings) for loop in loops), "-",
                  "-"])
    widths = [max(len(row[index]) for row in table) for index in range(len(header))]
    lines = []
    for index, row in enumerate(table):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines) + "\n"
