"""Plots that cannot mislead: notes clear of the labels, honest titles, points at few samples, labels apart."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.collections import PathCollection
from matplotlib.text import Text

from bench.analysis import compare
from bench.records import load_run
from bench.render import (
    FEW_SAMPLES,
    accept_figure,
    latency_figure,
    latency_speedups,
    place_labels,
    plot_all,
    speedup_figure,
)

SAMPLE = Path(__file__).resolve().parents[1] / "results" / "sample"
CATEGORIES = ["coding", "humanities", "math", "multilingual", "qa", "rag", "reasoning", "roleplay", "stem",
              "summarization", "writing"]


def _stats(with_ci: set[str], *, latency_na: tuple[str, ...] = (), decode_na: tuple[str, ...] = ()) -> list[dict]:
    rows = []
    for index, category in enumerate([*CATEGORIES, "overall"]):
        decode = None if category in decode_na else 1.1 + 0.05 * index
        latency = None if category in latency_na else 1.05 + 0.02 * index
        ci = category in with_ci
        rows.append({
            "category": category, "decode_speedup": decode, "latency_speedup": latency,
            "decode_speedup_low": decode - 0.05 if ci and decode else None,
            "decode_speedup_high": decode + 0.05 if ci and decode else None,
            "latency_speedup_low": latency - 0.05 if ci and latency else None,
            "latency_speedup_high": latency + 0.05 if ci and latency else None,
            "accept_rate": 1.0 if index % 3 else 0.6 + 0.01 * index,
        })
    return rows


def _boxes(figure) -> tuple[list, object]:
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    axis = figure.axes[0]
    ticks = [label.get_window_extent(renderer) for label in axis.get_xticklabels() if label.get_text()]
    notes = [text for text in axis.texts if text.get_fontsize() == 8 and text.get_text().endswith(".")]
    return ticks, notes, renderer


def _all_text(figure) -> str:
    text = "\n".join(text.get_text() for text in figure.axes[0].texts) + "\n" + figure.axes[0].get_title()
    return " ".join(text.split())  # footnotes are wrapped


def test_speedup_footnote_sits_below_the_rotated_labels() -> None:
    figure = speedup_figure(_stats({"overall"}))
    ticks, notes, renderer = _boxes(figure)
    assert len(notes) == 1
    note = notes[0].get_window_extent(renderer)
    assert ticks and all(not note.overlaps(tick) and note.y1 < tick.y0 for tick in ticks)
    plt.close(figure)


def test_speedup_title_says_which_bars_have_an_interval() -> None:
    figure = speedup_figure(_stats({"overall"}))
    title = figure.axes[0].get_title()
    assert "95% CI on overall only" in title  # the overall row is no category: never "1 of 12 categories"
    assert "Whiskers: 95% t-interval on the logs, on overall. No whiskers on coding" in _all_text(figure)
    plt.close(figure)
    everywhere = speedup_figure(_stats(set([*CATEGORIES, "overall"])))
    assert everywhere.axes[0].get_title().endswith("95% CI)") and "whiskers" not in _all_text(everywhere).lower()
    plt.close(everywhere)
    some = speedup_figure(_stats({"coding", "math", "overall"}))
    assert "95% CI on 2 of 11 categories and overall" in some.axes[0].get_title()
    plt.close(some)
    nowhere = speedup_figure(_stats(set()))
    assert "no confidence intervals" in nowhere.axes[0].get_title()
    plt.close(nowhere)


def test_speedup_names_what_is_missing() -> None:
    figure = speedup_figure(_stats({"overall"}, latency_na=("qa",), decode_na=("rag",)))
    text = _all_text(figure)
    assert "Latency speedup n/a: qa." in text
    assert "Not shown (decode speedup n/a): rag." in text
    assert [label.get_text() for label in figure.axes[0].get_xticklabels()].count("rag") == 0
    plt.close(figure)


def test_fewlatency_speedups_are_drawn_as_points_not_collapsed_boxes() -> None:
    ratios = {"qa": [1.25], "rag": [0.98, 1.11], "math": [1.1, 1.1, 1.2, 1.0, 1.05, 1.02]}
    figure = latency_figure(ratios)
    axis = figure.axes[0]
    points = sum(len(c.get_offsets()) for c in axis.collections if isinstance(c, PathCollection))
    assert points == 3  # qa and rag: every prompt a point
    assert len(axis.patches) == 1  # math: one box (at least FEW_SAMPLES prompts)
    assert f"fewer than {FEW_SAMPLES} prompts (qa, rag). Boxes elsewhere" in _all_text(figure)
    plt.close(figure)


def test_latency_plot_compares_each_prompt_with_itself() -> None:
    """A 3-turn prompt takes 3x a 1-turn one: pooled absolute latencies would show that spread, not the effect."""
    comparison = compare(load_run(SAMPLE / "baseline.json"), load_run(SAMPLE / "speculative.json"))
    figure = latency_figure(*latency_speedups(comparison))
    axis = figure.axes[0]
    assert "speedup" in axis.get_ylabel() and "same prompt" in axis.get_title()
    drawn = [value for c in axis.collections if isinstance(c, PathCollection) for _, value in c.get_offsets()]
    base = {r.key: r.latency_s for r in comparison.baseline.results}
    expected = sorted(base[r.key] / r.latency_s for r in comparison.speculative.results)
    assert sorted(drawn) == pytest.approx(expected)  # every prompt's own ratio, nothing pooled
    assert max(drawn) / min(drawn) < 2.0 < max(base.values()) / min(base.values())
    plt.close(figure)


def test_latency_names_categories_missing_from_one_run() -> None:
    figure = latency_figure({"qa": [1.0]}, missing=["rag"])
    assert "Not shown (no prompt succeeded in both runs): rag." in _all_text(figure)
    plt.close(figure)


def test_accept_labels_do_not_collide_and_nothing_vanishes_silently() -> None:
    stats = _stats(set())
    stats[1]["accept_rate"] = None  # humanities: nothing drafted
    stats[5]["decode_speedup"] = None  # rag
    figure = accept_figure(stats)
    axis = figure.axes[0]
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    labels = [text for text in axis.texts if text.get_text() in CATEGORIES]
    assert len(labels) == len(CATEGORIES) - 2
    boxes = [Text.get_window_extent(label, renderer) for label in labels]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    text = _all_text(figure)
    assert "accept rate n/a (nothing drafted): humanities." in text and "decode speedup n/a: rag." in text
    plt.close(figure)


@pytest.mark.parametrize("count", [2, 6, 12])
def test_place_labels_keeps_crowded_labels_apart(count: int) -> None:
    figure, axis = plt.subplots(figsize=(6.5, 4.6))
    points = [(1.0, 1.25 + 0.002 * index) for index in range(count)]  # one tight cluster, as at accept rate 1.0
    axis.scatter([x for x, _ in points], [y for _, y in points])
    axis.set_xlim(0.5, 1.1)
    axis.set_ylim(0.8, 1.8)
    notes = place_labels(axis, points, [f"category-{index}" for index in range(count)])
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    boxes = [Text.get_window_extent(note, renderer) for note in notes]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    plt.close(figure)


def test_plot_all_keeps_its_files(tmp_path: Path) -> None:
    baseline, speculative = load_run(SAMPLE / "baseline.json"), load_run(SAMPLE / "speculative.json")
    files = plot_all(compare(baseline, speculative), tmp_path, formats=("png",))
    assert [path.name for path in files] == ["speedup.png", "accept_vs_speedup.png", "latency.png",
                                            "position_acceptance.png", "speedup_parts.png"]
    assert all(path.stat().st_size > 5_000 for path in files)


def test_the_whiskers_of_a_run_sampled_until_decided_name_the_stopping_looks_level() -> None:
    from bench.analysis import compare, sample_until_decided
    from bench.render import interval_label
    from tests.test_sequential import _rounds

    decided = sample_until_decided(_rounds(1.05, 1), rounds=10, per_round=11)
    comparison = compare(decided.baseline, decided.speculative)
    label = interval_label(comparison)
    assert label == f"CI at the sequential stopping look ({decided.last.confidence:.1%} overall)"
    figure = speedup_figure([row.as_cells() for row in comparison.stats], interval=label)
    assert label in figure.axes[0].get_title() and "95%" not in figure.axes[0].get_title()


def test_speedup_marks_the_categories_with_no_drafts() -> None:
    figure = speedup_figure(_stats(set()), no_drafts={"qa", "stem"})
    ticks = [label.get_text() for label in figure.axes[0].get_xticklabels()]
    assert ticks[CATEGORIES.index("qa")] == "qa\n(no drafts)" and ticks[CATEGORIES.index("stem")] == "stem\n(no drafts)"
    assert ticks[CATEGORIES.index("coding")] == "coding"
    hatched = [bar for bar in figure.axes[0].patches if bar.get_hatch() == "//"]
    assert len(hatched) == 4  # decode and latency bars of both
    assert "No drafts (hatched): qa, stem" in _all_text(figure)
    plt.close(figure)


def test_accept_plot_is_not_one_stack_of_points_when_every_accept_rate_is_one() -> None:
    rows = [{"category": category, "accept_rate": 1.0, "decode_speedup": 1.0 + 0.1 * index,
             "drafted_share": 0.1 * (index + 1)} for index, category in enumerate(["coding", "math", "qa", "rag"])]
    figure = accept_figure(rows)
    (points,) = [item for item in figure.axes[0].collections if isinstance(item, PathCollection)]
    xs = sorted(x for x, _ in points.get_offsets())
    assert xs == pytest.approx([0.1, 0.2, 0.3, 0.4])  # spread by drafted share, each point apart
    assert "drafted share" in figure.axes[0].get_xlabel() and "every accept rate 1.00" in figure.axes[0].get_title()
    assert "cannot tell them apart" in _all_text(figure)
    plt.close(figure)
    varied = accept_figure([{**row, "accept_rate": 0.5 + 0.1 * index} for index, row in enumerate(rows)])
    assert varied.axes[0].get_xlabel().startswith("accept rate")
    plt.close(varied)
