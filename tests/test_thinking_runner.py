"""Reasoning samples as the runner records them: thinking and answer tokens apart, how they were counted, the
streamed answer's first token and each segment's rate; the thinking switch sent per engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import main
from bench.engines import VLLM, LlamaCpp, SGLang
from bench.records import load_run
from tests.fake_thinking import ThinkingServer, ThinkingTruth


def _run(server: ThinkingServer, tmp_path: Path, *extra: str, name: str = "r.json") -> Path:
    output = tmp_path / name
    code = main(["run", "--url", server.url, "--engine", "llamacpp", "--category", "qa", "--limit", "2",
                 "--osl", "200", "--output", str(output), "--quiet", *extra])
    assert code == 0
    return output


@pytest.mark.parametrize(("extra", "usage", "source"), [
    ((), True, "usage"), (("--stream",), False, "stream"), ((), False, "tokenize"),
])
def test_each_sample_records_thinking_and_answer_tokens_and_how_they_were_counted(
        tmp_path: Path, extra: tuple[str, ...], usage: bool, source: str) -> None:
    truth = ThinkingTruth(thinking=30, answer=12, reasoning_tokens=usage)
    with ThinkingServer(truth) as server:
        run = load_run(_run(server, tmp_path, *extra))
    assert [result.thinking_source for result in run.results] == [source, source]
    assert all(result.thinking_tokens == 30 and result.answer_tokens == 12 for result in run.results)


def test_a_stream_records_the_first_answer_token_and_each_segments_rate(tmp_path: Path) -> None:
    truth = ThinkingTruth(thinking=40, answer=20, step_s=0.004, steps={"t": 1.0, "a": 1.0})
    with ThinkingServer(truth) as server:
        run = load_run(_run(server, tmp_path, "--stream"))
    for result in run.results:
        assert result.chunk_segments == "t" * 40 + "a" * 20
        assert result.ttft_s is not None and result.answer_ttft_s is not None
        assert result.answer_ttft_s > result.ttft_s + 39 * 0.004 * 0.9  # the answer starts after 40 thinking steps
        assert result.thinking_decode_t_s is not None and result.answer_decode_t_s is not None
        assert result.thinking_decode_t_s < 1 / 0.004 * 1.05  # no faster than one token a step


def test_reasoning_switch_is_sent_per_engine_and_recorded(tmp_path: Path) -> None:
    truth = ThinkingTruth(thinking=10, answer=5)
    with ThinkingServer(truth) as server:
        output = _run(server, tmp_path, "--reasoning", "off")
    assert truth.requests[-1]["chat_template_kwargs"] == {"enable_thinking": False}
    assert json.loads(output.read_text())["config"]["reasoning"] == "off"
    run = load_run(output)
    assert all(result.thinking_tokens is None and not any(result.reasoning) for result in run.results)
    assert LlamaCpp().reasoning_fields("on") == {"chat_template_kwargs": {"enable_thinking": True},
                                                 "reasoning_format": "deepseek"}
    assert VLLM().reasoning_fields("off") == {"chat_template_kwargs": {"enable_thinking": False}}
    assert SGLang().reasoning_fields("on")["separate_reasoning"] is True
    assert VLLM().reasoning_fields("auto") == {}


def test_reasoning_switch_keeps_the_templates_other_kwargs(tmp_path: Path) -> None:
    truth = ThinkingTruth(thinking=10, answer=5)
    with ThinkingServer(truth) as server:
        _run(server, tmp_path, "--reasoning", "on", "--chat-template-kwargs", '{"reasoning_effort": "low"}')
    assert truth.requests[-1]["chat_template_kwargs"] == {"reasoning_effort": "low", "enable_thinking": True}


def test_an_unknown_reasoning_setting_is_refused(tmp_path: Path, capsys) -> None:
    assert main(["run", "--url", "localhost:1", "--reasoning", "maybe", "--output", str(tmp_path / "r.json")]) == 2
    assert "--reasoning: invalid choice: 'maybe'" in capsys.readouterr().err
