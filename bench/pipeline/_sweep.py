"""The `sweep` job: one baseline and several speculative arms, interleaved, at each concurrency level.

Embedded servers are started afresh for every level (the drafter's state is reset by the restart). Every level
is a cell folder `c<level>/` holding ordinary run files (`baseline.json`, `<arm>.json`,
each with its journal), so `compare`, `report`, `regress` and the reference's compare read any pair.
The sweep summary (`sweep.txt`, `sweep.md`, `sweep.json`, plots) is written beside them.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench._constants import DEFAULT_THRESHOLD, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from bench._errors import BenchError
from bench._types import JsonMapping, JsonValue, Writer
from bench.analysis import Sweep, SweepCell, summarize_sweep, sweep_cell
from bench.pipeline._job import ComparisonJob, settings_prompts
from bench.records import (
    BASELINE,
    Run,
    RunIdentity,
    SampleResult,
    check_limits,
    journal_path,
    level_folder,
    load_run,
    plots_folder,
    read_journal,
    resumed_or_new_folder,
    run_file,
    runs_complete,
    sweep_files,
    write_text_file,
)
from bench.render import plot_sweep, sweep_decision_text, sweep_json, sweep_markdown, sweep_text
from bench.runner import Arm, LockStep, Progress, RunConfig, RunOptions, choose_workers, run_arms

PLACEHOLDER_URL = "http://127.0.0.1:1"
"""Stands in for a server's URL while the settings are checked, before any server starts."""
_ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=:+-]*$")


@dataclass(frozen=True)
class ArmDefinition:
    """One speculative arm: a name (its run file's stem) and either an embedded mode with parameters or a URL."""

    name: str
    mode: str | None = None
    draft_max: int | None = None
    url: str | None = None


@dataclass(frozen=True)
class SweepConfig:
    """What `speedbench sweep` runs: one comparison job (its run settings, the baseline server, the embedded
    servers' settings, the folder, seeds, threshold, workers), the speculative arms and the concurrency levels."""

    job: ComparisonJob
    arms: tuple[ArmDefinition, ...]
    levels: tuple[int, ...] = (1, 2, 4)
    tags: dict[str, str] = field(default_factory=dict)
    """Each embedded arm's mode, as its server was started (recorded on its runs)."""


def parse_levels(text: str) -> tuple[int, ...]:
    """`1,2,4,8` -> (1, 2, 4, 8): positive, distinct, ascending, each within `--concurrency`'s declared limits."""
    refusal = f"--concurrency {text[:80]!r}: give positive integers separated by commas, e.g. 1,2,4,8"
    try:
        levels = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise BenchError(refusal) from None
    if not levels or levels[0] < 1:
        raise BenchError(refusal)
    check_limits({"concurrency": levels[-1]})
    return levels


def parse_embedded_arms(text: str, engine: str = "llamacpp") -> tuple[ArmDefinition, ...]:
    """`ngram-mod:draft_max=4,ngram-simple` -> arms of the embedded server (modes and their parameters)."""
    from bench.server import speculative_modes

    try:
        modes = speculative_modes(engine)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    arms = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        mode, _, params = item.partition(":")
        if mode not in modes:
            raise BenchError(f"--spec {item!r}: unknown speculative mode {mode!r}; expected one of: "
                             f"{', '.join(modes)}")
        draft_max = None
        for param in (p for p in params.split(";") if p) if params else ():
            key, _, value = param.partition("=")
            if key != "draft_max" or not value.isdigit() or int(value) < 1:
                raise BenchError(f"--spec {item!r}: the one parameter is draft_max=N (N >= 1), got {param!r}")
            draft_max = int(value)
        arms.append(ArmDefinition(name=item.replace(":", "_").replace("=", ""), mode=mode, draft_max=draft_max))
    return _distinct(arms)


def parse_url_arms(values: Sequence[str]) -> tuple[ArmDefinition, ...]:
    """`NAME=URL` values -> arms of servers the user runs."""
    arms = []
    for value in values:
        name, sep, url = value.partition("=")
        if not sep or not url or not _ARM_NAME.match(name) or name == BASELINE:
            raise BenchError(f"--spec-url {value!r}: use NAME=URL with a simple name other than 'baseline'")
        arms.append(ArmDefinition(name=name, url=url))
    return _distinct(arms)


def _distinct(arms: list[ArmDefinition]) -> tuple[ArmDefinition, ...]:
    names = [arm.name for arm in arms]
    if not arms:
        raise BenchError("a sweep needs at least one speculative arm (--spec or --spec-url)")
    if len(set(names)) != len(names):
        raise BenchError(f"arm names must differ: {', '.join(names)}")
    return tuple(arms)


