"""The comparison renderer reproduces the SpeedBench tables of the seed pull request."""

from __future__ import annotations

import re

import pytest

from bench.analysis import compare_summaries
from bench.render import (
    COMPARISON_COLUMNS,
    comparison_markdown,
    comparison_text,
    format_value,
    markdown_escape,
    summary_text,
    text_table,
)
from tests.conftest import DATA

SPEEDUP_COLUMNS = (3, 6)


def _parse_table(text: str) -> tuple[list[str], list[list[str]]]:
    lines = text.rstrip("\n").split("\n")
    assert lines[0].startswith("Comparison: ")
    return lines, [re.split(r"\s{2,}", line.strip()) for line in lines[3:]]


def _rebuild_inputs(cells: list[list[str]]) -> tuple[list[dict], list[dict]]:
    """Rebuild baseline and speculative summary rows from the printed figures."""
    baseline, speculative = [], []
    for row in cells:
        category, base_tps, spec_tps, _, base_lat, spec_lat, _, rate = row
        baseline.append({"category": category, "avg_pred_t_s": float(base_tps), "avg_latency": float(base_lat[:-1])})
        speculative.append(
            {
                "category": category,
                "avg_pred_t_s": float(spec_tps),
                "avg_latency": float(spec_lat[:-1]),
                "accept_rate": None if rate == "n/a" else float(rate),
            }
        )
    return baseline, speculative


def _expected_with_recomputed_speedups(lines: list[str], cells: list[list[str]], rows: list[dict]) -> tuple[str, int]:
    """The seed table with each speedup cell replaced by the one recomputed from the rounded inputs."""
    out = lines[:3]
    changed = 0
    for line, row_cells, row in zip(lines[3:], cells, rows, strict=True):
        for column in SPEEDUP_COLUMNS:
            printed = row_cells[column]
            recomputed = format_value(row[COMPARISON_COLUMNS[column][1]], "speedup")
            assert abs(float(printed[:-1]) - float(recomputed[:-1])) <= 0.0100001, (printed, recomputed)
            if printed != recomputed:
                changed += 1
                line = re.sub(rf"(?<=\s){re.escape(printed)}(?=\s)", recomputed, line, count=1)
        out.append(line)
    return "\n".join(out) + "\n", changed


@pytest.mark.parametrize("number", [1, 2, 3])
def test_seed_tables_rebuild(number: int) -> None:
    seed = (DATA / f"seed_table_{number}.txt").read_text(encoding="utf-8")
    lines, cells = _parse_table(seed)
    baseline, speculative = _rebuild_inputs(cells)
    rows = compare_summaries(baseline, speculative)
    expected, changed = _expected_with_recomputed_speedups(lines, cells, rows)
    assert changed <= 3, "recomputed speedups may differ from the printed ones only by rounding, rarely"
    rendered = comparison_text(rows, "baseline.json", "dspark.json")
    if number == 2:
        # byte for byte, trailing spaces included; the paste trimmed only the last line's
        assert rendered[: rendered.rindex("overall")] == expected[: expected.rindex("overall")]
        assert rendered.splitlines()[-1].rstrip() == expected.splitlines()[-1]
    else:
        assert [line.rstrip() for line in rendered.splitlines()] == [line.rstrip() for line in expected.splitlines()]


def test_seed_table_2_roleplay_rounding_case() -> None:
    """Roleplay's printed 1.94x comes from unrounded latencies; from the rounded figures it is 1.94x or 1.93x."""
    seed = (DATA / "seed_table_2.txt").read_text(encoding="utf-8")
    _, cells = _parse_table(seed)
    baseline, speculative = _rebuild_inputs(cells)
    rows = {row["category"]: row for row in compare_summaries(baseline, speculative)}
    assert rows["roleplay"]["latency_speedup"] == pytest.approx(128.897 / 66.507)
    assert format_value(rows["coding"]["decode_speedup"], "speedup") == "3.10x"


