"""The `tune` job: which draft length to ship, measured as one interleaved comparison per configuration.

Each configuration (a draft length K at a concurrency C) gets a baseline and a speculative server started for it
(embedded, or the user's commands with `{port}`, `{draft_max}`, `{concurrency}`), one interleaved comparison on the
same prompts, and its folder `c<C>/draft_max-<K>/` with `baseline.json` and `draft_max-<K>.json` (and the commands'
output); the servers are stopped (every process they started ended) before the next configuration starts. The budget is
spent by the prediction model where it holds: the grid's extremes, then the predicted best and its neighbours.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._constants import DEFAULT_THRESHOLD, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from bench._errors import BenchError
from bench._redact import one_line, redact
from bench.analysis import (
    Comparison,
    PredictionCheck,
    Tune,
    compare,
    default_budget,
    plan_next,
    sample_until_decided,
    scope_prediction,
    summarize_tune,
)
from bench.pipeline._arms import arm_config
from bench.pipeline._rounds import Rounds
from bench.prompts import load_prompts
from bench.records import (
    BASELINE,
    Run,
    journal_path,
    load_run,
    read_journal,
    refuse_resume,
    resumed_or_new_folder,
    run_file,
    runs_complete,
    save_run,
)
from bench.render import plot_tune, tune_markdown, tune_text
from bench.runner import (
    Arm,
    LockStep,
    Progress,
    RunConfig,
    RunOptions,
    prompts_digest,
    run_arms,
    stopped_like_ctrl_c,
)

OVERALL = "overall"


@dataclass(frozen=True)
class TuneConfig:
    """What `speedbench tune` runs: the drafter, the grid, the load levels, the servers and the prompts."""

    mode: str = "ngram-mod"
    grid: tuple[int, ...] = tuple(range(1, 17))
    levels: tuple[int, ...] = (1,)
    base_cmd: str | None = None
    base_url: str | None = None
    spec_cmd: str | None = None
    bench: str = "qualitative"
    dataset: str = "categories"
    category: str = "all"
    limit: int = 5
    osl: int = 128
    until_decided: bool = False
    full_grid: bool = False
    results_dir: str = "results"
    label: str | None = None
    resume: str | None = None
    order_seed: int = 0
    threshold: float = DEFAULT_THRESHOLD
    tie_margin: float = DEFAULT_THRESHOLD
    engine: str = "llamacpp"
    model: str | None = None
    draft: str | None = None
    threads: int = 1
    ready_timeout: float = 120.0
    tags: dict[str, str] = field(default_factory=dict)


MAX_DRAFT_LENGTH = 1024
"""The longest draft length `--draft-max` takes: far above any drafter's, and a range is built before it runs."""


def parse_grid(text: str) -> tuple[int, ...]:
    """`2,4,8,16` or `1-16` (or both, `1-4,8,16`) -> distinct draft lengths in [1, MAX_DRAFT_LENGTH], ascending."""
    values: set[int] = set()
    try:
        for part in (item.strip() for item in text.split(",") if item.strip()):
            low, _, high = part.partition("-")
            first, last = int(low), int(high) if high else int(low)
            if not 1 <= first <= last <= MAX_DRAFT_LENGTH:
                raise ValueError(part)
            values.update(range(first, last + 1))
    except ValueError:
        values = set()
    if not values:
        raise BenchError(f"--draft-max {one_line(text, 80)!r}: give draft lengths >= 1 (at most "
                         f"{MAX_DRAFT_LENGTH}) as a list or range, e.g. 2,4,8,16 or 1-16")
    return tuple(sorted(values))


def arm_name(draft_max: int) -> str:
    """The run file stem of a configuration: `draft_max-16`."""
    return f"draft_max-{draft_max}"


def config_folder(folder: Path, level: int, draft_max: int) -> Path:
    """Where one configuration's comparison lives: `c<C>/draft_max-<K>/`."""
    return folder / f"c{level}" / arm_name(draft_max)


@contextlib.contextmanager
def _server(config: TuneConfig, *, speculative: bool, level: int, draft_max: int, where: Path,
            out: Callable[[str], Any]) -> Iterator[tuple[str, str | None]]:
    """(URL, the server's state for the records) of one side: a given URL, the user's command or an embedded one."""
    from bench.server import CommandServer, ServerError, ServerRequest, make_server

    if not speculative and config.base_url:
        yield config.base_url, None
        return
    command = config.spec_cmd if speculative else config.base_cmd
    try:
        if command:
            server: Any = CommandServer(command, where / ("spec.log" if speculative else "baseline.log"),
                                        ready_timeout=config.ready_timeout, draft_max=draft_max, concurrency=level)
        else:
            server = make_server(ServerRequest(
                engine=config.engine, mode=config.mode if speculative else "baseline", model=config.model,
                draft=config.draft, threads=config.threads, slots=level, ctx_per_slot=4096,
                draft_max=draft_max if speculative else None))
        out(f"speedbench: starting the {'speculative' if speculative else 'baseline'} server for "
            f"{arm_name(draft_max)} at concurrency {level}\n")
        server.start()
    except (ServerError, ValueError) as exc:
        raise BenchError(str(exc)) from None
    try:
        yield server.url, "restart"
    finally:
        server.stop()


