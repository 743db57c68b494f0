"""Peak RSS of a `speedbench run` subprocess at concurrency 64 (wait4's ru_maxrss)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from measures.common import OSL, TARGETS, Measured, Row, cli_env, judge, speedbench_cli, write_dataset
from measures.nginx import Nginx

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




def rss_rows(count: int, rss: tuple[float, float]) -> Measured:
    """The peak RSS row and its note."""
    peak, wall = rss
    row = Row(f"peak RSS, {count:,}-request run (MB)", f"{peak:.1f}", "<= 120",
              judge(peak, TARGETS["rss_mb"], at_least=False), "-", "-")
    return Measured([row], [f"RSS: wait4 ru_maxrss of a `speedbench run` subprocess, c=64, wall {wall:.1f}s."])
