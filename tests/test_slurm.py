"""docs/scaling.md's Slurm example, run as written on a real one-node Slurm cluster (`make test-slurm`).

The two shell blocks of the page's Slurm section (the job script and the submit lines) are read from the page,
the script saved as `shards.sbatch`, the submit lines run by bash; the shards drive a loopback fake server. The
merged run must hold the unsharded run's sample set and pass `compare`, and every daemon started must be gone.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.records import load_run
from tests.fakeserver import FakeServer, FakeState
from tests.slurm import MISSING, missing_tools, one_node_cluster

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slurm


def _slurm_blocks() -> tuple[str, str]:
    """The job script and the submit lines of docs/scaling.md's Slurm section."""
    text = (ROOT / "docs" / "scaling.md").read_text(encoding="utf-8")
    section = text[text.index("### Slurm"):]
    section = section[: section.find("\n## ") if "\n## " in section else len(section)]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2, "docs/scaling.md's Slurm section should hold the job script and the submit lines"
    return blocks[0], blocks[1]


@pytest.fixture
def cluster():
    missing = missing_tools()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{MISSING} (missing: {', '.join(missing)}); CI=true requires the Slurm tier")
        pytest.skip(f"{MISSING} (missing: {', '.join(missing)})")
    with one_node_cluster(cpus=4) as running:
        yield running
    assert not running.running(), f"daemons still running after stop: {running.running()}"


def test_the_docs_slurm_example_runs_as_written_and_merges_into_the_unsharded_run(cluster, tmp_path: Path) -> None:
    script, submit = _slurm_blocks()
    assert "srun -n 4" in script and "--start-at" in script and "afterok" in submit
    work = tmp_path / "work"
    work.mkdir()
    (work / "shards.sbatch").write_text(script, encoding="utf-8")
    server = FakeServer(FakeState())
    server.start()
    try:
        env = {**cluster.env, "URL": server.url, "LIMIT": "1", "OSL": "8",
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{cluster.env['PATH']}"}
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", submit], cwd=work, env=env, capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        merge_job = done.stdout.split()[-1]
        state = cluster.wait_for(merge_job, timeout=240)
        logs = {path.name: path.read_text(errors="replace") for path in work.glob("*.log")}
        assert state == "COMPLETED", f"merge job {merge_job}: {state}; logs: {logs}"
        assert (work / "run.json").exists(), logs
        whole = subprocess.run([sys.executable, "-m", "bench", "run", "--url", server.url, "--limit", "1", "--osl",
                                "8", "--concurrency", "64", "--quiet", "--output", "whole.json"], cwd=work,
                               capture_output=True, text=True, timeout=120, check=False)
        assert whole.returncode == 0, whole.stderr
        compared = subprocess.run([sys.executable, "-m", "bench", "compare", "--baseline", "whole.json",
                                   "--speculative", "run.json"], cwd=work, capture_output=True, text=True,
                                  timeout=120, check=False)
    finally:
        server.stop()
    assert compared.returncode == 0, compared.stderr
    assert compared.stdout.startswith("Comparison: baseline=whole.json speculative=run.json")
    merged, unsharded = load_run(work / "run.json"), load_run(work / "whole.json")
    assert sorted(result.key for result in merged.results) == sorted(result.key for result in unsharded.results)
    assert len(merged.results) == unsharded.selected_samples > 4
    assert merged.config["concurrency"] == unsharded.config["concurrency"] == 64
    shards = [load_run(path) for path in sorted((work / "shards").glob("shard-*.json"))]
    assert len(shards) == 4 and len({shard.meta["start_at"] for shard in shards}) == 1  # one shared start
