"""How long writing a run file takes: Python's pure encoder (the reference's bytes) against the C-speed one.

Run: .venv/bin/python benchmarks/save_run.py [REQUESTS]   (default 20000)
A synthetic run of REQUESTS results (benchmarks/measures/analysis.py), written five times each way in turn:
`json.dump(indent=2, sort_keys=True)` into a file (how run files were written before) and `save_run` (to_dict,
`reference_json`, fsync, rename). Prints the median, min and max of each and checks the bytes are equal.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from measures.analysis import synthetic_run

from bench.records import save_run


def main() -> None:
    """Time both writers on one run and print the figures."""
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    run = synthetic_run(count, speculative=True, seed=1)
    folder = Path(tempfile.mkdtemp())
    before, after = folder / "python.json", folder / "save_run.json"

    def python_encoder() -> None:
        with before.open("w", encoding="utf-8") as handle:
            json.dump(run.to_dict(), handle, indent=2, sort_keys=True, allow_nan=False)

    times: dict[str, list[float]] = {"json.dump (pure Python)": [], "save_run (C-speed encoder)": []}
    for _ in range(5):
        for name, write in zip(times, (python_encoder, lambda: save_run(run, after)), strict=True):
            start = time.perf_counter()
            write()
            times[name].append(time.perf_counter() - start)
    assert before.read_bytes() == after.read_bytes(), "the two writers' bytes differ"
    print(f"{count:,} requests, {after.stat().st_size / 1e6:.1f} MB per run file, bytes identical")
    for name, values in times.items():
        print(f"  {name}: median {statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})")


if __name__ == "__main__":
    main()
