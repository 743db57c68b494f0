"""Nothing lost, nothing leaked, nothing mixed: each case an adversary found, against a small fault server.

The first sections are the second round of cases, the "round 3" sections the third.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import gzip
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from bench import BenchError, cli, forget_secrets, redact, redact_url, register_secret
from bench.engines import VLLM, LlamaCpp, ResponseError, SGLang
from bench.pipeline import PipelineConfig, run_pipeline
from bench.prompts import PromptSet, Sample, load_prompts, rows_to_samples
from bench.records import Journal, Run, load_run, read_journal, save_run, summarize
from bench.runner import RunConfig, SilentProgress, SSEDecoder, normalize_base_url, retry_after_seconds, run_benchmark
from tests.fakeserver import FakeServer, FakeState, RawServer, http_response, read_request

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    """Each test's secrets stay its own: later tests' outputs are not masked where they share 8 characters."""
    yield
    forget_secrets()


def _prompts(count: int) -> PromptSet:
    samples = tuple(Sample(id=f"s{index:03d}", category=("coding", "qa")[index % 2], turns=(f"s{index:03d}",))
                    for index in range(count))
    return PromptSet(samples=samples, source="test", bench="qualitative", categories=("coding", "qa"))


def _dataset(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "prompts.jsonl"
    rows = [{"question_id": f"q{index}", "category": ("coding", "qa")[index % 2], "turns": [f"question {index}"]}
            for index in range(count)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@contextlib.contextmanager
def _fake(state: FakeState | None = None) -> Iterator[FakeServer]:
    server = FakeServer(state or FakeState())
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "OPENAI_API_KEY": ""})


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line_error(err: str) -> None:
    assert "Traceback" not in err and "never retrieved" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("speedbench: error: "), err


# ---------------------------------------------------------------- 1. journal write errors


def test_journal_write_error_stops_cleanly_and_keeps_finished_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    original = Journal.append
    calls = {"n": 0}

    def flaky_append(self: Journal, result: Any, **options: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 4:  # the disk is full for a moment
            raise OSError(errno.ENOSPC, "No space left on device")
        original(self, result, **options)

    monkeypatch.setattr(Journal, "append", flaky_append)
    output = tmp_path / "run.json"
    with _fake() as server:
        code, _, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 10)),
                             "--osl", "8", "--output", str(output), "--quiet")
    assert code == cli.EXIT_FAILED
    _one_line_error(err)
    assert "No space left on device" in err and "4 of 10" in err
    run = load_run(output)  # the run file holds every finished sample, the one the journal missed included
    assert len(run.results) == 4 and all(result.ok for result in run.results)
    assert run.meta["interrupted"] is True and run.selected_samples == 10
    _, journalled = read_journal(f"{output}.jsonl")
    assert len(journalled) == 3


def test_a_journal_flush_that_fails_stops_the_run_and_keeps_finished_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    original = Journal.flush
    calls = {"n": 0}

    def flaky_flush(self: Journal) -> None:  # lines are handed to the OS once per loop iteration
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        original(self)

    monkeypatch.setattr(Journal, "flush", flaky_flush)
    output = tmp_path / "run.json"
    with _fake() as server:
        code, _, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 10)),
                             "--osl", "8", "--output", str(output), "--quiet")
    assert code == cli.EXIT_FAILED
    _one_line_error(err)
    assert "No space left on device" in err
    run = load_run(output)  # every sample that finished is in the run file
    assert 2 <= len(run.results) < 10 and all(result.ok for result in run.results)
    assert run.meta["interrupted"] is True


def test_cli_exit_code_says_whether_every_selected_sample_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench.runner

    def partial_run(prompts: PromptSet, config: RunConfig, **kwargs: Any) -> tuple[Run, bool]:
        run, _ = real(prompts, config, **kwargs)
        return Run(config=run.config, selected_samples=run.selected_samples, results=run.results[:2],
                   summary=run.summary, meta=run.meta, path=run.path), False

    real = bench.runner.run_benchmark
    monkeypatch.setattr(bench.runner, "run_benchmark", partial_run)
    with _fake() as server:
        code, _, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 4)),
                             "--osl", "8", "--output", str(tmp_path / "r.json"), "--quiet")
    assert code == cli.EXIT_FAILED and "only 2 of 4 selected samples finished" in err


def test_disk_full_on_a_small_tmpfs(tmp_path: Path) -> None:
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"this machine does not allow mounting a tmpfs: {mounted.stderr.strip()}")
    try:
        state = FakeState(reasoning="r" * 6000)  # each journalled result is ~6 KB: 64 KB fills after ~10
        with _fake(state) as server:
            result = _cli("run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 22)), "--osl", "8",
                          "--output", str(mount_point / "run.json"), "--quiet")
        assert result.returncode == cli.EXIT_FAILED, result.stderr
        _one_line_error(result.stderr)
        assert "No space left on device" in result.stderr
        assert "of 22 samples finished" in result.stderr
        assert len(state.requests) < 22  # the run stopped instead of sending samples it could not record
        _, journalled = read_journal(mount_point / "run.json.jsonl")
        assert journalled and all(item.ok for item in journalled)
    finally:
        subprocess.run(["umount", str(mount_point)], capture_output=True)


# ---------------------------------------------------------------- 2/3. secrets


def test_url_password_never_reaches_run_file_journal_report_or_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "sk-urlpass-" + "7" * 20
    state = FakeState(fault=lambda index, body: "http_500" if index == 0 else None)
    with _fake(state) as server:
        url = server.url.replace("http://", f"http://user:{secret}@")
        code, out, err = _main(capsys, "run", "--url", url, "--dataset", str(_dataset(tmp_path, 6)), "--osl", "8",
                               "--output", str(tmp_path / "r.json"), "--quiet")
    assert code == cli.EXIT_FAILED and state.headers[0]["Authorization"].startswith("Basic ")
    assert secret not in out + err
    for path in (tmp_path / "r.json", tmp_path / "r.json.jsonl"):
        assert secret not in path.read_text(encoding="utf-8")
    assert load_run(tmp_path / "r.json").config["url"].startswith("http://***@127.0.0.1")
    code, out, err = _main(capsys, "report", "--baseline", str(tmp_path / "r.json"),
                           "--speculative", str(tmp_path / "r.json"), "--out", str(tmp_path / "rep"),
                           "--allow-mismatch")  # the same file twice is refused without it
    assert secret not in out + err
    assert code == 0 and secret not in (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    code, _, err = _main(capsys, "run", "--url", f"http://user:{secret}@127.0.0.1:99999")
    assert code == 2 and secret not in err and "***@" in err


def test_a_server_echoing_the_key_in_a_401_body_never_gets_it_stored_or_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "sk-echoed-" + "5" * 24
    with _fake(FakeState(fault=lambda index, body: "echo_auth")) as server:
        code, out, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 2)),
                               "--osl", "8", "--api-key", secret, "--output", str(tmp_path / "r.json"), "--quiet")
    assert code == cli.EXIT_FAILED and "first error: HTTP 401" in err
    assert secret not in out + err
    for path in (tmp_path / "r.json", tmp_path / "r.json.jsonl"):
        text = path.read_text(encoding="utf-8")
        assert secret not in text and "unauthorized" in text
    assert all("\n" not in (result.error or "") for result in load_run(tmp_path / "r.json").results)


def test_redaction_rules() -> None:
    register_secret("sk-registered-123456")
    assert redact_url("https://bob:hunter22@host:1/v1") == "https://***@host:1/v1"
    text = redact('{"authorization": "Bearer abc.def"} x-api-key: k123456 token sk-registered-123456 '
                  "http://a:b@h/ Authorization: Basic dXNlcjpwYXNz")
    for leak in ("abc.def", "k123456", "sk-registered-123456", "a:b@", "dXNlcjpwYXNz"):
        assert leak not in text, text


# ---------------------------------------------------------------- 4. empty and hand-edited run files


def _save(path: Path, results: tuple = ()) -> Path:
    save_run(Run(config={"url": "x"}, selected_samples=4, results=results,
                 summary=tuple(summarize(list(results)))), path)
    return path


@pytest.mark.parametrize("command", ["compare", "report", "regress"])
def test_zero_result_run_files_give_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    empty = str(_save(tmp_path / "empty.json"))
    args = {
        "compare": ["compare", "--baseline", empty, "--speculative", empty, "--stats"],
        "report": ["report", "--baseline", empty, "--speculative", empty, "--out", str(tmp_path / "o")],
        "regress": ["regress", "--reference", empty, "--candidate", empty],
    }[command]
    code, _, err = _main(capsys, *args)
    assert code == 2
    _one_line_error(err)


@pytest.mark.parametrize(("where", "key", "value"), [
    ("result", "outputs", [1, {"a": 2}]), ("result", "itl_s", ["x"]), ("result", "draft_n", "many"),
    ("summary", "avg_pred_t_s", "fast"), ("summary", "accept_rate", [1]),
])
def test_hand_edited_values_are_refused_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, key: str, value: Any
) -> None:
    from bench.records import SampleResult

    results = tuple(SampleResult(id=f"s{i}", category="qa", ok=True, turns=1, latency_s=1.0 + i,
                                 predicted_per_second=50.0 + i, outputs=("x",)) for i in range(6))
    good = _save(tmp_path / "good.json", results)
    data = json.loads(good.read_text())
    (data["results"] if where == "result" else data["summary"])[0][key] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    for args in (["compare", "--baseline", str(good), "--speculative", str(bad), "--stats"],
                 ["regress", "--reference", str(good), "--candidate", str(bad)]):
        code, _, err = _main(capsys, *args)
        assert code == 2 and key in err
        _one_line_error(err)


# ---------------------------------------------------------------- 5. draft counts


@pytest.mark.parametrize(("drafted", "accepted"), [(10, 100), (-4, 0), (10, -1), ("10", 5), (10, "5"), (10.5, 2)])
def test_impossible_draft_counts_are_refused(drafted: Any, accepted: Any) -> None:
    base = {"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}], "usage": {"completion_tokens": 4}}
    responses = [
        (LlamaCpp(), {**base, "timings": {"draft_n": drafted, "draft_n_accepted": accepted}}),
        (VLLM(), {**base, "metrics": {"speculative_decoding": {"num_draft_tokens": drafted,
                                                              "num_accepted_draft_tokens": accepted}}}),
        (SGLang(), {**base, "sglext": {"spec_tokens_details": {"spec_num_proposed_drafts": drafted,
                                                               "spec_num_correct_drafts": accepted}}}),
    ]
    for engine, response in responses:
        with pytest.raises(ResponseError) as caught:
            engine.parse(response)
        assert caught.value.kind == "bad_timings"


def test_accept_rate_never_exceeds_one_end_to_end(tmp_path: Path) -> None:
    with _fake(FakeState(drafting=True)) as server:
        server.state.fault = lambda index, body: "accepted_above_drafted"
        original = server._fault

        async def fault(request: Any, name: str, body: dict) -> Any:
            from aiohttp import web

            from tests.fakeserver import completion
            data = completion(server.state, body)
            data["timings"].update(draft_n=4, draft_n_accepted=40)
            return web.json_response(data) if name == "accepted_above_drafted" else await original(request, name, body)

        server._fault = fault  # type: ignore[method-assign]
        run, _ = run_benchmark(_prompts(2), RunConfig(url=server.url, osl=8), install_signal_handlers=False)
    assert [result.error_kind for result in run.results] == ["bad_timings", "bad_timings"]
    assert run.summary[-1]["accept_rate"] is None


# ---------------------------------------------------------------- 6. --extra-inputs


@pytest.mark.parametrize("extra", ['{"messages": []}', '{"stream": true}', '{"max_completion_tokens": 9999}',
                                   '{"n": 3, "temperature": 0}', '{"prompt": "x"}'])
def test_extra_inputs_cannot_override_harness_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str
) -> None:
    with _fake() as server:
        code, _, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 2)),
                             "--extra-inputs", extra, "--output", str(tmp_path / "r.json"), "--quiet")
        assert not server.state.requests
    assert code == 2 and next(iter(json.loads(extra))) in err
    _one_line_error(err)


def test_extra_inputs_model_only_refused_when_model_is_given(tmp_path: Path) -> None:
    RunConfig(extra_inputs={"model": "m"}).validate()
    with pytest.raises(BenchError, match="model"):
        RunConfig(model="a", extra_inputs={"model": "b"}).validate()


# ---------------------------------------------------------------- 7. single writer


def test_a_second_writer_of_the_same_output_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "r.json"
    with _fake(FakeState(delay_s=0.3)) as server:
        first = subprocess.Popen([sys.executable, "-m", "bench", "run", "--url", server.url, "--dataset",
                                  str(_dataset(tmp_path, 6)), "--osl", "8", "--output", str(output), "--quiet"],
                                 cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while not server.state.requests and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.state.requests, "the first run never started"
            code, _, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 6)),
                                 "--osl", "8", "--output", str(output), "--force", "--quiet")
            assert code == 2 and "another speedbench run is writing it" in err
            _one_line_error(err)
            code, _, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 6)),
                                 "--osl", "8", "--output", str(output), "--resume", "--quiet")
            assert code == 2 and "another speedbench run is writing it" in err
        finally:
            first.wait(60)
    assert first.returncode == 0, first.stderr
    assert len(server.state.requests) == 6  # nothing sent twice
    assert len(load_run(output).results) == 6


def test_the_lock_is_released_when_the_run_ends(tmp_path: Path) -> None:
    output = tmp_path / "r.json"
    with _fake() as server:
        run_benchmark(_prompts(2), RunConfig(url=server.url, osl=8), output=output, install_signal_handlers=False)
    with open(f"{output}.lock", "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # would raise if still held


# ---------------------------------------------------------------- 8. probes under the stop mechanism


async def _hang_metrics(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        _, path, _, _ = await read_request(reader)
        if path == "/metrics":
            await asyncio.sleep(3600)
        if path == "/v1/models":  # an OpenAI-compatible server, so the run gets past its first check
            writer.write(http_response(200, b'{"object": "list", "data": []}'))
            await writer.drain()
            return
        writer.write(http_response(404, b"no"))
        await writer.drain()
        return


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_is_honoured_while_a_probe_hangs(tmp_path: Path, signum: int) -> None:
    with RawServer(_hang_metrics) as server:
        process = subprocess.Popen([sys.executable, "-m", "bench", "run", "--url", server.url, "--dataset",
                                    str(_dataset(tmp_path, 4)), "--output", str(tmp_path / "r.json"), "--quiet"],
                                   cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not server.connections and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        sent = time.monotonic()
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
        waited = time.monotonic() - sent
    assert process.returncode == cli.EXIT_INTERRUPTED, err
    assert waited < 4.5, f"took {waited:.1f}s to honour the stop (probe timeout is 5 s, old client: 10 s per probe)"
    assert "Traceback" not in err


async def _hang_everything(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    await asyncio.sleep(3600)


def test_a_stop_is_honoured_while_the_first_check_hangs(tmp_path: Path) -> None:
    with RawServer(_hang_everything) as server:
        process = subprocess.Popen([sys.executable, "-m", "bench", "run", "--url", server.url, "--dataset",
                                    str(_dataset(tmp_path, 4)), "--output", str(tmp_path / "r.json"), "--quiet"],
                                   cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not server.connections and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
        waited = time.monotonic() - sent
    assert process.returncode == cli.EXIT_INTERRUPTED, err
    assert waited < 4.5 and "Traceback" not in err
    assert not (tmp_path / "r.json").exists()


# ---------------------------------------------------------------- 9. bounded responses


@pytest.mark.parametrize("stream", [False, True])
def test_a_huge_response_is_bounded_and_recorded(tmp_path: Path, stream: bool) -> None:
    state = FakeState(fault=lambda index, body: "bigbody_3000000" if index == 0 else None)
    with _fake(state) as server:
        run, _ = run_benchmark(_prompts(3), RunConfig(url=server.url, osl=8, stream=stream,
                                                      max_response_bytes=256 * 1024),
                               output=tmp_path / "r.json", install_signal_handlers=False)
    first = run.results[0]
    assert not first.ok and first.error_kind == "too_large" and "262144" in (first.error or "")
    assert all(result.ok for result in run.results[1:])
    assert (tmp_path / "r.json").stat().st_size < 100_000
    assert (tmp_path / "r.json.jsonl").stat().st_size < 100_000


def test_max_response_bytes_is_a_cli_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with _fake(FakeState(fault=lambda index, body: "bigbody_50000")) as server:
        code, _, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 1)), "--osl",
                             "8", "--max-response-bytes", "4096", "--output", str(tmp_path / "r.json"), "--quiet")
    assert code == cli.EXIT_FAILED and "larger than 4096 bytes" in err


# ---------------------------------------------------------------- 10. SSE


def _decode(stream: bytes, cut: int) -> list[str]:
    decoder = SSEDecoder()
    return decoder.feed(stream[:cut]) + decoder.feed(stream[cut:]) + decoder.close()


@pytest.mark.parametrize("newline", [b"\n", b"\r", b"\r\n"])
def test_sse_follows_the_event_stream_rules(newline: bytes) -> None:
    stream = newline.join([
        b": a comment", b"event: message", b"id: 7", b"data: {\"a\":", b"data:  1}", b"", b"data", b"",
        b"retry: 100", b"data: last", b"", b"data: never dispatched",
    ])
    for cut in range(len(stream) + 1):
        assert _decode(stream, cut) == ['{"a":\n 1}', "", "last"], cut


async def _sse(body: bytes) -> Any:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _, path, _, _ = await read_request(reader)
        if path != "/v1/chat/completions":
            writer.write(http_response(404, b"no"))
        else:
            writer.write(http_response(200, body, {"Content-Type": "text/event-stream"}))
        await writer.drain()
    return handler


def _stream_run(tmp_path: Path, body: bytes) -> Any:
    handler = asyncio.run(_sse(body))
    with RawServer(handler) as server:
        run, _ = run_benchmark(_prompts(1), RunConfig(url=server.url, osl=8, stream=True, engine="openai"),
                               install_signal_handlers=False)
    return run.results[0]


def test_multi_line_data_and_bare_cr_streams_are_read(tmp_path: Path) -> None:
    chunk = {"choices": [{"delta": {"content": "hello world"}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    pretty = json.dumps(chunk, indent=1).replace("\n", "\ndata: ")
    for body in (f"data: {pretty}\n\ndata: [DONE]\n\n".encode(),
                 f"data: {json.dumps(chunk)}\r\rdata: [DONE]\r\r".encode()):
        result = _stream_run(tmp_path, body)
        assert result.ok, result.error
        assert result.outputs == ("hello world",) and result.completion_tokens == 2


def test_a_stream_of_only_done_is_not_a_successful_sample(tmp_path: Path) -> None:
    result = _stream_run(tmp_path, b"data: [DONE]\n\n")
    assert not result.ok and result.error_kind == "missing_fields"


# ---------------------------------------------------------------- 11. one-line errors


@pytest.mark.parametrize("args", [
    ["--header", "X-Evil: a\nInjected: b"], ["--api-key", "sk-abc\ndef"], ["--header", "Bad Name: x"],
])
def test_control_characters_in_headers_and_keys_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    with _fake() as server:
        code, _, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 1)), *args,
                             "--output", str(tmp_path / "r.json"), "--quiet")
        assert not server.state.requests
    assert code == 2 and "sk-abc" not in err
    _one_line_error(err)


def test_userinfo_url_plus_api_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with _fake() as server:
        url = server.url.replace("http://", "http://user:pw1234@")
        code, _, err = _main(capsys, "run", "--url", url, "--api-key", "sk-other-1234", "--dataset",
                             str(_dataset(tmp_path, 1)), "--output", str(tmp_path / "r.json"), "--quiet")
    assert code == 2 and "use one of them" in err and "pw1234" not in err
    _one_line_error(err)


def test_broken_pipe_on_stdout_exits_quietly(tmp_path: Path) -> None:
    from bench.records import SampleResult

    results = tuple(SampleResult(id=f"s{i}", category=f"c{i}", ok=True, turns=1, latency_s=1.0,
                                 predicted_per_second=50.0) for i in range(300))
    run_file = _save(tmp_path / "r.json", results)
    other = _save(tmp_path / "o.json", tuple(replace(result, latency_s=2.0) for result in results))
    command = f"{sys.executable} -m bench compare --baseline {run_file} --speculative {other}"
    for reader, lines in (("head -2", 2), ("true", 0)):  # `true` leaves before the first write: EPIPE for sure
        pipeline = subprocess.run(f"{command} | {reader}; exit ${{PIPESTATUS[0]}}", shell=True, executable="/bin/bash",
                                  cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert len(pipeline.stdout.splitlines()) == lines
        # nothing about the pipe: only the comparability note these synthetic runs (no prompt digest) get
        assert all(line.startswith("speedbench: note: no prompt digest") for line in pipeline.stderr.splitlines()), \
            pipeline.stderr
        assert pipeline.returncode in (0, 141)  # 141 = 128 + SIGPIPE, as `yes | head` reports


def test_no_gathering_future_noise_on_a_double_ctrl_c(tmp_path: Path) -> None:
    with _fake(FakeState(delay_s=3)) as server:
        process = subprocess.Popen([sys.executable, "-m", "bench", "run", "--url", server.url, "--dataset",
                                    str(_dataset(tmp_path, 8)), "--concurrency", "4", "--output",
                                    str(tmp_path / "r.json"), "--quiet"],
                                   cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while len(server.state.requests) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        time.sleep(0.3)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    assert process.returncode == cli.EXIT_INTERRUPTED
    assert "never retrieved" not in err and "CancelledError" not in err and "Traceback" not in err, err


# ---------------------------------------------------------------- 12. serve --port


def test_port_probe_ignores_time_wait_leftovers() -> None:
    from bench.server import port_is_free as _port_is_free

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    accepted.close()  # the server side closes first: its end of the connection goes to TIME_WAIT
    time.sleep(0.1)
    client.close()
    listener.close()
    assert _port_is_free(port)


def test_an_explicit_port_that_is_taken_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.server import EmbeddedServer, ServerConfig, ServerError

    spawned: list[int] = []
    monkeypatch.setattr(EmbeddedServer, "check_models", lambda self: (Path("m.gguf"), None))
    monkeypatch.setattr(EmbeddedServer, "_spawn_and_wait", lambda self, model, draft, port, deadline:
                        spawned.append(port))
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(ServerError, match=f"port {port} is taken"):
            EmbeddedServer(ServerConfig(port=port)).start()
    assert spawned == []


def test_serve_ready_line_comes_after_the_signal_handlers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench.server

    class Server:
        url = "http://127.0.0.1:1"

        def __init__(self, config: Any) -> None:
            pass

        def __enter__(self) -> Server:
            return self

        def __exit__(self, *exc_info: object) -> None:
            pass

        def is_running(self) -> bool:
            return True

    monkeypatch.setattr(bench.server, "EmbeddedServer", Server)
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    real_write = sys.stdout.write

    def write(text: str) -> int:
        if "Ctrl-C to stop" in text:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C the moment the ready line is printed
        return real_write(text)

    monkeypatch.setattr(sys.stdout, "write", write)
    try:
        code = cli.main(["serve"])
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert code == cli.EXIT_OK


# ---------------------------------------------------------------- 13. the smaller ones


def test_retry_after_as_an_http_date() -> None:
    from datetime import UTC, datetime, timedelta

    when = format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    assert 15 <= retry_after_seconds({"Retry-After": when}) <= 20
    assert retry_after_seconds({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0


def test_a_bad_gzip_body_is_labelled_on_one_line(tmp_path: Path) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _, path, _, _ = await read_request(reader)
        body = gzip.compress(b'{"choices": []}')[:10] + b"not gzip at all" * 4
        writer.write(http_response(200 if path.endswith("completions") else 404, body,
                                   {"Content-Encoding": "gzip", "Content-Type": "application/json"}))
        await writer.drain()

    with RawServer(handler) as server:
        run, _ = run_benchmark(_prompts(1), RunConfig(url=server.url, osl=8), install_signal_handlers=False)
    (result,) = run.results
    assert result.error_kind == "bad_encoding" and "\n" not in (result.error or ""), result.error


def test_output_directory_with_force_is_refused_before_sending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _fake() as server:
        code, _, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 2)),
                             "--output", str(tmp_path), "--force", "--quiet")
        assert not server.state.requests
    assert code == 2 and "is a directory" in err
    _one_line_error(err)


def test_duplicate_question_ids_are_reported_as_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    path.write_text('{"question_id": "a", "category": "qa", "turns": ["x"]}\n'
                    '{"question_id": "a", "category": "qa", "turns": ["y"]}\n', encoding="utf-8")
    with pytest.raises(BenchError, match=r"question_id .*'a'"):
        load_prompts(str(path))


def test_non_string_turns_are_never_sent_as_python_repr() -> None:
    samples, skipped, _ = rows_to_samples([
        {"question_id": "1", "category": "qa", "turns": [{"role": "user", "content": "x"}]},
        {"question_id": "2", "category": "qa", "turns": ["fine", 42]},
        {"question_id": "3", "category": "qa", "turns": ["fine"]},
    ])
    assert [sample.id for sample in samples] == ["3"] and skipped == 2


def test_category_all_in_a_list_selects_every_category() -> None:
    assert load_prompts(category="all,qa").samples == load_prompts(category="all").samples


def test_https_against_plain_http_fails_fast_with_a_hint(tmp_path: Path) -> None:
    with _fake() as server:
        url = server.url.replace("http://", "https://")
        with pytest.raises(BenchError, match="try http://"):
            run_benchmark(_prompts(4), RunConfig(url=url, osl=8), install_signal_handlers=False)
        assert not server.state.requests


def test_https_against_a_silent_plain_server_fails_fast_with_a_hint(tmp_path: Path) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)  # the TLS hello: a plain-HTTP server waits for a request line forever
        await asyncio.sleep(3600)

    with RawServer(silent) as server:
        started = time.monotonic()
        with pytest.raises(BenchError, match="try http://"):
            run_benchmark(_prompts(4), RunConfig(url=server.url.replace("http://", "https://"), osl=8),
                          install_signal_handlers=False)
    assert time.monotonic() - started < 30  # one probe's timeout, not one per sample (old client: 74 s)


@pytest.mark.parametrize("given", ["http://h:1/v1/chat/completions", "h:1/v1/completions/", "http://h:1/chat/completions"])
def test_a_full_endpoint_url_is_normalised(given: str) -> None:
    assert normalize_base_url(given) == "http://h:1/v1"


def test_bench_resume_continues_an_interrupted_comparison(tmp_path: Path) -> None:
    with _fake() as base, _fake(FakeState(drafting=True)) as spec:
        config = PipelineConfig.build(limit=2, osl=8, base_url=base.url, spec_url=spec.url,
                                results_dir=str(tmp_path), label="ab")
        assert run_pipeline(config, out=lambda text: None, progress=SilentProgress()) == 0
        (folder,) = tmp_path.iterdir()
        turns = {result.id: result.turns for result in load_run(folder / "baseline.json").results}
        selected = len(turns)
        journal = folder / "speculative.json.jsonl"  # as if the speculative run had been killed after 1 sample
        journal.write_text("".join(journal.read_text().splitlines(keepends=True)[:2]))
        _, (kept,) = read_journal(journal)
        (folder / "speculative.json").unlink()
        (folder / "comparison.txt").unlink()
        sent_base, sent_spec = len(base.state.requests), len(spec.state.requests)
        resumed = PipelineConfig.build(limit=2, osl=8, base_url=base.url, spec_url=spec.url,
                                 results_dir=str(tmp_path), label="ab", resume=str(folder))
        assert run_pipeline(resumed, out=lambda text: None, progress=SilentProgress()) == 0
        assert len(base.state.requests) == sent_base  # the finished baseline sent nothing again
        missing_turns = sum(count for sample_id, count in turns.items() if sample_id != kept.id)
        assert len(spec.state.requests) - sent_spec == missing_turns  # only the missing samples were sent
        assert len(load_run(folder / "speculative.json").results) == selected
        assert (folder / "comparison.txt").exists() and list(tmp_path.iterdir()) == [folder]


def test_bench_resume_is_a_cli_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(capsys, "bench", "--resume", str(tmp_path), "--base-url", "http://127.0.0.1:1",
                         "--spec-url", "http://127.0.0.1:1")
    assert code == 2 and "no interrupted comparison to resume" in err
    _one_line_error(err)


# ================================================================ round 3


def _secret_runs(secret: str) -> set[str]:
    return {secret[index:index + 8] for index in range(len(secret) - 7)}


def _unescaped(text: str) -> str:
    """The text with JSON and URL escapes undone (twice), so an escaped run of a secret shows."""
    from urllib.parse import unquote

    for _ in range(2):
        text = text.replace("\\\\", "\\").replace("\\/", "/")
        text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda match: chr(int(match.group(1), 16)), text)
        text = unquote(text)
    return text


def _assert_no_secret(text: str, secret: str, where: str = "", *encoded: str) -> None:
    runs = _secret_runs(secret).union(*(_secret_runs(form) for form in encoded))
    for view in (text, _unescaped(text)):
        leaked = [run for run in runs if run in view]
        assert not leaked, f"{where}: {leaked[:3]} of the secret survived in {view[:600]!r}"


def _echo_handler(status: int, body_of: Any, failing: int = 1) -> Any:
    """A raw server: the first `failing` sample requests get `status` with body_of(request headers); the rest a
    llama.cpp-shaped answer; every other path 404."""
    from tests.fakeserver import completion

    seen = {"chat": 0}

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _, path, headers, body = await read_request(reader)
        if not path.endswith("/chat/completions"):
            writer.write(http_response(404, b"no"))
        elif "messages" not in json.loads(body):  # the run's first check: the route exists, the body is empty
            writer.write(http_response(400, b'{"error": {"message": "no messages"}}'))
        elif json.loads(body).get("max_tokens") != 1 and seen["chat"] < failing:  # 1 token: the engine probe
            seen["chat"] += 1
            writer.write(http_response(status, body_of(headers).encode("utf-8"), {"Content-Type": "application/json"}))
        else:
            data = json.dumps(completion(FakeState(), json.loads(body))).encode()
            writer.write(http_response(200, data, {"Content-Type": "application/json"}))
        await writer.drain()

    return handler


def _run_and_collect(tmp_path: Path, capsys: pytest.CaptureFixture[str], handler: Any, *extra: str,
                     samples: int = 4) -> tuple[int, str]:
    """Run the CLI against a raw server, write a report of the run; return (exit code, everything written)."""
    output = tmp_path / "r.json"
    with RawServer(handler) as server:
        code, out, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, samples)),
                               "--osl", "8", *extra, "--output", str(output), "--quiet")
    written = [out, err, output.read_text(encoding="utf-8"), Path(f"{output}.jsonl").read_text(encoding="utf-8")]
    _, rout, rerr = _main(capsys, "report", "--baseline", str(output), "--speculative", str(output),
                          "--out", str(tmp_path / "rep"), "--allow-mismatch", "--allow-partial")
    written += [rout, rerr]
    written += [path.read_text(encoding="utf-8") for path in (tmp_path / "rep").glob("*.md")]
    return code, "\n".join(written)


def _echo_forms(secret: str) -> dict[str, str]:
    import base64
    from urllib.parse import quote

    return {
        "json_slash": secret.replace("/", "\\/"),  # as PHP's json_encode writes it
        "json_unicode": "".join(f"\\u{ord(char):04x}" for char in secret),
        "url": quote(secret, safe=""),
        "base64": base64.b64encode(secret.encode()).decode(),
        "basic": base64.b64encode(f"user:{secret}".encode()).decode(),
        "raw": secret,
    }


# ---------------------------------------------------------------- round 3, 1. secrets in disguise


@pytest.mark.parametrize("form", ["json_slash", "json_unicode", "url", "base64", "basic", "raw"])
def test_a_key_echoed_in_any_encoding_is_never_stored_or_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    secret = "sk/AbCdEfGh0123456789" + form.replace("_", "") + "XyZ"
    handler = _echo_handler(400, lambda headers: json.dumps(
        {"error": {"message": "invalid api key " + _echo_forms(headers["authorization"].split(" ", 1)[1])[form]}}
    ).replace("\\\\", "\\"))
    code, written = _run_and_collect(tmp_path, capsys, handler, "--api-key", secret)
    assert code == cli.EXIT_FAILED and "first error: HTTP 400" in written
    encoded = _echo_forms(secret)[form]
    _assert_no_secret(written, secret, form, encoded[7:] if form == "basic" else encoded.rstrip("="))


def test_redaction_masks_every_form_and_every_run_of_a_secret() -> None:
    secret = "sk/RegisteredKey-0123456789abc"
    register_secret(secret)
    for form, text in _echo_forms(secret).items():
        _assert_no_secret(redact(f"echo: {text} end"), secret, form, text[7:] if form == "basic" else text)
        assert "echo:" in redact(f"echo: {text} end")
    _assert_no_secret(redact("prefix " + secret[:20]), secret, "a cut prefix")
    _assert_no_secret(redact("suffix " + secret[-9:]), secret, "a cut suffix")
    assert redact("nothing secret here: 0123 sk") == "nothing secret here: 0123 sk"


# ---------------------------------------------------------------- round 3, 3. secret headers by another name


@pytest.mark.parametrize("name", ["Ocp-Apim-Subscription-Key", "X-Goog-Api-Key", "X-Amz-Signature",
                                  "X-Session-Cookie", "X-Client-Secret", "Private-Token"])
def test_secret_headers_are_recognised_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    secret = f"hv-Q7w9Zp3LmN-{len(name)}-{name[2:4]}55555555"
    handler = _echo_handler(400, lambda headers: f"subscription {headers[name.lower()]} is not valid; "
                                                 f"received {json.dumps(headers)}")
    code, written = _run_and_collect(tmp_path, capsys, handler, "--header", f"{name}: {secret}")
    assert code == cli.EXIT_FAILED and "first error: HTTP 400" in written
    _assert_no_secret(written, secret, name)


def test_secret_named_values_in_echoed_text_are_masked() -> None:
    for text in ('{"Ocp-Apim-Subscription-Key": "abcdef123456"}', "X-Goog-Api-Key: abcdef123456",
                 "?api_key=abcdef123456&x=1", '{\\"client_secret\\": \\"abcdef123456\\"}',
                 "set-cookie: session=abcdef123456", "Authorization: Token abcdef123456"):
        assert "abcdef" not in redact(text), text
    kept = "completion_tokens: 5, max_tokens=8, keyword: fine"
    assert redact(kept) == kept


# ---------------------------------------------------------------- round 3, 4. redaction before truncation


@pytest.mark.parametrize("offset", [455, 465, 475])
def test_a_key_straddling_the_error_cut_leaks_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], offset: int
) -> None:
    secret = "sk-straddle-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123"
    handler = _echo_handler(400, lambda headers: "e" * (offset - 9) + " bad key " + headers["authorization"][7:]
                            + " " + "f" * 400)
    code, written = _run_and_collect(tmp_path, capsys, handler, "--api-key", secret)
    assert code == cli.EXIT_FAILED
    _assert_no_secret(written, secret, str(offset))


def test_run_file_and_journal_redact_all_text_they_store(tmp_path: Path) -> None:
    from bench.records import SampleResult

    secret = "sk/StoredSecret-0123456789"
    register_secret(secret)
    escaped = secret.replace("/", "\\/")
    results = (SampleResult(id="a", category="qa", ok=False, turns=1, latency_s=1.0, error=f"echo {escaped}"),
               SampleResult(id="b", category="qa", ok=True, turns=1, latency_s=1.0, predicted_per_second=5.0))
    run = Run(config={"url": "x", "label": f"k{secret[:12]}"}, selected_samples=2, results=results,
              summary=tuple(summarize(list(results))),
              meta={"warnings": [f"server said {secret[3:]}"], "server": {"props": {"note": escaped}}})
    save_run(run, tmp_path / "r.json")
    journal = Journal(tmp_path / "r.json.jsonl", {"config": dict(run.config), "note": f"x {escaped}"})
    for result in results:
        journal.append(result)
    journal.close()
    for path in (tmp_path / "r.json", tmp_path / "r.json.jsonl"):
        _assert_no_secret(path.read_text(encoding="utf-8"), secret, path.name)
    assert load_run(tmp_path / "r.json").results[0].error == "echo ***"


# ---------------------------------------------------------------- round 3, 11. planted symbolic links


@pytest.mark.parametrize("planted", [".jsonl", ".lock"])
@pytest.mark.parametrize("resume", [False, True])
def test_a_link_planted_at_the_journal_or_lock_is_never_written_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], planted: str, resume: bool
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    output = tmp_path / "r.json"
    dataset = str(_dataset(tmp_path, 2))
    with _fake() as server:
        if resume:  # an interrupted run's journal, copied to the victim, then a link put in its place
            _main(capsys, "run", "--url", server.url, "--dataset", dataset, "--osl", "8", "--output", str(output))
            journal = Path(f"{output}.jsonl")
            journal.write_text(journal.read_text().splitlines(keepends=True)[0])
            if planted == ".jsonl":
                victim.write_text(journal.read_text())
            Path(f"{output}{planted}").unlink(missing_ok=True)  # a finished run leaves no lock file
            output.unlink()
        before = victim.read_text(encoding="utf-8")
        sent = len(server.state.requests)
        Path(f"{output}{planted}").symlink_to(victim)
        code, _, err = _main(capsys, "run", "--url", server.url, "--dataset", dataset, "--osl", "8", "--output",
                             str(output), "--quiet", *(["--resume"] if resume else ["--force"]))
        assert len(server.state.requests) == sent
    assert victim.read_text(encoding="utf-8") == before
    assert code == 2 and "symbolic link" in err, err
    _one_line_error(err)


def test_a_link_planted_at_the_run_files_temporary_name_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    (tmp_path / f".r.json.tmp-{os.getpid()}").symlink_to(victim)
    _save(tmp_path / "r.json")
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert load_run(tmp_path / "r.json").selected_samples == 4


# ---------------------------------------------------------------- round 3, 8. input that lies


def _dataset_text(tmp_path: Path, text: str, name: str = "bad.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("name", "text"), [
    ("deep.jsonl", '{"question_id": "a", "category": "qa", "turns": ["x"]}\n' + "[" * 200_000 + "\n"),
    ("deep.json", "[" * 200_000),
    ("shallow-but-deep.jsonl", '{"question_id": "a", "category": "qa", "turns": ["x"], "meta": '
     + "[" * 500 + "]" * 500 + "}\n"),
    ("surrogate.jsonl", '{"question_id": "a", "category": "qa\\udc80", "turns": ["x"]}\n'),
    ("surrogate-turn.jsonl", '{"question_id": "a", "category": "qa", "turns": ["x\\ud800y"]}\n'),
    ("huge-int.jsonl", '{"question_id": ' + "9" * 5000 + ', "category": "qa", "turns": ["x"]}\n'),
])
def test_a_dataset_that_lies_gets_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    path = _dataset_text(tmp_path, text, name)
    code, _, err = _main(capsys, "run", "--url", "http://127.0.0.1:9", "--dataset", str(path), "--output",
                         str(tmp_path / "r.json"), "--quiet")
    assert code == 2, err
    _one_line_error(err)
    assert not (tmp_path / "r.json").exists()


def _good_runs(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    from bench.records import SampleResult

    results = tuple(SampleResult(id=f"s{i}", category=("qa", "coding")[i % 2], ok=True, turns=1, latency_s=1.0 + i,
                                 predicted_per_second=50.0 + i, completion_tokens=8, spec={"steps": 3})
                    for i in range(8))
    good = _save(tmp_path / "good.json", results)
    return good, json.loads(good.read_text())


def _edit(data: dict[str, Any], where: str, value: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(data))
    part, _, key = where.partition(".")
    if part == "result":
        data["results"][0][key] = value
    elif part == "results":
        for result in data["results"]:
            result[key] = value
    elif part == "summary":
        data["summary"][0][key] = value
    else:
        data["results"][0]["spec"][key] = value
    return data


@pytest.mark.parametrize(("where", "value"), [
    ("result.latency_s", 10**400), ("result.completion_tokens", 10**400), ("result.itl_s", [0.1, 10**400]),
    ("summary.avg_pred_t_s", 10**400), ("spec.steps", 10**400), ("config.repeat", 10**400),
    ("results.category", "qa\udc80"), ("result.id", "s\ud800"), ("summary.category", "qa\udc80"),
    ("results.repeat", None), ("result.itl_s", [0.1, float("nan")]),
], ids=["latency-10e400", "tokens-10e400", "itl-10e400", "summary-10e400", "spec-10e400", "config-10e400",
        "category-surrogate", "id-surrogate", "summary-surrogate", "repeat-null", "itl-nan"])
@pytest.mark.parametrize("command", ["compare", "report", "regress"])
def test_a_run_file_that_lies_gets_one_line_or_a_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, value: Any, command: str
) -> None:
    good, data = _good_runs(tmp_path)
    if where == "config.repeat":
        data["config"]["repeat"] = value
        data["elapsed_s"] = value
    else:
        data = _edit(data, where, value)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data, ensure_ascii=True), encoding="utf-8")  # a lone surrogate as \\udc80
    args = {
        "compare": ["compare", "--baseline", str(good), "--speculative", str(bad), "--stats", "--allow-mismatch"],
        "report": ["report", "--baseline", str(good), "--speculative", str(bad), "--out", str(tmp_path / "o"),
                   "--allow-mismatch"],
        "regress": ["regress", "--reference", str(good), "--candidate", str(bad), "--allow-mismatch"],
    }[command]
    code, _, err = _main(capsys, *args)
    assert "Traceback" not in err
    if code == 2:
        _one_line_error(err)
    else:  # read as what it means: a null repeat is repeat 0, a 10**400 setting is no setting
        assert where in ("results.repeat", "config.repeat") and code in (0, 1), err


# ---------------------------------------------------------------- round 3, 7. injection through names


_EVIL = "<img src=x onerror=alert(1)> [click here](https://evil.example/x) www.evil.example @octocat #12 " \
        "\x1b]0;pwned\x07\x1b[2J\u202eevil"


def _named_runs(tmp_path: Path) -> tuple[Path, Path]:
    from bench.records import SampleResult

    def results(speed: float) -> tuple[SampleResult, ...]:
        return tuple(SampleResult(id=f"s{i}", category=(_EVIL, "qa")[i % 2], ok=True, turns=1, latency_s=1.0 + i,
                                  predicted_per_second=(speed + i) if i % 2 else None, completion_tokens=8)
                     for i in range(12))

    return _save(tmp_path / "base.json", results(50.0)), _save(tmp_path / "spec.json", results(80.0))


def _outside_code(markdown: str) -> str:
    """Markdown with fenced blocks and code spans removed: what GitHub renders as markup."""
    markdown = re.sub(r"(?ms)^(`{3,}).*?^\1", "", markdown)
    return re.sub(r"(`+).*?\1", "", markdown)


def test_names_reach_markdown_inert_and_the_terminal_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, spec = _named_runs(tmp_path)
    code, out, err = _main(capsys, "report", "--baseline", str(base), "--speculative", str(spec), "--out",
                           str(tmp_path / "rep"))
    assert code == 0, err
    report = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    assert "Not charted" in report or "not charted" in report
    rendered = _outside_code(report)
    for raw in ("https://", "www.evil", "@octocat", " #12", "\x1b", "\u202e"):
        assert raw not in rendered, (raw, [line for line in rendered.splitlines() if raw in line])
    assert not re.search(r"(?<!\\)<img", rendered)
    assert not re.search(r"(?<!\\)\[click here(?<!\\)\]", rendered)  # no link: its brackets are escaped
    for args in (["compare", "--baseline", str(base), "--speculative", str(spec), "--stats"],
                 ["compare", "--baseline", str(base), "--speculative", str(spec)],
                 ["regress", "--reference", str(base), "--candidate", str(spec)]):
        _, out, err = _main(capsys, *args)
        assert "\x1b" not in out + err and "\x07" not in out + err and "\u202e" not in out + err, args
        assert "\\x1b]0;pwned" in out, args


def test_markdown_escape_leaves_nothing_github_links_or_notifies() -> None:
    from bench.render import markdown_escape

    for text in ("see https://evil.example/a_b", "x:https://e.co", "mail bob@evil.example", "hi @octocat",
                 "cc @org/team", "www.evil.example", "fixes #12", "org/repo#3", "<b>bold</b>", "[a](b)"):
        escaped = _outside_code(markdown_escape(text))
        for raw in ("https://", "bob@", "@octocat", "@org", "www.", "#12", "#3"):
            assert raw not in escaped, (text, escaped)
        assert not re.search(r"(?<!\\)<b>", escaped), (text, escaped)
        assert not re.search(r"(?<!\\)\]\(", escaped), (text, escaped)
    assert markdown_escape("sample@char a_b") == "sample@char a_b"


# ---------------------------------------------------------------- round 3, 9. server accounting that contradicts itself


def _doctored(server: FakeServer, edit: Any) -> None:
    """Make every chat answer of a fake server go through `edit(data)` first."""
    from aiohttp import web

    from tests.fakeserver import completion

    server.state.fault = lambda index, body: "doctored"

    async def fault(request: Any, name: str, body: dict) -> Any:
        data = completion(server.state, body)
        edit(data)
        return web.json_response(data)

    server._fault = fault  # type: ignore[method-assign]


def test_usage_against_timings_withholds_the_server_decode_rate(tmp_path: Path) -> None:
    with _fake() as server:
        _doctored(server, lambda data: data["usage"].update(completion_tokens=5000))
        run, _ = run_benchmark(_prompts(2), RunConfig(url=server.url, osl=8), install_signal_handlers=False)
    assert all(result.ok for result in run.results)
    assert all(result.server_decode_t_s is None and result.predicted_per_second is None for result in run.results)
    assert any("usage.completion_tokens 5000 against timings.predicted_n" in line for line in run.info.warnings)


@pytest.mark.parametrize("key", ["completion_tokens", "prompt_tokens", "total_tokens"])
def test_negative_usage_is_refused(key: str) -> None:
    response = {"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, key: -7}}
    for engine in (LlamaCpp(), VLLM(), SGLang()):
        with pytest.raises(ResponseError) as caught:
            engine.parse(response)
        assert caught.value.kind == "bad_timings" and key in str(caught.value)


@pytest.mark.parametrize("fault", ["accepted_above_drafted", "backwards"])
def test_metrics_counters_that_contradict_themselves_are_withheld(fault: str) -> None:
    scrapes = {"n": 0}

    def metrics(state: FakeState) -> None:
        scrapes["n"] += 1
        if fault == "accepted_above_drafted":
            state.accepted = state.draft_tokens * 2
        elif scrapes["n"] == 5:  # after the second sample the counters restart, as a restarted server's do
            state.drafts, state.draft_tokens, state.accepted = 0, 0, 0

    with _fake(FakeState(drafting=True, on_metrics=metrics)) as server:
        run, _ = run_benchmark(_prompts(4), RunConfig(url=server.url, osl=8), install_signal_handlers=False)
    acceptance = run.info.acceptance
    assert acceptance is None or acceptance.source != "metrics", acceptance
    withheld = ["accepted" not in result.spec for result in run.results]
    assert all(withheld) if fault == "accepted_above_drafted" else withheld == [False, True, False, False]
    assert any("counters contradict themselves" in line for line in run.info.warnings), run.info.warnings


def test_counter_checks_of_the_adapter() -> None:
    engine = LlamaCpp()
    good = engine.checked_counter_deltas({"drafts": 1, "draft_tokens": 4, "accepted": 2},
                                         {"drafts": 3, "draft_tokens": 12, "accepted": 8})
    assert good == {"drafts": 2, "draft_tokens": 8, "accepted": 6} and not engine.warnings()
    assert engine.checked_counter_deltas({"drafts": 5, "draft_tokens": 20, "accepted": 10},
                                         {"drafts": 1, "draft_tokens": 4, "accepted": 2}) == {}
    assert engine.checked_counter_acceptance({}, {"drafts": 2, "draft_tokens": 4, "accepted": 8},
                                             server_wide=False) is None
    assert len(engine.warnings()) == 2


def test_the_model_that_answered_is_recorded_and_compared(tmp_path: Path) -> None:
    with _fake() as server:
        run, _ = run_benchmark(_prompts(2), RunConfig(url=server.url, osl=8, model="wanted-model"),
                               install_signal_handlers=False)
    assert run.meta.get("served_models") == ["fake"]
    assert any("'fake', not the requested 'wanted-model'" in line for line in run.info.warnings), run.info.warnings
    with _fake() as server:
        run, _ = run_benchmark(_prompts(2), RunConfig(url=server.url, osl=8, model="fake"),
                               install_signal_handlers=False)
    assert not any("requested" in line for line in run.info.warnings)


# ---------------------------------------------------------------- round 3, 13. the smaller ones


def test_allow_mismatch_says_warning_not_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, spec = _named_runs(tmp_path)
    for path, osl in ((base, 8), (spec, 16)):
        data = json.loads(path.read_text())
        data["config"]["osl"] = osl
        path.write_text(json.dumps(data))
    for args in (["report", "--baseline", str(base), "--speculative", str(spec), "--out", str(tmp_path / "rep")],
                 ["compare", "--baseline", str(base), "--speculative", str(spec)]):
        code, _, err = _main(capsys, *args)
        assert code == 2 and "osl" in err
        code, _, err = _main(capsys, *args, "--allow-mismatch")
        assert code == 0, err
        assert "error" not in err and any(line.startswith("speedbench: warning:") and "osl" in line
                                          for line in err.splitlines()), err


async def _speculative_bursts(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A streaming server that answers as speculative decoding does: each verification step's accepted tokens
    arrive as back-to-back chunks (one write), the steps 40 ms apart."""
    _, path, _, body = await read_request(reader)
    if not path.endswith("/chat/completions") or json.loads(body).get("max_tokens") == 1:
        writer.write(http_response(404 if not path.endswith("/chat/completions") else 400, b"no"))
        await writer.drain()
        return
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
    tokens = 0
    for _ in range(6):
        burst = b""
        for _ in range(4):
            chunk = {"choices": [{"index": 0, "delta": {"content": f" t{tokens}"}, "finish_reason": None}]}
            burst += f"data: {json.dumps(chunk)}\n\n".encode()
            tokens += 1
        writer.write(burst)
        await writer.drain()
        await asyncio.sleep(0.04)
    final = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
             "usage": {"prompt_tokens": 3, "completion_tokens": tokens, "total_tokens": tokens + 3}}
    writer.write(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n".encode())
    await writer.drain()


def test_no_merged_chunk_warning_at_concurrency_one_on_a_speculative_stream(tmp_path: Path) -> None:
    with RawServer(_speculative_bursts) as server:
        run, _ = run_benchmark(_prompts(4), RunConfig(url=server.url, osl=32, stream=True, engine="openai"),
                               install_signal_handlers=False)
    assert all(result.ok for result in run.results), [result.error for result in run.results]
    gaps = [gap for result in run.results for gap in result.itl_s]
    assert sorted(gaps)[len(gaps) // 2] < 0.001  # most gaps are back-to-back chunks: the old median was ~0 ms
    assert not any("lower --concurrency for exact ITL" in line for line in run.info.warnings), run.info.warnings


# ---------------------------------------------------------------- round 3, 12. labels are names, not paths


def test_file_label_keeps_one_safe_path_part() -> None:
    from bench.records import file_label

    for label in ("x/../../../../tmp/LABELPWN", "../../X", "..", "/etc/passwd", "a\\b", "\x1b[31mred", "a" * 500):
        name = file_label(label, "run")
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) and ".." not in name and len(name) <= 64, name
    assert file_label(None, "run") == "run" and file_label("ok-label_1.2", "run") == "ok-label_1.2"


def test_a_label_never_writes_outside_the_results_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "a" / "b" / "c" / "work"  # deep enough that an escape still lands inside tmp_path
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    with _fake() as server:
        code, _, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 2)), "--osl",
                             "8", "--label", "x/../../../../LABELPWN", "--quiet")
        assert code == 0, err
        with _fake(FakeState(drafting=True)) as spec:
            config = PipelineConfig.build(limit=1, osl=8, base_url=server.url, spec_url=spec.url,
                                    results_dir=str(work / "results"), label="y/../../../../X")
            assert run_pipeline(config, out=lambda text: None, progress=SilentProgress()) == 0
    written = [path for path in tmp_path.rglob("*") if path.is_file() and "prompts.jsonl" not in path.name]
    assert written and all(path.is_relative_to(work / "results") for path in written), written


