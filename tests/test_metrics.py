"""Metrics declared once: each table's columns come from its declarations, and every output draws all of them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bench.analysis import (
    FORMATS,
    REFERENCE_METRICS,
    REPEAT_CV_METRICS,
    SPEEDUP_CV_METRICS,
    STREAM_METRICS,
    SUMMARY_METRICS,
    ArmPair,
    Metric,
    Percentiles,
    RepeatCv,
    SpeedupCv,
    StreamRow,
    compare,
)
from bench.records import load_run
from bench.render import comparison_payload, format_value, render_json, render_markdown, render_text

SAMPLE = Path(__file__).resolve().parents[1] / "results" / "sample"


def test_a_metric_with_an_unknown_display_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown display format 'bar'"):
        Metric("x", "x", True, "bar")
    assert Metric("decode_rate", "decode t/s", True, "speed", "t/s").header == "decode_rate"
    assert Metric("pred_t_s_cv", "cv", False, "percent", "%", "decode_t/s_cv").header == "decode_t/s_cv"


@pytest.mark.parametrize("metrics", [REFERENCE_METRICS, SUMMARY_METRICS, STREAM_METRICS, REPEAT_CV_METRICS,
                                     SPEEDUP_CV_METRICS])
def test_each_table_declares_each_key_and_header_once(metrics: tuple[Metric, ...]) -> None:
    assert len({metric.key for metric in metrics}) == len(metrics)
    assert len({metric.header for metric in metrics}) == len(metrics)


def _sections() -> tuple[StreamRow, RepeatCv, SpeedupCv]:
    spread = Percentiles(0.01, 0.02, 0.03)
    stream = StreamRow("overall", 4, spread, spread, spread, spread, spread, Percentiles(1.0, 2.0, 3.0), 41.5)
    return stream, RepeatCv("overall", 2, 0.031, 0.042), SpeedupCv("overall", 2, 0.011, 0.052, 0.013, 0.064)


def test_typed_rows_carry_exactly_their_declared_cells() -> None:
    stream, variation, speedup = _sections()
    assert list(stream.as_cells()) == [metric.key for metric in STREAM_METRICS]
    assert list(variation.as_cells()) == [metric.key for metric in REPEAT_CV_METRICS]
    assert list(speedup.as_cells()) == [metric.key for metric in SPEEDUP_CV_METRICS]
    runs = [load_run(SAMPLE / f"{name}.json") for name in ("baseline", "speculative")]
    reference = compare(*runs, stats=False).reference
    assert reference and all(list(row.as_cells()) == [metric.key for metric in REFERENCE_METRICS]
                             for row in reference)


def test_text_markdown_and_json_draw_every_declared_column_of_every_section() -> None:
    stream, variation, speedup = _sections()
    runs = [load_run(SAMPLE / f"{name}.json") for name in ("baseline", "speculative")]
    comparison = replace(compare(*runs), streaming=ArmPair((stream,), ()), variation=ArmPair((), (variation,)),
                         speedup_variation=(speedup,))
    text, markdown = render_text(comparison), render_markdown(comparison)
    payload = json.loads(render_json(comparison))
    for metrics, rows in ((STREAM_METRICS, payload["streaming"]["baseline"]),
                          (REPEAT_CV_METRICS, payload["repeat_cv"]["speculative"]),
                          (SPEEDUP_CV_METRICS, payload["speedup_repeat_cv"])):
        assert set(rows[0]) == {metric.key for metric in metrics}
        for metric in metrics:
            assert metric.header in text
            assert metric.header.replace("_", "\\_") in markdown or metric.header in markdown
    assert "baseline: Streaming latencies" in text and "speculative: Streaming latencies" not in text
    assert "### Run-to-run variation (speculative)" in markdown and "(baseline)" not in markdown.split("Run-to-run")[1]
    assert "41.50" in text and "4.2%" in text and "6.4%" in markdown  # each cell drawn in its declared format
    assert payload["streaming"]["speculative"] == []


def test_a_comparison_without_statistics_renders_only_the_sections_that_need_none() -> None:
    runs = [load_run(SAMPLE / f"{name}.json") for name in ("baseline", "speculative")]
    bare = compare(*runs, stats=False)
    assert set(comparison_payload(bare)) <= {"comparison", "comparability", "cache", "drafter_state", "stats_note"}
    assert "Paired statistics" not in render_text(bare) and "### Lossless check" not in render_markdown(bare)
    assert render_text(bare).startswith("Comparison: baseline=")


def test_one_formatter_draws_every_declared_format() -> None:
    drawn = {kind: format_value(0.125, kind) for kind in FORMATS}
    assert drawn == {"": "0.125", "int": "0", "rate": "0.1250", "seconds": "0.125s", "speed": "0.12",
                     "speedup": "0.12x", "ms": "125.0ms", "percent": "12.5%", "difference": "+12.5",
                     "number": "0.125"}
    assert format_value(None, "percent") == format_value(float("nan"), "speedup") == "n/a"
