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
