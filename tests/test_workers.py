"""Worker processes: one run or one comparison over N client processes, joined into one run file and journal per
arm, measuring what one process would (the same samples, pairs, batches, arm orders and arrival offsets)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from bench import BenchError
from bench.analysis import compare
from bench.prompts import PromptSet, Sample
from bench.records import journal_path, load_run, read_journal
from bench.runner import (
    PER_PROCESS_IN_FLIGHT,
    Arm,
    RunConfig,
    RunOptions,
    block_plan,
    choose_workers,
    cores,
    job_key,
    run_arms,
    run_benchmark,
    seeded_order,
    strategy_for,
    worker_shares,
)
from tests.conftest import make_prompts
from tests.fakeserver import FakeServer, FakeState


def compare_arms(prompts, arms, *, seed=0, block_size=None, **options):
    strategy = strategy_for(arms[0].config, arms=len(arms), block_size=block_size, order_seed=seed)
    return run_arms(prompts, arms, strategy, RunOptions(**options))


def arm_order(seed, jobs, names):
    return seeded_order(seed, [job_key(job) for job in jobs], names)


def _qa(count: int) -> PromptSet:
    samples = tuple(Sample(id=f"q{index:02d}", category="qa", turns=(f"question {index}",)) for index in range(count))
    return PromptSet(samples=samples, source="test", bench="qualitative", categories=("qa",))


def test_the_concurrency_is_split_over_the_workers() -> None:
    assert worker_shares(64, 2) == [32, 32]
    assert worker_shares(5, 3) == [2, 2, 1]
    assert worker_shares(1, 1) == [1]
    with pytest.raises(BenchError, match="--workers 3 exceeds --concurrency 2"):
        worker_shares(2, 3)
    with pytest.raises(BenchError, match="--workers must be >= 1"):
        worker_shares(2, 0)


def test_auto_keeps_one_process_until_the_measured_per_process_limit() -> None:
    assert choose_workers(None, concurrency=1) == (1, "auto: 1 process (1 in flight against 256 per process, "
                                                      f"{cores()} cores)")
    assert choose_workers(None, concurrency=PER_PROCESS_IN_FLIGHT)[0] == 1
    assert choose_workers(None, concurrency=PER_PROCESS_IN_FLIGHT + 1)[0] == min(cores(), 2)
    assert choose_workers(None, concurrency=100 * PER_PROCESS_IN_FLIGHT)[0] == cores()
    assert choose_workers(None, concurrency=1, request_rate=50.0, open_loop=True)[0] == 1
    assert choose_workers(None, concurrency=1, request_rate=5.0, open_loop=True, max_concurrency=1000)[0] == min(
        cores(), 4)
    assert choose_workers(3, concurrency=8) == (3, None)
    assert choose_workers(None, concurrency=4096, single="--shard")[0] == 1
    with pytest.raises(BenchError, match="--workers 2: --until-decided runs in one process"):
        choose_workers(2, concurrency=4, single="--until-decided")


def test_two_workers_send_every_sample_once_and_join_into_one_run_and_one_journal(
    fake_server: FakeServer, fake_state, tmp_path: Path
) -> None:
    fake_state.delay_s = 0.05  # each worker's timed part lasts long enough for its loop-lag monitor to sample
    prompts = make_prompts(per_category=4)
    config = RunConfig(url=fake_server.url, osl=8, concurrency=4, workers=2, label="w2", repeat=2)
    _, interrupted = run_benchmark(prompts, config, output=tmp_path / "w2.json")
    assert not interrupted
    loaded = load_run(tmp_path / "w2.json")
    expected = [(sample.id, repeat) for repeat in range(2) for sample in prompts.samples]
    assert [(result.id, result.repeat) for result in loaded.results] == expected  # schedule order
    assert loaded.config["concurrency"] == 4 and loaded.config["workers"] == 2 and loaded.config["label"] == "w2"
    workers = loaded.meta["workers"]
    assert [worker["index"] for worker in workers] == [0, 1]
    assert all(worker["client_lag"] is not None for worker in workers)  # each worker's own loop-lag monitor
    assert len(fake_server.state.requests) == 2 * sum(len(sample.turns) for sample in prompts.samples)
    assert not list(tmp_path.glob(".workers-*"))  # the workers' own files are gone once joined
    header, journalled = read_journal(journal_path(tmp_path / "w2.json"))  # one journal, in schedule order
    assert [(result.id, result.repeat) for result in journalled] == expected
    assert header["sample_ids"] == [sample.id for sample in prompts.samples] and "shard" not in header
    assert header["config"]["concurrency"] == 4
    starts = sorted(result.sent_s for result in loaded.results)
    assert starts[0] < 0.05  # both workers count from one shared start, taken once both had set up

    single, _ = run_benchmark(prompts, RunConfig(url=fake_server.url, osl=8, concurrency=4, repeat=2), force=True)
    assert compare(single, loaded) is not None


def test_an_open_loop_over_workers_keeps_the_whole_runs_arrival_offsets(fake_server: FakeServer,
                                                                       tmp_path: Path) -> None:
    from bench.runner import arrival_schedule

    prompts = _qa(12)
    config = RunConfig(url=fake_server.url, osl=4, request_rate=20.0, arrival_seed=3, workers=2)
    run, _ = run_benchmark(prompts, config, output=tmp_path / "open.json")
    offsets = arrival_schedule(12, 20.0, seed=3).offsets_s
    due = {result.id: result.scheduled_s for result in run.results}
    first = min(due.values())
    for position, sample in enumerate(prompts.samples):  # each request at the offset one process gives it
        assert abs((due[sample.id] - first) - (offsets[position] - offsets[0])) < 0.001, sample.id


def _batches(run) -> dict[int, list[float]]:
    times: dict[int, list[float]] = defaultdict(list)
    for result in run.results:
        times[result.batch].extend((result.sent_s, result.sent_s + result.latency_s))
    return times


def test_an_interleaved_comparison_over_two_workers_keeps_the_pairs_batches_and_arm_order(tmp_path: Path) -> None:
    prompts = _qa(10)
    found = {}
    for workers in (1, 2):
        base, spec = FakeServer(FakeState(delay_s=0.02)), FakeServer(FakeState(delay_s=0.02, drafting=True))
        base.start()
        spec.start()
        try:
            arms = [Arm(name, RunConfig(url=server.url, osl=4, concurrency=4, workers=workers, label=name),
                            tmp_path / f"w{workers}" / f"{name}.json")
                    for name, server in (("baseline", base), ("speculative", spec))]
            found[workers], interrupted = compare_arms(prompts, arms, seed=5)
        finally:
            base.stop()
            spec.stop()
        assert not interrupted
    jobs = [(sample, 0) for sample in prompts.samples]
    for workers, runs in found.items():
        for name, run in runs.items():
            pairs = sorted((result.id, result.repeat, result.batch) for result in run.results)
            assert pairs == sorted((sample.id, 0, index // 4) for index, sample in enumerate(prompts.samples)), name
            assert run.config["concurrency"] == 4 and run.config["workers"] == workers
        base, spec = _batches(runs["baseline"]), _batches(runs["speculative"])
        for batch in range(3):
            order = arm_order(5, jobs[batch * 4:batch * 4 + 4], ["baseline", "speculative"])
            first, second = (base, spec) if order[0] == "baseline" else (spec, base)
            assert max(first[batch]) <= min(second[batch]) + 0.002, (workers, batch)  # one arm at a time
    header, _ = read_journal(journal_path(tmp_path / "w2" / "speculative.json"))
    assert header["interleaved"]["batch"] == 4 and header["config"]["workers"] == 2


def test_an_open_loop_ab_over_two_workers_keeps_the_schedule_and_blocks(fake_server: FakeServer, fake_state,
                                                                         tmp_path: Path) -> None:
    from bench.runner import arrival_schedule

    prompts = _qa(12)
    spec = FakeServer(FakeState(drafting=True))
    spec.start()
    try:
        arms = [Arm(name, RunConfig(url=server.url, osl=4, request_rate=40.0, arrival_seed=2, workers=2, label=name),
                        tmp_path / f"{name}.json")
                for name, server in (("baseline", fake_server), ("speculative", spec))]
        runs, interrupted = compare_arms(prompts, arms, seed=2, block_size=4)
    finally:
        spec.stop()
    assert not interrupted
    offsets = arrival_schedule(12, 40.0, seed=2).offsets_s
    blocks = block_plan(12, 4, ["baseline", "speculative"], 2)
    for name, run in runs.items():
        due = {result.id: (result.batch, result.scheduled_s) for result in run.results}
        assert sorted(due) == [sample.id for sample in prompts.samples]
        for block in blocks:
            ids = [prompts.samples[position].id for position in range(block.start, block.stop)]
            assert {due[sample_id][0] for sample_id in ids} == {block.index}, name
            start = due[ids[0]][1]
            for position, sample_id in zip(range(block.start, block.stop), ids, strict=True):
                gap = offsets[position] - offsets[block.start]
                assert abs(due[sample_id][1] - start - gap) < 0.001, (name, sample_id)  # due times, not send times


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("args", "message"), [
    (["run", "--url", "http://127.0.0.1:9", "--workers", "2", "--concurrency", "2", "--shard", "0/2"],
     "--workers 2: --shard runs in one process; drop --workers"),
    (["run", "--url", "http://127.0.0.1:9", "--workers", "3", "--concurrency", "2"],
     "--workers must be between 1 and --concurrency (2); got 3"),
    (["run", "--url", "http://127.0.0.1:9", "--workers", "3", "--request-rate", "5", "--max-concurrency", "2"],
     "--workers must be between 1 and --max-concurrency (2); got 3"),
    (["bench", "--base-url", "http://127.0.0.1:9", "--spec-url", "http://127.0.0.1:9", "--until-decided",
      "--workers", "2", "--concurrency", "2"], "--workers 2: --until-decided runs in one process; drop --workers"),
    (["bench", "--base-url", "http://127.0.0.1:9", "--spec-url", "http://127.0.0.1:9", "--workers", "3",
      "--concurrency", "2"], "--workers must be between 1 and --concurrency (2); got 3"),
])
def test_workers_that_cannot_hold_are_refused_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    done = _cli([*args, "--quiet"], tmp_path)
    assert done.returncode == 2 and message in done.stderr and done.stderr.count("\n") == 1, done.stderr


def _dataset(tmp_path: Path, count: int) -> Path:
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text("".join(json.dumps({"question_id": f"q{index}", "category": "qa", "turns": [f"q {index}"]})
                               + "\n" for index in range(count)))
    return dataset


_STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test():
    """Kill every `speedbench run` a test started, and its workers, whether the test passed or failed."""
    yield
    while _STARTED:
        process = _STARTED.pop()
        if process.poll() is None:
            children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
            workers = [int(pid) for pid in children.read_text().split()] if children.exists() else []
            for group in (process.pid, *workers):  # each worker leads a process group of its own
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGKILL)
            process.communicate()


def _start(fake_server: FakeServer, tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "bench", "run", "--url", fake_server.url, "--dataset", str(_dataset(tmp_path, 40)),
         "--osl", "4", "--concurrency", "2", "--workers", "2", "--quiet", "--output", "w.json", *extra],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    _STARTED.append(process)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".workers-*/*/*.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.05)  # until the workers journal their first samples
    time.sleep(0.5)
    return process


def test_ctrl_c_stops_every_worker_keeps_what_they_finished_and_resume_completes_it(
    fake_server: FakeServer, fake_state, tmp_path: Path
) -> None:
    fake_state.delay_s = 0.2  # 40 samples over 2 workers at concurrency 1 each: about 4 s, stopped early
    process = _start(fake_server, tmp_path)
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, out + err
    run = load_run(tmp_path / "w.json")
    assert run.info.interrupted and 0 < len(run.results) < 40
    assert len({result.id for result in run.results}) == len(run.results)
    assert "continue with --resume" in out
    _, journalled = read_journal(journal_path(tmp_path / "w.json"))
    assert sorted(result.id for result in journalled) == sorted(result.id for result in run.results)

    fake_state.delay_s = 0.0
    sent_before = len(fake_state.requests)
    done = _cli(["run", "--url", fake_server.url, "--dataset", str(tmp_path / "prompts.jsonl"), "--osl", "4",
                 "--concurrency", "2", "--workers", "2", "--quiet", "--output", "w.json", "--resume"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    resumed = load_run(tmp_path / "w.json")
    assert sorted(result.id for result in resumed.results) == sorted(f"q{index}" for index in range(40))
    assert len(fake_state.requests) - sent_before == 40 - len(run.results)  # only what had not finished


def test_a_killed_worker_loses_nothing_it_finished(fake_server: FakeServer, fake_state, tmp_path: Path) -> None:
    fake_state.delay_s = 0.1
    process = _start(fake_server, tmp_path)
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    workers = [int(pid) for pid in children]
    assert len(workers) == 2
    victim_journal = next(tmp_path.glob(".workers-*/worker-0/run.json.jsonl"))
    os.kill(workers[0], signal.SIGKILL)  # worker 0 dies without writing its run file
    out, err = process.communicate(timeout=60)
    assert process.returncode == 2 and "worker(s) 0 of 2 failed (exit -9)" in err and "w.json" in err, out + err
    _, recorded = read_journal(journal_path(tmp_path / "w.json"))
    run = load_run(tmp_path / "w.json")
    assert run.info.interrupted
    from_victim = {result.id for result in run.results if int(result.id[1:]) % 2 == 0}
    assert from_victim and len(run.results) > len(from_victim)  # the killed worker's journal and the other's run
    assert sorted(result.id for result in recorded) == sorted(result.id for result in run.results)
    assert not victim_journal.exists()  # joined into the output, the private folder removed


def _running(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


def test_workers_stop_when_their_parent_is_killed(fake_server: FakeServer, fake_state, tmp_path: Path) -> None:
    fake_state.delay_s = 0.2  # 40 samples over 2 workers at concurrency 1 each: about 4 s, killed early
    process = _start(fake_server, tmp_path)
    workers = [int(pid) for pid in Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()]
    assert len(workers) == 2
    os.kill(process.pid, signal.SIGKILL)  # no chance to forward a stop
    process.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while any(map(_running, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if _running(pid)]
    kept = [read_journal(path)[1] for path in tmp_path.glob(".workers-*/worker-*/run.json.jsonl")]
    assert sum(len(results) for results in kept) > 0  # what the workers finished is kept in their journals


def test_each_workers_lag_note_is_said_once_naming_the_worker(fake_server: FakeServer, monkeypatch,
                                                              tmp_path: Path) -> None:
    from bench.runner import LagMonitor, LineProgress

    monkeypatch.setattr(LagMonitor, "warning", lambda self: "the client's event loop stalled (as if)")  # forked on
    said: list[str] = []
    config = RunConfig(url=fake_server.url, osl=4, concurrency=2, workers=2)
    arms = [Arm(name, config, tmp_path / f"{name}.json") for name in ("baseline", "speculative")]
    runs, _ = compare_arms(make_prompts(), arms, progress=LineProgress(said.append))
    for index in (0, 1):
        note = f"speedbench: warning: worker {index}/2: the client's event loop stalled (as if)\n"
        assert said.count(note) == 1, said  # once for both arms: one monitor per worker process
        assert all(note.split("warning: ")[1].strip() in run.info.warnings for run in runs.values())
    assert any(line.startswith("interleaved baseline vs speculative (2 workers): 8/8 done, 0 failed") for line in said)


def _fake_pair() -> tuple[FakeServer, FakeServer]:
    servers = FakeServer(FakeState(delay_s=0.01)), FakeServer(FakeState(delay_s=0.01, drafting=True))
    for server in servers:
        server.start()
    return servers


def test_bench_and_sweep_with_workers_write_the_usual_folders(tmp_path: Path, capsys) -> None:
    from bench.cli import main

    base, spec = _fake_pair()
    try:
        code = main(["bench", "--base-url", base.url, "--spec-url", spec.url, "--limit", "1", "--osl", "4",
                     "--concurrency", "2", "--workers", "2", "--no-logprobs", "--results-dir", str(tmp_path / "b"),
                     "--quiet"])
        printed = capsys.readouterr().out
        assert code == 0, printed
        assert "2 client processes, each sending both arms' requests for its slice" in printed
        (folder,) = (tmp_path / "b").iterdir()
        for side in ("baseline", "speculative"):
            run = load_run(folder / f"{side}.json")
            assert run.config["workers"] == 2 and len(run.meta["workers"]) == 2
            assert read_journal(journal_path(folder / f"{side}.json"))[1]  # one journal per arm
        assert (folder / "comparison.json").exists() and not list(folder.glob(".workers-*"))
        assert main(["compare", "--baseline", str(folder / "baseline.json"),
                     "--speculative", str(folder / "speculative.json")]) == 0
        capsys.readouterr()
        code = main(["sweep", "--base-url", base.url, "--spec-url", f"fast={spec.url}", "--concurrency", "1,2",
                     "--category", "coding,qa", "--limit", "2", "--osl", "4", "--workers", "2",
                     "--results-dir", str(tmp_path / "s"), "--quiet"])
        assert code == 0, capsys.readouterr().out
        (sweep,) = (tmp_path / "s").iterdir()
        assert load_run(sweep / "c1" / "fast.json").config["workers"] == 1  # a level of 1 has one request
        assert load_run(sweep / "c2" / "fast.json").config["workers"] == 2
        code = main(["sweep", "--base-url", base.url, "--spec-url", f"fast={spec.url}", "--request-rate", "20",
                     "--category", "coding,qa", "--limit", "2", "--osl", "4", "--workers", "2",
                     "--results-dir", str(tmp_path / "r"), "--quiet"])
        assert code == 0, capsys.readouterr().out
        (rates,) = (tmp_path / "r").iterdir()
        assert load_run(rates / "r20" / "fast.json").config["workers"] == 2
    finally:
        base.stop()
        spec.stop()


def test_a_joined_journal_resumes_with_one_process_or_another_count(fake_server: FakeServer, fake_state,
                                                                    tmp_path: Path) -> None:
    prompts = _qa(9)
    output = tmp_path / "run.json"
    run_benchmark(prompts, RunConfig(url=fake_server.url, osl=4, concurrency=3, workers=3), output=output)
    journal = journal_path(output)
    lines = journal.read_text().splitlines(keepends=True)
    for kept, config in ((7, RunConfig(url=fake_server.url, osl=4, concurrency=3)),
                         (4, RunConfig(url=fake_server.url, osl=4, concurrency=3, workers=2))):
        journal.write_text("".join(lines[:1 + kept]))  # the header and the first results: as if interrupted
        sent = len(fake_state.requests)
        run, interrupted = run_benchmark(prompts, config, output=output, resume=True)
        assert not interrupted and len(fake_state.requests) - sent == 9 - kept
        assert sorted(result.id for result in run.results) == [sample.id for sample in prompts.samples]
    with pytest.raises(BenchError, match=r"cannot resume: .*osl"):
        run_benchmark(prompts, RunConfig(url=fake_server.url, osl=8, concurrency=3, workers=3), output=output,
                    resume=True)
    assert not list(tmp_path.glob(".workers-*"))  # a refused resume leaves nothing behind


def test_an_interrupted_comparison_over_workers_keeps_both_arms_and_resumes(tmp_path: Path) -> None:
    import threading

    prompts = _qa(16)
    base, spec = FakeServer(FakeState(delay_s=0.15)), FakeServer(FakeState(delay_s=0.15, drafting=True))
    base.start()
    spec.start()
    try:
        arms = [Arm(name, RunConfig(url=server.url, osl=4, concurrency=2, workers=2, label=name),
                        tmp_path / f"{name}.json") for name, server in (("baseline", base), ("speculative", spec))]
        def interrupt_once_both_arms_finished_some() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                lines = {name: sum(path.read_text().count('"type": "result"')
                                   for path in tmp_path.glob(f".workers-*/*/{name}.json.jsonl"))
                         for name in ("baseline", "speculative")}
                if all(lines.values()):
                    break
                time.sleep(0.02)
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C reaches the parent only

        threading.Thread(target=interrupt_once_both_arms_finished_some, daemon=True).start()
        runs, interrupted = compare_arms(prompts, arms, seed=1)
        assert interrupted
        finished = {name: {result.id for result in run.results} for name, run in runs.items()}
        assert all(0 < len(ids) < 16 for ids in finished.values()), finished
        for name in finished:
            assert {r.id for r in read_journal(journal_path(tmp_path / f"{name}.json"))[1]} == finished[name]
        sent = len(base.state.requests) + len(spec.state.requests)
        runs, interrupted = compare_arms(prompts, arms, seed=1, resume=True)
    finally:
        base.stop()
        spec.stop()
    assert not interrupted
    assert len(base.state.requests) + len(spec.state.requests) - sent == 32 - sum(map(len, finished.values()))
    for run in runs.values():
        assert sorted(result.id for result in run.results) == [sample.id for sample in prompts.samples]
        assert sorted((result.id, result.batch) for result in run.results) == sorted(
            (sample.id, index // 2) for index, sample in enumerate(prompts.samples))  # the batches of one process


def test_a_worker_killed_while_waiting_for_its_turn_stops_the_team_without_hanging_anyone() -> None:
    import asyncio
    import multiprocessing
    import multiprocessing.connection

    from bench.runner import Stop, Team

    team = Team.create(2)
    context = multiprocessing.get_context("fork")
    outcome = context.Value("d", -1.0)

    def member(index: int) -> None:
        async def wait() -> None:
            stop = Stop()
            began = await team.member(index).turn(stop)
            outcome.value = -2.0 if began is None and stop.requested.is_set() else 1.0

        asyncio.run(wait())

    def serve_until(process) -> None:
        while process.exitcode is None:
            ready = multiprocessing.connection.wait([*team.connections(), process.sentinel], timeout=5)
            assert ready, "nothing moved within 5 s"
            team.handle(ready)
            process.join(0)

    waiting = context.Process(target=member, args=(0,))
    waiting.start()
    multiprocessing.connection.wait(team.connections(), timeout=10)
    team.handle(team.connections()[:1])  # worker 0 arrived; worker 1 is not there yet
    waiting.kill()
    waiting.join()
    team.abort()  # what the parent does when a worker dies: returns at once
    late = context.Process(target=member, args=(1,))
    late.start()
    serve_until(late)
    assert late.exitcode == 0 and outcome.value == -2.0  # told to stop, as a stop request of its own


_ORPHAN = """
import asyncio, os, signal, sys, time
from bench.runner import Stop, Team
from bench.runner._workers import _launch
from bench.runner._progress import SilentProgress

