"""Issue 14, round 2 of "nothing lost, nothing leaked": each numbered case against a small fault server."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import gzip
import json
import os
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

from bench import cli
from bench._errors import BenchError
from bench._redact import redact, redact_url, register_secret
from bench.engines import VLLM, LlamaCpp, ResponseError, SGLang
from bench.pipeline import PipelineConfig, run_pipeline
from bench.prompts import PromptSet, Sample, load_prompts, rows_to_samples
from bench.records import Journal, Run, load_run, read_journal, save_run, summarize
from bench.runner import RunConfig, SilentProgress, SSEDecoder, normalize_base_url, retry_after_seconds, run_benchmark
from tests.fakeserver import FakeServer, FakeState, RawServer, http_response, read_request

ROOT = Path(__file__).resolve().parents[1]


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

    def flaky_append(self: Journal, result: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 4:  # the disk is full for a moment
            raise OSError(errno.ENOSPC, "No space left on device")
        original(self, result)

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
        config = PipelineConfig(limit=2, osl=8, base_url=base.url, spec_url=spec.url,
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
        resumed = PipelineConfig(limit=2, osl=8, base_url=base.url, spec_url=spec.url,
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