def test_text_table_rules() -> None:
    rows = [{"category": "a", "n": 3, "r": None}, {"category": "longer", "n": 12, "r": 0.5}]
    columns = [("category", "category", ""), ("n", "n", "int"), ("rate", "r", "rate")]
    assert text_table(rows, columns) == (
        "category  n   rate  \n"
        "--------  --  ------\n"
        "a         3   n/a   \n"
        "longer    12  0.5000\n"
    )


def test_summary_text_headers() -> None:
    text = summary_text([{"category": "overall", "requests": 2, "avg_prompt_t_s": 10.0, "avg_pred_t_s": 5.0,
                          "avg_latency": 1.5, "accept_rate": None}])
    assert text.splitlines()[0] == "category  samples  avg_prompt_t/s  avg_pred_t/s  avg_latency  accept_rate"
    assert text.splitlines()[2] == "overall   2        10.00           5.00          1.500s       n/a        "


def test_no_overlap_message() -> None:
    assert comparison_text([], "a.json", "b.json") == (
        "Comparison: baseline=a.json speculative=b.json\nNo overlapping categories found for comparison.\n"
    )


def test_markdown_table() -> None:
    rows = compare_summaries(
        [{"category": "qa", "avg_pred_t_s": 10.0, "avg_latency": 2.0}],
        [{"category": "qa", "avg_pred_t_s": 15.0, "avg_latency": 1.0, "accept_rate": 0.25}],
    )
    assert comparison_markdown(rows).splitlines() == [
        "| category | base_<wbr>avg_<wbr>pred_<wbr>t/s | spec_<wbr>avg_<wbr>pred_<wbr>t/s | decode_<wbr>speedup "
        "| base_<wbr>avg_<wbr>latency | spec_<wbr>avg_<wbr>latency | latency_<wbr>speedup | accept_<wbr>rate |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        "| qa | 10.00 | 15.00 | 1.50x | 2.000s | 1.000s | 2.00x | 0.2500 |",
    ]


def test_markdown_escape_neutralises_markup() -> None:
    assert markdown_escape("<script>|x*") == "\\<script\\>\\|x\\*"
    assert markdown_escape("snake_case _em_ [link](u)\nnext") == "snake_case \\_em\\_ \\[link\\](u) next"


def test_lossless_table_names_each_divergence_with_its_kind_and_margin() -> None:
    from bench.analysis import Divergence, LosslessRow
    from bench.render import lossless_text

    rows = [LosslessRow("math", compared=3, identical=1, first_diff="m1@93, m2@40", near_tie=1, real=1, unclassified=0,
                        divergences=(Divergence("m1", 0, 0, 93, 3, 0.04, "near_tie"),
                                     Divergence("m2", 0, 0, 40, 7, 2.31, "real")),
                        near_tie_threshold=0.1, resolution=None, resolution_note="", replaced_text=0)]
    text = lossless_text(rows)
    assert "m1@93: near-tie 0.04, m2@40: real 2.31" in text
    assert "near_tie  real" in text.splitlines()[1]
    assert "under 0.1 nats" in text


def test_notes_about_nothing_recorded_are_not_printed() -> None:
    from dataclasses import replace
    from pathlib import Path

    from bench.analysis import Resolution, compare
    from bench.records import Acceptance, load_run
    from bench.render import render_report, render_text

    assert Resolution(None, 0, "estimated from recorded margins").text == ""  # no margin recorded: nothing to say
    assert "no log-probability grid found in 12 recorded margins" in Resolution(None, 12, "estimated").text
    sample = Path(__file__).resolve().parents[1] / "results" / "sample"
    base, spec = (load_run(sample / f"{name}.json") for name in ("baseline", "speculative"))
    silent = replace(spec, meta=replace(spec.info, acceptance=Acceptance(source="metrics", drafts=0.0,
                                                                         draft_tokens=0.0, accepted=0.0)))
    for text in (render_text(compare(base, silent)), render_report(compare(base, silent))):
        assert "acceptance length n/a" not in text and "in 0 recorded margins" not in text
    assert "Server counters over the speculative run" in render_text(compare(base, spec))