def _run_config(config: TuneConfig, url: str, level: int, side: str, draft_max: int) -> RunConfig:
    tags = {"mode": "baseline" if side == BASELINE else config.mode, **config.tags, **_server_tags(config, side)}
    if side != BASELINE:
        tags["draft_max"] = str(draft_max)
    return arm_config(url=url, bench=config.bench, dataset=config.dataset, category=config.category,
                      limit=config.limit, osl=config.osl, concurrency=level, label=f"c{level} {side}", tags=tags)


def _server_tags(config: TuneConfig, side: str) -> dict[str, str]:
    """What identifies a side's server when tune starts it (its port is new on every start): the command, or the
    embedded engine, model files and threads. A given URL identifies itself."""
    if side == BASELINE and config.base_url:
        return {}
    command = config.base_cmd if side == BASELINE else config.spec_cmd
    if command:
        return {"server": f"command {redact(command)}"}
    tags = {"server": f"embedded {config.engine}", "model": config.model or "default", "threads": str(config.threads)}
    if side != BASELINE and config.mode == "draft":
        tags["draft_model"] = config.draft or config.model or "default"
    return tags


def _refuse_unlike(config: TuneConfig, where: Path, level: int, draft_max: int, names: list[str]) -> None:
    """Refuse in one line to keep a configuration's finished run files measured with other settings (osl, prompts,
    categories, servers) or swapped for each other: a pick is made from one configuration's measurements."""
    prompts = load_prompts(config.dataset, bench=config.bench, category=config.category, limit=config.limit)
    for name in names:
        path = run_file(where, name)
        run = load_run(path)
        asked = _run_config(config, config.base_url or "http://127.0.0.1:1", level, name, draft_max)
        refuse_resume(str(path), run.config, asked.recorded())
        if run.config.get("label") != asked.label:
            raise BenchError(f"{path}: cannot resume: label was {run.config.get('label')!r}, now {asked.label!r}")
        if not config.until_decided and run.info.prompts_sha256 != prompts_digest(prompts):
            raise BenchError(f"{path}: cannot resume: the selected prompts differ from the finished run's")


def _refuse_unlike_journals(config: TuneConfig, where: Path, level: int, draft_max: int, names: list[str]) -> None:
    """Before any server starts: an interrupted configuration's journals must be of the settings asked for now."""
    for name in names:
        journal = journal_path(run_file(where, name))
        if journal.exists():
            recorded = read_journal(journal)[0].get("config")
            asked = _run_config(config, config.base_url or "http://127.0.0.1:1", level, name, draft_max)
            refuse_resume(str(journal), recorded if isinstance(recorded, dict) else {}, asked.recorded())


def measure_config(config: TuneConfig, folder: Path, level: int, draft_max: int, *, out: Callable[[str], Any],
                   progress: Progress) -> tuple[Run, Run, bool]:
    """One configuration: both servers started, one interleaved comparison, both stopped; (baseline, spec, stopped)."""
    where = config_folder(folder, level, draft_max)
    names = [BASELINE, arm_name(draft_max)]
    if runs_complete(where, names):
        _refuse_unlike(config, where, level, draft_max, names)
        out(f"speedbench: {arm_name(draft_max)} at concurrency {level} already complete in {where}\n")
        baseline, speculative = (load_run(run_file(where, name)) for name in names)
        return baseline, speculative, False
    _refuse_unlike_journals(config, where, level, draft_max, names)
    where.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        base_url, base_state = stack.enter_context(_server(config, speculative=False, level=level,
                                                           draft_max=draft_max, where=where, out=out))
        spec_url, spec_state = stack.enter_context(_server(config, speculative=True, level=level,
                                                           draft_max=draft_max, where=where, out=out))
        states = {name: state for name, state in zip(names, (base_state, spec_state), strict=True) if state}
        arms = [Arm(BASELINE, _run_config(config, base_url, level, BASELINE, draft_max), run_file(where, BASELINE),
                    server_state=states.get(BASELINE)),
                Arm(names[1], _run_config(config, spec_url, level, names[1], draft_max), run_file(where, names[1]),
                    server_state=states.get(names[1]))]
        if config.until_decided:
            return _until_decided(config, where, arms, states, out=out, progress=progress)
        resume = all(journal_path(Path(arm.output)).exists() for arm in arms if arm.output is not None)
        prompts = load_prompts(config.dataset, bench=config.bench, category=config.category, limit=config.limit)
        runs, stopped = run_arms(prompts, arms, LockStep(level, config.order_seed),
                                 RunOptions(progress=progress, resume=resume, force=not resume))
    return runs[BASELINE], runs[names[1]], stopped


