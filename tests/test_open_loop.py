"""Open-loop runs against fake servers whose capacity and service times are known."""

from __future__ import annotations

import itertools
import json
import statistics

import pytest

from bench import BenchError
from bench.analysis import Slo, goodput, request_timings, throughput
from bench.prompts import PromptSet, Sample
from bench.runner import RunConfig, inter_arrival_cv, run_benchmark


def _prompts(count: int) -> PromptSet:
    samples = tuple(Sample(id=f"qa-{index:03d}", category="qa" if index % 2 else "math",
                           turns=(f"question {index}",)) for index in range(count))
    return PromptSet(samples=samples, source="test", bench="qualitative", categories=("math", "qa"))


def _run(server, tmp_path, count, **settings):
    run, interrupted = run_benchmark(_prompts(count), RunConfig(url=server.url, osl=8, **settings),
                                     output=tmp_path / "r.json", install_signal_handlers=False)
    assert not interrupted and all(result.ok for result in run.results)
    return run


@pytest.mark.parametrize(("arrival", "burstiness", "low", "high"), [
    ("poisson", 1.0, 0.85, 1.15), ("constant", 1.0, 0.0, 0.1), ("gamma", 0.25, 1.5, 2.7),
])
def test_twenty_per_second_for_300_requests(fake_state, fake_server, tmp_path, arrival, burstiness, low, high):
    fake_state.service_s = lambda index: 0.01
    run = _run(fake_server, tmp_path, 300, request_rate=20.0, arrival=arrival, burstiness=burstiness, arrival_seed=3)
    requests = request_timings(run)
    measured = throughput(requests)
    assert measured.achieved_rate == pytest.approx(20.0, rel=0.05)
    assert not measured.fell_behind
    assert low <= inter_arrival_cv([r.scheduled_s for r in requests]) <= high  # the recorded arrivals
    # the sends keep to them: half within 10 ms of their arrival (a loaded 2-core machine stalls the rest at times)
    lags = sorted(r.queue_wait_s for r in requests)
    assert lags[len(lags) // 2] < 0.01
    sent_gaps = [b - a for a, b in itertools.pairwise(sorted(r.sent_s for r in requests))]
    median_gap = statistics.median(sent_gaps)
    spread = statistics.median(abs(gap - median_gap) for gap in sent_gaps) / statistics.fmean(sent_gaps)
    if arrival == "constant":
        assert spread < 0.1  # robust dispersion of the send gaps: constant stays constant
    assert run.config["request_rate"] == 20.0 and run.config["arrival"] == arrival


def test_capped_client_above_capacity_counts_latency_from_the_schedule(fake_state, fake_server, tmp_path):
    # the server serves one request per 0.1 s (10/s); 20/s arrive and the client keeps 1 in flight
    fake_state.service_s = lambda index: 0.1
    fake_state.capacity = 1
    run = _run(fake_server, tmp_path, 30, request_rate=20.0, arrival="constant", max_concurrency=1)
    requests = request_timings(run)
    waits = [r.queue_wait_s for r in requests]
    latencies = [r.e2e_s for r in requests]
    # each request waits ~0.05 s longer than the one before: the queue grows by (0.1 - 0.05) s per arrival
    assert latencies[-1] > latencies[0] + 1.0
    assert all(later >= earlier - 0.02 for earlier, later in itertools.pairwise(latencies))
    assert waits[-1] == pytest.approx(latencies[-1] - 0.1, abs=0.05)
    assert statistics.fmean(r.e2e_s - r.queue_wait_s for r in requests) == pytest.approx(0.1, abs=0.03)
    assert throughput(requests).fell_behind  # sent at ~10/s of the 20 offered: said


def test_attainment_on_a_bimodal_server_matches_the_truth(fake_state, fake_server, tmp_path):
    # 7 of every 10 requests take 0.02 s, 3 take 0.3 s: with an e2e SLO of 0.15 s the truth is 70%
    fake_state.service_s = lambda index: 0.02 if index % 10 < 7 else 0.3
    run = _run(fake_server, tmp_path, 100, request_rate=25.0, arrival="constant")
    table = goodput(run, Slo(e2e_s=0.15))
    share = table.overall.attainment
    assert share.point == pytest.approx(0.70, abs=0.03)
    assert share.low <= 0.70 <= share.high
    assert table.overall.goodput.point == pytest.approx(share.point * 100 / table.throughput.duration_s)


def test_trace_replays_offsets_and_prompt_order(fake_state, fake_server, tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps(row) for row in [
        {"offset_s": 0.0, "prompt_id": "qa-003"}, {"offset_s": 0.2}, {"offset_s": 0.25, "prompt_id": "qa-001"}]))
    run = _run(fake_server, tmp_path, 4, trace=str(trace))
    ordered = sorted(run.results, key=lambda result: result.scheduled_s)
    # the first and third arrivals ask for their prompts; the second takes the next unused one in order
    assert [result.id for result in ordered] == ["qa-003", "qa-000", "qa-001"]
    gaps = [round(b.scheduled_s - a.scheduled_s, 2) for a, b in itertools.pairwise(ordered)]
    assert gaps == [0.2, 0.05]


