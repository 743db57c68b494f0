"""One arm of a run: prepared (resume checked, jobs planned), connected (engine, warm-up), concluded, built.

Single runs and interleaved runs both go through these steps, driven by `_lifecycle.arms_lifecycle`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import os
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NotRequired, TypedDict

from bench._errors import BenchError
from bench._redact import redact_url, register_secrets
from bench._types import JsonMapping, JsonObject
from bench._version import __version__
from bench.engines import Engine, engine_from_metrics
from bench.prompts import PromptSet, Sample, Shard
from bench.records import (
    Acceptance,
    ClientLag,
    Interleaving,
    Journal,
    MachineInfo,
    Run,
    RunIdentity,
    RunMeta,
    SampleResult,
    ServerStart,
    journal_path,
    latest_by_key,
    read_journal,
    save_run,
    shard_marker,
    summarize,
)
from bench.runner._config import RunConfig, normalize_base_url, server_root
from bench.runner._loops import choose_loop
from bench.runner._narrow import json_value
from bench.runner._probes import (
    SampleMeter,
    choose_engine,
    get_json,
    get_text,
    resumed_acceptance,
    run_acceptance,
    server_info,
    without_counter_deltas,
)
from bench.runner._progress import Progress
from bench.runner._stop import Stop
from bench.runner._transport import Transport
from bench.runner._turns import RequestSettings, build_payload, send_turn


def _utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def machine_info() -> MachineInfo:
    """The machine a run ran on (for reports)."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }


@dataclass
class _Plan:
    jobs: list[tuple[Sample, int]]
    previous: list[SampleResult]


def _plan(prompts: PromptSet, config: RunConfig, resume_from: list[SampleResult]) -> _Plan:
    """Every (sample, repeat) in interleaved order (all samples once, then again), minus what is done."""
    done = {result.key for result in latest_by_key(resume_from) if result.ok}
    jobs = [
        (sample, repeat)
        for repeat in range(config.repeat)
        for sample in prompts.samples
        if (sample.id, repeat) not in done
    ]
    return _Plan(jobs=jobs, previous=resume_from)


def prompts_digest(prompts: PromptSet) -> str:
    """A sha256 over every sample's id, category and turns: resuming must send the very same prompts."""
    digest = hashlib.sha256()
    for sample in prompts.samples:
        digest.update(json.dumps([sample.id, sample.category, list(sample.turns)]).encode("utf-8"))
    return digest.hexdigest()


class Harness(TypedDict):
    """The harness that wrote a run: its name and version."""

    name: str
    version: str


class RunHeader(TypedDict):
    """An arm's journal header as the runner writes it: what `build_run` and a resume read back from it."""

    config: JsonObject
    selected_samples: int
    sample_ids: list[str]
    prompts_sha256: str
    harness: Harness
    started_at: str
    machine: MachineInfo
    server_start: NotRequired[JsonObject]
    """What /metrics said of the server before the run's first request (kept from a resumed run's first part)."""
    interleaved: NotRequired[Interleaving]
    shard: NotRequired[JsonObject]
    """A shard's marker (`SHARD_KEY`): the full run's digest and size, the shard's own sample ids."""
    start_at: NotRequired[float]
    """The shards' shared start (epoch seconds), when one was given."""


class HeaderExtra(TypedDict, total=False):
    """What a run adds to each arm's header beside what `_header` writes: a shard's marker, the shared start."""

    shard: JsonObject
    start_at: float


def _header(prompts: PromptSet, config: RunConfig) -> RunHeader:
    return {
        "config": config.recorded(),
        "selected_samples": len(prompts.samples) * config.repeat,
        "sample_ids": [sample.id for sample in prompts.samples],
        "prompts_sha256": prompts_digest(prompts),
        "harness": {"name": "speedbench", "version": __version__},
        "started_at": _utc_now(),
        "machine": {**machine_info(), "event_loop": choose_loop(config.loop)},
    }


def header_json(header: RunHeader) -> JsonObject:
    """The header as the journal's JSON object, its keys in the order they were set."""
    return {key: json_value(value) for key, value in header.items()}