def _until_decided(config: TuneConfig, where: Path, arms: list[Arm], states: dict[str, str], *,
                   out: Callable[[str], Any], progress: Progress) -> tuple[Run, Run, bool]:
    """Rounds of one sample per category (each round's files under `rounds/k/`) until the overall verdict against
    the baseline is decided or `limit` rounds ran; both run files carry the sequential record."""
    everything = load_prompts(config.dataset, bench=config.bench, category=config.category, limit=config.limit)
    state = Rounds()

    def run_round(k: int) -> tuple[Run, Run]:
        prompts = load_prompts(config.dataset, bench=config.bench, category=config.category, limit=k)
        seen = state.seen(BASELINE)
        fresh = dataclasses.replace(prompts, samples=tuple(s for s in prompts.samples if s.id not in seen))
        round_arms = [dataclasses.replace(arm, output=run_file(where / "rounds" / str(k), arm.name)) for arm in arms]
        Path(round_arms[0].output or "").parent.mkdir(parents=True, exist_ok=True)
        runs, stopped = run_arms(fresh, round_arms, LockStep(arms[0].config.concurrency, config.order_seed + k),
                                 RunOptions(progress=progress, force=True))
        whole = []
        for arm in arms:
            run = state.so_far(arm.name, runs[arm.name], k)
            save_run(run, run_file(where, arm.name))
            whole.append(run)
        if stopped:
            raise _Stopped
        return whole[0], whole[1]

    def save_record(baseline: Run, speculative: Run) -> None:
        state.stop = speculative.info.sequential
        for arm, run in zip(arms, (baseline, speculative), strict=True):
            save_run(run, run_file(where, arm.name))

    try:
        decided = sample_until_decided(run_round, rounds=config.limit, per_round=len(everything.categories),
                                       threshold=config.threshold, on_record=save_record,
                                       on_look=lambda look: out(f"speedbench: {look.reason}\n"))
    except _Stopped:
        return load_run(run_file(where, arms[0].name)), load_run(run_file(where, arms[1].name)), True
    return decided.baseline, decided.speculative, False


class _Stopped(Exception):
    """A round was interrupted: stop sampling, keep what finished."""


def _folder(config: TuneConfig) -> Path:
    return resumed_or_new_folder(config.resume, config.results_dir, config.label or f"tune-{config.mode}", "tune")


def validate(config: TuneConfig) -> None:
    """Refuse impossible options in one line, before any server starts."""
    if config.spec_cmd is None and (config.base_cmd or config.base_url):
        raise BenchError("--base-cmd/--base-url need --spec-cmd (the speculative server's command, with {draft_max})")
    if config.base_cmd and config.base_url:
        raise BenchError("give either --base-cmd or --base-url, not both")
    from bench.runner import checked_number, normalize_base_url

    checked_number("--ready-timeout", config.ready_timeout)
    if config.base_url:
        normalize_base_url(config.base_url)
    if config.spec_cmd is not None and "{draft_max}" not in config.spec_cmd:
        raise BenchError("--spec-cmd must contain {draft_max}: every configuration starts it with its draft length")
    from bench.server import ServerError, fill_command

    for command in (config.base_cmd, config.spec_cmd):
        if command is None:
            continue
        if "{port}" not in command:
            raise BenchError(f"server command {command!r} has no {{port}}: the server must listen where asked")
        try:
            fill_command(command, port=1, draft_max=1, concurrency=1)
        except ServerError as exc:
            raise BenchError(str(exc)) from None
    if config.limit < 1 or config.osl < 1 or not 0 < config.tie_margin < 1 or not 0 < config.threshold < 1:
        raise BenchError("--limit and --osl must be >= 1, --tie-margin and --threshold between 0 and 1")
    if config.spec_cmd is None:
        from bench.server import speculative_modes

        modes = speculative_modes(config.engine)
        if config.mode not in modes:
            raise BenchError(f"--spec {config.mode!r}: the embedded {config.engine} server knows {', '.join(modes)}")
    load_prompts(config.dataset, bench=config.bench, category=config.category, limit=config.limit)
    for level in config.levels:
        _run_config(config, "http://127.0.0.1:1", level, BASELINE, 1).validate()


