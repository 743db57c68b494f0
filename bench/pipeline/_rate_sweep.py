"""The rate sweep: one baseline and several speculative arms at each arrival rate, on one schedule per rate.

Every rate is a folder `r<rate>/` holding ordinary run files (`baseline.json`, `<arm>.json`). At each rate every
embedded server is started afresh (a restart: the only reset that clears llama.cpp's ngram-mod memory, see
docs/traffic.md), so every level starts from the same state; every arm runs the same seeded arrivals and
prompt sequence in alternating blocks. The summary (`rate_sweep.txt/.md/.json`, the goodput-vs-rate plot and
one request timeline per rate) is written beside them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

from bench._constants import EXIT_INTERRUPTED
from bench._errors import BenchError
from bench._inputs import read_input_text
from bench._types import Writer
from bench.analysis import (
    DEFAULT_SLO_TARGET,
    RateSweep,
    Slo,
    compare_traffic,
    drafter_state,
    parse_slo,
    rate_sweep,
    request_timings,
)
from bench.pipeline._job import settings_prompts
from bench.pipeline._sweep import PLACEHOLDER_URL, SweepConfig, _given_urls, _servers, finished_exit_code
from bench.records import (
    BASELINE,
    Run,
    folder_rate,
    is_rate_sweep_layout,
    load_run,
    new_results_folder,
    plots_folder,
    rate_folder,
    rate_sweep_files,
    run_file,
    run_files,
    write_text_file,
)
from bench.render import rate_sweep_text, traffic_json
from bench.runner import (
    Arm,
    Progress,
    RunConfig,
    RunOptions,
    checked_number,
    choose_workers,
    run_arms,
    strategy_for,
)


def parse_rates(text: str) -> tuple[float, ...]:
    """`1,2,4,8` -> (1.0, 2.0, 4.0, 8.0): positive finite requests/s, distinct, ascending."""
    try:
        rates = tuple(sorted({float(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        rates = ()
    if not rates or any(not math.isfinite(rate) or rate <= 0 for rate in rates):
        raise BenchError(f"--request-rate {text!r}: give positive requests/s separated by commas, e.g. 1,2,4,8")
    for rate in rates:
        checked_number("--request-rate", rate)
    return rates


@dataclass(frozen=True)
class RateSweepConfig:
    """A sweep over arrival rates: a sweep (its job's run settings shape the arrivals: process, burstiness, cap,
    repeats; its block size and SLOs), the rates and the attainment the SLOs ask for."""

    sweep: SweepConfig
    rates: tuple[float, ...]
    slo_target: float = DEFAULT_SLO_TARGET

    @property
    def slots(self) -> int:
        """Slots of each embedded server: the cap, else the sweep's highest concurrency level."""
        return self.sweep.job.settings.max_concurrency or max(self.sweep.levels)


def _arm_config(config: RateSweepConfig, rate: float, name: str, url: str) -> RunConfig:
    """The run config of one arm at one rate."""
    sweep, settings = config.sweep, config.sweep.job.settings
    workers, why = choose_workers(sweep.job.workers, concurrency=1, request_rate=rate, open_loop=True,
                                  max_concurrency=settings.max_concurrency)
    return RunConfig.from_settings(settings, url=url, concurrency=1, label=f"r{rate:g} {name}",
                                   tags={"mode": sweep.tags.get(name, name)}, request_rate=rate, workers=workers,
                                   workers_auto=why)


def run_rate_sweep(config: RateSweepConfig, *, out: Writer, progress: Progress) -> int:
    """Every rate, arms in alternating blocks on one schedule, servers restarted per rate; then the summary."""
    sweep, job = config.sweep, config.sweep.job
    if job.resume:
        raise BenchError("a rate sweep cannot be resumed yet: start it again")
    slo = parse_slo(job.slo) if job.slo else None
    prompts = settings_prompts(job.settings)
    for rate in config.rates:
        _arm_config(config, rate, BASELINE, PLACEHOLDER_URL).validate()
    folder = new_results_folder(job.results_dir, job.label or "rate-sweep")
    names = [BASELINE, *(arm.name for arm in sweep.arms)]
    out(f"speedbench: rate sweep of {', '.join(names[1:])} against the baseline at "
        f"{', '.join(f'{rate:g}' for rate in config.rates)} req/s ({job.settings.arrival}); "
        f"{len(prompts.samples) * job.settings.repeat} requests per arm and rate, osl={job.settings.osl}\n")
    runs: dict[float, dict[str, Run]] = {}
    level_sweep = replace(sweep, levels=(config.slots,))
    for rate in config.rates:
        with _servers(level_sweep, out) as urls:  # fresh servers: every rate starts from the same state
            states = {name: "restart" for name in names if name not in _given_urls(sweep)}
            level = rate_folder(folder, rate)
            level.mkdir()
            arms = [Arm(name, _arm_config(config, rate, name, urls[name]), run_file(level, name),
                        server_state=states.get(name)) for name in names]
            strategy = strategy_for(arms[0].config, arms=len(arms), block_size=job.block_size,
                                    order_seed=job.order_seed)
            cell, interrupted = run_arms(prompts, arms, strategy, RunOptions(progress=progress))
        runs[rate] = cell
        if interrupted:
            out(f"speedbench: interrupted at {rate:g} req/s; the finished rates are in {folder}\n")
            return EXIT_INTERRUPTED
    result = summarize_rate_sweep(runs, names[1:], slo=slo, target=config.slo_target, threshold=job.threshold)
    written = write_rate_sweep(result, runs, folder)
    out("\n" + rate_sweep_text(result))
    out(f"\nspeedbench: wrote {', '.join(str(path) for path in written)}\n")
    return finished_exit_code(runs.values(), out, where="the rate folders")


