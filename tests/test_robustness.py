"""Nothing lost: assorted faults, interrupt and resume, property-based parsing, secrets, unsafe calls."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from bench import BenchError
from bench.engines import ENGINES, ResponseError
from bench.prompts import PromptSet, Sample
from bench.records import load_run, read_journal, run_from_dict
from bench.runner import RunConfig, SSEDecoder, run_benchmark
from tests.fakeserver import FakeServer, FakeState

ROOT = Path(__file__).resolve().parents[1]
FAULTS = {
    "http_500": "http_5xx", "http_400": "http_4xx", "http_429": "http_429", "invalid_json": "invalid_json",
    "missing_fields": "missing_fields", "nan_timings": "bad_timings", "negative_timings": "bad_timings",
    "absurd_timings": "bad_timings", "disconnect": "disconnect", "slow": "timeout",
}


def _prompts(count: int) -> PromptSet:
    samples = tuple(Sample(id=f"s{index:03d}", category=("coding", "qa", "rag")[index % 3], turns=(f"s{index:03d}",))
                    for index in range(count))
    return PromptSet(samples=samples, source="test", bench="qualitative", categories=("coding", "qa", "rag"))


def test_a_third_of_requests_fail_in_assorted_ways(tmp_path: Path) -> None:
    kinds = list(FAULTS)
    planted: dict[str, str] = {}

    def fault(index: int, body: dict) -> str | None:
        sample = body["messages"][-1]["content"]
        number = int(sample[1:])
        if number % 3 != 0:
            return None
        planted[sample] = kinds[(number // 3) % len(kinds)]
        return planted[sample]

    server = FakeServer(FakeState(fault=fault, drafting=True))
    server.start()
    try:
        run, _ = run_benchmark(_prompts(30), RunConfig(url=server.url, osl=8, timeout=1.0, concurrency=3),
                               output=tmp_path / "r.json", install_signal_handlers=False)
    finally:
        server.stop()
    assert len(run.results) == 30 and run.failed_samples == 10
    for result in run.results:
        if result.id in planted:
            assert not result.ok and result.error_kind == FAULTS[planted[result.id]], (result.id, result.error)
        else:
            assert result.ok
    overall = run.summary[-1]
    assert overall["requests"] == 20 and overall["failed"] == 10
    assert overall["avg_pred_t_s"] == pytest.approx(50.0) and overall["accept_rate"] == pytest.approx(0.75)


def _speedbench(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bench", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def test_sigint_then_resume_gives_the_uninterrupted_summary(tmp_path: Path) -> None:
    state = FakeState(drafting=True, delay_s=0.15)
    server = FakeServer(state)
    server.start()
    secret = "sk-planted-" + "9" * 24
    try:
        common = ["run", "--url", server.url, "--osl", "8", "--category", "coding,qa", "--limit", "6", "--quiet"]
        full = tmp_path / "full.json"
        done = _speedbench(*common, "--output", str(full), env={"OPENAI_API_KEY": secret})
        full_out, full_err = done.communicate(timeout=60)
        assert done.returncode == 0, full_err

        partial = tmp_path / "partial.json"
        process = _speedbench(*common, "--output", str(partial), env={"OPENAI_API_KEY": secret})
        journal = Path(str(partial) + ".jsonl")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if journal.exists() and journal.read_text().count('"type": "result"') >= 3:
                break
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
        assert process.returncode == 130, err
        assert "Summary (elapsed=" in out and "--resume" in out
        interrupted = load_run(partial)
        assert 3 <= len(interrupted.results) < 12 and interrupted.meta["interrupted"] is True

        sent_before_resume = len(state.requests)
        resumed = _speedbench(*common, "--output", str(partial), "--resume", env={"OPENAI_API_KEY": secret})
        resumed_out, resumed_err = resumed.communicate(timeout=60)
        assert resumed.returncode == 0, resumed_err
    finally:
        server.stop()
    assert len(state.requests) - sent_before_resume == 12 - len(interrupted.results)  # only the missing ones
    first, second = load_run(full), load_run(partial)
    assert [r.id for r in sorted(second.results, key=lambda r: r.id)] == [r.id for r in sorted(first.results,
                                                                                               key=lambda r: r.id)]
    for before, after in zip(first.summary, second.summary, strict=True):
        for key in ("category", "requests", "turns", "failed", "avg_prompt_t_s", "avg_pred_t_s", "draft_n",
                    "accepted", "accept_rate"):
            assert before[key] == after[key], key
    for path in tmp_path.iterdir():
        assert secret not in path.read_text()
    for text in (full_out, full_err, out, err, resumed_out, resumed_err):
        assert secret not in text


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["choices", "usage", "timings", "message", "content", "metrics", "sglext", "draft_n",
                         "predicted_per_second", "prompt_ms", "speculative_decoding", "spec_tokens_details",
                         "finish_reason", "text", "x"]), children, max_size=5),
    max_leaves=20,
))
def test_response_parsing_never_crashes(data: object) -> None:
    for engine in ENGINES.values():
        try:
            stats = engine().parse(data if isinstance(data, dict) else {"choices": data})
        except ResponseError as exc:
            assert exc.kind in {"missing_fields", "bad_timings"}
            continue
        assert stats.prompt_tokens >= 0 and stats.completion_tokens >= 0
        assert stats.predicted_per_second is None or stats.predicted_per_second >= 0


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(
        st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=30),
        max_size=8,
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10),
)
def test_sse_decoding_is_independent_of_chunking(payloads: list[str], cuts: list[int]) -> None:
    stream = "".join(f"data: {payload}\n\n: comment\n" for payload in payloads).encode()
    points = sorted({min(cut, len(stream)) for cut in cuts} | {0, len(stream)})
    decoder = SSEDecoder()
    events: list[str] = []
    for start, stop in itertools.pairwise(points):
        events.extend(decoder.feed(stream[start:stop]))
    events.extend(decoder.close())
    assert events == payloads


@settings(max_examples=300, deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["summary", "results", "config", "id", "category", "ok", "latency_s", "schema_version",
                         "outputs", "spec", "selected_samples", "turns"]), children, max_size=6),
    max_leaves=25,
))
def test_result_loading_accepts_or_refuses_cleanly(data: object) -> None:
    try:
        run = run_from_dict(data, "x.json")
    except BenchError as exc:
        assert str(exc).startswith("x.json")
        return
    assert isinstance(run.summary, tuple)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_journal_loading_never_crashes(tmp_path_factory: pytest.TempPathFactory, blob: bytes) -> None:
    path = tmp_path_factory.mktemp("j") / "run.json.jsonl"
    path.write_bytes(blob)
    try:
        read_journal(path)
    except BenchError:
        pass


def test_no_shell_eval_or_pickle_in_the_package() -> None:
    source = "\n".join(path.read_text() for path in (ROOT / "bench").glob("*.py"))
    assert "shell=True" not in source
    assert not re.search(r"\b(pickle|marshal|eval|exec)\s*\(", source)
    assert "import pickle" not in source and "yaml.load(" not in source


def test_existing_output_is_not_overwritten(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text(json.dumps({"keep": True}))
    process = _speedbench("run", "--url", "127.0.0.1:9", "--osl", "4", "--limit", "1", "--output", str(target))
    _, err = process.communicate(timeout=60)
    assert process.returncode == 2 and "--force" in err
    assert json.loads(target.read_text()) == {"keep": True}
