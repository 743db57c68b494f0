"""Comparisons of reasoning runs against a server of known truth: thinking share, answer-only decode speedup,
tokens per step in each segment from the stream's bursts, empty answers flagged, divergences inside thinking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.analysis import compare, step_starts
from bench.cli import main
from bench.records import load_run
from bench.render import decision_text, render_json, render_markdown, render_text
from tests.fake_thinking import ThinkingServer, ThinkingTruth

BASE = {"t": 1.0, "a": 1.0}
SPEC = {"t": 3.0, "a": 1.5}


def _arm(tmp_path: Path, name: str, truth: ThinkingTruth, *extra: str, osl: int = 400) -> tuple[Path, ThinkingTruth]:
    output = tmp_path / f"{name}.json"
    with ThinkingServer(truth) as server:
        assert main(["run", "--url", server.url, "--engine", "llamacpp", "--category", "qa,math", "--limit", "3",
                     "--osl", str(osl), "--output", str(output), "--quiet", "--stream", *extra]) == 0
    return output, truth


def _truth_steps(truth: ThinkingTruth, kind: str) -> float:
    answered = truth.done[-6:]  # the run's six samples (detection may send a first request)
    return sum(item[kind][0] for item in answered) / sum(item[kind][1] for item in answered)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, ThinkingTruth, ThinkingTruth]:
    folder = tmp_path_factory.mktemp("thinking")
    base, base_truth = _arm(folder, "baseline", ThinkingTruth(thinking=90, answer=30, steps=BASE, step_s=0.003))
    spec, spec_truth = _arm(folder, "speculative", ThinkingTruth(thinking=90, answer=30, steps=SPEC, step_s=0.003,
                                                                 seed=1))
    return base, spec, base_truth, spec_truth


def test_thinking_share_answer_speedup_and_tokens_per_step_match_the_truth(pair) -> None:
    base, spec, base_truth, spec_truth = pair
    comparison = compare(load_run(base), load_run(spec))
    overall = comparison.thinking[-1]
    assert overall.category == "overall" and overall.pairs == 6
    assert overall.share == (pytest.approx(0.75), pytest.approx(0.75))
    for got, truth in ((overall.steps_thinking, (_truth_steps(base_truth, "t"), _truth_steps(spec_truth, "t"))),
                       (overall.steps_answer, (_truth_steps(base_truth, "a"), _truth_steps(spec_truth, "a")))):
        for value, known in zip(got, truth, strict=True):
            assert value is not None and abs(value / known - 1) <= 0.05
    # the answer's steps carry 1.5 tokens at the same step time: its decode rate is ~1.5x, the thinking's ~3x
    assert overall.answer_decode is not None and 1.3 < overall.answer_decode < 1.75
    assert overall.decode is not None and overall.decode > overall.answer_decode
    text, markdown, payload = render_text(comparison), render_markdown(comparison), json.loads(render_json(comparison))
    assert "Thinking and answer" in text and "answer_decode" in text and "75.0%/75.0%" in text
    assert "### Thinking and answer" in markdown
    assert payload["thinking"][-1]["answer_decode"] == pytest.approx(overall.answer_decode)
    assert "SpeedBench" in markdown and "answer_decode" not in text.split("Paired statistics")[0]


def test_answers_left_empty_by_the_budget_are_flagged_with_an_osl_that_fits(tmp_path: Path) -> None:
    base, _ = _arm(tmp_path, "b", ThinkingTruth(thinking=50, answer=10), osl=40)
    spec, _ = _arm(tmp_path, "s", ThinkingTruth(thinking=50, answer=10, steps=SPEC), osl=40)
    comparison = compare(load_run(base), load_run(spec))
    overall = comparison.thinking[-1]
    assert [arm.empty for arm in overall.budget] == [6, 6]
    assert overall.flag is not None and "baseline 6/6" in overall.flag and "osl 40" in overall.flag
    decision = decision_text([comparison])
    assert "12 of 12 answers empty: thinking used up osl 40" in decision
    assert "raise --osl" in decision
    assert "flag: overall: answers empty" in render_text(comparison)


def test_an_osl_that_fits_is_read_from_the_samples_that_finished(tmp_path: Path) -> None:
    base, _ = _arm(tmp_path, "b", ThinkingTruth(thinking=50, answer=10), osl=200)
    spec, _ = _arm(tmp_path, "s", ThinkingTruth(thinking=50, answer=10, steps=SPEC), osl=55)
    overall = compare(load_run(base), load_run(spec)).thinking[-1]
    assert [arm.empty for arm in overall.budget] == [0, 0]  # 55 leaves a partial answer: not empty
    spec, _ = _arm(tmp_path, "s2", ThinkingTruth(thinking=50, answer=10, steps=SPEC), osl=45)
    overall = compare(load_run(base), load_run(spec)).thinking[-1]
    assert overall.budget[1].empty == 6 and "used up to 60 tokens: --osl 64 fits them" in (overall.flag or "")


def test_a_divergence_inside_thinking_is_found_and_located(tmp_path: Path, capsys) -> None:
    base, _ = _arm(tmp_path, "b", ThinkingTruth(thinking=30, answer=10))
    spec, _ = _arm(tmp_path, "s", ThinkingTruth(thinking=30, answer=10, steps=SPEC, diverge_at=12))
    comparison = compare(load_run(base), load_run(spec))
    overall = comparison.lossless[-1]
    assert overall.identical == 0 and overall.unclassified == 6
    where = len("".join(f" t{index}" for index in range(12))) + 1  # the space before the 13th token is shared
    assert [(item.segment, item.char) for item in overall.divergences] == [("thinking", where)] * 6
    assert f"thinking@char {where}: unclassified" in render_text(comparison)


def test_other_thinking_switches_are_refused_and_longer_thinking_is_named(tmp_path: Path, capsys) -> None:
    base, _ = _arm(tmp_path, "b", ThinkingTruth(thinking=30, answer=10), "--reasoning", "on")
    spec, _ = _arm(tmp_path, "s", ThinkingTruth(thinking=30, answer=10), "--reasoning", "off")
    assert main(["compare", "--baseline", str(base), "--speculative", str(spec)]) == 2
    assert "reasoning differs: baseline=on speculative=off" in capsys.readouterr().err
    longer, _ = _arm(tmp_path, "l", ThinkingTruth(thinking=45, answer=10, steps=SPEC), "--reasoning", "on")
    capsys.readouterr()
    assert main(["compare", "--baseline", str(base), "--speculative", str(longer), "--stats"]) == 0
    out = capsys.readouterr()
    assert "sampling?) differs: baseline=35 speculative=52" in out.err  # 30 and 45 a turn, some prompts 2 turns
    assert main(["regress", "--reference", str(base), "--candidate", str(longer)]) in (0, 1)
    out = capsys.readouterr()
    assert "thinking length" in out.out + out.err


def test_bursts_split_at_the_gap_between_steps_and_a_server_without_bursts_is_one_token_a_step() -> None:
    assert step_starts([0.01, 0.0, 0.0, 0.01, 0.00002, 0.012]) == [True, False, False, True, False, True]
    assert step_starts([0.010, 0.011, 0.0095, 0.05]) == [True] * 4  # a slow step is no burst
    assert step_starts([]) == []