# ---------------------------------------------------------------- round 3, 2. redirects


def _redirecting(target: str, status: int = 307, lists_models: bool = True) -> Any:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _, path, _, _ = await read_request(reader)
        if path == "/v1/models" and lists_models:  # passes the run's first check: the samples meet the redirect
            writer.write(http_response(200, b'{"object": "list", "data": []}'))
        elif path.endswith("/chat/completions"):
            writer.write(http_response(status, b"moved", {"Location": f"{target}{path}"}))
        else:
            writer.write(http_response(404, b"no"))
        await writer.drain()
    return handler


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_a_failed_sample_and_sends_nothing_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], status: int
) -> None:
    secret = "sk-redirected-" + "4" * 20
    with _fake() as other, RawServer(_redirecting(other.url, status)) as server:
        code, out, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 2)), "--osl",
                               "8", "--api-key", secret, "--header", f"X-Api-Key: {secret}", "--header",
                               f"Ocp-Apim-Subscription-Key: {secret}", "--header", f"X-Goog-Api-Key: {secret}",
                               "--engine", "llamacpp", "--output", str(tmp_path / "r.json"), "--quiet")
        assert not other.state.requests, other.state.headers  # nothing (and no secret) reached the other origin
    assert code == cli.EXIT_FAILED
    run = load_run(tmp_path / "r.json")
    assert all(not result.ok and result.error_kind == "redirect" for result in run.results)
    assert all(f"HTTP {status}" in (result.error or "") and other.url in (result.error or "") for result in run.results)
    assert secret not in out + err


