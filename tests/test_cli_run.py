"""`speedbench run` from the command line: output, exit codes, options passed through."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.cli import main
from tests.fakeserver import FakeServer, FakeState


def test_run_prints_reference_summary_and_writes_file(fake_server: FakeServer, tmp_path: Path, capsys) -> None:
    fake_server.state.drafting = True
    output = tmp_path / "r.json"
    code = main(["run", "--url", fake_server.url, "--category", "qa,math", "--limit", "2", "--osl", "8",
                 "--output", str(output), "--quiet",
                 "--extra-inputs", '{"temperature": 0, "top_k": 1}', "--chat-template-kwargs", '{"think": false}'])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "speedbench: loaded 4 samples from bench=qualitative category=qa,math"
    assert "Summary (elapsed=" in out
    assert "category  samples  avg_prompt_t/s  avg_pred_t/s  avg_latency  accept_rate" in lines
    assert any(line.startswith("overall   4        500.00          50.00 ") for line in lines)
    assert lines[-1] == f"speedbench: wrote {output}"
    body = fake_server.state.requests[0]
    assert body["top_k"] == 1 and body["chat_template_kwargs"] == {"think": False}
    saved = json.loads(output.read_text())
    assert saved["config"]["extra_inputs"] == {"temperature": 0, "top_k": 1}
    assert saved["config"]["osl"] == 8 and saved["config"]["category"] == "qa,math"


def _fails_fast(url: str, tmp_path: Path, capsys) -> str:
    """Run against `url`: exit 2, one line on stderr, nothing on stdout, no run file or journal; the line."""
    output = tmp_path / "r.json"
    code = main(["run", "--url", url, "--category", "qa", "--limit", "2", "--osl", "4", "--output", str(output),
                 "--quiet"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.count("\n") == 1 and captured.out == ""
    assert list(tmp_path.iterdir()) == []
    return captured.err


def test_unreachable_server_fails_fast_without_a_file(tmp_path: Path, capsys) -> None:
    err = _fails_fast("127.0.0.1:9", tmp_path, capsys)
    assert err == "speedbench: error: cannot reach http://127.0.0.1:9/v1: connection refused\n"


def _serve_in_thread(handler: type) -> tuple[Any, str]:
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"127.0.0.1:{server.server_address[1]}"


def test_a_server_that_is_not_http_fails_fast(tmp_path: Path, capsys) -> None:
    import socketserver

    class Banner(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    server, url = _serve_in_thread(Banner)  # type: ignore[arg-type]
    try:
        err = _fails_fast(url, tmp_path, capsys)
    finally:
        server.shutdown()
    assert "does not speak HTTP" in err and url in err


def test_an_http_server_that_is_not_an_llm_server_fails_fast(tmp_path: Path, capsys) -> None:
    import http.server

    class Static(http.server.SimpleHTTPRequestHandler):  # what `python -m http.server` answers: 404 and 501
        def log_message(self, *args: Any) -> None:
            pass

    server, url = _serve_in_thread(Static)
    try:
        err = _fails_fast(url, tmp_path, capsys)
    finally:
        server.shutdown()
    assert "is not an OpenAI-compatible server" in err and "HTTP 404" in err and "HTTP 501" in err


def test_a_server_that_wants_a_key_says_so(fake_server: FakeServer, tmp_path: Path, capsys) -> None:
    import http.server

    class Locked(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(401)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server, url = _serve_in_thread(Locked)
    try:
        err = _fails_fast(url, tmp_path, capsys)
    finally:
        server.shutdown()
    assert "HTTP 401" in err and "--api-key, or $OPENAI_API_KEY" in err  # the hint survives the redaction
    assert "***" not in err


def test_unknown_category_exits_2_with_one_line(tmp_path: Path, capsys) -> None:
    code = main(["run", "--category", "cooking", "--output", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "available categories: all, coding" in err


def test_bad_option_values_exit_2(capsys) -> None:
    assert main(["run", "--osl", "0"]) == 2
    assert "--osl must be >= 1" in capsys.readouterr().err


def test_several_urls_are_used_round_robin(tmp_path: Path, capsys) -> None:
    servers = [FakeServer(FakeState()) for _ in range(2)]
    for server in servers:
        server.start()
    try:
        code = main(["run", "--url", servers[0].url, "--url", servers[1].url, "--category", "qa", "--limit", "4",
                     "--osl", "4", "--output", str(tmp_path / "r.json"), "--quiet"])
    finally:
        for server in servers:
            server.stop()
    assert code == 0
    assert [len(server.state.requests) for server in servers] == [2, 2]


def test_stream_and_repeat_print_their_tables(fake_server: FakeServer, tmp_path: Path, capsys) -> None:
    code = main(["run", "--url", fake_server.url, "--category", "qa", "--limit", "2", "--osl", "8", "--stream",
                 "--repeat", "2", "--output", str(tmp_path / "r.json"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    assert "Streaming latencies (TTFT, inter-token per chunk and per token" in out
    assert "ttft_p50" in out and "client_decode_t/s" in out
    assert "Run-to-run variation across repeats" in out
    assert len(fake_server.state.requests) == 4


def test_generated_throughput_bench_is_sized_by_the_server(fake_server: FakeServer, tmp_path: Path, capsys) -> None:
    code = main(["run", "--url", fake_server.url, "--bench", "throughput_1k", "--limit", "1", "--osl", "4",
                 "--output", str(tmp_path / "r.json"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0 and "sizing prompts with the server's /tokenize" in out
    assert fake_server.state.tokenized > 3
    words = [len(body["messages"][0]["content"].split()) for body in fake_server.state.requests]
    assert len(words) == 3 and all(abs(count - 1024) <= 0.02 * 1024 for count in words)
    saved = json.loads((tmp_path / "r.json").read_text())
    assert [row["category"] for row in saved["summary"]] == ["low_entropy", "mixed", "high_entropy", "overall"]


def test_an_engine_that_is_not_the_servers_is_refused(fake_server: FakeServer, tmp_path: Path, capsys) -> None:
    code = main(["run", "--url", fake_server.url, "--engine", "vllm", "--category", "qa", "--limit", "1", "--osl",
                 "4", "--output", str(tmp_path / "r.json"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "--engine vllm, but the server at" in err and "is llamacpp" in err and "pass --engine llamacpp" in err
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "r.json.jsonl").exists()
    assert not fake_server.state.requests  # refused before a prompt was sent
