"""Start-up: seconds from exec of a `speedbench run` subprocess to its first request at nginx."""

from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path

from measures.common import OSL, TARGETS, Measured, Row, cli_env, judge, speedbench_cli, write_dataset
from measures.nginx import Nginx


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




def startup_rows(runs: int, startup: tuple[float, float]) -> Measured:
    """The start-up row and its note."""
    first, post = startup
    row = Row("start-up, exec to first request (s)", f"{first:.3f}", "<= 0.6",
              judge(first, TARGETS["startup_s"], at_least=False), "-", "-")
    note = (f"start-up: median of {runs} `speedbench run` subprocesses, exec to nginx's $msec of the first "
            f"request (GET /metrics), bytecode cached; to the first POST {post:.3f}s.")
    return Measured([row], [note])
