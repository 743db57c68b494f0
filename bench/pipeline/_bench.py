"""The `make bench` job: baseline and speculative runs on embedded (or given) servers, then every artefact."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from bench._constants import DEFAULT_THRESHOLD, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from bench._errors import BenchError
from bench._redact import redact_url
from bench.analysis import Comparison
from bench.pipeline._arms import arm_config
from bench.pipeline._artefacts import write_comparison, write_traffic
from bench.pipeline._rounds import Rounds
from bench.prompts import PromptSet, load_prompts
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
    from bench.server import EngineServer, ServerRequest


@dataclass(frozen=True)
class PipelineConfig:
    """What `make bench` runs: sample count, output length, speculative mode, model, or external URLs.

    `interleave` (default) keeps both servers up and sends each sample to both back to back in a seeded random
    order; `logprobs` asks both for top-2 log-probabilities so each lossless divergence gets its margin;
    `stream` streams both sides, so the comparison carries the streaming latencies.
    """

    limit: int = 2
    osl: int = 64
    spec: str = "ngram-mod"
    model: str | None = None
    draft: str | None = None
    base_url: str | None = None
    spec_url: str | None = None
    category: str = "all"
    threads: int = 1
    results_dir: str = "results"
    label: str | None = None
    concurrency: int = 1
    threshold: float = DEFAULT_THRESHOLD
    resume: str | None = None
    interleave: bool = True
    arrival_seed: int = 0
    """Seeds the open loop's arrival schedule (both arms get the same)."""
    order_seed: int = 0
    """Seeds the order in which the arms take their turns."""
    logprobs: bool = True
    stream: bool = False
    until_decided: bool = False  # rounds of one sample per category until the overall decode verdict is decided
    engine: str = "llamacpp"  # which embedded server: llamacpp or vllm (bench.server.SERVER_ENGINES)
    bench: str = "qualitative"  # the prompt set; a comma-separated list runs each workload in turn
    request_rate: float | None = None
    """Open loop: both arms get the same seeded arrivals at this rate, in alternating blocks (None: closed loop)."""
    arrival: str = "poisson"
    burstiness: float = 1.0
    max_concurrency: int | None = None
    block_size: int | None = None
    """Requests per A/B block of an open-loop comparison (None: about 5 s of arrivals, 4-30 requests)."""
    slo: str | None = None
    """SLO targets (`ttft=0.5,e2e=20`): adds paired attainment and goodput."""
    workers: int | None = None
    """Client processes, each sending both arms' requests for its slice of the samples (None: auto)."""
    reasoning: str = "auto"
    """The thinking switch both arms send (`--reasoning on|off|auto`)."""

    @property
    def slots(self) -> int:
        """Server slots: the cap of an open loop, else the concurrency."""
        return self.max_concurrency or self.concurrency


def _server_request(mode: str, config: PipelineConfig) -> ServerRequest:
    """What `make bench` asks of the embedded server for `mode`."""
    from bench.server import ServerRequest

    return ServerRequest(engine=config.engine, mode=mode, model=config.model, draft=config.draft,
                         threads=config.threads, slots=config.slots, ctx_per_slot=8192)


@contextlib.contextmanager
def _endpoint(url: str | None, mode: str, config: PipelineConfig,
              out: Callable[[str], Any]) -> Iterator[tuple[str, EngineServer | None]]:
    """Yield (url, server or None): the given URL, or an embedded server started for the run."""
    if url:
        yield url, None
        return
    from bench.server import ServerError, engine_display_name, make_server

    try:
        server = make_server(_server_request(mode, config))
        out(f"speedbench: starting embedded {engine_display_name(config.engine)} server ({mode})\n")
        server.start()
    except (ServerError, ValueError) as exc:
        raise BenchError(str(exc)) from None
    try:
        yield server.url, server
    finally:
        server.stop()


def check_servers(config: PipelineConfig) -> None:
    """Validate modes and model files of the servers to embed, before anything runs."""
    from bench.server import ServerError, make_server

    for url, mode in ((config.base_url, "baseline"), (config.spec_url, config.spec)):
        if url:
            continue
        try:
            make_server(_server_request(mode, config)).check_models()
        except (ServerError, ValueError) as exc:
            raise BenchError(str(exc)) from None


