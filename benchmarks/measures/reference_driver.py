"""Drive llama.cpp's `speed_bench.run_one` over a thread pool, as its main() does, on constructed samples.

Run by `perf.py` in the reference's own venv: `python reference_driver.py SPEED_BENCH_DIR URL N CONCURRENCY WARMUP`.
The reference loads prompts from the hub, which is not reachable here, so `datasets` is stubbed when it is
not installed (only `load_samples` uses it) and the samples are built locally. It prints one JSON object.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import math
import os
import statistics
import sys
import time
import types
from typing import Any, NoReturn

OSL = 64
TIMEOUT_S = 30.0


def _hub_unreachable(*args: Any, **kwargs: Any) -> NoReturn:
    """Stand-in for the hub loaders: perf.py never loads prompts from the hub."""
    raise RuntimeError("the hub is not reachable from the perf harness")


def _import_reference(folder: str) -> types.ModuleType:
    """Import speed_bench.py from its folder (stubbing `datasets` if it is missing)."""
    if importlib.util.find_spec("datasets") is None:
        stub = types.ModuleType("datasets")
        stub.load_dataset = _hub_unreachable  # type: ignore[attr-defined]
        stub.get_dataset_config_names = _hub_unreachable  # type: ignore[attr-defined]
        sys.modules["datasets"] = stub
    sys.path.insert(0, folder)
    import speed_bench

    return speed_bench


def _pool_run(sb: types.ModuleType, samples: list[Any], endpoint: str, concurrency: int) -> tuple[list[Any], float]:
    """The reference main()'s loop: submit run_one for every sample, collect as completed under tqdm."""
    from tqdm import tqdm

    extra_inputs = sb.parse_extra_inputs('{"temperature":0}')
    results: list[Any] = []
    with open(os.devnull, "w", encoding="utf-8") as sink:
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as executor:
            futures = [
                executor.submit(sb.run_one, sample, endpoint, None, OSL, extra_inputs, TIMEOUT_S)
                for sample in samples
            ]
            for future in tqdm(
                concurrent.futures.as_completed(futures), total=len(futures), desc="speed_bench", unit="sample",
                file=sink,
            ):
                results.append(future.result())
        elapsed = time.perf_counter() - started
    return results, elapsed


def _nearest_rank(ordered: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile of sorted values (None when empty)."""
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def main(argv: list[str]) -> int:
    """Run a warm-up and a timed pass; print requests, failures, elapsed and latency figures as JSON."""
    folder, url, count, concurrency, warmup = argv[0], argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    sb = _import_reference(folder)
    endpoint = sb.normalize_base_url(url) + "/chat/completions"
    samples = [
        sb.Sample(id=f"ref-{index}", category="qa", turns=[f"Question {index}: what is speculative decoding?"])
        for index in range(count)
    ]
    if warmup:
        _pool_run(sb, samples[:warmup], endpoint, concurrency)
    results, elapsed = _pool_run(sb, samples, endpoint, concurrency)
    latencies = sorted(result.latency_s for result in results if result.ok)
    failed = [result for result in results if not result.ok]
    report = {
        "requests": len(results),
        "failed": len(failed),
        "first_error": failed[0].error if failed else None,
        "elapsed_s": elapsed,
        "mean_latency_s": statistics.mean(latencies) if latencies else None,
        "p50_latency_s": _nearest_rank(latencies, 0.5),
        "p99_latency_s": _nearest_rank(latencies, 0.99),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