def _check_resumable(header: JsonMapping, prompts: PromptSet, config: RunConfig, source: str) -> None:
    """Refuse to resume a journal whose run identity or prompts differ from the run asked for now."""
    old = header.get("config")
    mismatches = RunIdentity.of(old if isinstance(old, Mapping) else {}).resume_mismatches(
        RunIdentity.of(config.recorded())
    )
    if mismatches:
        raise BenchError(f"{source}: cannot resume: " + "; ".join(mismatch.message() for mismatch in mismatches))
    if header.get("sample_ids") != [sample.id for sample in prompts.samples] or header.get(
        "prompts_sha256", prompts_digest(prompts)
    ) != prompts_digest(prompts):
        raise BenchError(f"{source}: cannot resume: the selected prompts differ from the interrupted run's")


@dataclass
class ArmRun:
    """One arm's run in progress: its prompts, config, journal and what the server said before the run."""

    prompts: PromptSet
    config: RunConfig
    output: str | os.PathLike[str] | None
    header: RunHeader
    previous: list[SampleResult]
    plan: _Plan
    base_urls: list[str]
    journal: Journal | None = None
    engine: Engine = field(default_factory=Engine)
    server: JsonObject = field(default_factory=lambda: {"models": None})
    """The server's info documents by name, as `server_info` read them (and `late_info_paths` again after)."""
    settings: list[RequestSettings] = field(default_factory=list)
    metrics_before: str = ""
    start_read_at: float = 0.0
    meter: SampleMeter | None = None
    new_results: list[SampleResult] = field(default_factory=list)
    server_state: str | None = None
    """How the pipeline set the server's state (`restart`, ...), recorded on every result."""


def prepare_arm(
    prompts: PromptSet,
    config: RunConfig,
    output: str | os.PathLike[str] | None,
    *,
    resume: bool,
    force: bool,
    header_extra: HeaderExtra | None = None,
) -> ArmRun:
    """Validate, read the journal to resume (or refuse to overwrite) and plan what is left to send."""
    config.validate()
    register_secrets(config.secrets())
    if output is not None and Path(output).is_dir():
        raise BenchError(f"{output}: is a directory; --output names the run file to write")
    base_urls = [normalize_base_url(url) for url in config.urls()]
    journal_file = journal_path(output) if output is not None else None
    previous: list[SampleResult] = []
    header: RunHeader = {**_header(prompts, config), **(header_extra or {})}
    if output is not None and journal_file is not None:
        if resume:
            if not journal_file.exists():
                raise BenchError(f"{journal_file}: no journal to resume from")
            old_header, previous = read_journal(journal_file)
            _check_resumable(old_header, prompts, config, str(journal_file))
            started, server_start = old_header.get("started_at"), old_header.get("server_start")
            if isinstance(started, str):
                header["started_at"] = started
            if isinstance(server_start, dict):
                header["server_start"] = server_start
        else:
            refuse_existing_output(output, force=force)
    return ArmRun(prompts, config, output, header, previous, _plan(prompts, config, previous), base_urls)


def refuse_existing_output(output: str | os.PathLike[str], *, force: bool) -> None:
    """A one-line BenchError when the run file or its journal exists and `--force` was not given."""
    if not force and (Path(output).exists() or journal_path(output).exists()):
        raise BenchError(f"{output}: exists; pass --force to overwrite it or --resume to continue it")


def open_journal(arm: ArmRun, *, resume: bool) -> None:
    """Start (or continue) the arm's journal; opened once the server answered, so a refused start keeps the output."""
    if arm.output is not None:
        arm.journal = Journal(journal_path(arm.output), header_json(arm.header), append=resume)


def close_journal(arm: ArmRun, stop: Stop) -> None:
    """Sync and close the arm's journal; a failure to do so stops the run like any journal error."""
    if arm.journal is not None:
        try:
            arm.journal.close()
        except OSError as exc:
            stop.fail(exc)


async def read_start(arm: ArmRun, transport: Transport, stop: Stop) -> None:
    """Read the server's /metrics before any request of the run (every arm's before any arm's warm-up)."""
    arm.metrics_before = await stop.guard(get_text(transport, server_root(arm.base_urls[0]) + "/metrics"), "")
    arm.start_read_at = time.time()