@pytest.mark.parametrize(("settings", "message"), [
    ({"request_rate": 5.0, "trace": "x.jsonl"}, "give one"),
    ({"request_rate": -1.0}, "--request-rate"),
    ({"max_concurrency": 2}, "give --request-rate or --trace"),
    ({"request_rate": 5.0, "burstiness": 0.5}, "--arrival gamma"),
    ({"request_rate": 5.0, "arrival": "burst"}, "unknown --arrival"),
])
def test_bad_open_loop_settings_are_one_line_errors(settings, message):
    with pytest.raises(BenchError, match=message):
        RunConfig(**settings).validate()


def test_a_trace_asking_for_a_prompt_twice_too_often_is_refused(fake_server, tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"offset_s": 0, "prompt_id": "qa-001"}\n{"offset_s": 1, "prompt_id": "qa-001"}\n')
    with pytest.raises(BenchError, match="more often"):
        run_benchmark(_prompts(4), RunConfig(url=fake_server.url, osl=8, trace=str(trace)),
                      output=tmp_path / "r.json", install_signal_handlers=False)


def test_a_trace_longer_than_the_jobs_is_refused(fake_server, tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps({"offset_s": index / 10}) for index in range(9)))
    with pytest.raises(BenchError, match="9 arrivals for 4 requests"):
        run_benchmark(_prompts(4), RunConfig(url=fake_server.url, osl=8, trace=str(trace)),
                      output=tmp_path / "r.json", install_signal_handlers=False)


def test_bench_request_rate_runs_both_arms_on_one_schedule_in_blocks(tmp_path, capsys):
    from bench import cli
    from tests.fakeserver import FakeServer, FakeState

    base, spec = FakeState(), FakeState(drafting=True)
    base.service_s, spec.service_s = (lambda index: 0.08), (lambda index: 0.03)
    servers = [FakeServer(base), FakeServer(spec)]
    for server in servers:
        server.start()
    try:
        code = cli.main(["bench", "--base-url", servers[0].url, "--spec-url", servers[1].url, "--limit", "2",
                         "--request-rate", "10", "--block-size", "3", "--slo", "e2e=0.06", "--no-logprobs",
                         "--results-dir", str(tmp_path), "--quiet"])
    finally:
        for server in servers:
            server.stop()
    printed = capsys.readouterr().out
    assert code == 0, printed
    folder = next(tmp_path.iterdir())
    from bench.records import load_run

    runs = [load_run(folder / f"{side}.json") for side in ("baseline", "speculative")]
    # one schedule: the same prompt at the same offset within the same block on both arms
    keyed = [{r.id: (r.batch, r.scheduled_s) for r in run.results} for run in runs]
    assert keyed[0].keys() == keyed[1].keys() and len(keyed[0]) == 22
    blocks = {block for block, _ in keyed[0].values()}
    assert blocks == set(range(8))  # 22 requests in blocks of 3
    for sample, (block, _) in keyed[0].items():
        assert keyed[1][sample][0] == block
    assert "paired requests in 8 alternating blocks" in printed
    assert "attainment change (points)" in printed and "goodput ratio" in printed
    assert (folder / "traffic.json").exists() and (folder / "plots" / "timeline.png").exists()
    traffic = json.loads((folder / "traffic.json").read_text())
    latency = next(item for item in traffic["speedups"] if item["metric"]["key"] == "latency_speedup")
    assert latency["estimate"]["verdict"] == "better" and latency["estimate"]["point"] > 2.0
    assert traffic["goodput"]["verdict"] == "better"


