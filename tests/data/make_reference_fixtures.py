"""Write reference fixtures with llama.cpp's own speed_bench code (run once, by hand).

Usage: python tests/data/make_reference_fixtures.py PATH/TO/llama.cpp/tools/server/bench/speed-bench
It needs the reference's imports (requests, tqdm, datasets). Nothing here is imported by the tests.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main() -> None:
    """Build two synthetic runs with the reference's own functions and record its compare output."""
    reference_dir = Path(sys.argv[1]).resolve()
    sys.path.insert(0, str(reference_dir))
    import speed_bench  # the reference
    import speed_bench_compare

    rng = random.Random(7)
    categories = ["coding", "math", "qa", "rag", "writing"]

    def results(spec: bool) -> list:
        out = []
        for category in categories:
            for index in range(6):
                ok = not (category == "qa" and index == 5 and spec)
                draft = rng.randint(50, 400) if spec and category != "writing" else 0
                turns = 2 if index == 0 else 1
                tps = rng.uniform(15, 25) * (rng.uniform(1.1, 2.5) if spec else 1.0)
                out.append(
                    speed_bench.RequestResult(
                        id=f"{category}-{index:03d}", category=category, ok=ok, turns=turns,
                        latency_s=rng.uniform(1, 30) if ok else 0.5,
                        prompt_tokens=rng.randint(50, 900) if ok else 0,
                        completion_tokens=rng.randint(20, 512) if ok else 0, total_tokens=0,
                        finish_reason="stop" if ok else None,
                        draft_n=draft if ok else 0,
                        draft_n_accepted=int(draft * rng.uniform(0.1, 0.7)) if ok else 0,
                        prompt_ms=rng.uniform(10, 300) if ok else None,
                        predicted_ms=rng.uniform(500, 9000) if ok else None,
                        prompt_per_second=rng.uniform(200, 900) if ok else None,
                        predicted_per_second=tps if ok else None,
                        error=None if ok else "HTTP 500: boom",
                    )
                )
        return out

    for name, spec in (("baseline", False), ("speculative", True)):
        res = results(spec)
        summary = [speed_bench.summarize_group(c, [r for r in res if r.category == c]) for c in categories]
        summary.append(speed_bench.summarize_group("overall", res))
        args = argparse.Namespace(
            url="localhost:8080", model=None, bench="qualitative", category="all", osl=1024, concurrency=1,
            extra_inputs={"temperature": 0},
        )
        samples = [speed_bench.Sample(id=r.id, category=r.category, turns=["x"]) for r in res]
        speed_bench.save_output(str(HERE / f"reference_{name}.json"), args, samples, res, summary)
    os.chdir(HERE)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        speed_bench_compare.main(
            ["--baseline", "reference_baseline.json", "--speculative", "reference_speculative.json"]
        )
    (HERE / "reference_compare_stdout.txt").write_text(buffer.getvalue(), encoding="utf-8")
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        speed_bench.print_table(summary)
    (HERE / "reference_summary_stdout.txt").write_text(buffer.getvalue(), encoding="utf-8")


if __name__ == "__main__":
    main()