def test_a_server_that_redirects_everything_fails_fast(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = "sk-redirected-" + "5" * 20
    with _fake() as other, RawServer(_redirecting(other.url, 307, lists_models=False)) as server:
        code, out, err = _main(capsys, "run", "--url", server.url, "--dataset", str(_dataset(tmp_path, 2)), "--osl",
                               "8", "--api-key", secret, "--output", str(tmp_path / "r.json"), "--quiet")
        assert not other.state.requests
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "redirects POST /chat/completions (HTTP 307" in err and secret not in err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["prompts.jsonl"]


# ---------------------------------------------------------------- round 3, 6. a byte-order mark before the first event


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_sse_strips_a_leading_byte_order_mark(newline: bytes) -> None:
    stream = b"\xef\xbb\xbfdata: first" + newline * 2 + b"data: second" + newline * 2
    for cut in range(len(stream) + 1):
        assert _decode(stream, cut) == ["first", "second"], cut
    for cut_a in range(1, 4):  # the mark itself split over three reads
        decoder = SSEDecoder()
        events = decoder.feed(stream[:cut_a]) + decoder.feed(stream[cut_a:3]) + decoder.feed(stream[3:])
        assert events == ["first", "second"], cut_a
    assert _decode(b"data: a\n\n\xef\xbb\xbfdata: b\n\n", 0) == ["a"]  # only a leading mark is stripped


def test_a_stream_with_a_byte_order_mark_keeps_its_first_chunk(tmp_path: Path) -> None:
    chunks = [{"choices": [{"delta": {"content": "hello"}, "finish_reason": None}]},
              {"choices": [{"delta": {"content": " world"}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 2}}]
    body = b"\xef\xbb\xbf" + b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks) + \
        b"data: [DONE]\n\n"
    result = _stream_run(tmp_path, body)
    assert result.ok, result.error
    assert result.outputs == ("hello world",)


# ---------------------------------------------------------------- round 3, 10. the client's own limits


def _limited_run(tmp_path: Path, url: str, soft: int, hard: int, concurrency: int,
                 samples: int) -> subprocess.CompletedProcess[str]:
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return subprocess.run([sys.executable, "-m", "bench", "run", "--url", url, "--dataset",
                           str(_dataset(tmp_path, samples)), "--osl", "8", "--concurrency", str(concurrency),
                           "--output", str(tmp_path / "r.json"), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, preexec_fn=limit,
                          env={**os.environ, "OPENAI_API_KEY": ""})


def test_too_few_file_descriptors_for_the_concurrency_is_refused_up_front(tmp_path: Path) -> None:
    with _fake() as server:
        result = _limited_run(tmp_path, server.url, 256, 256, 400, 8)
        assert not server.state.requests
    assert result.returncode == 2, result.stderr
    _one_line_error(result.stderr)
    assert "400" in result.stderr and "256" in result.stderr and "ulimit -n" in result.stderr


def test_a_low_soft_file_limit_is_raised_to_the_hard_one(tmp_path: Path) -> None:
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip(f"this machine's hard limit on open files is {hard}")
    with _fake(FakeState(delay_s=0.5)) as server:
        result = _limited_run(tmp_path, server.url, 256, hard, 300, 300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert all(item.ok for item in load_run(tmp_path / "r.json").results)


def test_no_registered_secret_reaches_the_terminal_or_an_output_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.commands import COMMANDS
    from bench.records import write_text_file

    secret = "sk-terminal-" + "6" * 20
    register_secret(secret)

    def leaky(args: Any, out: Any) -> int:
        out(f"a server said {secret} on stdout\n")
        sys.stderr.write(f"and {secret.replace('-', '%2D')} on stderr\n")
        write_text_file(tmp_path / "out.md", f"| {secret} |\n")
        return 0

    name = next(iter(COMMANDS))
    module = COMMANDS[name]
    monkeypatch.setattr(module, "run", leaky)
    args = {"compare": ["--baseline", "a", "--speculative", "b"]}.get(name, [])
    code = cli.main([name, *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    _assert_no_secret(captured.out + captured.err + (tmp_path / "out.md").read_text(), secret)
    assert "a server said *** on stdout" in captured.out


def test_a_run_shows_names_escaped_on_the_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "named.jsonl"
    path.write_text("".join(json.dumps({"question_id": f"q{i}", "category": "evil\x1b]0;pwned\x07\x1b[2J",
                                        "turns": [f"question {i}"]}) + "\n" for i in range(2)), encoding="utf-8")
    with _fake() as server:
        code, out, err = _main(capsys, "run", "--url", server.url, "--dataset", str(path), "--osl", "8",
                               "--label", "\x1b]8;;https://evil.example\x07label", "--output", str(tmp_path / "r.json"))
    assert code == 0, err
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "evil\\x1b]0;pwned" in out
