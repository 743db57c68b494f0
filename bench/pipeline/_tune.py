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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench._constants import DEFAULT_THRESHOLD, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from bench._errors import BenchError
from bench._redact import one_line, redact
from bench._types import Writer
from bench.analysis import (
    Comparison,
    PredictionCheck,
    Tune,
    compare,
    default_budget,
    not_linear_at,
    plan_next,
    sample_until_decided,
    scope_prediction,
    summarize_tune,
)
from bench.pipeline._job import ComparisonJob, most_rounds, settings_prompts
from bench.pipeline._rounds import Rounds
from bench.pipeline._servers import LOG_NAMES, ended_on_signals
from bench.records import (
    BASELINE,
    SPECULATIVE,
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
from bench.runner import Arm, Progress, RunConfig, RunOptions, long_turns, prompts_digest, run_arms

if TYPE_CHECKING:
    from bench.analysis import ConfigParts, Measured, Prediction
    from bench.server import EngineServer

OVERALL = "overall"


@dataclass(frozen=True)
class TuneConfig:
    """What `speedbench tune` runs: one comparison job (run settings, the servers: URL, command or embedded with
    its drafter `job.server.spec`, the folder, seeds, threshold), the draft lengths, the load levels and the pick's
    own options."""

    job: ComparisonJob
    grid: tuple[int, ...] = tuple(range(1, 17))
    levels: tuple[int, ...] = (1,)
    full_grid: bool = False
    tie_margin: float = DEFAULT_THRESHOLD

    @property
    def mode(self) -> str:
        """The drafter tuned (`--spec`)."""
        return self.job.server.spec


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
            out: Writer) -> Iterator[tuple[str, str | None]]:
    """(URL, the server's state for the records) of one side: a given URL, the user's command or an embedded one."""
    from bench.server import CommandServer, ServerError, ServerRequest, make_server

    job = config.job
    if not speculative and job.base.url:
        yield job.base.url, None
        return
    command = job.spec.command if speculative else job.base.command
    server: CommandServer | EngineServer
    try:
        if command:
            server = CommandServer(command, where / LOG_NAMES[SPECULATIVE if speculative else BASELINE],
                                   ready_timeout=job.server.ready_timeout, api_key=job.settings.api_key,
                                   draft_max=draft_max, concurrency=level)
        else:
            server = make_server(ServerRequest(
                engine=job.embedded_engine, mode=config.mode if speculative else "baseline", model=job.server.model,
                draft=job.server.draft, threads=job.server.threads, slots=level, ctx_per_slot=4096,
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
    """One side's run config at one level: the run settings, its endpoint and the tags naming its server."""
    job = config.job
    tags = {"mode": "baseline" if side == BASELINE else config.mode, **_server_tags(config, side)}
    if side != BASELINE:
        tags["draft_max"] = str(draft_max)
    return RunConfig.from_settings(job.settings, url=url, concurrency=level, label=f"c{level} {side}", tags=tags)


def _server_tags(config: TuneConfig, side: str) -> dict[str, str]:
    """What identifies a side's server when tune starts it (its port is new on every start): the command, or the
    embedded engine, model files and threads. A given URL identifies itself."""
    job = config.job
    if side == BASELINE and job.base.url:
        return {}
    command = job.base.command if side == BASELINE else job.spec.command
    if command:
        return {"server": f"command {redact(command)}"}
    server = job.server
    tags = {"server": f"embedded {job.embedded_engine}", "model": server.model or "default",
            "threads": str(server.threads)}
    if side != BASELINE and config.mode == "draft":
        tags["draft_model"] = server.draft or server.model or "default"
    return tags


def _refuse_unlike(config: TuneConfig, where: Path, level: int, draft_max: int, names: list[str]) -> None:
    """Refuse in one line to keep a configuration's finished run files measured with other settings (osl, prompts,
    categories, servers) or swapped for each other: a pick is made from one configuration's measurements."""
    prompts = settings_prompts(config.job.settings)
    for name in names:
        path = run_file(where, name)
        run = load_run(path)
        asked = _run_config(config, config.job.base.url or "http://127.0.0.1:1", level, name, draft_max)
        refuse_resume(str(path), run.config, asked.recorded())
        if run.config.get("label") != asked.label:
            raise BenchError(f"{path}: cannot resume: label was {run.config.get('label')!r}, now {asked.label!r}")
        if not config.job.until_decided and run.info.prompts_sha256 != prompts_digest(prompts):
            raise BenchError(f"{path}: cannot resume: the selected prompts differ from the finished run's")


def _refuse_unlike_journals(config: TuneConfig, where: Path, level: int, draft_max: int, names: list[str]) -> None:
    """Before any server starts: an interrupted configuration's journals must be of the settings asked for now."""
    for name in names:
        journal = journal_path(run_file(where, name))
        if journal.exists():
            recorded = read_journal(journal)[0].get("config")
            asked = _run_config(config, config.job.base.url or "http://127.0.0.1:1", level, name, draft_max)
            refuse_resume(str(journal), recorded if isinstance(recorded, dict) else {}, asked.recorded())


def measure_config(config: TuneConfig, folder: Path, level: int, draft_max: int, *, out: Writer,
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
        if config.job.until_decided:
            return _until_decided(config, where, arms, states, out=out, progress=progress)
        resume = all(journal_path(Path(arm.output)).exists() for arm in arms if arm.output is not None)
        prompts = settings_prompts(config.job.settings)
        runs, stopped = run_arms(prompts, arms, long_turns(level, config.job.order_seed),
                                 RunOptions(progress=progress, resume=resume, force=not resume))
    return runs[BASELINE], runs[names[1]], stopped


def _until_decided(config: TuneConfig, where: Path, arms: list[Arm], states: dict[str, str], *,
                   out: Writer, progress: Progress) -> tuple[Run, Run, bool]:
    """Rounds of one sample per category (each round's files under `rounds/k/`) until the overall verdict against
    the baseline is decided or `limit` rounds ran; both run files carry the sequential record."""
    job = config.job
    everything = settings_prompts(job.settings)
    limit = most_rounds(job.settings, everything)
    state = Rounds()

    def run_round(k: int) -> tuple[Run, Run]:
        prompts = settings_prompts(job.settings, limit=k)
        seen = state.seen(BASELINE)
        fresh = dataclasses.replace(prompts, samples=tuple(s for s in prompts.samples if s.id not in seen))
        round_arms = [dataclasses.replace(arm, output=run_file(where / "rounds" / str(k), arm.name)) for arm in arms]
        Path(round_arms[0].output or "").parent.mkdir(parents=True, exist_ok=True)
        runs, stopped = run_arms(fresh, round_arms, long_turns(arms[0].config.concurrency, job.order_seed + k),
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
        decided = sample_until_decided(run_round, rounds=limit, per_round=len(everything.categories),
                                       threshold=job.threshold, on_record=save_record,
                                       on_look=lambda look: out(f"speedbench: {look.reason}\n"))
    except _Stopped:
        return load_run(run_file(where, arms[0].name)), load_run(run_file(where, arms[1].name)), True
    return decided.baseline, decided.speculative, False


class _Stopped(Exception):
    """A round was interrupted: stop sampling, keep what finished."""


def _folder(config: TuneConfig) -> Path:
    job = config.job
    return resumed_or_new_folder(job.resume, job.results_dir, job.label or f"tune-{config.mode}", "tune")


def validate(config: TuneConfig) -> None:
    """Refuse impossible options in one line, before any server starts."""
    job = config.job
    base_cmd, spec_cmd = job.base.command, job.spec.command
    if spec_cmd is None and (base_cmd or job.base.url):
        raise BenchError("--base-cmd/--base-url need --spec-cmd (the speculative server's command, with {draft_max})")
    if base_cmd and job.base.url:
        raise BenchError("give either --base-cmd or --base-url, not both")
    from bench.runner import checked_number, normalize_base_url

    checked_number("--ready-timeout", job.server.ready_timeout)
    if job.base.url:
        normalize_base_url(job.base.url)
    if spec_cmd is not None and "{draft_max}" not in spec_cmd:
        raise BenchError("--spec-cmd must contain {draft_max}: every configuration starts it with its draft length")
    from bench.server import ServerError, fill_command

    placeholders = {"draft_max": 1, "concurrency": 1}
    if job.settings.api_key is not None:
        placeholders["api_key"] = 1
    for command in (base_cmd, spec_cmd):
        if command is None:
            continue
        if "{port}" not in command:
            raise BenchError(f"server command {command!r} has no {{port}}: the server must listen where asked")
        try:
            fill_command(command, port=1, **placeholders)
        except ServerError as exc:
            raise BenchError(str(exc)) from None
    if not 0 < config.tie_margin < 1 or not 0 < job.threshold < 1:
        raise BenchError("--tie-margin and --threshold must be between 0 and 1")
    if spec_cmd is None:
        from bench.server import speculative_modes

        modes = speculative_modes(job.embedded_engine)
        if config.mode not in modes:
            raise BenchError(f"--spec {config.mode!r}: the embedded {job.embedded_engine} server knows "
                             f"{', '.join(modes)}")
    settings_prompts(job.settings)
    for level in config.levels:
        _run_config(config, "http://127.0.0.1:1", level, BASELINE, 1).validate()


def run_tune(config: TuneConfig, *, out: Writer, progress: Progress) -> int:
    """Every concurrency level: configurations measured as the plan asks, then the pick and every tune file."""
    validate(config)
    folder = _folder(config)
    comparisons: dict[int, dict[int, Comparison]] = {}
    checks: list[PredictionCheck] = []
    notes: list[str] = []
    failed = 0
    with ended_on_signals():
        try:
            for level in config.levels:
                measured = comparisons.setdefault(level, {})
                prediction: Prediction | None = None
                budget = None if config.full_grid else default_budget(config.grid)  # each level planned on its own
                while True:
                    wanted = plan_next(config.grid, measured, None if config.full_grid else prediction,
                                       budget=budget)
                    if not wanted:
                        wanted = _uncovered(config.grid, measured, level == config.levels[0], notes, level)
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
                        measured[draft_max] = compare(baseline, speculative, threshold=config.job.threshold,
                                                      baseline_label=BASELINE, speculative_label=arm_name(draft_max))
                        notes += _drafting_notes(measured[draft_max], draft_max, level)
                        guess = prediction.speedup(draft_max) if prediction is not None else None
                        decode = measured[draft_max].stats[-1].decode if measured[draft_max].stats else None
                        if guess is not None and decode is not None and decode.point > 0:
                            checks.append(PredictionCheck(draft_max, level, guess, decode.point))
                    prediction = _overall_prediction(measured)
                    if not prediction.holds and budget is not None:
                        bent = not_linear_at(prediction.why, level)
                        notes.append(bent or f"concurrency {level}: {prediction.text}; every configuration of the "
                                     "grid is measured instead")
                        budget = None
        except KeyboardInterrupt:
            out(f"speedbench: interrupted; finished configurations kept; continue with --resume {folder}\n")
            return EXIT_INTERRUPTED
    tune = summarize_tune(comparisons, config.grid, mode=config.mode, checks=checks, threshold=config.job.threshold,
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


def _uncovered(grid: tuple[int, ...], measured: dict[int, Comparison], categories: bool, notes: list[str],
               level: int) -> tuple[int, ...]:
    """What the level's reported scopes (overall, and the categories at the lowest level) still need measured for
    their picks to be proven; the plan measures it beyond the budget, and a note says so."""
    from bench.analysis import comparison_scopes, cover_scopes, predicted_best

    by_scope: dict[str, dict[int, tuple[Measured, ConfigParts | None]]] = {}
    for k, comparison in measured.items():
        for scope, item in comparison_scopes(comparison, k).items():
            if scope == OVERALL or categories:
                by_scope.setdefault(scope, {})[k] = item
    predictions = {scope: scope_prediction(configs) for scope, configs in by_scope.items()}
    missing = cover_scopes(grid, measured, predictions)
    if not missing:
        return ()
    wanted = tuple(sorted({k for ks in missing.values() for k in ks}))
    why = "; ".join(f"{scope}: predicted best K={predicted_best(grid, predictions[scope])} and its grid neighbours"
                    if predicted_best(grid, predictions[scope]) is not None else f"{scope}: the model does not "
                    "predict, so the whole grid" for scope in missing)
    notes.append(f"concurrency {level}: measured draft_max {', '.join(map(str, wanted))} beyond the budget so that "
                 f"every reported pick is proven over configurations measured for it ({why})")
    return wanted


def _overall_prediction(measured: dict[int, Comparison]) -> Prediction:
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
