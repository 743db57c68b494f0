"""The artefacts of a comparison folder: the comparison's renderings and plots, and the arms' traffic."""

from __future__ import annotations

from pathlib import Path

from bench._constants import DEFAULT_THRESHOLD
from bench._types import Writer
from bench.analysis import Comparison, compare
from bench.records import (
    BASELINE,
    SPECULATIVE,
    Run,
    comparison_files,
    plots_folder,
    traffic_files,
    write_text_file,
)
from bench.render import render_json, render_markdown, render_text


def write_traffic(
    baseline: Run, speculative: Run, folder: Path, *, out: Writer, slo: str | None,
    rate: float | None, threshold: float = DEFAULT_THRESHOLD,
) -> list[Path]:
    """Throughput of both arms (every comparison); for an open-loop pair also the paired comparison at the
    schedule (traffic.txt/.md/.json) and the request timeline; drafter-state warnings on stderr."""
    import sys

    from bench.analysis import compare_traffic, drafter_state, parse_slo, request_timings, state_warnings
    from bench.render import terminal_text, throughput_line, traffic_json, traffic_text

    runs = {BASELINE: baseline, SPECULATIVE: speculative}
    for line in state_warnings(runs):
        sys.stderr.write(f"speedbench: warning: {terminal_text(line)}\n")
    requests = {side: request_timings(run) for side, run in runs.items()}
    if not all(requests.values()):
        return []
    if rate is None and not baseline.settings.trace:
        from bench.analysis import throughput

        for side, timings in requests.items():
            out(f"{side}: {throughput_line(throughput(timings))}\n")
        return []
    comparison = compare_traffic(
        requests[BASELINE], requests[SPECULATIVE], names=(BASELINE, SPECULATIVE),
        slo=parse_slo(slo) if slo else None, rate=rate, threshold=threshold,
        drafter=[drafter_state(run, side) for side, run in runs.items()],
    )
    out("\n" + traffic_text(comparison))
    paths = traffic_files(folder)
    write_text_file(paths[0], traffic_text(comparison))
    write_text_file(paths[1], traffic_text(comparison, markdown=True))
    write_text_file(paths[2], traffic_json(comparison))
    from bench.render import plot_timeline

    paths += plot_timeline(requests, plots_folder(folder), formats=("png",))
    return paths


def write_comparison(
    baseline: Run, speculative: Run, folder: Path, *, threshold: float = DEFAULT_THRESHOLD
) -> tuple[Comparison, list[Path]]:
    """Compare two runs once; write comparison.txt/.md/.json and the plots into `folder`; return both."""
    comparison = compare(baseline, speculative, threshold=threshold)
    files = comparison_files(folder)
    write_text_file(files[0], render_text(comparison))
    write_text_file(files[1], render_markdown(comparison))
    write_text_file(files[2], render_json(comparison))
    from bench.render import plot_all

    files += plot_all(comparison, plots_folder(folder), formats=("png",))
    return comparison, files
