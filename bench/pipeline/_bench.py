"""The `make bench` job: baseline and speculative runs on embedded (or given) servers, then every artefact."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from bench._constants import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from bench._errors import BenchError
from bench._redact import redact, redact_url
from bench._types import Writer
from bench.analysis import Comparison
from bench.pipeline._artefacts import write_comparison, write_traffic
from bench.pipeline._job import ComparisonJob, ServerSide, most_rounds, settings_prompts
from bench.pipeline._rounds import Rounds
from bench.pipeline._servers import check_command, check_embedded, command_values, ended_on_signals, side_endpoint
from bench.prompts import PromptSet
from bench.records import (
    BASELINE,
    FRESH,
    SPECULATIVE,
    UNKNOWN,
    Run,
    has_journal,
    journal_path,
    load_run,
    new_results_folder,
    round_folder,
    run_file,
)
from bench.render import console_text
from bench.runner import (
    Arm,
    LockStep,
    Progress,
    RunConfig,
    RunOptions,
    choose_workers,
    left_workers,
    normalize_base_url,
    run_arms,
    strategy_for,
)

if TYPE_CHECKING:
    from bench.server import CommandServer, EngineServer


@dataclass(frozen=True)
class PipelineConfig:
    """What `bench` runs: one comparison job (run settings, both servers, the comparison's own fields), whether the
    arms are interleaved and the report's title.

    `interleave` (default) keeps both servers up and sends each sample to both back to back in a seeded random
    order.
    """

    job: ComparisonJob = field(default_factory=ComparisonJob)
    interleave: bool = True
    title: str | None = None

    @classmethod
    def build(cls, *, interleave: bool = True, title: str | None = None, **values: Any) -> PipelineConfig:
        """A pipeline from flat names (`ComparisonJob.build`'s)."""
        return cls(ComparisonJob.build(**values), interleave, title)


def _run_config(side: str, endpoint: str, mode: str, config: PipelineConfig,
                server: CommandServer | EngineServer | None) -> RunConfig:
    """The run config of one side: its endpoint, the run settings and tags describing its server."""
    from bench.server import CommandServer, server_tags

    job, settings = config.job, config.job.settings
    tags = {"mode": mode}
    if isinstance(server, CommandServer):  # identified by its command (the port is new on every start)
        tags.update(server="command", command=redact(" ".join(server.template.split())))
    elif server is not None:  # an embedded server describes itself
        tags.update(server_tags(server))
    workers, why = choose_workers(job.workers, concurrency=settings.concurrency, request_rate=settings.request_rate,
                                  open_loop=settings.request_rate is not None,
                                  max_concurrency=settings.max_concurrency,
                                  single="--until-decided" if job.until_decided else None)
    return RunConfig.from_settings(settings, url=endpoint, label=side, tags=tags, workers=workers,
                                   workers_auto=why)


def _report_death(side: str, server: CommandServer | EngineServer | None, out: Writer) -> bool:
    """Whether the side's embedded server died; if so print its last log lines."""
    if server is None or server.is_running():
        return False
    out(f"speedbench: the {side} server died during the run; its last log lines:\n")
    out("".join(f"  {line}\n" for line in server.log_tail(20)))
    return True


def _resuming(config: PipelineConfig, output: Path) -> bool:
    """Whether this side continues an interrupted comparison (`--resume FOLDER` and a journal to continue)."""
    return config.job.resume is not None and (journal_path(output).exists() or left_workers(output) is not None)


def _one_side(
    side: str, server_side: ServerSide, mode: str, config: PipelineConfig, prompts: PromptSet, folder: Path,
    out: Writer, progress: Progress,
) -> tuple[Run, bool, bool]:
    """Run one side alone (sequential mode); return (run, interrupted, server died)."""
    output = run_file(folder, side)
    with side_endpoint(side, server_side, mode, config.job, folder, out) as (endpoint, server):
        run_config = _run_config(side, endpoint, mode, config, server)
        runs, interrupted = run_arms(prompts, [Arm(side, run_config, output,
                                                   server_state="restart" if server is not None else None)],
                                     strategy_for(run_config),
                                RunOptions(progress=progress, resume=_resuming(config, output)))
        died = _report_death(side, server, out)
    return runs[side], interrupted, died


def _both_sides(
    config: PipelineConfig, prompts: PromptSet, folder: Path, out: Writer, progress: Progress
) -> tuple[Run, Run, bool, bool]:
    """Start both servers, run them interleaved; return (baseline, speculative, interrupted, a server died)."""
    sides = config.job.sides()
    job = config.job
    with contextlib.ExitStack() as stack:
        arms, servers = [], {}
        for side, server_side, mode in sides:
            endpoint, server = stack.enter_context(side_endpoint(side, server_side, mode, job, folder, out))
            servers[side] = server
            # a started server is fresh for this comparison: its drafter and prompt cache hold nothing earlier
            arms.append(Arm(side, _run_config(side, endpoint, mode, config, server), run_file(folder, side),
                            server_state="restart" if server is not None else None))
        resume = all(_resuming(config, Path(arm.output)) for arm in arms if arm.output is not None)
        workers = arms[0].config.workers
        strategy = strategy_for(arms[0].config, arms=len(arms), block_size=job.block_size,
                                order_seed=job.order_seed)
        if workers > 1:
            out(f"speedbench: {workers} client processes, each sending both arms' requests for its slice of the "
                f"samples, in step (order seed {job.order_seed})\n")
        elif job.settings.request_rate is not None:
            out(f"speedbench: both arms on one seeded {job.settings.arrival} schedule at "
                f"{job.settings.request_rate:g} req/s, alternating blocks ABBA (order seed {job.order_seed})\n")
        else:
            out(f"speedbench: interleaving baseline and speculative per sample (order seed {job.order_seed})\n")
        runs, interrupted = run_arms(prompts, arms, strategy, RunOptions(progress=progress, resume=resume))
        died = any([_report_death(side, servers[side], out) for side, _, _ in sides])
    return runs[BASELINE], runs[SPECULATIVE], interrupted, died


def _until_decided(
    config: PipelineConfig, folder: Path, out: Writer, progress: Progress
) -> tuple[Run, Run, bool, bool]:
    """Interleaved rounds (round k adds the k-th sample of each category; its run files under `rounds/k/`, each
    kept) on servers that stay up, until the sequential test decides the overall decode verdict or `--limit`; both
    run files carry the test's record (its looks so far)."""
    from bench.analysis import sample_until_decided
    from bench.records import save_run

    job = config.job
    sides = job.sides()
    everything = settings_prompts(job.settings)
    limit = most_rounds(job.settings, everything)
    state = Rounds()
    with contextlib.ExitStack() as stack:
        endpoints = {side: stack.enter_context(side_endpoint(side, server_side, mode, job, folder, out))
                     for side, server_side, mode in sides}

        def run_round(k: int) -> tuple[Run, Run]:
            prompts = settings_prompts(job.settings, limit=k)
            fresh = dataclasses.replace(prompts, samples=tuple(
                sample for sample in prompts.samples if sample.id not in state.seen(BASELINE)))
            rounds = round_folder(folder, k)
            rounds.mkdir(parents=True, exist_ok=True)
            arms = [Arm(side, _run_config(side, endpoints[side][0], mode, config, endpoints[side][1]),
                        run_file(rounds, side)) for side, _, mode in sides]
            runs, interrupted = run_arms(fresh, arms, LockStep(job.settings.concurrency, job.order_seed + k),
                                    RunOptions(progress=progress))
            merged = []
            for side, _, _ in sides:
                merged.append(state.so_far(side, runs[side], k, first_start=True))
                save_run(merged[-1], run_file(folder, side))  # finished rounds are never lost
            if interrupted:
                raise _RoundsStopped
            return merged[0], merged[1]

        def save_record(baseline: Run, speculative: Run) -> None:
            state.stop = speculative.info.sequential
            for side, run in ((BASELINE, baseline), (SPECULATIVE, speculative)):
                save_run(run, run_file(folder, side))

        out(f"speedbench: sampling until decided: rounds of one sample per category ({len(everything.categories)} "
            f"categories), at most {limit} rounds\n")
        try:
            decided = sample_until_decided(run_round, rounds=limit, per_round=len(everything.categories),
                                           threshold=job.threshold,
                                           on_look=lambda look: out(f"speedbench: {look.reason}\n")
                                           if not look.stops else None,  # the stopping look: decided.message
                                           on_record=save_record)
        except _RoundsStopped:
            baseline, speculative = (load_run(run_file(folder, side)) for side in (BASELINE, SPECULATIVE))
            return baseline, speculative, True, False
        died = any([_report_death(side, endpoints[side][1], out) for side, _, _ in sides])
    out(decided.message + "\n")
    return decided.baseline, decided.speculative, False, died


class _RoundsStopped(Exception):
    """A round was interrupted: stop sampling, keep what finished."""


PLACEHOLDER_URL = "http://127.0.0.1:1"
"""Stands in for an embedded server's URL while the options are checked, before any server starts."""
PROBE_TIMEOUT_S = 5.0


def workloads(config: PipelineConfig) -> list[str]:
    """The prompt sets to run, in order (`grounded,qualitative` -> both); BenchError when none is named."""
    text = config.job.settings.bench
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names or len(set(names)) != len(names):
        raise BenchError(f"--bench needs one or more different prompt sets (got {text!r})")
    return names


def _workload(config: PipelineConfig, bench: str, *, results_dir: str, label: str) -> PipelineConfig:
    """The pipeline of one of its prompt sets (`bench`), its results in `results_dir` under `label`."""
    job = replace(config.job, settings=replace(config.job.settings, bench=bench), results_dir=results_dir, label=label)
    return replace(config, job=job)


def validate(config: PipelineConfig) -> None:
    """Refuse every impossible option with one line, before a server starts or a file is written."""
    job = config.job
    job.check_sides()
    if job.server.threads < 1:
        raise BenchError(f"--threads must be >= 1 (got {job.server.threads})")
    if not 0 < job.threshold < 1:
        raise BenchError(f"--threshold must be between 0 and 1 (got {job.threshold})")
    from bench.runner import checked_number

    checked_number("--ready-timeout", job.server.ready_timeout)  # finite, in (0, 1e6] s (a config file's too)
    if job.server.draft_max is not None and job.server.draft_max < 1:
        raise BenchError(f"--draft-max must be >= 1 (got {job.server.draft_max})")
    if job.resume is not None and len(workloads(config)) > 1:
        raise BenchError("--resume continues one workload's folder: give its --bench and that folder")
    if job.until_decided and (job.resume is not None or not config.interleave):
        raise BenchError("--until-decided runs interleaved rounds in a new folder: drop --resume and --sequential")
    for name, server_side, mode in job.sides():
        if server_side.command is not None:
            flag = "--base-cmd" if name == BASELINE else "--spec-cmd"
            key = {"api_key": job.settings.api_key} if job.settings.api_key is not None else {}
            check_command(server_side.command, flag, **command_values(job, mode), **key)
    if job.resume is not None:
        _results_folder(config)  # a folder with no interrupted comparison is refused here, before anything runs
    for bench in workloads(config):
        for side, server_side, mode in job.sides():
            replace(_run_config(side, server_side.url or PLACEHOLDER_URL, mode, config, None),
                    bench=bench).validate()


def probe_urls(config: PipelineConfig) -> None:
    """Connect to each given server once; an unreachable one is a one-line BenchError naming its URL and cause."""
    for side, server_side, _ in config.job.sides():
        url = server_side.url
        if not url:
            continue
        parsed = urlsplit(normalize_base_url(url))
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            with socket.create_connection((parsed.hostname or "", port), timeout=PROBE_TIMEOUT_S):
                pass
        except OSError as exc:
            cause = exc.strerror or type(exc).__name__
            if isinstance(exc, TimeoutError):
                cause = f"no answer within {PROBE_TIMEOUT_S:.0f} s"
            raise BenchError(f"cannot reach the {side} server at {redact_url(url)}: {cause.lower()}") from None


def check_pipeline(config: PipelineConfig) -> None:
    """Every option, prompt set and embedded model checked and every given URL probed, before anything starts."""
    validate(config)
    for bench in workloads(config):
        settings_prompts(config.job.settings, bench=bench)
    check_embedded(config.job)
    probe_urls(config)


def run_pipeline(
    config: PipelineConfig, *, out: Writer, progress: Progress, verbose: bool = False
) -> int:
    """Each workload in turn (one prompt set unless `bench` lists several), then the decision over all of them.

    Every option is checked and both given URLs probed before any server starts or any file is written. Each
    workload prints a screen's worth (`console_text`); `verbose` prints every table the files hold."""
    check_pipeline(config)
    with ended_on_signals():
        try:
            code, comparisons = run_comparison(config, out=out, progress=progress, verbose=verbose)
        except KeyboardInterrupt:
            out("speedbench: interrupted; the servers started are stopped, finished results kept\n")
            return EXIT_INTERRUPTED
    if comparisons:
        from bench.render import decision_text

        out(f"\nspeedbench: decision: {decision_text(comparisons)}\n")
    return code


def run_comparison(config: PipelineConfig, *, out: Writer, progress: Progress,
                   folder: Path | None = None, verbose: bool = False) -> tuple[int, list[Comparison]]:
    """Each workload of a checked pipeline (`check_pipeline`) in turn, its servers started fresh; into `folder`
    when given (else a new results folder); (exit code, the finished workloads' comparisons)."""
    names = workloads(config)
    if len(names) == 1:
        code, comparison = _run_workload(config, out=out, progress=progress, folder=folder, verbose=verbose)
        return code, [comparison] if comparison is not None else []
    top = folder or _results_folder(config)
    top.mkdir(parents=True, exist_ok=True)
    comparisons: list[Comparison] = []
    code = EXIT_OK
    for bench in names:
        one = _workload(config, bench, results_dir=str(top), label=bench)
        one_code, comparison = _run_workload(one, out=out, progress=progress, verbose=verbose)
        code = code or one_code  # the first failure is the run's
        if comparison is None:  # stopped: the next workload does not start
            break
        comparisons.append(comparison)
    if comparisons:
        from bench.render import write_report

        out(f"speedbench: wrote {write_report(comparisons, top, title=config.title)}\n")
    return code, comparisons


def _run_workload(
    config: PipelineConfig, *, out: Writer, progress: Progress, folder: Path | None = None,
    verbose: bool = False
) -> tuple[int, Comparison | None]:
    """One workload: both runs (interleaved by default), the comparison, statistics, lossless check and plots
    in its folder; (exit code, comparison or None when stopped)."""
    job = config.job
    prompts = settings_prompts(job.settings)
    if folder is None:
        folder = _results_folder(config)
    folder.mkdir(parents=True, exist_ok=True)
    out(f"speedbench: {job.settings.bench}: {len(prompts.samples)} samples in {len(prompts.categories)} categories, "
        f"osl={job.settings.osl}\n")
    if job.until_decided:
        baseline, speculative, interrupted, died = _until_decided(config, folder, out, progress)
        if interrupted or died:
            out(f"speedbench: stopped during the rounds; finished rounds kept in {folder}\n")
            return (EXIT_INTERRUPTED if interrupted else EXIT_FAILED), None
    elif config.interleave:
        baseline, speculative, interrupted, died = _both_sides(config, prompts, folder, out, progress)
        if interrupted or died:
            out(f"speedbench: stopped during the interleaved runs; results kept in {folder}\n")
            return (EXIT_INTERRUPTED if interrupted else EXIT_FAILED), None
    else:
        baseline, interrupted, died = _one_side(
            BASELINE, job.base, "baseline", config, prompts, folder, out, progress
        )
        if interrupted or died:
            out(f"speedbench: stopped after the baseline run; results kept in {folder}\n")
            return (EXIT_INTERRUPTED if interrupted else EXIT_FAILED), None
        speculative, interrupted, died = _one_side(
            SPECULATIVE, job.spec, job.server.spec, config, prompts, folder, out, progress
        )
        if interrupted or died:
            out(f"speedbench: stopped during the speculative run; results kept in {folder}\n")
            return (EXIT_INTERRUPTED if interrupted else EXIT_FAILED), None
    fresh_server_hints(config, {BASELINE: baseline, SPECULATIVE: speculative}, out)
    comparison, files = write_comparison(baseline, speculative, folder, threshold=job.threshold)
    out("\n" + console_text(comparison, verbose=verbose))
    rate = job.settings.request_rate
    traffic_out = out if verbose or rate is not None else _nowhere  # closed loop: in the files
    files += write_traffic(baseline, speculative, folder, out=traffic_out, slo=job.slo, rate=rate,
                           threshold=job.threshold)
    out(f"speedbench: wrote in {folder}: {', '.join(_relative(path, folder) for path in files)}\n")
    failed = baseline.failed_samples + speculative.failed_samples
    unfinished = sum(max(0, run.selected_samples - len(run.results)) for run in (baseline, speculative))
    if unfinished:
        out(f"speedbench: {unfinished} selected samples did not finish; continue with --resume {folder}\n")
        return EXIT_FAILED, comparison
    if failed:
        out(f"speedbench: {failed} samples failed; see the run files\n")
        return EXIT_FAILED, comparison
    return EXIT_OK, comparison


def _nowhere(text: str) -> None:
    """Drops what a quiet console leaves to the files."""


def _relative(path: Path, folder: Path) -> str:
    return str(path.relative_to(folder)) if path.is_relative_to(folder) else str(path)


def fresh_server_hints(config: PipelineConfig, runs: dict[str, Run], out: Writer) -> None:
    """A warning, with how to start a fresh one, for each given server that had served requests before its run."""
    for side, server_side, mode in config.job.sides():
        url = server_side.url
        flag = "--base-url" if side == BASELINE else "--spec-url"
        start = runs[side].info.server_start
        if url and start is not None and start.state not in (FRESH, UNKNOWN):
            out(f"speedbench: warning: the {side} server at {redact_url(url)} was not fresh when its run began "
                f"({start.describe()}): earlier requests warm its prompt cache and a drafter's memory; start a fresh "
                f"server before each comparison (restart it: `speedbench serve --mode {mode}` or your own server "
                f"command), or leave out {flag} and bench starts one ({flag.replace('url', 'cmd')}: your command)\n")


def _results_folder(config: PipelineConfig) -> Path:
    """A new `<results>/<UTC time>-<label>` folder, or the comparison folder given to `--resume`."""
    job = config.job
    if job.resume is not None:
        folder = Path(job.resume)
        left = any(left_workers(run_file(folder, arm)) for arm in (BASELINE, SPECULATIVE))
        if not has_journal(folder) and not left:
            journal = journal_path(run_file("", BASELINE))
            raise BenchError(f"{folder}: no interrupted comparison to resume (no {journal})")
        return folder
    from bench.server import folder_prefix

    external = not (job.spec.embedded and job.base.embedded)
    label = job.label or folder_prefix(job.embedded_engine) + ("external" if external else job.server.spec)
    return new_results_folder(job.results_dir, label)
