"""Per-turn server decode definition, --logprobs margins, and lossless divergences classified by margin."""

from __future__ import annotations

import json

import pytest

from bench.analysis import NEAR_TIE_MARGIN, divergence, lossless_check, pair_runs
from bench.engines import TurnStats
from bench.records import Run, SampleResult, decode_margins, encode_margins, result_from_dict, summarize
from bench.runner import RunConfig, run_benchmark, server_rates
from tests.conftest import make_prompts
from tests.fakeserver import DriftSchedule, FakeServer, FakeState


def test_server_rates_use_n_minus_1_per_turn_and_uncached_prompt_tokens() -> None:
    turns = [TurnStats(prompt_tokens=50, completion_tokens=11, predicted_ms=1000.0, prompt_ms=100.0, cache_n=0),
             TurnStats(prompt_tokens=80, completion_tokens=21, predicted_ms=2000.0, prompt_ms=50.0, cache_n=70)]
    decode, prompt = server_rates(turns)
    assert decode == pytest.approx((10 + 20) / 3.0)  # the reference's 32 / 3 s reads 1/(n-1) high
    assert prompt == pytest.approx((50 + 10) / 0.15)  # cached tokens are not evaluated
    assert server_rates([TurnStats(completion_tokens=5)]) == (None, None)


def test_margins_round_trip_compactly() -> None:
    text = encode_margins([(5, 0.38751), (2, None), (3, 12.345678)])
    assert text == "5:0.388 2:- 3:12.3"
    assert decode_margins(text) == [(5, 0.388), (2, None), (3, 12.3)]
    assert decode_margins("garbage") == []


def test_runner_records_server_decode_and_margins_that_survive_the_run_file(tmp_path) -> None:
    state = FakeState(schedule=DriftSchedule(token_delay_s=0.001), margin=lambda position: 0.05 * position)
    server = FakeServer(state)
    server.start()
    try:
        run, _ = run_benchmark(make_prompts(), RunConfig(url=server.url, osl=16, logprobs=True),
                               output=tmp_path / "r.json", install_signal_handlers=False)
    finally:
        server.stop()
    assert state.requests[0]["logprobs"] is True and state.requests[0]["top_logprobs"] == 2
    multi = next(result for result in run.results if result.turns == 2)
    assert len(multi.token_margins) == 2
    entries = decode_margins(multi.token_margins[0])
    assert [margin for _, margin in entries[:3]] == [0.0, 0.05, 0.1]
    assert sum(size for size, _ in entries) == len(multi.outputs[0].encode())
    n = multi.completion_tokens // 2  # both turns have the same token count here
    assert multi.server_decode_t_s == pytest.approx(2 * (n - 1) / (multi.predicted_ms / 1000), rel=1e-6)
    assert multi.predicted_per_second == pytest.approx(2 * n / (multi.predicted_ms / 1000), rel=1e-6)
    reread = result_from_dict(json.loads(json.dumps(multi.to_dict())))
    assert reread == multi


def _result(sample: str, output: str, margins: str | None, *, tps: float = 10.0, server: float | None = None):
    return SampleResult(id=sample, category="x", ok=True, turns=1, latency_s=1.0, predicted_per_second=tps,
                        outputs=(output,), token_margins=(margins,) if margins is not None else (),
                        server_decode_t_s=server)


def _run(results: list[SampleResult]) -> Run:
    return Run(config={}, selected_samples=len(results), results=tuple(results), summary=tuple(summarize(results)))


def test_first_divergence_is_classified_by_the_baseline_margin_at_its_token() -> None:
    # tokens "The"," cat"," sat": the speculative server wrote " dog" for " cat"
    base_near = _result("a", "The cat sat", "3:1.5 4:0.02 4:2")
    base_real = _result("b", "The cat sat", "3:1.5 4:4.1 4:2")
    spec = _result("a", "The dog sat", "3:1.5 4:0.5 4:2")
    assert divergence(base_near, spec).kind == "near_tie"
    assert divergence(base_near, spec).as_cells() == {
        "id": "a", "repeat": 0, "turn": 0, "char": 4, "token": 1, "margin": 0.02, "kind": "near_tie"}
    assert divergence(base_real, spec).kind == "real" and divergence(base_real, spec).margin == 4.1
    # the speculative token extends the baseline's ("The" vs "Then"): the divergence is token 0, not token 1
    prefix = _result("c", "The cat", "3:0.01 4:3")
    longer = _result("c", "Then cat", "4:0.2 4:3")
    assert divergence(prefix, longer).token == 0 and divergence(prefix, longer).kind == "near_tie"
    assert divergence(_result("d", "x y", None), _result("d", "x z", None)).kind == "unclassified"
    assert divergence(base_near, base_near) is None
    assert NEAR_TIE_MARGIN == 0.1


def test_lossless_rows_count_each_kind() -> None:
    base = _run([_result("a", "The cat sat", "3:1.5 4:0.02 4:2"), _result("b", "The cat sat", "3:1.5 4:4.1 4:2"),
                 _result("c", "same", "4:1"), _result("d", "one two", None)])
    spec = _run([_result("a", "The dog sat", "3:1.5 4:1 4:2"), _result("b", "The dog sat", "3:1.5 4:1 4:2"),
                 _result("c", "same", "4:1"), _result("d", "one six", None)])
    row = lossless_check(base, spec)[-1].as_cells()
    assert (row["compared"], row["identical"], row["near_tie"], row["real"], row["unclassified"]) == (4, 1, 1, 1, 1)
    assert [item["id"] for item in row["divergences"]] == ["a", "b", "d"]
    assert row["near_tie_threshold"] == NEAR_TIE_MARGIN


def test_pairs_use_the_server_decode_definition_when_both_sides_have_it() -> None:
    base = _run([_result("a", "o", None, tps=10.0, server=9.0), _result("b", "o", None, tps=10.0)])
    spec = _run([_result("a", "o", None, tps=20.0, server=16.0), _result("b", "o", None, tps=15.0, server=14.0)])
    speedups = dict(zip(*pair_runs(base, spec)[["id", "decode_speedup"]].to_numpy().T, strict=True))
    assert speedups["a"] == pytest.approx(16.0 / 9.0) and speedups["b"] == pytest.approx(1.5)


def test_bench_with_a_near_tie_and_a_real_divergence_classifies_both(tmp_path) -> None:
    from bench.cli import main

    base_state = FakeState(margin=lambda position: 0.03 if position == 2 else 2.5)
    spec_state = FakeState(drafting=True, transform=lambda text: text.replace("to:", "TO:"))
    servers = [FakeServer(base_state), FakeServer(spec_state)]
    for server in servers:
        server.start()
    try:
        assert main(["bench", "--base-url", servers[0].url, "--spec-url", servers[1].url, "--limit", "1",
                     "--category", "qa,math", "--osl", "16", "--results-dir", str(tmp_path), "--quiet"]) in (0, 1)
    finally:
        for server in servers:
            server.stop()
    (folder,) = tmp_path.iterdir()
    from bench.records import load_run

    row = lossless_check(load_run(folder / "baseline.json"), load_run(folder / "speculative.json"))[-1].as_cells()
    # "Answer to: ..." -> "Answer TO: ...": the baseline's token 1 (" to:") had margin 2.5: a real divergence
    assert row["real"] == row["compared"] == 2 and row["near_tie"] == 0
    assert all(item["token"] == 1 and item["margin"] == 2.5 for item in row["divergences"])
