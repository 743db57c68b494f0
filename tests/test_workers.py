"""Worker processes: one run over N client processes, merged into one run file that compare reads unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench._errors import BenchError
from bench.analysis import compare
from bench.records import load_run
from bench.runner import RunConfig, run_benchmark, run_workers, worker_shares
from tests.conftest import make_prompts
from tests.fakeserver import FakeServer


def test_the_concurrency_is_split_over_the_workers() -> None:
    assert worker_shares(64, 2) == [32, 32]
    assert worker_shares(5, 3) == [2, 2, 1]
    assert worker_shares(1, 1) == [1]
    with pytest.raises(BenchError, match="--workers 3 exceeds --concurrency 2"):
        worker_shares(2, 3)
    with pytest.raises(BenchError, match="--workers must be >= 1"):
        worker_shares(2, 0)


def test_two_workers_send_every_sample_once_and_merge_into_one_run(fake_server: FakeServer, fake_state,
                                                                   tmp_path: Path) -> None:
    fake_state.delay_s = 0.05  # each worker's timed part lasts long enough for its loop-lag monitor to sample
    prompts = make_prompts(per_category=4)
    config = RunConfig(url=fake_server.url, osl=8, concurrency=4, workers=2, label="w2")
    _, interrupted = run_workers(prompts, config, output=tmp_path / "w2.json")
    assert not interrupted
    loaded = load_run(tmp_path / "w2.json")
    assert sorted(result.id for result in loaded.results) == sorted(sample.id for sample in prompts.samples)
    assert loaded.config["concurrency"] == 4 and loaded.config["workers"] == 2 and loaded.config["label"] == "w2"
    workers = loaded.meta["workers"]
    assert [worker["index"] for worker in workers] == [0, 1]
    assert all(worker["client_lag"] is not None for worker in workers)  # each worker's own loop-lag monitor
    assert len(fake_server.state.requests) == sum(len(sample.turns) for sample in prompts.samples)
    assert not list(tmp_path.glob(".workers-*"))  # the workers' own files are gone once merged

    single, _ = run_benchmark(prompts, RunConfig(url=fake_server.url, osl=8, concurrency=4), force=True)
    comparison = compare(single, loaded)
    assert comparison is not None


def test_workers_with_shard_or_resume_or_beyond_the_concurrency_are_refused_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    for extra, message in (
        (["--workers", "2", "--concurrency", "2", "--shard", "0/2"],
         "--workers cannot be combined with --shard, --start-at or --resume"),
        (["--workers", "3", "--concurrency", "2"], "--workers must be between 1 and --concurrency (2); got 3"),
        (["--shard", "2/2"], "--shard 2/2: needs 0 <= I < N"),
    ):
        done = subprocess.run([sys.executable, "-m", "bench", "run", "--url", "http://127.0.0.1:9", "--quiet", *extra],
                              cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and message in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_ctrl_c_stops_every_worker_and_keeps_what_they_finished(fake_server: FakeServer, fake_state, tmp_path) -> None:
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    fake_state.delay_s = 0.2  # 40 samples over 2 workers at concurrency 1 each: about 4 s, stopped early
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text("".join(json.dumps({"question_id": f"q{index}", "category": "qa", "turns": [f"q {index}"]})
                               + "\n" for index in range(40)))
    process = subprocess.Popen(
        [sys.executable, "-m", "bench", "run", "--url", fake_server.url, "--dataset", str(dataset), "--osl", "4",
         "--concurrency", "2", "--workers", "2", "--quiet", "--output", "w.json"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".workers-*/*.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.05)  # until the workers journal their first samples
    time.sleep(0.5)
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, out + err
    assert (tmp_path / "w.json").exists(), out + err
    run = load_run(tmp_path / "w.json")
    assert run.info.interrupted and 0 < len(run.results) < 40
    assert len({result.id for result in run.results}) == len(run.results)
    assert "continue with --resume" in out or "interrupted" in out