def _run_config(side: str, endpoint: str, mode: str, config: PipelineConfig, server: EngineServer | None) -> RunConfig:
    """The run config of one side: its endpoint, the shared settings and tags describing its server."""
    from bench.server import server_tags

    tags = {"mode": mode}
    if server is not None:
        tags.update(server_tags(server))
    workers, why = choose_workers(config.workers, concurrency=config.concurrency, request_rate=config.request_rate,
                                  open_loop=config.request_rate is not None, max_concurrency=config.max_concurrency,
                                  single="--until-decided" if config.until_decided else None)
    return arm_config(
        url=endpoint, bench=config.bench, osl=config.osl, category=config.category, limit=config.limit,
        concurrency=config.concurrency, label=side, tags=tags, logprobs=config.logprobs,
        stream=config.stream, request_rate=config.request_rate, arrival=config.arrival,
        burstiness=config.burstiness, max_concurrency=config.max_concurrency, arrival_seed=config.arrival_seed,
        workers=workers, workers_auto=why, reasoning=config.reasoning,
    )


def _report_death(side: str, server: EngineServer | None, out: Callable[[str], Any]) -> bool:
    """Whether the side's embedded server died; if so print its last log lines."""
    died = server is not None and not server.is_running()
    if died:
        out(f"speedbench: the {side} server died during the run; its last log lines:\n")
        out("".join(f"  {line}\n" for line in server.log_tail(20)))
    return died


def _resuming(config: PipelineConfig, output: Path) -> bool:
    """Whether this side continues an interrupted comparison (`--resume FOLDER` and a journal to continue)."""
    return config.resume is not None and (journal_path(output).exists() or left_workers(output) is not None)


def _one_side(
    side: str, url: str | None, mode: str, config: PipelineConfig, prompts: PromptSet, folder: Path,
    out: Callable[[str], Any], progress: Progress,
) -> tuple[Run, bool, bool]:
    """Run one side alone (sequential mode); return (run, interrupted, server died)."""
    output = run_file(folder, side)
    with _endpoint(url, mode, config, out) as (endpoint, server):
        run_config = _run_config(side, endpoint, mode, config, server)
        runs, interrupted = run_arms(prompts, [Arm(side, run_config, output)], strategy_for(run_config),
                                RunOptions(progress=progress, resume=_resuming(config, output)))
        died = _report_death(side, server, out)
    return runs[side], interrupted, died


def _both_sides(
    config: PipelineConfig, prompts: PromptSet, folder: Path, out: Callable[[str], Any], progress: Progress
) -> tuple[Run, Run, bool, bool]:
    """Start both servers, run them interleaved; return (baseline, speculative, interrupted, a server died)."""
    sides = ((BASELINE, config.base_url, "baseline"), (SPECULATIVE, config.spec_url, config.spec))
    with contextlib.ExitStack() as stack:
        arms, servers = [], {}
        for side, url, mode in sides:
            endpoint, server = stack.enter_context(_endpoint(url, mode, config, out))
            servers[side] = server
            # an embedded server starts fresh for this comparison: its drafter and prompt cache hold nothing earlier
            arms.append(Arm(side, _run_config(side, endpoint, mode, config, server), run_file(folder, side),
                            server_state="restart" if server is not None else None))
        resume = all(_resuming(config, Path(arm.output)) for arm in arms if arm.output is not None)
        workers = arms[0].config.workers
        strategy = strategy_for(arms[0].config, arms=len(arms), block_size=config.block_size,
                                order_seed=config.order_seed)
        if workers > 1:
            out(f"speedbench: {workers} client processes, each sending both arms' requests for its slice of the "
                f"samples, in step (order seed {config.order_seed})\n")
        elif config.request_rate is not None:
            out(f"speedbench: both arms on one seeded {config.arrival} schedule at {config.request_rate:g} req/s, "
                f"alternating blocks ABBA (order seed {config.order_seed})\n")
        else:
            out(f"speedbench: interleaving baseline and speculative per sample (order seed {config.order_seed})\n")
        runs, interrupted = run_arms(prompts, arms, strategy, RunOptions(progress=progress, resume=resume))
        died = any([_report_death(side, servers[side], out) for side, _, _ in sides])
    return runs[BASELINE], runs[SPECULATIVE], interrupted, died


