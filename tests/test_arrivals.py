"""Open-loop arrival schedules: rates, dispersion of each process, seeding and trace validation."""

from __future__ import annotations

import itertools
import json
import math

import pytest

from bench import BenchError
from bench.runner import (
    ARRIVAL_PROCESSES,
    arrival_schedule,
    block_offsets,
    block_plan,
    default_block_size,
    inter_arrival_cv,
    load_trace,
)


@pytest.mark.parametrize("process", ARRIVAL_PROCESSES)
def test_offered_rate_is_the_requested_rate(process):
    schedule = arrival_schedule(300, 20.0, process=process, burstiness=0.25 if process == "gamma" else 1.0, seed=3)
    assert len(schedule) == 300
    assert schedule.offered_rate == pytest.approx(20.0, rel=1e-9)
    assert schedule.duration_s == pytest.approx(15.0)
    assert all(b >= a for a, b in zip(schedule.offsets_s, schedule.offsets_s[1:], strict=False))
    assert all(gap >= 0 for gap in schedule.gaps_s())


def test_dispersion_of_each_process_at_20_per_second_for_300():
    gamma_cvs = []
    for seed in range(40):
        poisson = arrival_schedule(300, 20.0, process="poisson", seed=seed)
        constant = arrival_schedule(300, 20.0, process="constant", seed=seed)
        gamma = arrival_schedule(300, 20.0, process="gamma", burstiness=0.25, seed=seed)
        assert 0.85 <= inter_arrival_cv(poisson.offsets_s) <= 1.15
        assert inter_arrival_cv(constant.offsets_s) < 0.1
        gamma_cvs.append(inter_arrival_cv(gamma.offsets_s))
    # gamma shape k has CV 1/sqrt(k) = 2; at 300 gaps its sample CV spreads over about 1.65-2.5 (heavy tail)
    assert all(1.5 <= cv <= 2.7 for cv in gamma_cvs)
    assert 1.85 <= sum(gamma_cvs) / len(gamma_cvs) <= 2.1


def test_burstiness_orders_the_dispersion():
    cvs = [inter_arrival_cv(arrival_schedule(2000, 10.0, process="gamma", burstiness=k, seed=1).offsets_s)
           for k in (0.25, 1.0, 4.0)]
    assert cvs[0] > cvs[1] > cvs[2]
    assert cvs == pytest.approx([2.0, 1.0, 0.5], rel=0.1)


def test_same_seed_same_schedule_other_seed_other_schedule():
    first = arrival_schedule(50, 5.0, seed=7)
    assert first == arrival_schedule(50, 5.0, seed=7)
    assert first.offsets_s != arrival_schedule(50, 5.0, seed=8).offsets_s
    assert first.seed == 7 and first.process == "poisson" and first.burstiness == 1.0


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"count": 0, "rate": 1.0}, "at least 1 request"),
    ({"count": 5, "rate": 0.0}, "--request-rate"),
    ({"count": 5, "rate": math.inf}, "--request-rate"),
    ({"count": 5, "rate": True}, "--request-rate"),
    ({"count": 5, "rate": 1.0, "process": "burst"}, "unknown arrival process"),
    ({"count": 5, "rate": 1.0, "process": "gamma", "burstiness": -1.0}, "--burstiness"),
    ({"count": 5, "rate": 1.0, "process": "poisson", "burstiness": 2.0}, "--arrival gamma"),
])
def test_bad_parameters_are_one_line_errors(kwargs, message):
    with pytest.raises(BenchError, match=message) as caught:
        arrival_schedule(**kwargs)
    assert "\n" not in str(caught.value)


def test_trace_replays_offsets_and_prompt_ids(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text('{"offset_s": 0}\n\n{"offset_s": 0.5, "prompt_id": "coding-1"}\n{"offset_s": 2}\n')
    schedule = load_trace(path)
    assert schedule.offsets_s == (0.0, 0.5, 2.0)
    assert schedule.prompt_ids == (None, "coding-1", None)
    assert schedule.process == "trace" and schedule.source == str(path) and schedule.rate is None
    assert schedule.offered_rate == pytest.approx(1.5)


def test_trace_without_prompt_ids_has_none(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(json.dumps({"offset_s": i / 4}) for i in range(8)))
    assert load_trace(path).prompt_ids is None


@pytest.mark.parametrize(("text", "message"), [
    ("", "no arrivals"),
    ("{oops\n", ":1: not JSON"),
    ("[1, 2]\n", "must be a JSON object"),
    ('{"offset": 1}\n', "unknown key 'offset'"),
    ('{"offset_s": -1}\n', "offset_s must be"),
    ('{"offset_s": "1"}\n', "offset_s must be"),
    ('{"offset_s": NaN}\n', "offset_s must be"),
    ('{"offset_s": true}\n', "offset_s must be"),
    ('{"offset_s": 2}\n{"offset_s": 1}\n', ":2: offset_s 1 is earlier"),
    ('{"offset_s": 1, "prompt_id": 3}\n', "prompt_id must be"),
    ('{"offset_s": 1, "prompt_id": ""}\n', "prompt_id must be"),
])
def test_bad_traces_are_one_line_errors(tmp_path, text, message):
    path = tmp_path / "trace.jsonl"
    path.write_text(text)
    with pytest.raises(BenchError, match=message) as caught:
        load_trace(path)
    assert "\n" not in str(caught.value)


def test_missing_trace_file(tmp_path):
    with pytest.raises(BenchError, match="no such file"):
        load_trace(tmp_path / "absent.jsonl")


def test_cv_needs_three_arrivals():
    with pytest.raises(BenchError, match="at least 3"):
        inter_arrival_cv([0.0, 1.0])


def test_blocks_alternate_abba_and_keep_every_gap():
    schedule = arrival_schedule(10, 2.0, seed=4)
    blocks = block_plan(len(schedule), 4, ["base", "spec"], seed=1)
    assert [(b.start, b.stop) for b in blocks] == [(0, 4), (4, 8), (8, 10)]
    assert blocks[0].order == tuple(reversed(blocks[1].order)) == blocks[2].order
    assert set(blocks[0].order) == {"base", "spec"}
    firsts = {block_plan(10, 4, ["base", "spec"], seed=seed)[0].order[0] for seed in range(20)}
    assert firsts == {"base", "spec"}  # the seed picks which arm starts
    gaps = []
    for block in blocks:
        offsets = block_offsets(schedule, block)
        gaps += [offsets[0], *(b - a for a, b in itertools.pairwise(offsets))]
    assert gaps == pytest.approx(list(schedule.gaps_s()))


def test_default_block_size_is_a_few_seconds_of_arrivals():
    assert default_block_size(1.0) == 5 and default_block_size(2.0) == 10
    assert default_block_size(100.0) == 30 and default_block_size(0.1) == 4 and default_block_size(None) == 30
    with pytest.raises(BenchError, match="block-size"):
        block_plan(10, 0, ["a"])
