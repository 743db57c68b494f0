"""The parts chart: tokens per step, step cost and the speedup, each in its own unit, measured against explained."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.render import parts_figure, speedup_parts


def _row(category: str, share: float, accepted: float, cost: float, measured: float) -> dict:
    per_step = 1 + share * accepted
    return {"category": category, "tokens_per_step": per_step, "drafted_step_share": share,
            "accepted_per_draft": accepted, "step_cost": cost, "drafted_step_cost": 1.6, "plain_step_cost": 1.05,
            "explained_speedup": per_step / cost, "pooled_decode_speedup": measured, "reconciles": True}


def test_each_part_has_its_own_panel_and_unit_and_the_explained_speedup_sits_on_the_measured_scale() -> None:
    rows = [_row("code", 0.3, 5.0, 1.2, 2.1), _row("overall", 0.2, 4.0, 1.1, 1.64), {"category": "chat"}]
    figure = parts_figure(rows)
    assert figure is not None
    tokens, cost, speedup = figure.axes
    assert "tokens/step" in tokens.get_xlabel() and "x baseline token" in cost.get_xlabel()
    assert "speedup" in speedup.get_xlabel()
    assert [label.get_text() for label in tokens.get_yticklabels()] == ["overall", "code"]  # first row on top
    diamonds = speedup.collections[0].get_offsets()
    assert [float(x) for x, _ in diamonds] == pytest.approx([1.8 / 1.1, 2.5 / 1.2])
    bars = [patch.get_width() for patch in speedup.patches]
    assert bars == pytest.approx([1.64, 2.1])
    texts = [text.get_text() for text in tokens.texts]
    assert " 2.50 = 1 + 30% x 5.0" in texts


def test_no_row_with_parts_draws_nothing(tmp_path: Path) -> None:
    assert parts_figure([{"category": "chat", "explained_speedup": None}]) is None
    assert speedup_parts([], tmp_path) == []
    files = speedup_parts([_row("code", 0.3, 5.0, 1.2, 2.1)], tmp_path, formats=("png",))
    assert [path.name for path in files] == ["speedup_parts.png"] and files[0].stat().st_size > 5_000
