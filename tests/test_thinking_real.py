"""A real llama.cpp server that thinks: the embedded server with a chat template that opens a think block and
`reasoning_format` deepseek, so its output lands in `reasoning_content` and a small osl leaves the answer empty."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.analysis import compare
from bench.cli import main
from bench.records import load_run
from bench.render import decision_text
from bench.server import EmbeddedServer, ServerConfig

pytestmark = pytest.mark.e2e

TEMPLATE = (Path(__file__).parent / "data" / "thinking_template.jinja").read_text()


def _run(url: str, output: Path, *extra: str) -> Path:
    assert main(["run", "--url", url, "--category", "qa", "--limit", "2", "--output", str(output), "--quiet",
                 *extra]) == 0
    return output


def test_a_real_thinking_server_splits_thinking_from_answer_and_a_small_osl_empties_the_answer(
        tmp_path: Path) -> None:
    config = ServerConfig(chat_template=TEMPLATE, reasoning_format="deepseek", ctx_size=2048)
    with EmbeddedServer(config) as server:
        streamed = load_run(_run(server.url, tmp_path / "s.json", "--osl", "12", "--stream", "--reasoning", "on"))
        plain = load_run(_run(server.url, tmp_path / "p.json", "--osl", "12", "--reasoning", "on"))
        off = load_run(_run(server.url, tmp_path / "o.json", "--osl", "12", "--reasoning", "off"))
    for result in streamed.results:
        assert result.ok and any(result.reasoning) and not "".join(result.outputs)
        assert result.finish_reason == "length" and result.thinking_source == "stream"
        assert result.thinking_tokens == result.completion_tokens and result.answer_tokens == 0
        assert result.chunk_segments and set(result.chunk_segments) == {"t"}
        assert result.thinking_decode_t_s is not None and result.answer_ttft_s is None
    assert [result.thinking_source for result in plain.results] == ["tokenize"] * 2  # llama.cpp's /tokenize
    assert all(result.thinking_tokens is not None and result.thinking_tokens > 0 for result in plain.results)
    assert plain.config["reasoning"] == "on" and off.config["reasoning"] == "off"
    assert all("".join(result.outputs) and not any(result.reasoning) for result in off.results)
    comparison = compare(streamed, load_run(tmp_path / "s.json"))
    assert "answers empty: thinking used up osl 12" in decision_text([comparison])
