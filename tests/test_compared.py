"""A compared metric is one declaration: one appended to `PAIRED_METRICS` reaches every table, the JSON, the Holm
family, the outlier notes and the direction check without another edit."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bench.analysis import PAIRED_METRICS, Metric, PairedMetric, compare, family_size
from bench.records import Run, SampleResult, summarize
from bench.render import console_text, render_json, render_markdown, render_pairs_report, render_text

CATEGORIES = ("coding", "qa", "chat")


def _client_decode(merged: pd.DataFrame) -> pd.Series:
    """Per pair: the ratio of the reference's per-sample decode rates alone (no server timings)."""
    return merged["pred_t_s_spec"] / merged["pred_t_s_base"]


CLIENT_DECODE = PairedMetric(Metric("client_speedup", "client decode speedup", True, "speedup", "x"),
                             "client", _client_decode, "pred_t_s", 1.0, "decode_speedup")
"""A test-local compared metric, declared as a new one would be."""


def _run(speedup: float, seed: int, *, outlier: int | None = None) -> Run:
    rng = np.random.default_rng(seed)
    results = []
    for index in range(30):
        rate = 20.0 * float(np.exp(rng.normal(0.0, 0.1))) * speedup * (4.0 if index == outlier else 1.0)
        results.append(SampleResult(id=f"s-{index}", category=CATEGORIES[index % 3], ok=True, turns=1,
                                    latency_s=64.0 / rate, predicted_per_second=rate, completion_tokens=64,
                                    outputs=("x",), draft_n=32, draft_n_accepted=16))
    return Run(config={"bench": "b", "osl": 64}, selected_samples=30, results=tuple(results),
               summary=tuple(summarize(results)))


@pytest.fixture
def with_client_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bench.analysis._compared.PAIRED_METRICS", (*PAIRED_METRICS, CLIENT_DECODE))


@pytest.mark.usefixtures("with_client_decode")
def test_an_added_compared_metric_reaches_every_output() -> None:
    comparison = compare(_run(1.0, 1), _run(1.5, 2, outlier=4), baseline_label="base", speculative_label="spec")
    row = comparison.stats[-1]
    assert list(row.estimates) == ["decode_speedup", "latency_speedup", "client_speedup"]
    assert row.estimates["client_speedup"].point == pytest.approx(row.decode.point)
    assert row.estimates["client_speedup"].word == "faster"

    text = render_text(comparison)
    table = text[text.index("Paired statistics"):]
    header = table.splitlines()[1].split()
    assert header[header.index("latency_mde") + 1:][:3] == ["client_speedup", "client_verdict", "client_mde"]

    markdown = render_markdown(comparison)
    assert "client_<wbr>speedup" in markdown and "| client_mde |" not in markdown.split("<details>")[0]
    assert "client_mde" in markdown  # in the "more columns" table

    stats = json.loads(render_json(comparison))["stats"]
    overall = stats[-1]
    assert overall["client_verdict"] == "faster" and overall["client_speedup_low"] > 1.0
    assert set(overall) >= {"client_speedup_p", "client_speedup_mde", "client_speedup_robust_verdict"}

    category_rows = [row for row in comparison.stats if not row.primary]
    assert family_size(comparison.stats) == 3 * len(category_rows) == 9
    assert comparison.family is not None and comparison.family.size == 9
    assert "(9 tests," in text

    outliers = [line for line in text.splitlines() if "outlying samples" in line]
    assert len(outliers) == 1 and outliers[0].startswith("note: qa: ") and "latency 6.56x, client 6.56x)" in outliers[0]
    qa = next(row for row in comparison.stats if row.category == "qa")
    assert {item.metric for item in qa.outliers} == {"decode", "latency", "client"}

    console = console_text(comparison).splitlines()
    paired_header = next(line for line in console if line.startswith("category ") and "decode_verdict" in line)
    assert paired_header.split()[6:8] == ["client_speedup", "client_verdict"]

    summary = render_pairs_report([("one pair", comparison)]).split("## Summary\n\n")[1].splitlines()
    assert summary[0].split(" | ")[1:4] == ["decode speedup [95% CI]", "latency speedup [95% CI]",
                                             "client decode speedup [95% CI]"]
    assert summary[1].count("---") == 8 and summary[2].count(" | ") == 7


def test_without_an_added_metric_the_tables_are_unchanged() -> None:
    comparison = compare(_run(1.0, 1), _run(1.5, 2))
    assert list(comparison.stats[-1].estimates) == ["decode_speedup", "latency_speedup"]
    assert "client" not in render_text(comparison) and comparison.family is not None
    assert comparison.family.size == 6
