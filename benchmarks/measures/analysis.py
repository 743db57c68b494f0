"""Analysis: load, summarise, compare and render 100,000 synthetic records (two run files)."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from measures.common import CATEGORIES, TARGETS, Measured, Row, judge


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




def analysis_rows(records: int, analysis: tuple[float, dict[str, float]]) -> Measured:
    """The analysis row and its note (the time of each step)."""
    total, steps = analysis
    row = Row(f"load+analyse+render {records:,} records (s)", f"{total:.2f}", "<= 5",
              judge(total, TARGETS["analysis_s"], at_least=False), "-", "-")
    note = ("analysis: two synthetic run files (baseline, speculative) of "
            f"{records // 2:,} results each (all {records:,} loaded, summarised, compared, rendered and "
            "paired with bootstrap CIs); " + ", ".join(f"{name} {sec:.2f}s" for name, sec in steps.items()) + ".")
    return Measured([row], [note])