team = Team.create(2)
marks = sys.argv[1]

def waiting():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only an EOF on its pipe can end this worker's wait
    open(os.path.join(marks, "waiting"), "w").close()
    began = asyncio.run(team.member(0).turn(Stop()))
    open(os.path.join(marks, "ended"), "w").write(repr(began))

def busy():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(120)

_launch([waiting, busy], team, SilentProgress(), "t", 2, [0, 0, 0, 0])
"""


def test_a_worker_waiting_for_its_turn_sees_its_parents_death_as_an_eof(tmp_path: Path) -> None:
    script = tmp_path / "orphan.py"
    script.write_text(_ORPHAN)
    process = subprocess.Popen([sys.executable, str(script), str(tmp_path)], cwd=Path(__file__).parent.parent,
                               start_new_session=True)
    _STARTED.append(process)
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    deadline = time.monotonic() + 30
    while len(children.read_text().split()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = [int(pid) for pid in children.read_text().split()]
    while not (tmp_path / "waiting").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # worker 0 has arrived at its turn and waits on its pipe
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    try:
        deadline = time.monotonic() + 5
        while not (tmp_path / "ended").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "ended").read_text() == "None"  # the wait ended: no other process held the parent's end
    finally:
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _kill_parent_and_wait_for_workers(process: subprocess.Popen[str], within_s: float = 5.0) -> None:
    """SIGKILL `process` (no chance to forward a stop) and assert its workers end within `within_s`."""
    workers = [int(pid) for pid in Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()]
    assert len(workers) == 2
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=60)
    deadline = time.monotonic() + within_s
    while any(map(_running, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if _running(pid)], f"workers alive {within_s} s after their parent's death"


def test_what_workers_finished_before_their_parent_was_killed_is_joined_by_resume(
    fake_server: FakeServer, fake_state, tmp_path: Path
) -> None:
    fake_state.delay_s = 0.2
    process = _start(fake_server, tmp_path)
    _kill_parent_and_wait_for_workers(process)
    assert not (tmp_path / "w.json").exists() and not journal_path(tmp_path / "w.json").exists()
    left = sum(len(read_journal(path)[1]) for path in tmp_path.glob(".workers-*/worker-*/run.json.jsonl"))
    assert left > 0
    fake_state.delay_s = 0.0
    sent_before = len(fake_state.requests)
    done = _cli(["run", "--url", fake_server.url, "--dataset", str(tmp_path / "prompts.jsonl"), "--osl", "4",
                 "--concurrency", "2", "--workers", "2", "--output", "w.json", "--resume"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"joined {left} finished samples from" in done.stdout + done.stderr
    resumed = load_run(tmp_path / "w.json")
    assert sorted(result.id for result in resumed.results) == sorted(f"q{index}" for index in range(40))
    assert len(fake_state.requests) - sent_before == 40 - left  # only what had not finished
    assert not list(tmp_path.glob(".workers-*"))


def test_a_comparison_over_workers_whose_parent_was_killed_resumes_from_their_folder(tmp_path: Path) -> None:
    base, spec = FakeServer(FakeState(delay_s=0.2)), FakeServer(FakeState(delay_s=0.2, drafting=True))
    base.start()
    spec.start()
    try:
        args = ["bench", "--base-url", base.url, "--spec-url", spec.url, "--limit", "3", "--osl", "4",
                "--concurrency", "2", "--workers", "2", "--no-logprobs", "--results-dir", str(tmp_path / "b")]
        process = subprocess.Popen([sys.executable, "-m", "bench", *args, "--quiet"], cwd=tmp_path,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        _STARTED.append(process)
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob("b/*/.workers-*/*/speculative.json.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.8)
        _kill_parent_and_wait_for_workers(process)
        (folder,) = (tmp_path / "b").iterdir()
        assert not journal_path(folder / "baseline.json").exists()
        base.state.delay_s = spec.state.delay_s = 0.0
        done = _cli([*args, "--resume", str(folder)], tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert (done.stdout + done.stderr).count("finished samples from") == 2  # both arms joined, and said so
        for side in ("baseline", "speculative"):
            run = load_run(folder / f"{side}.json")
            assert len(run.results) == run.selected_samples and not run.info.interrupted
    finally:
        base.stop()
        spec.stop()