async def connect_arm(arm: ArmRun, transport: Transport, stop: Stop) -> None:
    """Choose the engine, record the server's state at the start, read its info, build request settings, warm up
    and set up per-sample metrics (after `read_start`).

    Every probe runs under the stop mechanism with a short timeout: Ctrl-C is honoured while a server hangs.
    """
    config = arm.config
    path = "/completions" if config.api == "completions" else "/chat/completions"
    roots = [server_root(base) for base in arm.base_urls]
    arm.engine = await stop.guard(
        choose_engine(transport, config, arm.metrics_before, arm.base_urls[0] + path, arm.prompts), arm.engine
    )
    named = engine_from_metrics(arm.metrics_before) if config.engine != "auto" else None
    if named is not None and named.name != arm.engine.name:  # another engine's adapter reads nothing right
        raise BenchError(f"--engine {config.engine}, but the server at {redact_url(arm.base_urls[0])} is {named.name} "
                         f"(its /metrics has {named.metric_prefix}:* series): pass --engine {named.name} or leave "
                         "--engine out")
    start = arm.engine.start_state(arm.metrics_before, arm.start_read_at)
    if start is not None:  # a resumed run keeps the state its first part started from
        arm.header.setdefault("server_start", start.to_dict())
    arm.engine.requested_model = config.model  # responses naming another model are a warning
    arm.server = await stop.guard(server_info(transport, arm.engine, roots[0], arm.base_urls[0]), arm.server)
    arm.settings = [
        RequestSettings(
            endpoint=base + path,
            model=config.model,
            osl=config.osl,
            extra_inputs=(
                {"chat_template_kwargs": dict(config.chat_template_kwargs), **config.extra_inputs}
                if config.chat_template_kwargs is not None
                else config.extra_inputs
            ),
            stream=config.stream,
            retries=config.retries,
            api=config.api,
            logprobs=config.logprobs,
            reasoning=config.reasoning,
        )
        for base in arm.base_urls
    ]
    await warmup(transport, arm.engine, arm.prompts, arm.settings[0], config.warmup, stop)
    if config.warmup:
        arm.metrics_before = await stop.guard(get_text(transport, roots[0] + "/metrics"), "")
    arm.meter = (
        SampleMeter(transport, arm.engine, roots[0] + "/metrics", stop)
        if config.per_sample_metrics and config.concurrency == 1 and len(arm.base_urls) == 1 and arm.metrics_before
        else None
    )


async def conclude_arm(
    arm: ArmRun, transport: Transport, progress: Progress, stop: Stop, extra_notes: Sequence[str] = ()
) -> tuple[list[SampleResult], Acceptance | None, list[str]]:
    """After the timed part: acceptance from /metrics, the adapter's warnings; return (results, acceptance, notes)."""
    results = [*arm.previous, *arm.new_results]
    root = server_root(arm.base_urls[0])
    for name, path in arm.engine.late_info_paths().items():  # what the server says only once it served
        late = await stop.guard(get_json(transport, root + path), None, closing=True)
        if late is not None:
            arm.server = {**arm.server, name: arm.engine.trim_info(name, late)}
    metrics_after = await stop.guard(
        get_text(transport, server_root(arm.base_urls[0]) + "/metrics"), "", closing=True
    )
    acceptance = run_acceptance(arm.engine, arm.metrics_before, metrics_after, arm.config, len(arm.base_urls))
    engine_notes = list(arm.engine.warnings())
    for note in engine_notes:
        progress.message(f"speedbench: warning: {note}")
    notes = [*engine_notes, *extra_notes]  # the run-wide notes (`extra_notes`) are said once by the caller
    if arm.meter is not None and arm.meter.moved_between:
        # other traffic moved the counters between samples: per-sample deltas cannot be trusted
        results = [*arm.previous, *(without_counter_deltas(result) for result in arm.new_results)]
        if acceptance is not None:
            acceptance = replace(acceptance, server_wide=True)
    if arm.previous:
        acceptance = resumed_acceptance(latest_by_key(results), acceptance)
    return results, acceptance, notes


_HEADER_READ = frozenset({"config", "selected_samples", "sample_ids", "harness", "started_at", "machine",
                          "prompts_sha256", "interleaved", "server_start"})
"""The journal header's keys `build_run` reads into typed fields (or leaves to the run file's other keys)."""