class _SweepProgress:
    """One progress display for the whole sweep: the first `start` sets the total of every cell."""

    def __init__(self, inner: Progress, total: int) -> None:
        """Wrap the display the CLI chose."""
        self.inner, self.total, self.started = inner, total, False

    def start(self, total: int, description: str) -> None:
        """Start once, for every sample of every arm at every level."""
        if not self.started:
            self.inner.start(self.total, "sweep")
            self.started = True

    def advance(self, result: SampleResult) -> None:
        """One sample of one arm finished."""
        self.inner.advance(result)

    def message(self, text: str) -> None:
        """Pass a message through."""
        self.inner.message(text)

    def finish(self) -> None:
        """The sweep's end finishes the display, not a cell's."""

    def close(self) -> None:
        """Finish the display."""
        if self.started:
            self.inner.finish()


@contextlib.contextmanager
def _servers(config: SweepConfig, out: Writer) -> Iterator[dict[str, str]]:
    """URL per arm name: the given URLs, or embedded servers of `config.engine` with slots for the highest level."""
    from bench.server import ServerError, ServerRequest, engine_display_name, make_server

    job = config.job
    top = max(config.levels)
    wanted = [(BASELINE, job.base.url, "baseline", None), *((a.name, a.url, a.mode, a.draft_max)
                                                              for a in config.arms)]
    with contextlib.ExitStack() as stack:
        urls: dict[str, str] = {}
        for name, url, mode, draft_max in wanted:
            if url:
                urls[name] = url
                continue
            try:
                server = make_server(ServerRequest(
                    engine=job.embedded_engine, mode=mode or "baseline", model=job.server.model,
                    draft=job.server.draft, threads=job.server.threads, slots=top, ctx_per_slot=4096,
                    draft_max=draft_max,
                ))
                out(f"speedbench: starting embedded {engine_display_name(job.embedded_engine)} server for {name} "
                    f"({top} slots)\n")
                server.start()
            except (ServerError, ValueError) as exc:
                raise BenchError(str(exc)) from None
            stack.callback(server.stop)
            urls[name] = server.url
            config.tags[name] = f"{mode}{'' if draft_max is None else f' draft_max={draft_max}'}"
        yield urls


def _given_urls(config: SweepConfig) -> set[str]:
    """Arms whose servers the user runs (their state is not ours to reset)."""
    given = {arm.name for arm in config.arms if arm.url}
    if config.job.base.url:
        given.add(BASELINE)
    return given


def _folder(config: SweepConfig) -> Path:
    job = config.job
    return resumed_or_new_folder(job.resume, job.results_dir, job.label or "sweep", "sweep")


def _arm_config(config: SweepConfig, level: int, name: str, url: str) -> RunConfig:
    """The run config of one arm at one level (`--workers N` gives a level of concurrency c at most c workers)."""
    asked = config.job.workers
    why: str | None
    if asked is not None and asked > level:
        workers, why = level, f"--workers {asked}: {level} at concurrency {level}, one per request"
    else:
        workers, why = choose_workers(asked, concurrency=level)
    return RunConfig.from_settings(config.job.settings, url=url, concurrency=level, label=f"c{level} {name}",
                                   tags={"mode": config.tags.get(name, name)}, workers=workers, workers_auto=why)


def _check_resumable(folder: Path, config: SweepConfig, names: Sequence[str]) -> None:
    """Refuse to resume a sweep whose run files or journals were made with another run identity (osl, ...).

    The servers are started anew (new ports, and the arms' tags are set then): URL and tags are not compared.
    """
    for level in config.levels:
        for name in names:
            path = run_file(level_folder(folder, level), name)
            journal = journal_path(path)
            if path.exists():
                recorded: JsonValue | JsonMapping = load_run(path).config
            elif journal.exists():
                recorded = read_journal(journal)[0].get("config")
            else:
                continue
            old = RunIdentity.of(recorded if isinstance(recorded, dict) else {})
            new = RunIdentity.of(_arm_config(config, level, name, str(old.get("url"))).recorded())
            mismatches = [m for m in old.resume_mismatches(new) if m.key not in ("url", "tags")]
            if mismatches:
                raise BenchError(f"{path}: cannot resume the sweep: "
                                 + "; ".join(mismatch.message() for mismatch in mismatches))


