"""The runner against the loopback fake server: requests, multi-turn, aggregation, journal, faults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import BenchError
from bench.records import SCHEMA_VERSION, load_run, read_journal
from bench.runner import RunConfig, Transport, normalize_base_url, run_benchmark
from tests.conftest import make_prompts
from tests.fakeserver import FakeServer, FakeState


def _config(server: FakeServer, **overrides) -> RunConfig:
    return RunConfig(url=server.url, osl=16, **overrides)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("localhost:8080", "http://localhost:8080/v1"),
        ("http://localhost:8080/v1/", "http://localhost:8080/v1"),
        ("https://h/x/v1", "https://h/x/v1"),
        ("127.0.0.1:9/", "http://127.0.0.1:9/v1"),
    ],
)
def test_normalize_base_url(given: str, expected: str) -> None:
    assert normalize_base_url(given) == expected


def test_normalize_base_url_rejects_garbage() -> None:
    with pytest.raises(BenchError):
        normalize_base_url("   ")
    with pytest.raises(BenchError):
        normalize_base_url("ftp://x")


def test_run_sends_reference_requests_and_records(fake_server: FakeServer, tmp_path: Path) -> None:
    fake_server.state.drafting = True
    prompts = make_prompts()
    output = tmp_path / "run.json"
    run, interrupted = run_benchmark(prompts, _config(fake_server, model="m"), output=output,
                                     install_signal_handlers=False)
    assert not interrupted
    requests = fake_server.state.requests
    assert len(requests) == 6  # 4 samples, two of them two-turn
    first = requests[0]
    assert first["max_tokens"] == 16 and first["temperature"] == 0 and first["stream"] is False
    assert first["model"] == "m"
    # a second turn carries the first reply as assistant history
    two_turn = [body for body in requests if len(body["messages"]) == 3]
    assert len(two_turn) == 2
    assert two_turn[0]["messages"][1] == {"role": "assistant", "content": "Answer to: coding q1"}
    assert run.completed_samples == 4 and run.failed_samples == 0
    assert [row["category"] for row in run.summary] == ["coding", "math", "overall"]
    overall = run.summary[-1]
    assert overall["accept_rate"] == pytest.approx(0.75)
    assert overall["avg_pred_t_s"] == pytest.approx(50.0)
    saved = json.loads(output.read_text())
    assert saved["engine"] == "llamacpp" and saved["schema_version"] == SCHEMA_VERSION
    assert saved["acceptance"]["acceptance_length"] == pytest.approx(4.0)
    assert saved["acceptance"]["per_position"] == pytest.approx([1.5, 1.5])
    assert saved["server"]["props"]["model_path"] == "/models/fake.gguf"
    assert "chat_template" not in saved["server"]["props"]
    header, journalled = read_journal(str(output) + ".jsonl")
    assert len(journalled) == 4 and header["sample_ids"] == [s.id for s in prompts.samples]
    assert load_run(output).results == run.results


def test_multi_turn_rates_are_totals_over_turns(fake_server: FakeServer, tmp_path: Path) -> None:
    run, _ = run_benchmark(make_prompts(), _config(fake_server), output=tmp_path / "r.json",
                           install_signal_handlers=False)
    two_turn = next(result for result in run.results if result.turns == 2)
    assert two_turn.predicted_per_second == pytest.approx(
        two_turn.completion_tokens / (two_turn.predicted_ms / 1000)
    )
    assert len(two_turn.outputs) == 2


def test_baseline_without_drafts_has_no_accept_rate(fake_server: FakeServer, tmp_path: Path) -> None:
    run, _ = run_benchmark(make_prompts(), _config(fake_server), output=tmp_path / "r.json",
                           install_signal_handlers=False)
    assert all(row["accept_rate"] is None for row in run.summary)


def test_unreachable_server_records_every_sample_failed(tmp_path: Path) -> None:
    prompts = make_prompts()
    run, _ = run_benchmark(prompts, RunConfig(url="127.0.0.1:9", osl=8, timeout=5), output=tmp_path / "r.json",
                           install_signal_handlers=False)
    assert run.failed_samples == len(prompts.samples)
    assert {result.error_kind for result in run.results} == {"connect"}
    assert (tmp_path / "r.json").exists()
    assert run.summary[-1]["failed"] == len(prompts.samples)


def test_existing_output_needs_force(fake_server: FakeServer, tmp_path: Path) -> None:
    output = tmp_path / "r.json"
    output.write_text("{}")
    with pytest.raises(BenchError, match="--force"):
        run_benchmark(make_prompts(), _config(fake_server), output=output, install_signal_handlers=False)
    assert output.read_text() == "{}"
    run_benchmark(make_prompts(), _config(fake_server), output=output, force=True, install_signal_handlers=False)
    assert load_run(output).completed_samples == 4


def test_concurrency_and_repeats(fake_server: FakeServer, tmp_path: Path) -> None:
    fake_server.state.delay_s = 0.01
    run, _ = run_benchmark(make_prompts(4), _config(fake_server, concurrency=4, repeat=2),
                           output=tmp_path / "r.json", install_signal_handlers=False)
    assert len(run.results) == 16 and {r.repeat for r in run.results} == {0, 1}
    assert run.selected_samples == 16


def test_streaming_records_ttft_and_client_decode(fake_server: FakeServer, tmp_path: Path) -> None:
    run, _ = run_benchmark(make_prompts(1), _config(fake_server, stream=True), output=tmp_path / "r.json",
                           install_signal_handlers=False)
    result = run.results[0]
    assert result.ok, result.error
    assert result.outputs == ("Answer to: coding question 0",)
    assert 0 < result.ttft_s < result.latency_s
    assert result.itl_s and result.client_decode_t_s > 0
    assert result.predicted_per_second == pytest.approx(50.0)  # timings still read from the final chunk
    assert fake_server.state.requests[0]["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(
    ("fault", "kind", "stream"),
    [
        ("http_500", "http_5xx", False),
        ("http_400", "http_4xx", False),
        ("http_429", "http_429", False),
        ("invalid_json", "invalid_json", False),
        ("missing_fields", "missing_fields", False),
        ("nan_timings", "bad_timings", False),
        ("negative_timings", "bad_timings", False),
        ("absurd_timings", "bad_timings", False),
        ("disconnect", "disconnect", False),
        ("slow", "timeout", False),
        ("no_done", "stream_incomplete", True),
        ("midstream_disconnect", "disconnect", True),
    ],
)
def test_each_fault_is_recorded_with_its_kind(fake_state: FakeState, fake_server: FakeServer, tmp_path: Path,
                                              fault: str, kind: str, stream: bool) -> None:
    # a connection closed before any answer is sent again once (a stale keep-alive): a disconnect is one that
    # happens to the resent request too
    fault_indices = (0, 1) if fault == "disconnect" else (0,)
    fake_state.fault = lambda index, body: fault if index in fault_indices else None
    run, _ = run_benchmark(make_prompts(1), _config(fake_server, stream=stream, timeout=1.0),
                           output=tmp_path / "r.json", install_signal_handlers=False)
    by_id = {result.id: result for result in run.results}
    assert by_id["coding-000"].ok is False
    assert by_id["coding-000"].error_kind == kind, by_id["coding-000"].error
    assert by_id["math-000"].ok is True
    assert run.summary[-1]["failed"] == 1 and run.summary[-1]["requests"] == 1


def test_retries_recover_transport_errors_and_429(fake_state: FakeState, fake_server: FakeServer,
                                                  tmp_path: Path) -> None:
    faults = {0: "http_429", 1: "disconnect", 2: "disconnect"}  # the second disconnect is the one-time resend
    fake_state.fault = lambda index, body: faults.get(index)
    run, _ = run_benchmark(make_prompts(1, ("qa",)), _config(fake_server, retries=2), output=tmp_path / "r.json",
                           install_signal_handlers=False)
    assert run.results[0].ok and run.results[0].retries == 2


def test_retries_do_not_repeat_http_500(fake_state: FakeState, fake_server: FakeServer, tmp_path: Path) -> None:
    fake_state.fault = lambda index, body: "http_500" if index == 0 else None
    run, _ = run_benchmark(make_prompts(1, ("qa",)), _config(fake_server, retries=3), output=tmp_path / "r.json",
                           install_signal_handlers=False)
    assert not run.results[0].ok and len(fake_state.requests) == 1


def test_api_key_is_sent_but_never_written(fake_server: FakeServer, tmp_path: Path) -> None:
    secret = "sk-planted-secret-123456"
    run_benchmark(make_prompts(1), _config(fake_server, api_key=secret, headers={"X-Team": "a"}),
                  output=tmp_path / "r.json", install_signal_handlers=False)
    assert fake_server.state.headers[0]["Authorization"] == f"Bearer {secret}"
    for path in tmp_path.iterdir():
        assert secret not in path.read_text()


def test_warmup_requests_are_not_recorded(fake_server: FakeServer, tmp_path: Path) -> None:
    run, _ = run_benchmark(make_prompts(1), _config(fake_server, warmup=3), output=tmp_path / "r.json",
                           install_signal_handlers=False)
    assert len(fake_server.state.requests) == 5 and len(run.results) == 2


def test_resume_sends_only_missing_samples(fake_state: FakeState, fake_server: FakeServer, tmp_path: Path) -> None:
    output = tmp_path / "r.json"
    fake_state.fault = lambda index, body: "http_500" if index < 2 else None
    first, _ = run_benchmark(make_prompts(), _config(fake_server), output=output, install_signal_handlers=False)
    assert first.failed_samples >= 1
    fake_state.fault = lambda index, body: None
    sent_before = len(fake_state.requests)
    second, _ = run_benchmark(make_prompts(), _config(fake_server), output=output, resume=True,
                              install_signal_handlers=False)
    assert first.failed_samples == 2  # coding-000 (request 0) and coding-001 (its first turn, request 1)
    assert second.failed_samples == 0 and second.completed_samples == 4
    resent = fake_state.requests[sent_before:]
    assert len(resent) == 3  # coding-000 once, coding-001's two turns; nothing else


def test_resume_refuses_other_settings(fake_server: FakeServer, tmp_path: Path) -> None:
    output = tmp_path / "r.json"
    run_benchmark(make_prompts(), _config(fake_server), output=output, install_signal_handlers=False)
    with pytest.raises(BenchError, match="osl"):
        run_benchmark(make_prompts(), RunConfig(url=fake_server.url, osl=32), output=output, resume=True,
                      install_signal_handlers=False)


def test_per_sample_counter_deltas_at_concurrency_1(fake_server: FakeServer, tmp_path: Path) -> None:
    fake_server.state.drafting = True
    run, _ = run_benchmark(make_prompts(), _config(fake_server), output=tmp_path / "r.json",
                           install_signal_handlers=False)
    for result in run.results:
        assert result.spec["accepted"] == result.draft_n_accepted
        assert result.spec["draft_tokens"] == result.draft_n
    assert run.meta["acceptance"]["server_wide"] is False


def test_counters_moving_between_samples_flag_server_wide(fake_server: FakeServer, tmp_path: Path) -> None:
    state = fake_server.state
    state.drafting = True

    def other_traffic(current: FakeState) -> None:
        current.drafts += 1  # someone else's requests move the counters between ours

    state.on_metrics = other_traffic
    run, _ = run_benchmark(make_prompts(), _config(fake_server), output=tmp_path / "r.json",
                           install_signal_handlers=False)
    assert run.meta["acceptance"]["server_wide"] is True
    assert not any("drafts" in result.spec for result in run.results)  # untrustworthy deltas are dropped


def test_concurrency_above_1_is_server_wide(fake_server: FakeServer, tmp_path: Path) -> None:
    fake_server.state.drafting = True
    run, _ = run_benchmark(make_prompts(), _config(fake_server, concurrency=2), output=tmp_path / "r.json",
                           install_signal_handlers=False)
    assert run.meta["acceptance"]["server_wide"] is True
    assert all("drafts" not in result.spec for result in run.results)


def test_an_unexpected_error_fails_one_sample_not_the_run(fake_server: FakeServer, tmp_path: Path,
                                                          monkeypatch) -> None:
    real = Transport.post

    async def flaky(self, url, body):
        if b"coding q1" in body:
            raise RuntimeError("boom")
        return await real(self, url, body)

    monkeypatch.setattr(Transport, "post", flaky)
    run, _ = run_benchmark(make_prompts(), _config(fake_server), output=tmp_path / "r.json",
                           install_signal_handlers=False)
    assert len(run.results) == 4
    (failed,) = [result for result in run.results if not result.ok]
    assert failed.id == "coding-001" and failed.error_kind == "internal" and "boom" in failed.error


def test_a_huge_integer_is_invalid_json_not_a_crash(fake_state: FakeState, fake_server: FakeServer,
                                                    tmp_path: Path) -> None:
    fake_state.fault = lambda index, body: "huge_int" if index == 0 else None
    run, _ = run_benchmark(make_prompts(1), _config(fake_server), output=tmp_path / "r.json",
                           install_signal_handlers=False)
    assert [r.error_kind for r in run.results] == ["invalid_json", None]


def test_resume_after_a_torn_journal_line(fake_server: FakeServer, tmp_path: Path) -> None:
    output = tmp_path / "r.json"
    run_benchmark(make_prompts(), _config(fake_server), output=output, install_signal_handlers=False)
    journal = Path(str(output) + ".jsonl")
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[:3]) + lines[3][:25])  # header, two results, a torn third
    resumed, _ = run_benchmark(make_prompts(), _config(fake_server), output=output, resume=True,
                               install_signal_handlers=False)
    assert resumed.completed_samples == 4
    reloaded = load_run(journal)
    assert reloaded.completed_samples == 4 and reloaded.failed_samples == 0


def test_reasoning_is_kept_apart_from_the_answer(fake_state: FakeState, fake_server: FakeServer,
                                                 tmp_path: Path) -> None:
    fake_state.reasoning = "Let me think step by step."
    run, _ = run_benchmark(make_prompts(1, ("qa",)), _config(fake_server), output=tmp_path / "r.json",
                           install_signal_handlers=False)
    result = run.results[0]
    assert result.reasoning == ("Let me think step by step.",)
    assert result.outputs == ("Answer to: qa question 0",)  # the lossless check compares answers only


def test_a_reset_after_the_request_was_read_is_not_resent(fake_state: FakeState, fake_server: FakeServer,
                                                          tmp_path: Path) -> None:
    fake_state.fault = lambda index, body: "reset_after_read" if index == 0 else None
    run, _ = run_benchmark(make_prompts(1, ("qa",)), _config(fake_server), output=tmp_path / "r.json",
                           install_signal_handlers=False)
    assert run.results[0].error_kind == "disconnect"
    assert len(fake_state.requests) == 1  # sent once, not resent by the transport


def test_resumed_run_rebuilds_acceptance_from_per_sample_counters(fake_state: FakeState, fake_server: FakeServer,
                                                                  tmp_path: Path) -> None:
    fake_state.drafting = True
    output = tmp_path / "r.json"
    fake_state.fault = lambda index, body: "http_500" if index < 2 else None
    run_benchmark(make_prompts(), _config(fake_server), output=output, install_signal_handlers=False)
    fake_state.fault = lambda index, body: None
    resumed, _ = run_benchmark(make_prompts(), _config(fake_server), output=output, resume=True,
                               install_signal_handlers=False)
    acceptance = resumed.meta["acceptance"]
    assert acceptance["source"] == "per-sample metrics" and acceptance["server_wide"] is False
    assert acceptance["accepted"] == sum(result.draft_n_accepted for result in resumed.results)


def test_resume_refuses_the_same_ids_with_other_text(fake_server: FakeServer, tmp_path: Path) -> None:
    from dataclasses import replace

    output = tmp_path / "r.json"
    prompts = make_prompts()
    run_benchmark(prompts, _config(fake_server), output=output, install_signal_handlers=False)
    changed = replace(prompts, samples=(replace(prompts.samples[0], turns=("other text",)), *prompts.samples[1:]))
    with pytest.raises(BenchError, match="prompts differ"):
        run_benchmark(changed, _config(fake_server), output=output, resume=True, install_signal_handlers=False)


def test_run_loop_holds_full_collections_back_for_the_run_and_restores_the_collector() -> None:
    import gc

    from bench.runner import FULL_COLLECTIONS_HELD, run_loop

    before = gc.get_threshold()

    async def inside() -> tuple[tuple[int, int, int], int]:
        return gc.get_threshold(), gc.get_freeze_count()

    thresholds, frozen = run_loop(inside())
    assert thresholds == (before[0], before[1], FULL_COLLECTIONS_HELD) and frozen > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0

    async def failing() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        run_loop(failing())
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
