"""What every `make perf` measurement shares: sizes, targets, the table row, percentiles, logging, helpers."""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CATEGORIES = ("coding", "humanities", "math", "multilingual", "qa", "rag", "reasoning", "roleplay", "stem")
OSL = 64
SSE_CHUNKS = 1000
"""Content chunks per streamed response of the static nginx stream."""
SERVER_TIME_S = 0.0
"""nginx's own time per static answer, subtracted from client latency (its $request_time reads 0.000)."""

TARGETS = {
    "rps_c1": 2500.0,
    "rps_c64": 5000.0,
    "overhead_p50_ms": 0.4,
    "chunks_per_s": 50_000.0,
    "startup_s": 0.6,
    "rss_mb": 120.0,
    "analysis_s": 5.0,
    "history_s": 2.0,
}


@dataclass(frozen=True)
class Sizes:
    """How many requests, responses and records each figure uses."""

    c1: int = 5000
    c64: int = 10000
    stream: int = 100
    repeats: int = 5
    startup_runs: int = 5
    rss: int = 10_000
    records: int = 100_000
    history_points: int = 10_000
    ref_c1: int = 2000
    ref_c64: int = 3000
    stream_chunks: tuple[int, ...] = (400, 200, 200)
    stream_waves: int = 2
    stream_c64: int = 256
    workers_c64: int = 20_000
    vllm_prompts: int = 400


QUICK = Sizes(c1=1500, c64=3000, stream=30, repeats=1, startup_runs=2, records=20_000, ref_c1=500, ref_c64=1000,
              stream_chunks=(200, 100, 100), stream_waves=1, stream_c64=64, workers_c64=4000, vllm_prompts=100)


def log(text: str) -> None:
    """A progress line on stderr (the table alone goes to stdout)."""
    sys.stderr.write(f"perf: {text}\n")
    sys.stderr.flush()


def timed(name: str, action: Callable[[], Any]) -> Any:
    """Run one step, logging its duration."""
    start = time.perf_counter()
    value = action()
    log(f"{name}: {time.perf_counter() - start:.1f}s")
    return value


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of unsorted values."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))
    return ordered[index]


@dataclass
class Row:
    """One figure: label, speedbench value, target text, PASS/FAIL/-, reference value and ratio."""

    label: str
    value: str
    target: str = "-"
    status: str = "-"
    reference: str = "n/a"
    ratio: str = "n/a"


def judge(value: float | None, target: float, *, at_least: bool) -> str:
    """PASS or FAIL against a target (n/a without a value)."""
    if value is None:
        return "n/a"
    return "PASS" if (value >= target if at_least else value <= target) else "FAIL"


def fmt(value: float | None, spec: str) -> str:
    """Format a value or n/a."""
    return "n/a" if value is None else format(value, spec)


def ratio(ours: float | None, theirs: float | None) -> str:
    """speedbench / reference as `1.23x`, or n/a."""
    if ours is None or not theirs:
        return "n/a"
    return f"{ours / theirs:.2f}x"


def render(rows: list[Row]) -> str:
    """The one text table."""
    header = Row("figure", "speedbench", "target", "status", "reference", "ratio sb/ref")
    table = [header, *rows]
    names = ("label", "value", "target", "status", "reference", "ratio")
    widths = [max(len(getattr(row, name)) for row in table) for name in names]
    lines = []
    for index, row in enumerate(table):
        cells = [getattr(row, name) for name in names]
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines) + "\n"


def missed_targets(rows: list[Row], stream_missed: list[str]) -> list[str]:
    """Every missed target: table rows judged FAIL (or n/a where a target applies) and missed streaming loads."""
    return [row.label for row in rows if row.status in ("FAIL", "n/a") and row.target != "-"] + stream_missed


def machine_line() -> str:
    """nproc, CPU model, Python and kernel."""
    model = "unknown CPU"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}, {platform.platform()}"


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (bound, read and released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def accepts(port: int) -> bool:
    """Whether 127.0.0.1:port accepts a connection."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
        return True
    return False


def prompt_set(count: int, tag: str) -> Any:
    """`count` single-turn samples spread over the shipped category names."""
    from bench.prompts import PromptSet, Sample

    samples = tuple(
        Sample(
            id=f"{tag}-{index}",
            category=CATEGORIES[index % len(CATEGORIES)],
            turns=(f"Question {index}: explain speculative decoding to a new engineer in three sentences.",),
        )
        for index in range(count)
    )
    return PromptSet(samples=samples, source="perf", bench="qualitative", categories=CATEGORIES)


def write_dataset(path: Path, count: int) -> Path:
    """A local single-category JSONL prompt file of `count` rows (for `speedbench run --dataset`)."""
    with open(path, "w", encoding="utf-8") as handle:
        for index in range(count):
            row = {"question_id": f"q{index}", "category": "qa", "turns": [f"Question {index}: what is a draft model?"]}
            handle.write(json.dumps(row) + "\n")
    return path


def speedbench_cli() -> list[str]:
    """The `speedbench` console script of this venv (or `python -m bench`)."""
    script = Path(sys.executable).parent / "speedbench"
    return [str(script)] if script.exists() else [sys.executable, "-m", "bench"]


def cli_env(workdir: Path) -> dict[str, str]:
    """The environment of `speedbench run` subprocesses: bytecode cached (in the temp dir), as on a user's machine."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    return env


BUSY_LIMIT_S = 600.0
"""A busy-loop process (`--busy`) ends by itself after this long, should perf.py die without stopping it."""


@contextlib.contextmanager
def busy_cores(count: int) -> Iterator[None]:
    """`count` processes that keep one core each busy (a loaded machine) for the duration, stopped after."""
    code = f"import time\nend = time.monotonic() + {BUSY_LIMIT_S}\nwhile time.monotonic() < end:\n    pass\n"
    busy = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]
    try:
        yield
    finally:
        for process in busy:
            process.kill()
            process.wait()


@dataclass
class Measured:
    """What one measurement adds to the table: its rows and the notes that define them."""

    rows: list[Row]
    notes: list[str]