def summarize_rate_sweep(runs: dict[float, dict[str, Run]], arms: list[str], *, slo: Slo | None, target: float,
                         threshold: float) -> RateSweep:
    """Each arm against the baseline at each rate, then break-even rates and SLO capacities."""
    comparisons = []
    for rate in sorted(runs):
        base = runs[rate][BASELINE]
        for arm in arms:
            comparisons.append(compare_traffic(
                request_timings(base), request_timings(runs[rate][arm]), names=(BASELINE, arm), slo=slo, rate=rate,
                threshold=threshold, drafter=[drafter_state(base, BASELINE), drafter_state(runs[rate][arm], arm)],
            ))
    return rate_sweep(comparisons, target=target)


def write_rate_sweep(result: RateSweep, runs: dict[float, dict[str, Run]], folder: Path) -> list[Path]:
    """rate_sweep.txt/.md/.json, the goodput-vs-rate plot (with SLOs) and one request timeline per rate."""
    from bench.render import plot_goodput_rate, plot_timeline

    files = rate_sweep_files(folder)
    write_text_file(files[0], rate_sweep_text(result))
    write_text_file(files[1], rate_sweep_text(result, markdown=True))
    write_text_file(files[2], traffic_json(result))
    plots = plots_folder(folder)
    if result.levels:
        files += plot_goodput_rate(list(result.levels), plots, target=result.target, formats=("png",))
    for rate, cell in runs.items():
        files += plot_timeline({name: request_timings(run) for name, run in cell.items()}, plots, formats=("png",),
                               stem=f"timeline_r{rate:g}", title=f"Request timeline at {rate:g} req/s")
    return files


def is_rate_sweep_folder(folder: str | Path) -> bool:
    """Whether a folder holds a rate sweep (an `r<rate>/` with a baseline run file)."""
    return is_rate_sweep_layout(folder)


def _recorded_slo(root: Path) -> tuple[Slo | None, float]:
    """The SLOs and attainment target the sweep ran with, as its `rate_sweep.json` states them (none: no SLO)."""
    path = rate_sweep_files(root)[2]
    if not path.exists():
        return None, DEFAULT_SLO_TARGET
    try:
        data = json.loads(read_input_text(path))
    except (OSError, ValueError) as exc:
        raise BenchError(f"{path}: unreadable ({exc})") from exc
    target = data.get("target", DEFAULT_SLO_TARGET) if isinstance(data, dict) else DEFAULT_SLO_TARGET
    for item in data.get("comparisons", []) if isinstance(data, dict) else []:
        recorded = (item.get("goodput_baseline") or {}).get("slo") if isinstance(item, dict) else None
        if isinstance(recorded, dict):
            fields = {name: recorded.get(name) for name in ("ttft_s", "tpot_s", "e2e_s")}
            if any(isinstance(value, int | float) for value in fields.values()):
                return Slo(**{k: float(v) for k, v in fields.items() if isinstance(v, int | float)}), float(target)
    return None, float(target)


def load_rate_sweep(folder: str | Path, *, threshold: float) -> RateSweep:
    """A rate-sweep folder's runs (every `r<rate>/`), summarised again with the SLOs its `rate_sweep.json` names."""
    root = Path(folder)
    runs: dict[float, dict[str, Run]] = {}
    for level in sorted(root.iterdir()) if root.is_dir() else []:
        rate = folder_rate(level)
        if rate is None or not run_file(level, BASELINE).exists():
            continue
        runs[rate] = {path.stem: load_run(path) for path in run_files(level)}
    if not runs:
        raise BenchError(f"{root}: not a rate-sweep folder (no r<rate>/ with baseline.json)")
    arms = list(dict.fromkeys(name for cell in runs.values() for name in cell if name != BASELINE))
    if not arms or any(set(arms) - set(cell) for cell in runs.values()):
        raise BenchError(f"{root}: every r<rate>/ needs baseline.json and the same arms' run files")
    slo, target = _recorded_slo(root)
    return summarize_rate_sweep(runs, arms, slo=slo, target=target, threshold=threshold)