def run_sweep(config: SweepConfig, *, out: Writer, progress: Progress) -> int:
    """Every level, arms interleaved; then the sweep summary, its files and plots. Exit code as `bench`."""
    job = config.job
    prompts = settings_prompts(job.settings)
    for level in config.levels:
        _arm_config(config, level, BASELINE, PLACEHOLDER_URL).validate()
    folder = _folder(config)
    names = [BASELINE, *(arm.name for arm in config.arms)]
    if job.resume:
        _check_resumable(folder, config, names)
    out(f"speedbench: sweep of {', '.join(names[1:])} against the baseline at concurrency "
        f"{', '.join(map(str, config.levels))}; {len(prompts.samples)} samples each, osl={job.settings.osl}\n")
    runs: dict[int, dict[str, Run]] = {}
    display = _SweepProgress(progress, len(prompts.samples) * len(names) * len(config.levels))
    try:
        for level in config.levels:
            cell_dir = level_folder(folder, level)
            cell_dir.mkdir(exist_ok=True)
            if runs_complete(cell_dir, names):
                runs[level] = {name: load_run(run_file(cell_dir, name)) for name in names}
                out(f"speedbench: concurrency {level} already complete in {cell_dir}\n")
                continue
            # fresh embedded servers per level: a drafter that remembers (ngram-mod) would otherwise meet later
            # levels warmer than earlier ones and bias the crossover; a restart is the only reset that clears it
            with _servers(config, out) as urls:
                resume = all(journal_path(run_file(cell_dir, name)).exists() for name in names)
                states = {name: "restart" for name in names if name not in _given_urls(config)}
                arms = [Arm(name, _arm_config(config, level, name, urls[name]), run_file(cell_dir, name),
                            server_state=states.get(name)) for name in names]
                cell_runs, interrupted = run_arms(prompts, arms, LockStep(level, job.order_seed),
                                             RunOptions(progress=display, resume=resume, force=not resume))
            runs[level] = cell_runs
            if interrupted:
                out(f"speedbench: interrupted at concurrency {level}; continue with --resume {folder}\n")
                return EXIT_INTERRUPTED
    finally:
        display.close()
    sweep = summarize_sweep(_cells(runs, names[1:], config))
    written = write_sweep(sweep, folder)
    out("\n" + sweep_text(sweep))
    out(f"\nspeedbench: wrote {', '.join(str(path) for path in written)}\n")
    code = finished_exit_code(runs.values(), out, where="the cell folders")
    out(f"speedbench: {sweep_decision_text(sweep).replace('sweep decision', 'decision', 1)}\n")
    return code


def finished_exit_code(levels: Iterable[Mapping[str, Run]], out: Writer, *, where: str) -> int:
    """EXIT_OK when every selected sample of every level's runs (by arm) finished; else say how many did not,
    EXIT_FAILED."""
    unfinished = sum(run.failed_samples + max(0, run.selected_samples - len(run.results))
                     for cell in levels for run in cell.values())
    if unfinished:
        out(f"speedbench: {unfinished} samples failed or did not finish; see {where}\n")
        return EXIT_FAILED
    return EXIT_OK


def _cells(runs: dict[int, dict[str, Run]], arms: Sequence[str], config: SweepConfig) -> list[SweepCell]:
    return [sweep_cell(arm, level, runs[level][BASELINE], runs[level][arm], threshold=config.job.threshold)
            for level in sorted(runs) for arm in arms]


def load_sweep(folder: str | Path, *, threshold: float = DEFAULT_THRESHOLD) -> Sweep:
    """A sweep folder's cells (every `c<level>/` with a baseline and arm run files), summarised again."""
    root = Path(folder)
    cells = []
    for cell_dir in sorted(root.glob("c*"), key=lambda path: int(path.name[1:]) if path.name[1:].isdigit() else 0):
        if not cell_dir.name[1:].isdigit() or not run_file(cell_dir, BASELINE).exists():
            continue
        level = int(cell_dir.name[1:])
        baseline = load_run(run_file(cell_dir, BASELINE))
        for path in sorted(cell_dir.glob("*.json")):
            if path != run_file(cell_dir, BASELINE):
                cells.append(sweep_cell(path.stem, level, baseline, load_run(path), threshold=threshold))
    if not cells:
        raise BenchError(f"{root}: not a sweep folder (no c<level>/ with baseline.json and an arm's run file)")
    return summarize_sweep(cells)


def write_sweep(sweep: Sweep, folder: Path) -> list[Path]:
    """sweep.txt, sweep.md, sweep.json and the sweep plots into `folder`."""
    plots = plot_sweep(sweep, plots_folder(folder))
    files = sweep_files(folder)
    write_text_file(files[0], sweep_text(sweep))
    write_text_file(files[1], sweep_markdown(sweep, [str(path.relative_to(folder)) for path in plots]))
    write_text_file(files[2], sweep_json(sweep))
    return files + plots
