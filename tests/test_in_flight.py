"""The achieved load of a run: the in-flight mean from send times and latencies, and its place in the run file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.records import (
    LOAD_VERSION,
    LONGER_TURNS,
    SCHEMA_VERSION,
    SampleResult,
    in_flight_mean,
    load_run,
    request_spans,
    run_load,
    save_run,
)


def _result(index: int, sent: float | None, latency: float) -> SampleResult:
    return SampleResult(id=str(index), category="qa", ok=True, turns=1, latency_s=latency, sent_s=sent)


def test_a_steady_batch_is_in_flight_at_its_size_and_a_drain_lowers_the_mean() -> None:
    steady = [(0.0, 10.0)] * 8
    assert in_flight_mean(steady) == pytest.approx(8.0)
    # 8 requests start together; half end at 5 s, half at 10 s: 8 in flight for 5 s, 4 for 5 s
    drained = [(0.0, 5.0)] * 4 + [(0.0, 10.0)] * 4
    assert in_flight_mean(drained) == pytest.approx(6.0)


def test_gaps_between_an_arms_turns_do_not_count_as_idle_time() -> None:
    # two turns of 2 requests each, with the partner arm's 5 s turn between them
    spans = [(0.0, 1.0), (0.0, 1.0), (6.0, 7.0), (6.0, 7.0)]
    assert in_flight_mean(spans) == pytest.approx(2.0)
    assert in_flight_mean([]) is None


def test_samples_without_a_send_time_or_with_no_latency_are_left_out() -> None:
    results = [_result(0, 0.0, 2.0), _result(1, None, 2.0), _result(2, 1.0, 0.0), _result(3, 0.0, float("nan"))]
    assert request_spans(results) == [(0.0, 2.0)]
    load = run_load(results, 4, turn_jobs=16)
    assert (load.asked, load.achieved, load.requests, load.drain) == (4, 1.0, 1, LONGER_TURNS)


def test_the_run_file_records_its_load_and_an_older_file_gets_one_computed(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[1] / "results/sample/baseline.json"
    data = json.loads(source.read_text())
    assert data["schema_version"] < LOAD_VERSION <= SCHEMA_VERSION and "load" not in data
    run = load_run(source)
    assert run.load.requests == len([r for r in run.latest if r.sent_s is not None and r.latency_s > 0])
    data["load"] = {"asked_concurrency": 1, "in_flight_mean": 99.0}  # an edited record is not believed
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    again = load_run(edited)
    assert again.load == run.load and "load" not in again.meta.extra
    save_run(again, tmp_path / "saved.json")
    saved = json.loads((tmp_path / "saved.json").read_text())
    assert saved["schema_version"] == SCHEMA_VERSION and saved["load"] == run.load.to_dict()
    assert saved["load"]["in_flight_mean"] != 99.0