def build_run(
    arm: ArmRun,
    results: list[SampleResult],
    acceptance: Acceptance | None,
    notes: list[str],
    *,
    interrupted: bool,
    elapsed_s: float,
    stop: Stop,
    client_lag: ClientLag | None = None,
) -> Run:
    """The arm's Run (meta from its header plus what the run found), saved to its output when it has one.

    When the journal failed first (`stop.fatal`), a run file that cannot be written either is not an error of
    its own: the journal keeps what it holds.
    """
    final = latest_by_key(results)
    header = arm.header
    meta = RunMeta(
        harness_name=header["harness"]["name"],
        harness_version=header["harness"]["version"],
        started_at=header["started_at"],
        finished_at=_utc_now(),
        elapsed_s=elapsed_s,
        engine=arm.engine.name,
        server=arm.engine.describe(arm.server),
        acceptance=acceptance,
        interrupted=interrupted,
        warnings=tuple(notes),
        machine=header["machine"],
        prompts_sha256=header["prompts_sha256"],  # kept: compare checks it
        server_info=arm.server,
        client_lag=ClientLag(**client_lag) if client_lag is not None else None,
        dataset={"source": arm.prompts.source, "bench": arm.prompts.bench, "skipped_rows": arm.prompts.skipped},
        interleaved=header.get("interleaved"),
        served_models=tuple(sorted(arm.engine.models)),
        server_start=ServerStart.from_mapping(header.get("server_start")),
        # the header's other keys: a shard's marker, ...
        extra={key: json_value(value) for key, value in header.items() if key not in _HEADER_READ},
    )
    run = Run(
        config=arm.header["config"],
        selected_samples=arm.header["selected_samples"],
        results=tuple(final),
        summary=tuple(summarize(final, list(arm.prompts.categories))),
        meta=meta,
        path=str(arm.output) if arm.output is not None else None,
    )
    if arm.output is not None:
        try:
            save_run(run, arm.output, force=True)
        except OSError:
            if stop.fatal is None:
                raise
    return run


class RunStopped(BenchError):
    """A run stopped because something it needs failed (the journal could not be written); `run` holds what finished."""

    def __init__(self, run: Run, cause: BaseException) -> None:
        """Record the partial run and the cause."""
        reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(cause)
        where = getattr(cause, "filename", None)
        super().__init__(
            f"{where + ': ' if where else ''}cannot write the journal ({reason}); run stopped with "
            f"{len(run.results)} of {run.selected_samples} samples finished"
        )
        self.run = run
        self.cause = cause


async def warmup(
    transport: Transport, engine: Engine, prompts: PromptSet, settings: RequestSettings, count: int, stop: Stop
) -> None:
    """Send `count` untimed single-turn requests (results discarded); a stop request ends it at once."""
    for index in range(count):
        if stop.requested.is_set():
            return
        sample = prompts.samples[index % len(prompts.samples)]
        messages = [{"role": "user", "content": sample.turns[0]}]
        request = asyncio.ensure_future(
            send_turn(transport, settings, engine, build_payload(settings, engine, messages))
        )
        stopped = asyncio.ensure_future(stop.requested.wait())
        await asyncio.wait([request, stopped], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not request.done():
            request.cancel()
            await asyncio.gather(request, return_exceptions=True)
            return
        if request.exception() is not None:  # warm-up failures surface in the timed run
            return


def shard_run(prompts: PromptSet, repeat: int, shard: Shard | None) -> tuple[PromptSet, HeaderExtra]:
    """(the shard's prompts, its headers' extra keys: its marker); the run's prompts and no marker without a shard."""
    if shard is None:
        return prompts, {}
    own = shard.prompts(prompts)
    return own, {"shard": shard_header(shard, prompts, own, repeat)}  # `shard`: the records' SHARD_KEY


def shard_header(shard: Shard, prompts: PromptSet, own: PromptSet, repeat: int) -> JsonObject:
    """The marker every header of `shard` carries: the full run's digests and size, and the shard's own ids."""
    return shard_marker(shard.index, shard.count, prompts_digest(prompts), len(prompts.samples) * repeat,
                        [sample.id for sample in own.samples], [sample.id for sample in prompts.samples])
