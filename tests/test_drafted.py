"""Drafted share: how much of the speculative output came from accepted drafts, and rows that drafted nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.analysis import NOTHING_DRAFTED, compare, drafted_by_category
from bench.records import Run, SampleResult, summarize
from bench.render import render_json, render_markdown, render_text


def _result(sample: str, category: str, tps: float, *, drafted: int = 0, accepted: int = 0, tokens: int = 64,
            spec: dict | None = None) -> SampleResult:
    return SampleResult(id=sample, category=category, ok=True, turns=1, latency_s=tokens / tps,
                        predicted_per_second=tps, completion_tokens=tokens, outputs=("same",),
                        draft_n=drafted, draft_n_accepted=accepted, spec=spec or {})


def _run(results: list[SampleResult]) -> Run:
    return Run(config={}, selected_samples=len(results), results=tuple(results), summary=tuple(summarize(results)))


def _pair(n: int = 8) -> tuple[Run, Run]:
    """`copy` drafts half its output and is 1.5x faster; `chat` drafts nothing and is 1.3x faster by noise."""
    rng = np.random.default_rng(3)
    base, spec = [], []
    for category, truth, drafted in (("copy", 1.5, 40), ("chat", 1.3, 0)):
        for index in range(n):
            rate = 20.0 * float(np.exp(rng.normal(0.0, 0.2)))
            sample = f"{category}-{index}"
            base.append(_result(sample, category, rate))
            spec.append(_result(sample, category, rate * truth * float(np.exp(rng.normal(0.0, 0.02))),
                                drafted=drafted, accepted=drafted * 4 // 5))
    return _run(base), _run(spec)


def test_drafted_share_is_accepted_draft_tokens_over_output_tokens() -> None:
    _, spec = _pair()
    drafted = drafted_by_category(spec)
    assert drafted["copy"].share == pytest.approx(32 / 64)
    assert drafted["chat"].share == 0.0 and drafted["chat"].nothing_drafted
    assert drafted["overall"].share == pytest.approx(32 * 8 / (64 * 16))
    assert drafted["overall"].proposed == 40 * 8 and not drafted["overall"].nothing_drafted


def test_rows_that_drafted_nothing_get_no_speedup_verdict() -> None:
    rows = {row.category: row for row in compare(*_pair()).stats}
    assert rows["copy"].decode.word == "faster"
    assert rows["chat"].decode.verdict == NOTHING_DRAFTED and rows["chat"].latency.verdict == NOTHING_DRAFTED
    assert rows["chat"].decode.point == pytest.approx(1.3, rel=0.05)  # the number stays; only the verdict goes
    assert rows["overall"].decode.word == "faster"


def test_drafted_share_is_shown_in_text_markdown_and_json() -> None:
    comparison = compare(*_pair())
    text = render_text(comparison)
    header = next(line for line in text.splitlines() if line.startswith("category  ") and "drafted" in line)
    assert header.split().index("drafted") == header.split().index("accept_len") + 1
    chat = next(line for line in text.splitlines() if line.startswith("chat ") and "nothing drafted" in line)
    assert "0.0%" in chat
    assert "| copy | 8 |" in render_markdown(comparison) and "| 50.0% |" in render_markdown(comparison)
    stats = {row["category"]: row for row in json.loads(render_json(comparison))["stats"]}
    assert stats["copy"]["drafted_share"] == pytest.approx(0.5)
    assert stats["copy"]["drafted_tokens"] == 8 * 32 and stats["copy"]["output_tokens"] == 8 * 64
    assert stats["chat"]["decode_verdict"] == NOTHING_DRAFTED


def test_a_server_that_reports_no_drafting_keeps_its_verdicts_and_shows_no_share() -> None:
    """Zero draft counts from a server that never reports them mean unknown, not nothing drafted."""
    base, spec = _pair()
    silent = _run([SampleResult(**{**r.to_dict(), "draft_n": 0, "draft_n_accepted": 0, "spec": {}})
                   for r in spec.results])
    rows = {row.category: row for row in compare(base, silent).stats}
    assert rows["chat"].decode.word == "faster" and rows["copy"].drafted_share is None


def test_counter_deltas_count_when_the_server_gives_no_per_request_drafts() -> None:
    results = [_result("a-0", "a", 20.0, spec={"drafts": 2.0, "draft_tokens": 16.0, "accepted": 12.0}),
               _result("b-0", "b", 20.0, spec={"drafts": 0.0, "draft_tokens": 0.0, "accepted": 0.0})]
    drafted = drafted_by_category(_run(results))
    assert drafted["a"].share == pytest.approx(12 / 64) and drafted["a"].proposed == 16
    assert drafted["b"].nothing_drafted and not drafted["overall"].nothing_drafted


def test_the_reference_table_is_unchanged_by_the_drafted_share() -> None:
    comparison = compare(*_pair())
    reference = render_text(comparison).split("\n\n")[0]
    assert "drafted" not in reference and "nothing drafted" not in reference
    assert reference.splitlines()[1].split() == ["category", "base_avg_pred_t/s", "spec_avg_pred_t/s",
                                                 "decode_speedup", "base_avg_latency", "spec_avg_latency",
                                                 "latency_speedup", "accept_rate"]
