"""vLLM's `bench serve` client on the same static stream as speedbench: streamed chunks/s at concurrency 64.

It runs from the vLLM environment (`make vllm-env` builds `.venv-vllm`); without it the row is skipped and
says why. `bench serve` needs a tokenizer for its random prompts: a Hugging Face folder converted from a
GGUF under speedbench's cache (`make test-vllm` makes one), so the row is skipped without that too.
chunks/s = the content chunks of the completed streams over `bench serve`'s own duration; every stream is
the same pre-generated 1,000-chunk answer, and its usage says so, so tokens and chunks are one figure.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from measures.common import SSE_CHUNKS, Measured, Row, Sizes, fmt, judge, log, ratio


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


def bench_serve(python: Path, tokenizer: Path, base: str, workdir: Path, prompts: int) -> dict[str, Any]:
    """Run `vllm bench serve` (openai-chat, random prompts, concurrency 64) against the stream; its result JSON."""
    result = workdir / "vllm-bench-serve.json"
    command = [
        str(python.parent / "vllm"), "bench", "serve", "--backend", "openai-chat", "--base-url", base,
        "--endpoint", "/sse/v1/chat/completions", "--model", "gemma", "--tokenizer", str(tokenizer),
        "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", str(SSE_CHUNKS),
        "--num-prompts", str(prompts), "--max-concurrency", "64", "--ignore-eos", "--disable-tqdm",
        "--save-result", "--result-dir", str(workdir), "--result-filename", result.name,
    ]
    subprocess.run(command, capture_output=True, timeout=600, check=True, env={"HF_HUB_OFFLINE": "1", "PATH": ""})
    return json.loads(result.read_text(encoding="utf-8"))


def vllm_chunks_per_s(report: dict[str, Any]) -> float:
    """Content chunks per second of a `bench serve` result (completed streams x chunks over its duration)."""
    return report["completed"] * SSE_CHUNKS / report["duration"]


VLLM_MULTIPLE = 1.5
"""speedbench's streamed chunks/s at concurrency 64 is to reach this multiple of `bench serve`'s."""


def measure_vllm(base: str, sizes: Sizes, workdir: Path) -> tuple[float | None, str]:
    """(`bench serve`'s streamed chunks/s at c=64 or None, what was run or why it was skipped)."""
    python, reason = vllm_unavailable()
    if python is None:
        return None, f"skipped: {reason}"
    tokenizer = tokenizer_folder()
    if tokenizer is None:
        return None, "skipped: no converted tokenizer folder under speedbench's cache (`make test-vllm` makes one)"
    try:
        report = bench_serve(python, tokenizer, base, workdir, sizes.vllm_prompts)
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as exc:
        log(f"vllm bench serve failed: {exc.__class__.__name__}: {str(exc)[:300]}")
        return None, f"skipped: `vllm bench serve` failed ({exc.__class__.__name__})"
    if not report.get("completed") or not report.get("duration"):
        return None, "skipped: `vllm bench serve` completed no request"
    return vllm_chunks_per_s(report), (
        f"`vllm bench serve --backend openai-chat --max-concurrency 64` ({sizes.vllm_prompts} prompts, random "
        f"dataset) on the same nginx stream; {report['completed']} completed"
    )


def vllm_rows(ours: float, theirs: float | None, how: str, streams: int) -> Measured:
    """speedbench's streamed chunks/s at c=64 beside `bench serve`'s, judged against the multiple."""
    if theirs is None:
        row = Row("stream chunks/s, c=64 (vs vLLM bench serve)", f"{ours:,.0f}", f">= {VLLM_MULTIPLE:g}x vLLM",
                  "-", "n/a", "n/a")
    else:
        row = Row("stream chunks/s, c=64 (vs vLLM bench serve)", f"{ours:,.0f}", f">= {VLLM_MULTIPLE:g}x vLLM",
                  judge(ours / theirs, VLLM_MULTIPLE, at_least=True), fmt(theirs, ",.0f"), ratio(ours, theirs))
    note = (f"stream chunks/s at c=64: speedbench over {streams} x {SSE_CHUNKS}-chunk streams at concurrency 64 "
            f"(median of the runs, runner elapsed_s); vLLM: {how}.")
    return Measured([row], [note])
