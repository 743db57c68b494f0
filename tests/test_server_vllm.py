"""The embedded vLLM launcher without starting vLLM: command line, environment, modes, and the bench's engine choice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.server import (
    SERVER_ENGINES,
    EmbeddedServer,
    ServerError,
    ServerRequest,
    VllmConfig,
    VllmServer,
    make_server,
    speculative_modes,
    vllm_python,
)


def test_ngram_command_line_follows_the_working_recipe(tmp_path: Path) -> None:
    argv = VllmServer(VllmConfig(mode="ngram-mod")).argv(Path("/v/bin/python"), tmp_path / "hf", None, 8123)
    assert argv[:3] == ["/v/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert "--enforce-eager" in argv and "--enable-per-request-metrics" in argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--port") + 1] == "8123"
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    assert argv[argv.index("--per-request-spec-decode-metrics") + 1] == "detailed"


def test_baseline_has_no_speculation_and_draft_names_its_model(tmp_path: Path) -> None:
    base = VllmServer(VllmConfig()).argv(Path("p"), tmp_path, None, 1)
    assert "--speculative-config" not in base and "--per-request-spec-decode-metrics" not in base
    draft = VllmServer(VllmConfig(mode="draft", draft_max=3)).argv(Path("p"), tmp_path, tmp_path / "d", 1)
    spec = json.loads(draft[draft.index("--speculative-config") + 1])
    assert spec == {"method": "draft_model", "model": str(tmp_path / "d"), "num_speculative_tokens": 3}


def test_environment_keeps_everything_on_loopback_offline_and_inside_the_work_folder(tmp_path: Path) -> None:
    env = VllmServer(VllmConfig()).environment(tmp_path)
    assert env["VLLM_HOST_IP"] == "127.0.0.1" and env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert env["HF_HUB_OFFLINE"] == "1"
    for key in ("VLLM_CACHE_ROOT", "TMPDIR", "HF_HOME"):
        assert Path(env[key]).is_relative_to(tmp_path), key
    assert Path(env["TMPDIR"]).is_dir()


def test_unknown_mode_and_bad_numbers_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown vLLM mode"):
        VllmConfig(mode="medusa")
    with pytest.raises(ValueError, match="draft_max"):
        VllmConfig(draft_max=0)


def test_missing_vllm_environment_says_how_to_build_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SPEEDBENCH_VLLM_PYTHON", str(tmp_path / "nope" / "python"))
    with pytest.raises(ServerError, match="make vllm-env"):
        vllm_python()


def test_one_factory_embeds_the_server_each_engine_names() -> None:
    assert isinstance(make_server(ServerRequest(mode="baseline")), EmbeddedServer)
    server = make_server(ServerRequest(engine="vllm", mode="ngram-mod", draft="gemma-3-270m"))
    assert isinstance(server, VllmServer) and server.config.mode == "ngram-mod"
    with pytest.raises(ValueError, match="unknown engine"):
        make_server(ServerRequest(engine="sglang"))
    llama = make_server(ServerRequest(mode="ngram-mod", slots=4, ctx_per_slot=4096, draft_max=8))
    assert llama.config.n_parallel == 4 and llama.config.ctx_size == 16384 and llama.config.draft_max == 8
    assert speculative_modes("llamacpp") == ("ngram-mod", "ngram-simple", "draft")
    assert set(speculative_modes("vllm")) >= {"ngram", "draft"}
    assert SERVER_ENGINES == ("llamacpp", "vllm")


def test_a_sweep_parses_arms_against_the_engine_it_embeds() -> None:
    from bench import BenchError
    from bench.pipeline import parse_embedded_arms

    (arm,) = parse_embedded_arms("ngram:draft_max=4", "vllm")
    assert arm.mode == "ngram" and arm.draft_max == 4
    with pytest.raises(BenchError, match="unknown speculative mode"):
        parse_embedded_arms("ngram:draft_max=4", "llamacpp")
    with pytest.raises(BenchError, match="unknown engine"):
        parse_embedded_arms("ngram", "sglang")
