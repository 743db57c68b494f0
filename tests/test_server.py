"""Tests of bench.server: validation before spawning, and a real embedded llama.cpp server."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from bench.server import MODES, EmbeddedServer, ServerConfig, ServerError


def _request(url: str, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    try:
        payload = json.dumps(body) if body is not None else None
        conn.request(method, path, payload, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie waiting for init counts as gone
        return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") >= 0
    except OSError:
        return True


def test_unknown_mode_raises_value_error() -> None:
    with pytest.raises(ValueError) as info:
        ServerConfig(mode="medusa")
    for mode in MODES:
        assert mode in str(info.value)


@pytest.mark.parametrize(
    ("content", "mode", "match"),
    [
        (None, "baseline", "model file not found"),
        (b"PK\x03\x04 not a gguf", "baseline", "not a GGUF file"),
        (b"GGUF\x03\x00\x00\x00", "draft", "draft model file not found"),
    ],
)
def test_invalid_model_fails_before_spawning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes | None, mode: str, match: str
) -> None:
    def no_spawn(*args: object, **kwargs: object) -> None:
        raise AssertionError("a child process was spawned")

    monkeypatch.setattr(subprocess, "Popen", no_spawn)
    model = tmp_path / "model.gguf"
    if content is not None:
        model.write_bytes(content)
    config = ServerConfig(mode=mode, model_path=model, draft_model_path=tmp_path / "missing-draft.gguf")
    server = EmbeddedServer(config)
    with pytest.raises(ServerError, match=match):
        server.start()
    assert server.pid is None
    assert not server.is_running()


@pytest.mark.e2e
def test_baseline_start_complete_stop_leaves_no_process() -> None:
    pytest.importorskip("xllamacpp")
    server = EmbeddedServer(ServerConfig(mode="baseline", ctx_size=512))
    with server:
        assert server.is_running()
        pid = server.pid
        assert pid is not None
        assert server.url.startswith("http://127.0.0.1:")
        status, raw = _request(
            server.url,
            "POST",
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "Count: 1, 2, 3"}], "max_tokens": 8, "temperature": 0},
        )
        assert status == 200
        timings = json.loads(raw)["timings"]
        assert timings["predicted_n"] > 0
        assert "draft_n" not in timings
        status, raw = _request(server.url, "GET", "/metrics")
        assert status == 200
        assert b"llamacpp:spec_decode_num_draft_tokens_total" in raw
    assert not server.is_running()
    assert _gone(pid)
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # nothing left in the child's process group
    server.stop()  # idempotent
    assert server.log_tail(50)  # the log survives stop()


@pytest.mark.e2e
def test_ngram_mod_reports_draft_counters() -> None:
    pytest.importorskip("xllamacpp")
    body = {
        "messages": [{"role": "user", "content": "Repeat the list 1,2,3,...,30 twice"}],
        "max_tokens": 16,
        "temperature": 0,
    }
    with EmbeddedServer(ServerConfig(mode="ngram-mod", ctx_size=512, draft_max=8)) as server:
        results = [
            json.loads(_request(server.url, "POST", "/v1/chat/completions", body)[1]) for _ in range(2)
        ]
        status, metrics = _request(server.url, "GET", "/metrics")
    first, second = (r["timings"] for r in results)
    # draft_n / draft_n_accepted are omitted when nothing was drafted (first request: pool empty).
    assert first.get("draft_n", 0) >= first.get("draft_n_accepted", 0) >= 0
    # The ngram-mod hash pool is shared and kept across requests: the repeat gets drafts.
    assert 0 < second["draft_n_accepted"] <= second["draft_n"]
    # Speculative decoding at temperature 0 is lossless.
    assert results[0]["choices"][0]["message"] == results[1]["choices"][0]["message"]
    assert status == 200
    assert b"llamacpp:spec_decode_num_drafts_total" in metrics


@pytest.mark.e2e
def test_child_failing_during_start_raises_with_log_tail(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    model = tmp_path / "truncated.gguf"
    model.write_bytes(b"GGUF" + b"\x00" * 60)  # right magic, unloadable content
    server = EmbeddedServer(ServerConfig(model_path=model))
    with pytest.raises(ServerError, match="exited with code") as info:
        server.start(timeout=60)
    assert "failed to start server" in str(info.value)
    assert not server.is_running()


_LIST_PROMPT = ("Repeat this list exactly, one item per line: apples, bread, candles, dates, eggs, figs, grapes, "
                "honey, ink, jam, kale, lemons, milk, nuts, oats, pears.")


def _accepted(url: str, slot: int | None = None) -> tuple[int, int]:
    body: dict = {"messages": [{"role": "user", "content": _LIST_PROMPT}], "max_tokens": 64, "temperature": 0,
                  "cache_prompt": False}
    if slot is not None:
        body["id_slot"] = slot
    timings = json.loads(_request(url, "POST", "/v1/chat/completions", body)[1])["timings"]
    return timings.get("draft_n", 0), timings.get("draft_n_accepted", 0)


@pytest.mark.e2e
def test_ngram_mod_memory_is_server_wide_and_only_a_restart_clears_it() -> None:
    pytest.importorskip("xllamacpp")
    server = EmbeddedServer(ServerConfig(mode="ngram-mod", n_parallel=2, ctx_size=1024))
    assert server.keeps_drafter_state
    with server:
        fresh = _accepted(server.url, slot=0)
        other_slot = _accepted(server.url, slot=1)  # another slot already knows slot 0's output
        assert other_slot[1] > fresh[1]
        for slot in (0, 1):
            status, _ = _request(server.url, "POST", f"/slots/{slot}?action=erase", {})
            assert status == 200
        assert _accepted(server.url, slot=0) == other_slot  # erasing every slot keeps the drafter's memory
        url = server.url
        server.restart()
        assert server.url == url and server.restarts == 1
        assert _accepted(server.url, slot=0) == fresh  # a fresh process starts from the same state
