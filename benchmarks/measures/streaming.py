"""The streaming load rows of `make perf`: client ITL error against a server's own send gaps, beside a floor.

A loopback server process (`stream_server.py`) streams pre-generated llama.cpp-shaped SSE on a known
schedule and logs `perf_counter_ns()` after each content chunk's send(). Two receivers are driven against
it in the same run, one after the other: the floor (a minimal epoll loop in this process that only reads
the sockets and timestamps content chunks, no HTTP or JSON parsing) and speedbench's runner
(`run_benchmark(stream=True)`). For each stream the receiver's gaps between content chunks are compared
with the server's gaps between the sends of the same chunks; the error is |client gap - server gap|.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import resource
import select
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from measures.common import Sizes, busy_cores, percentile, timed

SERVER = Path(__file__).resolve().parent / "stream_server.py"
CONTENT_MARKER = b'"delta":{"content"'
DONE_MARKER = b"data: [DONE]"


@dataclass(frozen=True)
class Load:
    """One load point: concurrent streams, chunks per second per stream, chunks per stream, streams per slot."""

    streams: int
    rate: int
    chunks: int
    waves: int

    @property
    def interval_us(self) -> int:
        """Microseconds between a stream's chunks."""
        return 1_000_000 // self.rate

    @property
    def label(self) -> str:
        """`64x200/s`."""
        return f"{self.streams}x{self.rate}/s"

    @property
    def offered(self) -> int:
        """Chunks per second offered by the server (streams x rate)."""
        return self.streams * self.rate


@dataclass
class Outcome:
    """What one receiver made of one load point."""

    errors_ms: list[float] = field(default_factory=list)
    chunks: int = 0
    lost: int = 0
    streams: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    note: str = ""
    lag: dict[str, Any] | None = None
    cpu_wall_s: float = 0.0
    merge_warned: bool = False

    @property
    def chunks_per_s(self) -> float:
        """Content chunks received per second of the receiving window (first request sent to last byte)."""
        return self.chunks / self.wall_s if self.wall_s else 0.0

    @property
    def cpu_share(self) -> float:
        """Client CPU seconds per wall second of what the CPU was measured over (1.0 = one core busy)."""
        wall = self.cpu_wall_s or self.wall_s
        return self.cpu_s / wall if wall else 0.0


