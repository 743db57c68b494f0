"""Engine adapters read acceptance from each engine's documented response and metrics shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.engines import (
    VLLM,
    Engine,
    LlamaCpp,
    ResponseError,
    SGLang,
    TensorRTLLM,
    detect_engine,
    engine_from_metrics,
    parse_prometheus,
)
from bench.records import counter_acceptance
from bench.runner import RunConfig, run_benchmark
from tests.conftest import make_prompts
from tests.fakeserver import FakeServer, FakeState, completion, metrics_text


def _shaped(engine: str) -> dict:
    return completion(FakeState(engine=engine, drafting=True), {"messages": [{"content": "hi there"}], "max_tokens": 8})


def test_llamacpp_reads_timings() -> None:
    stats = LlamaCpp().parse(_shaped("llamacpp"))
    assert stats.draft_n == 4 * stats.completion_tokens and stats.draft_n_accepted == 3 * stats.completion_tokens
    assert stats.predicted_per_second == 50.0 and stats.cache_n == 0


def test_vllm_reads_per_request_metrics() -> None:
    stats = VLLM().parse(_shaped("vllm"))
    assert stats.draft_n_accepted / stats.draft_n == 0.75 and stats.spec_steps == stats.completion_tokens


def test_sglang_asks_for_and_reads_spec_details() -> None:
    assert SGLang().request_fields() == {"return_spec_tokens_details": True}
    body = {"messages": [{"content": "hi"}], "max_tokens": 8, "return_spec_tokens_details": True}
    stats = SGLang().parse(completion(FakeState(engine="sglang", drafting=True), body))
    assert stats.draft_n and stats.draft_n_accepted and stats.spec_steps


def test_plain_openai_has_no_acceptance() -> None:
    stats = Engine().parse(_shaped("openai"))
    assert stats.draft_n is None and stats.predicted_per_second is None


def test_missing_choices_and_bad_timings_raise_typed_errors() -> None:
    with pytest.raises(ResponseError) as info:
        LlamaCpp().parse({"usage": {}})
    assert info.value.kind == "missing_fields"
    data = _shaped("llamacpp")
    data["timings"]["prompt_ms"] = float("inf")
    with pytest.raises(ResponseError) as info:
        LlamaCpp().parse(data)
    assert info.value.kind == "bad_timings"


@pytest.mark.parametrize("engine", ["llamacpp", "vllm", "sglang", "trtllm"])
def test_detection_from_metrics(engine: str) -> None:
    state = FakeState(engine=engine, drafting=True)
    assert detect_engine(None, metrics_text(state)).name == engine


def test_detection_from_first_response() -> None:
    assert engine_from_metrics("") is None
    assert detect_engine(_shaped("vllm"), "").name == "vllm"
    assert detect_engine(_shaped("llamacpp"), "").name == "llamacpp"
    assert detect_engine({"choices": []}, "").name == "openai"


def test_counter_acceptance_and_gauges() -> None:
    state = FakeState(engine="llamacpp")
    before = LlamaCpp().acceptance_counters(metrics_text(state))
    state.drafts, state.draft_tokens, state.accepted = 10, 40, 25
    after = LlamaCpp().acceptance_counters(metrics_text(state))
    acceptance = counter_acceptance(before, after, server_wide=False)
    assert acceptance["acceptance_length"] == 3.5 and acceptance["accept_rate"] == 0.625
    assert acceptance["per_position"] == [1.2, 1.3]
    assert SGLang().acceptance_gauges(metrics_text(FakeState(engine="sglang"))) == {
        "acceptance_length": 3.5, "accept_rate": 0.62}
    assert TensorRTLLM().acceptance_gauges(metrics_text(FakeState(engine="trtllm")))["acceptance_length"] == 2.5


def test_prometheus_parser_skips_junk() -> None:
    series = parse_prometheus('# HELP x\nx_total{a="1",b="q\\"x"} 3\nbad line\ny NaN\nz notanumber\n')
    assert series[("x_total", (("a", "1"), ("b", 'q"x')))] == 3.0
    assert len(series) == 2


def test_prometheus_parser_reads_braces_inside_label_values() -> None:
    text = 'llamacpp:spec_decode_num_drafts_total{model="a}b"} 7\nllamacpp:spec_decode_num_accepted_tokens_total 5\n'
    series = parse_prometheus(text)
    assert series[("llamacpp:spec_decode_num_drafts_total", (("model", "a}b"),))] == 7.0
    assert LlamaCpp().acceptance_counters(text)["drafts"] == 7.0


@pytest.mark.parametrize(
    ("engine", "expect_rate", "source"),
    [("llamacpp", 0.75, "metrics"), ("vllm", 0.75, "metrics"), ("sglang", 0.75, "gauges"),
     ("trtllm", None, "gauges"), ("openai", None, None)],
)
def test_run_reads_acceptance_from_every_engine(engine: str, expect_rate: float | None, source: str | None,
                                                 tmp_path: Path) -> None:
    server = FakeServer(FakeState(engine=engine, drafting=True))
    server.start()
    try:
        run, _ = run_benchmark(make_prompts(1), RunConfig(url=server.url, osl=8), output=tmp_path / "r.json",
                               install_signal_handlers=False)
    finally:
        server.stop()
    assert run.meta["engine"] == engine
    rate = run.summary[-1]["accept_rate"]
    assert (rate is None) if expect_rate is None else rate == pytest.approx(expect_rate)
    acceptance = run.meta["acceptance"]
    assert (acceptance is None) if source is None else acceptance["source"] == source


def test_missing_engine_fields_give_one_warning_not_a_zero(tmp_path: Path) -> None:
    server = FakeServer(FakeState(engine="vllm", drafting=False))
    server.start()
    messages: list[str] = []

    class Collect:
        def start(self, total: int, description: str) -> None: ...
        def advance(self, result) -> None: ...
        def message(self, text: str) -> None:
            messages.append(text)
        def finish(self) -> None: ...

    try:
        run, _ = run_benchmark(make_prompts(2), RunConfig(url=server.url, osl=8, engine="vllm"),
                               output=tmp_path / "r.json", progress=Collect(), install_signal_handlers=False)
    finally:
        server.stop()
    assert len(messages) == 1 and "--per-request-spec-decode-metrics" in messages[0]
    assert run.meta["warnings"] and run.summary[-1]["accept_rate"] is None


def test_llamacpp_slots_name_the_speculation_and_its_settings() -> None:
    from bench.engines import engine_by_name

    engine = engine_by_name("llamacpp")
    props = {"total_slots": 1, "default_generation_settings": {"params": {"speculative.types": "none"}}}
    fresh = [{"id": 0, "n_ctx": 4096, "speculative": True, "is_processing": False}]  # as a fresh server lists it
    served = [{"id": 0, "speculative": True, "n_prompt_tokens": 72, "params": {
        "temperature": 0.0, "speculative.types": "ngram-mod", "speculative.n_max": 16}}]
    off = [{"id": 0, "speculative": False}]
    describe = engine.describe
    assert describe({"props": props, "slots": engine.trim_info("slots", fresh)}).speculative == (
        "speculative (type not reported)")  # /props' default "none" does not override the slots' flag
    after = describe({"props": props, "slots": engine.trim_info("slots", served)})
    assert after.speculative == "ngram-mod" and after.draft_settings == {"speculative.n_max": 16}
    assert describe({"props": props, "slots": off}).speculative == "none"
    assert "n_prompt_tokens" not in engine.trim_info("slots", served)[0]  # the slots' prompts are not kept
    assert describe({"props": {}}).speculative is None
