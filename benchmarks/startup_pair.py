"""Start-up of two checkouts side by side: `speedbench --help`, `speedbench run --help` and `import bench.cli`.

Each command runs from each checkout with this interpreter, `PYTHONPATH` naming the checkout (it comes before an
installed package on `sys.path`), the two taken in turn (before, after, before, ...) after two warm-up runs each
(bytecode caches written). Prints each command's minimum and median wall time per checkout and the median of the
paired after/before ratios, the figure to read on a shared machine.

    .venv/bin/python benchmarks/startup_pair.py --before ../speedbench-old --after . --pairs 40
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

CASES = {
    "speedbench --help": ["-m", "bench", "--help"],
    "speedbench run --help": ["-m", "bench", "run", "--help"],
    "python -c 'import bench.cli'": ["-c", "import bench.cli"],
}
"""Each command timed, as the arguments of the interpreter."""


def once(arguments: list[str], tree: Path) -> float:
    """Seconds of one whole run of the interpreter with `arguments`, the package taken from `tree`."""
    start = time.perf_counter()
    subprocess.run([sys.executable, *arguments], cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree)),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def paired_times(arguments: list[str], before: Path, after: Path, pairs: int) -> tuple[list[float], list[float]]:
    """The wall times of `pairs` runs from each checkout, taken in turn after two warm-up runs each."""
    for tree in (before, after):
        once(arguments, tree), once(arguments, tree)
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(pairs):
        times[0].append(once(arguments, before))
        times[1].append(once(arguments, after))
    return times


def main() -> int:
    """Time every command from both checkouts and print the Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the checkout measured first in each pair")
    parser.add_argument("--after", type=Path, required=True, help="the checkout measured second in each pair")
    parser.add_argument("--pairs", type=int, default=40, help="timed pairs per command (default: 40)")
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error(f"--pairs must be at least 1, not {args.pairs}")
    for tree in (args.before, args.after):
        if not (tree / "bench" / "__init__.py").is_file():
            parser.error(f"{tree} holds no bench package")
    print(f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, Python "
          f"{platform.python_version()}; {args.pairs} pairs per command")
    print("| command | before min | before median | after min | after median | after/before (median paired ratio) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, arguments in CASES.items():
        before, after = paired_times(arguments, args.before.resolve(), args.after.resolve(), args.pairs)
        ratio = statistics.median(a / b for a, b in zip(after, before, strict=True))
        print(f"| `{name}` | {min(before) * 1e3:.0f} ms | {statistics.median(before) * 1e3:.0f} ms | "
              f"{min(after) * 1e3:.0f} ms | {statistics.median(after) * 1e3:.0f} ms | {ratio:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
