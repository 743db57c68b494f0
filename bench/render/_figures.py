"""What every chart shares: matplotlib on Agg with stable SVG ids, the colour-blind-safe palette, saving."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

from bench.records import open_no_follow
from bench.render._escape import terminal_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "speedbench"  # stable SVG ids: same inputs, same bytes
import matplotlib.pyplot as plt  # noqa: E402

# Okabe-Ito colour-blind-safe palette
BLUE, ORANGE, GREEN, VERMILLION, GREY = "#0072B2", "#E69F00", "#009E73", "#D55E00", "#999999"
FORMATS = ("png", "svg")


def _save(figure: Figure, out_dir: Path, stem: str, formats: Sequence[str]) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = out_dir / f"{stem}.{fmt}"
        metadata = {"Software": None} if fmt == "png" else {"Date": None, "Creator": None}
        with open_no_follow(path, "wb") as handle:  # never through a planted link, never into a FIFO
            figure.savefig(handle, format=fmt, dpi=110, bbox_inches="tight", metadata=metadata)
        paths.append(path)
    plt.close(figure)
    return paths


def _label(text: object) -> str:
    """Text shown as is: `$` would start matplotlib mathtext; control characters are shown escaped."""
    return terminal_text(text).replace("$", r"\$")