def _until_decided(
    config: PipelineConfig, folder: Path, out: Callable[[str], Any], progress: Progress
) -> tuple[Run, Run, bool, bool]:
    """Interleaved rounds (round k adds the k-th sample of each category; its run files under `rounds/k/`, each
    kept) on servers that stay up, until the sequential test decides the overall decode verdict or `--limit`; both
    run files carry the test's record (its looks so far)."""
    from bench.analysis import sample_until_decided
    from bench.records import save_run

    sides = ((BASELINE, config.base_url, "baseline"), (SPECULATIVE, config.spec_url, config.spec))
    everything = load_prompts(category=config.category, limit=config.limit, bench=config.bench)
    state = Rounds()
    with contextlib.ExitStack() as stack:
        endpoints = {side: stack.enter_context(_endpoint(url, mode, config, out)) for side, url, mode in sides}

        def run_round(k: int) -> tuple[Run, Run]:
            prompts = load_prompts(category=config.category, limit=k, bench=config.bench)
            fresh = dataclasses.replace(prompts, samples=tuple(
                sample for sample in prompts.samples if sample.id not in state.seen(BASELINE)))
            rounds = round_folder(folder, k)
            rounds.mkdir(parents=True, exist_ok=True)
            arms = [Arm(side, _run_config(side, endpoints[side][0], mode, config, endpoints[side][1]),
                        run_file(rounds, side)) for side, _, mode in sides]
            runs, interrupted = run_arms(fresh, arms, LockStep(config.concurrency, config.order_seed + k),
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
            f"categories), at most {config.limit} rounds\n")
        try:
            decided = sample_until_decided(run_round, rounds=config.limit, per_round=len(everything.categories),
                                           threshold=config.threshold,
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
    names = [name.strip() for name in config.bench.split(",") if name.strip()]
    if not names or len(set(names)) != len(names):
        raise BenchError(f"--bench needs one or more different prompt sets (got {config.bench!r})")
    return names


def validate(config: PipelineConfig) -> None:
    """Refuse every impossible option with one line, before a server starts or a file is written."""
    if config.threads < 1:
        raise BenchError(f"--threads must be >= 1 (got {config.threads})")
    if not 0 < config.threshold < 1:
        raise BenchError(f"--threshold must be between 0 and 1 (got {config.threshold})")
    if config.resume is not None and len(workloads(config)) > 1:
        raise BenchError("--resume continues one workload's folder: give its --bench and that folder")
    if config.until_decided and (config.resume is not None or not config.interleave):
        raise BenchError("--until-decided runs interleaved rounds in a new folder: drop --resume and --sequential")
    if config.resume is not None:
        _results_folder(config)  # a folder with no interrupted comparison is refused here, before anything runs
    for bench in workloads(config):
        for side, url, mode in ((BASELINE, config.base_url, "baseline"), (SPECULATIVE, config.spec_url, config.spec)):
            replace(_run_config(side, url or PLACEHOLDER_URL, mode, config, None), bench=bench).validate()


def probe_urls(config: PipelineConfig) -> None:
    """Connect to each given server once; an unreachable one is a one-line BenchError naming its URL and cause."""
    for side, url in ((BASELINE, config.base_url), (SPECULATIVE, config.spec_url)):
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


def run_pipeline(
    config: PipelineConfig, *, out: Callable[[str], Any], progress: Progress, verbose: bool = False
) -> int:
    """Each workload in turn (one prompt set unless `bench` lists several), then the decision over all of them.

    Every option is checked and both given URLs probed before any server starts or any file is written. Each
    workload prints a screen's worth (`console_text`); `verbose` prints every table the files hold."""
    validate(config)
    names = workloads(config)
    for bench in names:
        load_prompts(category=config.category, limit=config.limit, bench=bench)
    check_servers(config)
    probe_urls(config)
    if len(names) == 1:
        code, comparison = _run_workload(config, out=out, progress=progress, verbose=verbose)
        comparisons = [comparison] if comparison is not None else []
    else:
        top = _results_folder(config)
        comparisons, code = [], EXIT_OK
        for bench in names:
            one = replace(config, bench=bench, results_dir=str(top), label=bench)
            one_code, comparison = _run_workload(one, out=out, progress=progress, verbose=verbose)
            code = code or one_code  # the first failure is the run's
            if comparison is None:  # stopped: the next workload does not start
                break
            comparisons.append(comparison)
        if comparisons:
            from bench.render import write_report

            out(f"speedbench: wrote {write_report(comparisons, top)}\n")
    if comparisons:
        from bench.render import decision_text

        out(f"\nspeedbench: decision: {decision_text(comparisons)}\n")
    return code


def _run_workload(
    config: PipelineConfig, *, out: Callable[[str], Any], progress: Progress, verbose: bool = False
) -> tuple[int, Comparison | None]:
    """One workload: both runs (interleaved by default), the comparison, statistics, lossless check and plots
    in its folder; (exit code, comparison or None when stopped)."""
    prompts = load_prompts(category=config.category, limit=config.limit, bench=config.bench)
    folder = _results_folder(config)
    out(f"speedbench: {config.bench}: {len(prompts.samples)} samples in {len(prompts.categories)} categories, "
        f"osl={config.osl}\n")
    if config.until_decided:
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
            "baseline", config.base_url, "baseline", config, prompts, folder, out, progress
        )
        if interrupted or died:
            out(f"speedbench: stopped after the baseline run; results kept in {folder}\n")
            return (EXIT_INTERRUPTED if interrupted else EXIT_FAILED), None
        speculative, interrupted, died = _one_side(
            "speculative", config.spec_url, config.spec, config, prompts, folder, out, progress
        )
        if interrupted or died:
            out(f"speedbench: stopped during the speculative run; results kept in {folder}\n")
            return (EXIT_INTERRUPTED if interrupted else EXIT_FAILED), None
    fresh_server_hints(config, {BASELINE: baseline, SPECULATIVE: speculative}, out)
    comparison, files = write_comparison(baseline, speculative, folder, threshold=config.threshold)
    out("\n" + console_text(comparison, verbose=verbose))
    traffic_out = out if verbose or config.request_rate is not None else _nowhere  # closed loop: in the files
    files += write_traffic(baseline, speculative, folder, out=traffic_out, slo=config.slo, rate=config.request_rate,
                           threshold=config.threshold)
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