def run_tune(config: TuneConfig, *, out: Callable[[str], Any], progress: Progress) -> int:
    """Every concurrency level: configurations measured as the plan asks, then the pick and every tune file."""
    validate(config)
    folder = _folder(config)
    comparisons: dict[int, dict[int, Comparison]] = {}
    checks: list[PredictionCheck] = []
    notes: list[str] = []
    budget = None if config.full_grid else default_budget(config.grid)
    failed = 0
    with stopped_like_ctrl_c():
        try:
            for level in config.levels:
                measured = comparisons.setdefault(level, {})
                prediction = None
                while True:
                    wanted = plan_next(config.grid, measured, None if config.full_grid else prediction,
                                       budget=budget)
                    if not wanted:
                        break
                    for draft_max in wanted:
                        baseline, speculative, stopped = measure_config(config, folder, level, draft_max, out=out,
                                                                        progress=progress)
                        if stopped:
                            out(f"speedbench: interrupted; continue with --resume {folder}\n")
                            return EXIT_INTERRUPTED
                        _refuse_without_pairs(baseline, speculative, config_folder(folder, level, draft_max))
                        failed += baseline.failed_samples + speculative.failed_samples
                        measured[draft_max] = compare(baseline, speculative, threshold=config.threshold,
                                                      baseline_label=BASELINE, speculative_label=arm_name(draft_max))
                        notes += _drafting_notes(measured[draft_max], draft_max, level)
                        guess = prediction.speedup(draft_max) if prediction is not None else None
                        decode = measured[draft_max].stats[-1].decode if measured[draft_max].stats else None
                        if guess is not None and decode is not None and decode.point > 0:
                            checks.append(PredictionCheck(draft_max, level, guess, decode.point))
                    prediction = _overall_prediction(measured)
                    if not prediction.holds and budget is not None:
                        notes.append(f"concurrency {level}: {prediction.text}; every configuration of the grid is "
                                     "measured instead")
                        budget = None
        except KeyboardInterrupt:
            out(f"speedbench: interrupted; finished configurations kept; continue with --resume {folder}\n")
            return EXIT_INTERRUPTED
    tune = summarize_tune(comparisons, config.grid, mode=config.mode, checks=checks, threshold=config.threshold,
                          tie_margin=config.tie_margin, notes=notes)
    written = write_tune(tune, folder)
    out("\n" + tune_text(tune))
    out(f"\nspeedbench: wrote {', '.join(str(path) for path in written)}\n")
    if failed:
        out(f"speedbench: {failed} samples failed; see the configuration folders\n")
        return EXIT_FAILED
    return EXIT_OK


def _refuse_without_pairs(baseline: Run, speculative: Run, where: Path) -> None:
    """A configuration with no sample that succeeded on both servers cannot be compared: one line naming why."""
    finished = {result.id for result in baseline.results if result.ok}
    if finished & {result.id for result in speculative.results if result.ok}:
        return
    errors = [result for run in (baseline, speculative) for result in run.results if not result.ok]
    cause = f": {one_line(errors[0].error or errors[0].error_kind or 'failed', 200)}" if errors else ""
    raise BenchError(f"no sample succeeded on both servers of {where.name} at {where.parent.name}, so tune cannot "
                     f"compare them ({len(errors)} failed{cause}); the run files and server output are in {where}")


def _drafting_notes(comparison: Comparison, draft_max: int, level: int) -> list[str]:
    """A server that drafts longer than the configuration asked: the draft length never reached it."""
    parts = comparison.stats[-1].parts if comparison.stats else None
    length = parts.mean_draft_length if parts is not None else None
    if length is None or length <= draft_max + 0.5:
        return []
    return [f"warning: at concurrency {level} the draft_max={draft_max} server drafted {length:.1f} tokens per draft: "
            "it did not get that draft length (does its command pass {draft_max}?)"]


def _overall_prediction(measured: dict[int, Comparison]) -> Any:
    from bench.analysis import comparison_scopes

    return scope_prediction({k: comparison_scopes(comparison, k)[OVERALL] for k, comparison in measured.items()})


def write_tune(tune: Tune, folder: Path) -> list[Path]:
    """tune.json (exactly the recommendation and the rows), tune.md, tune.txt and the plot into `folder`."""
    import json

    from bench.records import finite, write_text_file

    files = [folder / "tune.json", folder / "tune.md", folder / "tune.txt"]
    plots = plot_tune(tune, folder / "plots")
    write_text_file(files[0], json.dumps(finite(tune.to_json()), indent=2) + "\n")
    write_text_file(files[1], tune_markdown(tune, [str(path.relative_to(folder)) for path in plots]))
    write_text_file(files[2], tune_text(tune))
    return files + plots
