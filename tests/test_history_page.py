"""The history page as headless Chromium draws it: no console error, no request out, the charts on screen."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from bench.analysis import analyse_history
from bench.render import history_html
from tests.browser import load_page
from tests.test_history import CATEGORIES, synthetic_points

LINE_BLUE = np.array([9, 105, 218]) / 255.0
REGRESSION_RED = np.array([207, 34, 46]) / 255.0


def _pixels_near(image: np.ndarray, colour: np.ndarray) -> int:
    return int(np.sum(np.all(np.abs(image[..., :3] - colour) < 0.08, axis=-1)))


def test_the_history_page_loads_offline_with_its_charts_drawn(tmp_path: Path) -> None:
    import matplotlib.image

    page = tmp_path / "history.html"
    page.write_text(history_html(analyse_history(synthetic_points(40, step_at=20, seed=21))))
    view = load_page(page, height=1400, expressions={
        "charts": "document.querySelectorAll('svg.chart').length",
        "drawn": "[...document.querySelectorAll('svg.chart')].filter(s => s.getBoundingClientRect().width > 100"
                 " && s.querySelector('polyline').getTotalLength() > 50).length",
        "marked": "document.querySelectorAll('svg.chart line.regression').length",
    })
    assert view.console_errors == []
    assert view.external_requests == []
    assert not view.scrolls_sideways
    assert view.values["charts"] == 1 + len(CATEGORIES)
    assert view.values["drawn"] == view.values["charts"]
    assert view.values["marked"] >= 2  # the math category's step, and the overall row's
    image = matplotlib.image.imread(io.BytesIO(view.screenshot), format="png")
    assert _pixels_near(image, LINE_BLUE) > 500  # the trend lines and their dots are on screen
    assert _pixels_near(image, REGRESSION_RED) > 20  # and the change points' dashed markers