def fresh_server_hints(config: PipelineConfig, runs: dict[str, Run], out: Callable[[str], Any]) -> None:
    """A warning, with how to start a fresh one, for each given server that had served requests before its run."""
    for side, url, flag, mode in ((BASELINE, config.base_url, "--base-url", "baseline"),
                                  (SPECULATIVE, config.spec_url, "--spec-url", config.spec)):
        start = runs[side].info.server_start
        if url and start is not None and start.state not in (FRESH, UNKNOWN):
            out(f"speedbench: warning: the {side} server at {redact_url(url)} was not fresh when its run began "
                f"({start.describe()}): earlier requests warm its prompt cache and a drafter's memory; start a fresh "
                f"server before each comparison (restart it: `speedbench serve --mode {mode}` or your own server "
                f"command), or leave out {flag} and bench starts one\n")


def _results_folder(config: PipelineConfig) -> Path:
    """A new `<results>/<UTC time>-<label>` folder, or the comparison folder given to `--resume`."""
    if config.resume is not None:
        folder = Path(config.resume)
        left = any(left_workers(run_file(folder, arm)) for arm in (BASELINE, SPECULATIVE))
        if not has_journal(folder) and not left:
            journal = journal_path(run_file("", BASELINE))
            raise BenchError(f"{folder}: no interrupted comparison to resume (no {journal})")
        return folder
    from bench.server import folder_prefix

    label = config.label or folder_prefix(config.engine) + (config.spec if not config.spec_url else "external")
    return new_results_folder(config.results_dir, label)