def test_rate_sweep_on_a_fake_pair_places_the_known_break_even(tmp_path, capsys):
    from bench import cli
    from tests.fakeserver import FakeServer, FakeState

    # the baseline takes 0.1 s a turn at any rate; the speculative server 0.05 s while conversations arrive more
    # than 90 ms apart (below ~11 req/s) and 0.15 s when they come closer: 2x at 4 and 8 req/s, 0.67x at 16
    # and 32, so the break-even lies between 8 and 16. SLO e2e 0.14 s: the baseline meets it on its 30
    # single-turn requests of 32 (93.8%) at every rate, the speculative server on all 32 up to 8 req/s, then only
    # on the first request of each block (no conversation just before it).
    base, spec = FakeState(), FakeState(drafting=True)
    base.gap_service_s = lambda gap: 0.1
    spec.gap_service_s = lambda gap: 0.05 if gap > 0.09 else 0.15
    servers = [FakeServer(base), FakeServer(spec)]
    for server in servers:
        server.start()
    try:
        code = cli.main(["sweep", "--base-url", servers[0].url, "--spec-url", f"fast={servers[1].url}", "--limit", "8",
                         "--category", "qa,rag", "--repeat", "2", "--request-rate", "4,8,16,32", "--arrival",
                         "constant", "--block-size", "4", "--slo", "e2e=0.14", "--slo-target", "0.75", "--osl", "8",
                         "--results-dir", str(tmp_path), "--quiet"])
    finally:
        for server in servers:
            server.stop()
    printed = capsys.readouterr().out
    assert code == 0, printed
    crossing = next(line for line in printed.splitlines() if line.startswith("break-even (fast"))
    assert "8.0" in crossing and "16.0" in crossing and "4.0" not in crossing and "32.0" not in crossing
    assert "fast: meets the SLOs (75% attainment, by its interval) up to 8 req/s" in printed
    folder = next(tmp_path.iterdir())
    summary = json.loads((folder / "rate_sweep.json").read_text())
    capacity = {item["arm"]: item for item in summary["capacity"]}
    # the baseline's point reaches the target at every rate (its interval may not, where a stall of this shared
    # machine clusters misses); the speculative server's stops at 8 req/s
    assert capacity["baseline"]["possible_rate"] == 32.0 and capacity["fast"]["possible_rate"] == 8.0
    assert (folder / "plots" / "goodput_rate.png").exists() and (folder / "r16" / "fast.json").exists()

    # `report --sweep` on the folder carries the rate sweep, summarised again from its run files and recorded SLOs
    assert cli.main(["report", "--sweep", str(folder), "--out", str(tmp_path / "report"), "--title", "rates"]) == 0
    report = (tmp_path / "report" / "report.md").read_text()
    assert report.startswith("# rates\n") and (folder / "rate_sweep.md").read_text() in report
    assert "fast: meets the SLOs (75% attainment, by its interval) up to 8 req/s" in report
    assert "break-even (fast, latency from the schedule): stops paying at 16.0" in report
    assert "`plots/goodput_rate.png`" in report
    assert (tmp_path / "report" / "plots" / "goodput_rate.png").exists()
    (folder / "r16" / "fast.json").unlink()
    assert cli.main(["report", "--sweep", str(folder), "--out", str(tmp_path / "broken")]) != 0


@pytest.mark.e2e
def test_bench_request_rate_on_the_embedded_llama_cpp(tmp_path, capsys):
    pytest.importorskip("xllamacpp")
    from bench import cli
    from bench.records import load_run

    code = cli.main(["bench", "--limit", "2", "--category", "qa", "--osl", "12", "--request-rate", "2",
                     "--block-size", "1", "--slo", "e2e=10", "--no-logprobs", "--results-dir", str(tmp_path),
                     "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    folder = next(tmp_path.iterdir())
    runs = [load_run(folder / f"{side}.json") for side in ("baseline", "speculative")]
    for run in runs:
        assert run.config["request_rate"] == 2.0 and all(result.ok for result in run.results)
        assert {result.server_state for result in run.results} == {"restart"}  # fresh embedded servers
        assert sorted(result.batch for result in run.results) == [0, 1]
    assert "achieved rate" in printed and "latency speedup (from schedule)" in printed
    assert (folder / "traffic.json").exists()


@pytest.mark.e2e
def test_serve_slots_gives_the_server_that_many_slots():
    pytest.importorskip("xllamacpp")
    import subprocess
    import sys
    import urllib.request

    proc = subprocess.Popen([sys.executable, "-m", "bench", "serve", "--slots", "2", "--ctx-size", "1024"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "2 slots" in line, line
        url = line.split(" at ")[1].split(",")[0].strip()
        with urllib.request.urlopen(url + "/slots", timeout=30) as response:
            assert len(json.loads(response.read())) == 2
    finally:
        proc.terminate()
        proc.wait(30)