STREAM_TARGETS = {
    # streams x chunks/s per stream: (p50 ms or None, p99 ms, floor multiple for p99, no chunk may be lost)
    (64, 200): (0.1, 1.0, 2.0, False),
    (256, 100): (None, 3.0, 2.0, True),
    (512, 100): (None, 3.0, 2.0, True),
}
"""The streaming targets: ITL error (|client gap - server send gap|) p99 passes under the absolute bound or
within the floor multiple of the floor's p99 measured in the same run; 512 x 100/s is a speculative
H100/H200 server's load at concurrency 512 (llama.cpp sends one chunk per token)."""


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its reaped children (worker processes) so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class StreamServer:
    """The schedule server as a child process; `stop()` returns its per-stream send log."""

    def __init__(self, workdir: Path, load: Load, tag: str) -> None:
        """Prepare (not start) a server for `load`."""
        self.port_file = workdir / f"{tag}.port"
        self.log_file = workdir / f"{tag}.log"
        self.load = load
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> int:
        """Start the server and return its port."""
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), str(self.port_file), str(self.log_file), str(self.load.chunks),
             str(self.load.interval_us)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 10.0
        while not self.port_file.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"stream server did not start: {self.process.stderr.read()[-500:]!r}")
            time.sleep(0.01)
        self.port = int(self.port_file.read_text())
        return self.port

    def stop(self) -> dict[str, list[int]]:
        """Stop the server; {stream key: send times (ns) of its content chunks}."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=20.0)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        sent: dict[str, list[int]] = {}
        if self.log_file.exists():
            for line in self.log_file.read_text(encoding="utf-8").splitlines():
                entry = json.loads(line)
                sent[entry["key"]] = entry["sent_ns"]
        return sent


def _request(key: str, chunks: int) -> bytes:
    """A streamed chat request whose last user message is `key`."""
    body = json.dumps({"messages": [{"role": "user", "content": key}], "max_tokens": chunks, "stream": True}).encode()
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


def floor_receive(port: int, load: Load, prefix: str) -> tuple[dict[str, list[int]], float, float]:
    """The floor: one epoll loop over `load.streams` keep-alive sockets, `load.waves` streams each.

    It reads each socket, takes `perf_counter_ns()` once per recv and gives that time to every content
    chunk the recv completed (counted by a marker, no HTTP or JSON parsing). Returns ({key: arrival ns of
    each content chunk}, wall seconds, CPU seconds).
    """
    arrivals: dict[str, list[int]] = {}
    poller = select.epoll()
    socks: dict[int, list[Any]] = {}  # fileno -> [socket, slot, wave, key, carry]
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    for slot in range(load.streams):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = f"{prefix}-{slot}-0"
        arrivals[key] = []
        sock.sendall(_request(key, load.chunks))
        sock.setblocking(False)
        socks[sock.fileno()] = [sock, slot, 0, key, b""]
        poller.register(sock.fileno(), select.EPOLLIN)
    open_streams = load.streams
    while open_streams:
        for fileno, _mask in poller.poll(5.0):
            state = socks[fileno]
            try:
                data = state[0].recv(262144)
            except BlockingIOError:
                continue
            now = time.perf_counter_ns()
            if not data:
                raise RuntimeError("floor: the server closed a connection")
            window = state[4] + data
            count = window.count(CONTENT_MARKER) - state[4].count(CONTENT_MARKER)
            if count:
                arrivals[state[3]].extend([now] * count)
            state[4] = window[-40:]
            if DONE_MARKER in window:
                state[2] += 1
                state[4] = b""
                if state[2] >= load.waves:
                    poller.unregister(fileno)
                    state[0].close()
                    open_streams -= 1
                    continue
                state[3] = f"{prefix}-{state[1]}-{state[2]}"
                arrivals[state[3]] = []
                state[0].setblocking(True)
                state[0].sendall(_request(state[3], load.chunks))
                state[0].setblocking(False)
    poller.close()
    return arrivals, time.perf_counter() - wall0, cpu_seconds() - cpu0


def gap_errors_ms(sent_ns: list[int], client_gaps_s: list[float]) -> list[float]:
    """|client gap - server gap| in ms for each pair of consecutive content chunks (both lists in order)."""
    server_gaps = [(later - earlier) / 1e9 for earlier, later in itertools.pairwise(sent_ns)]
    return [abs(client - server) * 1000.0 for client, server in zip(client_gaps_s, server_gaps, strict=False)]


def floor_outcome(port_server: StreamServer, load: Load, prefix: str) -> Outcome:
    """Run the floor against a started server and compare with its log (the server is stopped)."""
    arrivals, wall, cpu = floor_receive(port_server.port, load, prefix)
    sent = port_server.stop()
    outcome = Outcome(wall_s=wall, cpu_s=cpu)
    for key, times in arrivals.items():
        outcome.streams += 1
        outcome.chunks += len(times)
        server = sent.get(key, [])
        outcome.lost += max(0, len(server) - len(times))
        gaps = [(later - earlier) / 1e9 for earlier, later in itertools.pairwise(times)]
        outcome.errors_ms.extend(gap_errors_ms(server, gaps))
    return outcome


def runner_outcome(port_server: StreamServer, load: Load, prefix: str, workdir: Path, **settings: Any) -> Outcome:
    """Run speedbench's runner (stream=True) against a started server and compare (the server is stopped).

    `settings` are further RunConfig fields (`loop`, `workers`), passed only when given.
    """
    from bench.prompts import PromptSet, Sample
    from bench.runner import RunConfig, SilentProgress, run_benchmark

    keys = [f"{prefix}-{index}" for index in range(load.streams * load.waves)]
    samples = tuple(Sample(id=key, category="qa", turns=(key,)) for key in keys)
    prompts = PromptSet(samples=samples, source="perf", bench="qualitative", categories=("qa",))
    config = RunConfig(
        url=f"http://127.0.0.1:{port_server.port}/v1", osl=load.chunks, concurrency=load.streams, stream=True,
        label=prefix, timeout=60.0, per_sample_metrics=False, **settings,
    )
    output = workdir / f"{prefix}.json"
    cpu0 = cpu_seconds()
    run, interrupted = run_benchmark(prompts, config, output=output, progress=SilentProgress(),
                                     install_signal_handlers=False, force=True)
    cpu = cpu_seconds() - cpu0
    sent = port_server.stop()
    timed = [result for result in run.results if result.ok and result.sent_s is not None]
    window = (
        max(result.sent_s + result.latency_s for result in timed) - min(result.sent_s for result in timed)
        if timed else float(run.meta["elapsed_s"])
    )
    outcome = Outcome(wall_s=window, cpu_s=cpu, lag=run.meta.get("client_lag"), cpu_wall_s=float(run.meta["elapsed_s"]),
                      merge_warned=any("gap between streamed chunks" in warning for warning in run.info.warnings))
    if interrupted or run.failed_samples:
        first = next((result.error for result in run.results if result.error), None)
        outcome.note = f"{run.failed_samples} failed samples; first error: {first}"
    for result in run.results:
        if not result.ok:
            continue
        outcome.streams += 1
        received = len(result.itl_s) + 1 if result.ttft_s is not None else 0
        outcome.chunks += received
        server = sent.get(result.id, [])
        outcome.lost += max(0, len(server) - received)
        outcome.errors_ms.extend(gap_errors_ms(server, list(result.itl_s)))
    outcome.lost += sum(len(sent.get(key, [])) for key in keys if key not in {r.id for r in run.results if r.ok})
    os.unlink(output)
    return outcome


def measure_load(load: Load, workdir: Path, tag: str, **settings: Any) -> tuple[Outcome, Outcome]:
    """(floor, speedbench) at one load point, each against a fresh server process."""
    floor = measure_floor(load, workdir, f"{tag}-floor")
    return floor, measure_client(load, workdir, f"{tag}-sb", **settings)


def measure_floor(load: Load, workdir: Path, tag: str) -> Outcome:
    """The floor at one load point, against a fresh server process."""
    server = StreamServer(workdir, load, tag)
    server.start()
    try:
        return floor_outcome(server, load, tag)
    finally:
        server.stop()


def measure_client(load: Load, workdir: Path, tag: str, **settings: Any) -> Outcome:
    """speedbench's runner at one load point, against a fresh server process (`settings` as runner_outcome's)."""
    server = StreamServer(workdir, load, tag)
    server.start()
    try:
        return runner_outcome(server, load, tag, workdir, **settings)
    finally:
        server.stop()


def measure_streaming(
    sizes: Sizes, workdir: Path, busy: int = 0, **settings: Any
) -> list[tuple[Load, Outcome, Outcome]]:
    """(load, floor, speedbench) at each streaming load point, with `busy` cores kept busy (`settings` as
    runner_outcome's)."""
    streaming = []
    with busy_cores(busy):
        for (streams, rate), chunks in zip(STREAM_TARGETS, sizes.stream_chunks, strict=True):
            load = Load(streams, rate, chunks, sizes.stream_waves)
            floor_and_client = timed(f"stream load {load.label}",
                                     lambda load=load: measure_load(load, workdir, f"load{load.streams}", **settings))
            streaming.append((load, *floor_and_client))
    return streaming



def stream_table(streaming: list[tuple[Load, Outcome, Outcome]]) -> tuple[str, list[str], list[str]]:
    """The streaming load table (floor, speedbench, reference per load point), its notes and the missed targets."""
    header = ["load (chunks/s)", "receiver", "ITL err p50 ms", "p99 ms", "p99.9 ms", "max ms", "chunks/s", "CPU cores",
              "lost", "p99/floor", "target", "status"]
    table = [header]
    missed: list[str] = []
    notes: list[str] = []
    for load, floor, client in streaming:
        p50_target, p99_target, multiple, lossless = STREAM_TARGETS[(load.streams, load.rate)]
        floor_p99 = percentile(floor.errors_ms, 0.99) if floor.errors_ms else math.nan
        name = f"{load.label} ({load.offered:,})"
        for receiver, outcome in (("floor", floor), ("speedbench", client)):
            p50 = percentile(outcome.errors_ms, 0.5) if outcome.errors_ms else math.nan
            p99 = percentile(outcome.errors_ms, 0.99) if outcome.errors_ms else math.nan
            target, status = "-", "-"
            if receiver == "speedbench":
                checks = [p99 <= p99_target or p99 <= multiple * floor_p99]
                parts = [f"p99 <= {p99_target:g} or <= {multiple:g}x floor"]
                if p50_target is not None:
                    checks.append(p50 <= p50_target)
                    parts.insert(0, f"p50 <= {p50_target:g}")
                if lossless:
                    checks.append(outcome.lost == 0)
                    parts.append("0 lost")
                checks.append(not outcome.note and bool(outcome.errors_ms))
                target, status = "; ".join(parts), "PASS" if all(checks) else "FAIL"
                if status == "FAIL":
                    missed.append(f"streaming {load.label}")
                if outcome.note:
                    notes.append(f"speedbench at {load.label}: {outcome.note}")
                if outcome.lag:
                    lag = outcome.lag
                    notes.append(
                        f"speedbench's own event-loop lag at {load.label} (run meta client_lag): p50 "
                        f"{lag['p50_ms']:.2f} ms, p99 {lag['p99_ms']:.2f} ms, max {lag['max_ms']:.1f} ms over "
                        f"{lag['samples']} samples; the run warned of merged chunks: "
                        f"{'yes' if outcome.merge_warned else 'no'}"
                    )
            ratio_text = f"{p99 / floor_p99:.2g}x" if floor_p99 and not math.isnan(floor_p99) else "n/a"
            table.append([
                name, receiver, f"{p50:.3f}", f"{p99:.3f}",
                f"{percentile(outcome.errors_ms, 0.999):.3f}" if outcome.errors_ms else "nan",
                f"{max(outcome.errors_ms, default=math.nan):.2f}",
                f"{outcome.chunks_per_s:,.0f}", f"{outcome.cpu_share:.2f}", str(outcome.lost),
                ratio_text if receiver != "floor" else "1.0x", target, status,
            ])
        table.append([name, "reference", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "-", "-"])
    widths = [max(len(row[index]) for row in table) for index in range(len(header))]
    lines = []
    for index, row in enumerate(table):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    notes.extend([
        "streaming: a loopback server process (benchmarks/measures/stream_server.py) sends pre-generated "
        "llama.cpp-shaped SSE, one event per send(), chunk k of a stream due (k + phase) x 1/rate after its request "
        "(phases spread so streams do not tick together), and logs perf_counter_ns() after each content chunk's "
        "send(); ITL error = |receiver's gap - server's send gap| for every pair of consecutive content chunks of "
        "every stream, "
        + ", ".join(f"{load.label}: {load.streams * load.waves} streams of {load.chunks} chunks"
                    for load, _, _ in streaming) + ".",
        "floor: a minimal epoll loop in the same process that only reads the sockets and timestamps each recv "
        "(content chunks counted by a byte marker, no HTTP or JSON parsing), run against a fresh server just before "
        "speedbench; speedbench: run_benchmark(stream=True, concurrency=streams), its records' itl_s, whose times "
        "are the kernel's receive times of the reads (SO_TIMESTAMPNS), so its error can be below the floor's, "
        "which timestamps in user space. chunks/s = content chunks over the receiving window (floor: connect to "
        "last chunk; speedbench: first request sent to last [DONE]). CPU cores = the receiving process's "
        "user+system CPU seconds over the receiving wall time (speedbench: the run's elapsed_s, which adds the "
        "run's set-up and the writing of its file).",
        "reference: n/a for streaming - llama.cpp's speed_bench.py always sends \"stream\": false and reads whole "
        "JSON answers, so it cannot stream.",
    ])
    return "\n".join(lines) + "\n", notes, missed


