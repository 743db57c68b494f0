"""`make perf`'s measurement modules: the rows they add and how they judge them (no timing asserted here)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def perf():
    spec = importlib.util.spec_from_file_location("perf_rows_under_test", ROOT / "benchmarks" / "perf.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["perf_rows_under_test"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_streaming_rows_include_512_streams_at_100_chunks_per_second(perf) -> None:
    from measures.common import QUICK, Sizes

    assert (512, 100) in perf.STREAM_TARGETS
    assert len(Sizes().stream_chunks) == len(QUICK.stream_chunks) == len(perf.STREAM_TARGETS)


def test_the_vllm_row_is_judged_against_one_and_a_half_times_bench_serve_or_skipped_with_its_reason(perf) -> None:
    from measures.vllm_client import vllm_rows

    skipped = vllm_rows(40_000.0, None, "skipped: no vLLM environment", 256)
    assert skipped.rows[0].status == "-" and "skipped: no vLLM environment" in skipped.notes[0]
    assert vllm_rows(60_000.0, 40_000.0, "ran", 256).rows[0].status == "PASS"
    failed = vllm_rows(50_000.0, 40_000.0, "ran", 256).rows[0]
    assert failed.status == "FAIL" and failed.ratio == "1.25x"
    assert perf.missed_targets(skipped.rows, []) == []  # a skipped row is not a missed target


def test_worker_rows_say_why_they_are_empty_and_compare_against_one_worker(perf) -> None:
    from measures.common import QUICK
    from measures.throughput import Series
    from measures.workers import workers_rows

    empty = workers_rows(QUICK, None)
    assert all(row.value == "n/a" for row in empty.rows) and "no `workers` setting" in empty.notes[0]
    found = {1: (Series([2.0, 2.0], [], [], []), Series([1.0], [], [10_000], [])),
             2: (Series([1.0, 1.0], [], [], []), Series([0.5], [], [10_000], []))}
    rows = {row.label: row for row in workers_rows(QUICK, found).rows}
    assert rows["requests/s, c=64, workers=2"].ratio == "2.00x of workers=1"
    assert rows["stream chunks/s, c=64, workers=2"].value == "20,000"


def test_the_loops_run_in_a_seeded_order_each_once_per_repeat(perf) -> None:
    from measures.loop_compare import LoopFigures, loop_orders, loop_table

    orders = loop_orders(("asyncio", "uvloop"), 6, seed=3)
    assert orders == loop_orders(("asyncio", "uvloop"), 6, seed=3)
    assert all(sorted(order) == ["asyncio", "uvloop"] for order in orders)
    assert len({tuple(order) for order in orders}) == 2  # both orders occur: neither loop always goes first
    found = {"asyncio": LoopFigures({"requests/s, c=64": [1000.0, 1200.0, 1100.0]}),
             "uvloop": LoopFigures({"requests/s, c=64": [1300.0, 1250.0, 1400.0]}, merge_warnings=1)}
    text = loop_table(found, ("asyncio", "uvloop"))
    assert "1,100" in text and "1,300" in text and "1.18x" in text


def test_an_unknown_loop_is_a_usage_error(perf) -> None:
    with pytest.raises(SystemExit) as info:
        perf.main(["--loop", "tokio"])
    assert info.value.code == 2


def test_only_selects_row_groups_in_the_tables_order_and_refuses_unknown_ones(perf) -> None:
    assert perf.parse_parts("streaming,requests") == ("requests", "streaming")
    assert perf.parse_parts(" vllm , requests ") == ("requests", "vllm")
    with pytest.raises(ValueError, match="unknown row group tokio"):
        perf.parse_parts("requests,tokio")
    with pytest.raises(ValueError):
        perf.parse_parts(",")
    assert perf.parse_args(["--only", "requests"]).parts == ("requests",)
    assert perf.parse_args(["--streaming-only"]).parts == ("streaming",)
    assert "loops" not in perf.parse_args([]).parts and "requests" in perf.parse_args([]).parts


@pytest.mark.parametrize("argv", [["--only", "nothing"], ["--only", "requests", "--streaming-only"],
                                  ["--streaming-only", "--compare-loops"], ["--busy", "-1"],
                                  ["--stream-workers", "0"]])
def test_bad_row_selections_are_usage_errors(perf, argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as info:
        perf.parse_args(argv)
    assert info.value.code == 2
    assert ": error: " in capsys.readouterr().err.strip().splitlines()[-1]  # one line saying what is wrong


def test_the_heading_names_the_command_the_machine_and_the_load(perf) -> None:
    line = perf.heading(["--only", "requests"], "2026-12-02 18:15 UTC", (0.25, 0.5, 1.0))
    assert line.startswith("speedbench perf --only requests (2026-12-02 18:15 UTC; ")
    assert "cores" in line and line.endswith("load average 0.25 0.50 1.00 at the start)")


def _series(rate: float, count: int):
    from measures.throughput import Series

    return Series([count / rate] * 3, [count / rate] * 3, [], [0.0002] * 10)


def test_concurrency_64_is_judged_against_five_times_the_reference(perf) -> None:
    from measures.common import QUICK
    from measures.throughput import request_rows

    ref1 = {"requests": 500, "elapsed_s": 0.5, "mean_latency_s": 0.001, "p50_latency_s": 0.001,
            "p99_latency_s": 0.002}

    def rows(ours64: float, ref64: float | None, skipped: bool = False) -> dict[str, object]:
        measured = request_rows(QUICK, 25e-6, _series(3000.0, QUICK.c1), _series(ours64, QUICK.c64),
                                ref1 if ref64 else None,
                                {"requests": 1000, "elapsed_s": 1000 / ref64} if ref64 else None, skipped)
        return {row.label: row for row in measured.rows}

    passed = rows(6000.0, 1000.0)
    assert passed["requests/s, concurrency 64"].status == "PASS"
    assert passed["requests/s, c=64, speedbench/reference"].status == "PASS"
    assert passed["requests/s, c=64, speedbench/reference"].value == "6.00x"
    short = rows(6000.0, 1500.0)["requests/s, c=64, speedbench/reference"]
    assert short.status == "FAIL" and short.value == "4.00x"
    assert perf.missed_targets([short], []) == ["requests/s, c=64, speedbench/reference"]
    missing = rows(6000.0, None)["requests/s, c=64, speedbench/reference"]
    assert missing.status == "n/a" and perf.missed_targets([missing], [])  # no reference: not a pass
    skipped = rows(6000.0, None, skipped=True)["requests/s, c=64, speedbench/reference"]
    assert skipped.status == "-" and perf.missed_targets([skipped], []) == []  # --no-reference: not judged


def test_the_vllm_row_runs_bench_serve_against_the_server_root_interleaved(perf, monkeypatch, tmp_path) -> None:
    import measures.vllm_client as client
    from measures.common import QUICK
    from measures.throughput import Series

    calls: list[str] = []
    monkeypatch.setattr(client, "vllm_unavailable", lambda: (tmp_path / "python", None))
    monkeypatch.setattr(client, "tokenizer_folder", lambda: tmp_path)

    def serve(python, tokenizer, base, workdir, prompts):
        calls.append(f"vllm {base}")
        return {"completed": prompts, "duration": prompts * client.SSE_CHUNKS / 40_000.0}

    def ours(url, count, concurrency, workdir, repeats, **settings):
        calls.append("speedbench")
        return Series([1.0], [], [count * client.SSE_CHUNKS], [], [count * client.SSE_CHUNKS / 70_000.0])

    monkeypatch.setattr(client, "bench_serve", serve)
    monkeypatch.setattr(client, "runner_series", ours)
    measured = client.measure_vllm_rows("http://127.0.0.1:9/sse/v1", QUICK, tmp_path, {})
    assert calls.count("speedbench") == QUICK.repeats
    assert calls.count("vllm http://127.0.0.1:9") == min(QUICK.repeats, client.VLLM_REPEATS)
    row = measured.rows[0]
    assert row.status == "PASS" and row.reference == "40,000" and row.ratio == "1.75x"
