"""Open-loop plots: each request's timeline by arm, and goodput and SLO attainment against the arrival rate."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from bench.analysis import RateLevel, RequestTiming

matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "speedbench"
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from bench.render._plots import BLUE, FORMATS, GREEN, GREY, ORANGE, VERMILLION, _label, _save  # noqa: E402

_ARM_COLOURS = (BLUE, ORANGE, GREEN, VERMILLION)


def timeline_figure(arms: Mapping[str, Sequence[RequestTiming]], *, title: str = "") -> Figure:
    """One panel per arm: per request (in order of arrival) the queue wait, time to first token and decode."""
    names = list(arms)
    if not names:
        raise ValueError("a timeline needs at least one arm")
    height = max(3.0, min(12.0, 0.03 * max(len(arms[name]) for name in names) + 2.5))
    figure, axes = plt.subplots(len(names), 1, figsize=(9.0, height * len(names)), squeeze=False, sharex=True)
    for axis, name in zip(axes[:, 0], names, strict=True):
        requests = sorted(arms[name], key=lambda r: (r.scheduled_s, r.sent_s))
        rows = range(len(requests))
        waits = [(r.scheduled_s, r.queue_wait_s) for r in requests]
        firsts = [r.first_token_s if r.first_token_s is not None else r.sent_s for r in requests]
        for row, request, (start, wait), first in zip(rows, requests, waits, firsts, strict=True):
            if wait > 0:
                axis.plot([start, start + wait], [row, row], color=GREY, linewidth=2.2, solid_capstyle="butt")
            if first > request.sent_s:
                axis.plot([request.sent_s, first], [row, row], color=ORANGE, linewidth=2.2, solid_capstyle="butt")
            axis.plot([first, request.end_s], [row, row], color=BLUE if request.ok else VERMILLION, linewidth=2.2,
                      solid_capstyle="butt")
        axis.scatter([r.scheduled_s for r in requests], list(rows), s=6, color="#333333", zorder=3)
        blocks = sorted({r.block for r in requests if r.block is not None})
        for block in blocks:
            members = [r for r in requests if r.block == block]
            if block % 2:
                axis.axvspan(min(r.sent_s for r in members), max(r.end_s for r in members), color="#eeeeee",
                             zorder=0)
        axis.set_ylabel(f"{_label(name)}\nrequest (by arrival)")
        axis.yaxis.set_major_locator(MaxNLocator(integer=True))
        axis.invert_yaxis()
        axis.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("seconds since the run's start")
    handles = [
        plt.Line2D([], [], color="#333333", marker="o", linestyle="none", markersize=3, label="scheduled arrival"),
        plt.Line2D([], [], color=GREY, linewidth=2.2, label="queue wait (client)"),
        plt.Line2D([], [], color=ORANGE, linewidth=2.2, label="sent -> first token"),
        plt.Line2D([], [], color=BLUE, linewidth=2.2, label="first token -> end\n(sent -> end unstreamed)"),
        plt.Line2D([], [], color=VERMILLION, linewidth=2.2, label="failed"),
    ]
    axes[0, 0].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    blocked = any(r.block is not None for requests in arms.values() for r in requests)
    default = "Request timeline" + (" (shaded: odd A/B blocks)" if blocked else "")
    axes[0, 0].set_title(_label(title) if title else default)
    return figure


def plot_timeline(arms: Mapping[str, Sequence[RequestTiming]], out_dir: Path, *, title: str = "",
                  formats: Sequence[str] = FORMATS, stem: str = "timeline") -> list[Path]:
    """Write the request timeline of a run (or of each arm of an A/B run)."""
    return _save(timeline_figure(arms, title=title), out_dir, stem, formats)


def goodput_rate_figure(levels: Sequence[RateLevel], *, target: float | None = None, title: str = "") -> Figure:
    """Goodput and SLO attainment against the requested rate, one line per arm with its interval band."""
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 7.0), sharex=True)
    arms = list(dict.fromkeys(level.arm for level in levels))
    withheld = []
    for index, arm in enumerate(arms):
        colour = _ARM_COLOURS[index % len(_ARM_COLOURS)]
        mine = sorted((level for level in levels if level.arm == arm), key=lambda level: level.rate)
        rates = [level.rate for level in mine]
        for axis, pick, scale in ((top, "goodput", 1.0), (bottom, "attainment", 100.0)):
            points = [getattr(level.result.overall, pick) for level in mine]
            axis.plot(rates, [p.point * scale for p in points], marker="o", color=colour, label=_label(arm))
            banded = [(r, p) for r, p in zip(rates, points, strict=True) if p.has_interval]
            if banded:
                axis.fill_between([r for r, _ in banded], [p.low * scale for _, p in banded],
                                  [p.high * scale for _, p in banded], color=colour, alpha=0.18, linewidth=0)
            withheld += [f"{arm} at {r:g} req/s" for r, p in zip(rates, points, strict=True)
                         if not p.has_interval and pick == "goodput"]
    if levels:
        top_rate = max(level.rate for level in levels)
        top.plot([0, top_rate], [0, top_rate], color=GREY, linestyle="--", linewidth=1, label="offered rate")
    top.set_ylabel("goodput (requests/s meeting every SLO)")
    bottom.set_ylabel("SLO attainment (%)")
    bottom.set_ylim(-2, 102)
    if target is not None:
        bottom.axhline(target * 100, color=GREY, linestyle=":", linewidth=1, label=f"target {target:.0%}")
    bottom.set_xlabel("requested arrival rate (requests/s)")
    for axis in (top, bottom):
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small", loc="best")
    slo = levels[0].result.slo.text() if levels else ""
    top.set_title(_label(title) if title else f"Goodput and SLO attainment vs rate (SLO {slo}; bands: 95% intervals)")
    if withheld:
        bottom.annotate("No band at " + ", ".join(withheld[:6]) + (" ..." if len(withheld) > 6 else "")
                        + ": too few requests for an interval.", xy=(0, -0.22), xycoords="axes fraction",
                        fontsize=8, color="#444444")
    return figure


def plot_goodput_rate(levels: Sequence[RateLevel], out_dir: Path, *, target: float | None = None, title: str = "",
                      formats: Sequence[str] = FORMATS, stem: str = "goodput_rate") -> list[Path]:
    """Write the goodput/attainment-vs-rate plot of a rate sweep."""
    if any(not math.isfinite(level.rate) for level in levels):
        raise ValueError("rates must be finite")
    return _save(goodput_rate_figure(levels, target=target, title=title), out_dir, stem, formats)
