"""The runner: sends a prompt set to one endpoint with bounded concurrency and records every sample."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import gc
import hashlib
import json
import os
import platform
import re
import signal
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse, urlsplit

from bench._errors import BenchError
from bench._redact import SENSITIVE_HEADER, one_line, redact, redact_url, register_secrets, url_secrets
from bench._version import __version__
from bench.engines import ENGINE_NAMES, Engine, detect_engine, engine_by_name, engine_from_metrics, tokenizing_engines
from bench.prompts import PromptSet, Sample
from bench.records import (
    COUNTER_KEYS,
    Journal,
    Run,
    SampleResult,
    acceptance_summary,
    counter_acceptance,
    counter_deltas,
    journal_path,
    latest_by_key,
    output_lock,
    read_journal,
    save_run,
    summarize,
)
from bench.runner._client import RequestSettings, build_payload, run_sample, send_turn
from bench.runner._lag import LagMonitor
from bench.runner._progress import Progress, SilentProgress
from bench.runner._transport import Transport, TransportError

_T = TypeVar("_T")

GRACE_PERIOD_S = 5.0
PROBE_TIMEOUT_S = 5.0
"""Per-request timeout of the server probes (/metrics, /props, /models)."""
STOPPING_PROBE_S = 1.0
"""After a stop request, the closing /metrics scrape gets at most this long."""
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
"""Largest response body read and stored per request (`--max-response-bytes`)."""
ENDPOINT_SUFFIXES = ("/chat/completions", "/completions", "/models")
"""Endpoint paths that `--url` may carry by mistake; the base URL is what precedes them."""
RESERVED_FIELDS = ("messages", "prompt", "stream", "stream_options", "max_tokens", "max_completion_tokens", "n")
"""Request fields the harness owns: `--extra-inputs` cannot set them (nor `model` when --model is given)."""


def normalize_base_url(url: str) -> str:
    """`localhost:8080` or `http://host:8080/v1/` -> `http://host:8080/v1` (scheme and /v1 optional)."""
    url = url.strip().rstrip("/")
    if not url:
        raise BenchError("--url cannot be empty")
    if "://" not in url:
        url = "http://" + url
    try:
        parsed = urlparse(url)
        parsed.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise BenchError(f"invalid --url {redact_url(url)}: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise BenchError(f"invalid --url: {redact_url(url)}")
    if parsed.query or parsed.fragment:
        raise BenchError(f"invalid --url {redact_url(url)}: give the server's base URL, without ?query or #fragment")
    path = parsed.path.rstrip("/")
    for endpoint in ENDPOINT_SUFFIXES:  # a full endpoint URL was given: keep its base
        if path.endswith(endpoint):
            path = path[: -len(endpoint)]
            break
    if not path.endswith("/v1"):
        path = path + "/v1"
    return f"{parsed.scheme}://{parsed.netloc}{path}"


def server_root(base_url: str) -> str:
    """The server root (for /metrics, /props) of a `.../v1` base URL."""
    return base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines a run; all but the secrets are written to the run file."""

    url: str = "localhost:8080"
    model: str | None = None
    bench: str = "qualitative"
    category: str = "all"
    osl: int = 4096
    extra_inputs: Mapping[str, Any] = field(default_factory=lambda: {"temperature": 0})
    concurrency: int = 1
    limit: int | None = None
    timeout: float = 600.0
    dataset: str = "categories"
    revision: str | None = None
    repeat: int = 1
    warmup: int = 0
    stream: bool = False
    engine: str = "auto"
    api: str = "chat"
    retries: int = 0
    label: str | None = None
    per_sample_metrics: bool = True
    chat_template_kwargs: Mapping[str, Any] | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    logprobs: bool = False
    api_key: str | None = field(default=None, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    def validate(self) -> None:
        """Refuse impossible settings with a one-line BenchError."""
        if self.osl < 1:
            raise BenchError(f"--osl must be >= 1 (got {self.osl})")
        if self.concurrency < 1:
            raise BenchError(f"--concurrency must be >= 1 (got {self.concurrency})")
        if self.limit is not None and self.limit < 1:
            raise BenchError(f"--limit must be >= 1 (got {self.limit})")
        if self.timeout <= 0:
            raise BenchError(f"--timeout must be > 0 (got {self.timeout})")
        if self.repeat < 1 or self.warmup < 0 or self.retries < 0:
            raise BenchError("--repeat must be >= 1, --warmup and --retries >= 0")
        if self.engine not in ENGINE_NAMES:
            raise BenchError(f"unknown --engine {self.engine!r}; available: {', '.join(ENGINE_NAMES)}")
        if self.api not in ("chat", "completions"):
            raise BenchError(f"unknown --api {self.api!r}; available: chat, completions")
        if self.max_response_bytes < 1024:
            raise BenchError(f"--max-response-bytes must be >= 1024 (got {self.max_response_bytes})")
        owned = [key for key in self.extra_inputs if key in RESERVED_FIELDS or (key == "model" and self.model)]
        if owned:
            raise BenchError(
                f"--extra-inputs cannot set {', '.join(sorted(owned))}: the harness sets "
                "(use --osl for max_tokens, --stream, --api, --model)"
            )
        self._validate_headers()
        for url in self.urls():
            normalize_base_url(url)

    def _validate_headers(self) -> None:
        """Refuse header names/values and keys that would break (or smuggle into) the HTTP request."""
        for name, value in self.headers.items():
            if not name or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
                raise BenchError(f"--header name {redact(name)!r} is not a valid HTTP header name")
            if any((ord(char) < 32 and char != "\t") or ord(char) == 127 for char in value):
                raise BenchError(f"--header {name}: the value contains a line break or control character")
        if self.api_key is not None and any(ord(char) < 32 or ord(char) == 127 for char in self.api_key):
            raise BenchError("--api-key (or $OPENAI_API_KEY) contains a line break or control character")
        with_userinfo = [url for url in self.urls() if "@" in urlsplit(url if "://" in url else "http://" + url).netloc]
        has_auth = self.api_key or any(name.lower() == "authorization" for name in self.headers)
        if with_userinfo and has_auth:
            raise BenchError(
                "--url carries credentials (user:password@) and --api-key or an Authorization header is given; "
                "use one of them"
            )

    def secrets(self) -> list[str]:
        """Every secret of the config (API key, URL passwords, sensitive header values), for redaction."""
        found: list[str] = [self.api_key or ""]
        for url in self.urls():
            found += url_secrets(url)
        for name, value in self.headers.items():
            if SENSITIVE_HEADER.match(name):
                found.append(value)
                found.append(value.split(None, 1)[-1])  # the token of "Bearer <token>"
        return [value for value in found if value]

    def request_headers(self) -> dict[str, str]:
        """HTTP headers of every request: `--header`s and the bearer token."""
        headers = dict(self.headers)
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def urls(self) -> list[str]:
        """The server URLs (a comma-separated `--url` spreads requests round-robin)."""
        return [part.strip() for part in self.url.split(",") if part.strip()] or [self.url]

    def recorded(self) -> dict[str, Any]:
        """The config as written to the run file: the reference's keys plus speedbench's, no secrets."""
        data = asdict(self)
        data.pop("api_key")
        data["url"] = redact_url(self.url)
        data["headers"] = sorted(data["headers"])
        data["extra_inputs"] = dict(self.extra_inputs)
        data["tags"] = dict(self.tags)
        if self.chat_template_kwargs is not None:
            data["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        return data


def _utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def machine_info() -> dict[str, Any]:
    """The machine a run ran on (for reports)."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }


async def _get_json(transport: Transport, url: str) -> Any:
    body = await _get_text(transport, url)
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


async def _get_text(transport: Transport, url: str) -> str:
    try:
        response = await transport.get(url, timeout=PROBE_TIMEOUT_S)
    except TransportError as exc:
        if exc.kind == "tls":  # no request can succeed: say so now rather than after every sample fails
            raise BenchError(str(exc)) from None
        return ""
    return response.body.decode("utf-8", errors="replace") if response.status == 200 else ""


async def _choose_engine(
    transport: Transport, config: RunConfig, metrics_text: str, endpoint: str, prompts: PromptSet
) -> Engine:
    """The adapter named by --engine; for `auto`, the one /metrics names, else one untimed 1-token probe decides."""
    if config.engine != "auto":
        return engine_by_name(config.engine)
    found = engine_from_metrics(metrics_text)
    if found is not None or not prompts.samples:
        return found or Engine()
    text = prompts.samples[0].turns[0]
    body: dict[str, Any] = {"max_tokens": 1, **({"model": config.model} if config.model else {})}
    if config.api == "completions":
        body["prompt"] = text
    else:
        body["messages"] = [{"role": "user", "content": text}]
    try:
        response = await transport.post(endpoint, json.dumps(body).encode())
        first = json.loads(response.body) if response.status == 200 else None
    except (TransportError, ValueError):
        first = None
    return detect_engine(first if isinstance(first, dict) else None, "")


async def _server_info(transport: Transport, engine: Engine, root: str, base_url: str) -> dict[str, Any]:
    """What the server says about itself: the adapter's info documents and the OpenAI model list."""
    info = {name: engine.trim_info(name, await _get_json(transport, root + path))
            for name, path in engine.info_paths().items()}
    info["models"] = await _get_json(transport, base_url + "/models")
    return info


class _SampleMeter:
    """Scrapes /metrics around each sample (one request in flight) to attribute acceptance counters per sample."""

    def __init__(self, transport: Transport, engine: Engine, metrics_url: str, stop: _Stop) -> None:
        self.stop = stop
        self.transport = transport
        self.engine = engine
        self.metrics_url = metrics_url
        self.last_after: dict[str, Any] | None = None
        self.moved_between = False
        self.enabled = True

    async def _counters(self, closing: bool = False) -> dict[str, Any] | None:
        text = await self.stop.guard(_get_text(self.transport, self.metrics_url), "", closing=closing)
        return self.engine.acceptance_counters(text) if text else None

    async def measure(self, send: Any) -> SampleResult:
        """Run `send()` between two scrapes and add the counter deltas to the result's `spec`."""
        if not self.enabled:
            return await send()
        before = await self._counters()
        if before is None:
            self.enabled = False
            return await send()
        if self.last_after is not None and _core(before) != _core(self.last_after):
            self.moved_between = True
        result = await send()
        after = await self._counters(closing=True)
        self.last_after = after
        if after is None or not result.ok:
            return result
        return replace(result, spec={**result.spec, **counter_deltas(before, after)})


def _core(counters: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(counters.get(key) for key in COUNTER_KEYS)


class _Stop:
    """Interrupt state shared by the signal handler, the workers and the server probes."""

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self.hard = asyncio.Event()
        self.count = 0
        self.fatal: BaseException | None = None

    def signal(self) -> None:
        self.count += 1
        self.requested.set()
        if self.count >= 2:
            self.hard.set()

    def fail(self, exc: BaseException) -> None:
        """Stop the run because something the run cannot continue without failed (e.g. the journal)."""
        if self.fatal is None:
            self.fatal = exc
        self.requested.set()

    async def guard(self, coro: Coroutine[Any, Any, _T], default: _T, *, closing: bool = False) -> _T:
        """Await `coro` unless a stop arrives first (then cancel it and return `default`).

        Before a stop request any stop ends it. Once a stop was requested only a `closing` probe
        (the final /metrics scrape, which completes what was measured) still runs, for at most
        STOPPING_PROBE_S and until a second Ctrl-C; any other is skipped.
        """
        stopping = self.requested.is_set()
        if (stopping and not closing) or self.hard.is_set():
            coro.close()
            return default
        task = asyncio.ensure_future(coro)
        waiter = asyncio.ensure_future((self.hard if stopping else self.requested).wait())
        try:
            await asyncio.wait(
                [task, waiter], timeout=STOPPING_PROBE_S if stopping else None, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            waiter.cancel()
            if not task.done():
                task.cancel()
            await asyncio.gather(task, waiter, return_exceptions=True)
        if task.cancelled():
            return default
        return task.result()


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


def _header(prompts: PromptSet, config: RunConfig) -> dict[str, Any]:
    return {
        "config": config.recorded(),
        "selected_samples": len(prompts.samples) * config.repeat,
        "sample_ids": [sample.id for sample in prompts.samples],
        "prompts_sha256": prompts_digest(prompts),
        "harness": {"name": "speedbench", "version": __version__},
        "started_at": _utc_now(),
        "machine": machine_info(),
    }


def _check_resumable(header: Mapping[str, Any], prompts: PromptSet, config: RunConfig, source: str) -> None:
    old = header.get("config") or {}
    new = config.recorded()
    # an embedded server (tags name it) gets a new port on every start: its model and mode identify it
    embedded = str((new.get("tags") or {}).get("server", "")).startswith("embedded")
    for key in ("url", "model", "engine", "bench", "category", "osl", "extra_inputs", "chat_template_kwargs",
                "dataset", "revision", "repeat", "limit", "stream", "api", "tags"):
        if key == "url" and embedded:
            continue
        if key == "tags" and not embedded:
            continue
        if old.get(key) != new.get(key):
            raise BenchError(f"{source}: cannot resume: {key} was {old.get(key)!r}, now {new.get(key)!r}")
    if header.get("sample_ids") != [sample.id for sample in prompts.samples] or header.get(
        "prompts_sha256", prompts_digest(prompts)
    ) != prompts_digest(prompts):
        raise BenchError(f"{source}: cannot resume: the selected prompts differ from the interrupted run's")


@dataclass
class _Arm:
    """One endpoint's run in progress: its prompts, config, journal and what the server said before the run."""

    prompts: PromptSet
    config: RunConfig
    output: str | os.PathLike[str] | None
    header: dict[str, Any]
    previous: list[SampleResult]
    plan: _Plan
    base_urls: list[str]
    journal: Journal | None = None
    engine: Engine = field(default_factory=Engine)
    server: dict[str, Any] = field(default_factory=lambda: {"models": None})
    settings: list[RequestSettings] = field(default_factory=list)
    metrics_before: str = ""
    meter: _SampleMeter | None = None
    new_results: list[SampleResult] = field(default_factory=list)


def _prepare_arm(
    prompts: PromptSet,
    config: RunConfig,
    output: str | os.PathLike[str] | None,
    *,
    resume: bool,
    force: bool,
    header_extra: Mapping[str, Any] | None = None,
) -> _Arm:
    """Validate, read the journal to resume (or refuse to overwrite) and plan what is left to send."""
    config.validate()
    register_secrets(config.secrets())
    if output is not None and Path(output).is_dir():
        raise BenchError(f"{output}: is a directory; --output names the run file to write")
    base_urls = [normalize_base_url(url) for url in config.urls()]
    journal_file = journal_path(output) if output is not None else None
    previous: list[SampleResult] = []
    header = {**_header(prompts, config), **(header_extra or {})}
    if output is not None and journal_file is not None:
        if resume:
            if not journal_file.exists():
                raise BenchError(f"{journal_file}: no journal to resume from")
            old_header, previous = read_journal(journal_file)
            _check_resumable(old_header, prompts, config, str(journal_file))
            header["started_at"] = old_header.get("started_at", header["started_at"])
        elif not force and (Path(output).exists() or journal_file.exists()):
            raise BenchError(f"{output}: exists; pass --force to overwrite it or --resume to continue it")
    return _Arm(prompts, config, output, header, previous, _plan(prompts, config, previous), base_urls)


def _open_journal(arm: _Arm, *, resume: bool) -> None:
    """Start (or continue) the arm's journal; opened once the server answered, so a refused start keeps the output."""
    if arm.output is not None:
        arm.journal = Journal(journal_path(arm.output), arm.header, append=resume)


def _close_journal(arm: _Arm, stop: _Stop) -> None:
    """Sync and close the arm's journal; a failure to do so stops the run like any journal error."""
    if arm.journal is not None:
        try:
            arm.journal.close()
        except OSError as exc:
            stop.fail(exc)


async def _connect_arm(arm: _Arm, transport: Transport, stop: _Stop) -> None:
    """Choose the engine, read the server's info, build request settings, warm up and set up per-sample metrics.

    Every probe runs under the stop mechanism with a short timeout: Ctrl-C is honoured while a server hangs.
    """
    config = arm.config
    path = "/completions" if config.api == "completions" else "/chat/completions"
    roots = [server_root(base) for base in arm.base_urls]
    arm.metrics_before = await stop.guard(_get_text(transport, roots[0] + "/metrics"), "")
    arm.engine = await stop.guard(
        _choose_engine(transport, config, arm.metrics_before, arm.base_urls[0] + path, arm.prompts), arm.engine
    )
    arm.server = await stop.guard(_server_info(transport, arm.engine, roots[0], arm.base_urls[0]), arm.server)
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
        )
        for base in arm.base_urls
    ]
    await _warmup(transport, arm.engine, arm.prompts, arm.settings[0], config.warmup, stop)
    if config.warmup:
        arm.metrics_before = await stop.guard(_get_text(transport, roots[0] + "/metrics"), "")
    arm.meter = (
        _SampleMeter(transport, arm.engine, roots[0] + "/metrics", stop)
        if config.per_sample_metrics and config.concurrency == 1 and len(arm.base_urls) == 1 and arm.metrics_before
        else None
    )


async def _conclude_arm(
    arm: _Arm, transport: Transport, progress: Progress, stop: _Stop, extra_notes: Sequence[str] = ()
) -> tuple[list[SampleResult], dict[str, Any] | None, list[str]]:
    """After the timed part: acceptance from /metrics, the adapter's warnings; return (results, acceptance, notes)."""
    results = [*arm.previous, *arm.new_results]
    metrics_after = await stop.guard(
        _get_text(transport, server_root(arm.base_urls[0]) + "/metrics"), "", closing=True
    )
    acceptance = _acceptance(arm.engine, arm.metrics_before, metrics_after, arm.config, len(arm.base_urls))
    notes = [*arm.engine.warnings(), *extra_notes]
    for note in notes:
        progress.message(f"speedbench: warning: {note}")
    if arm.meter is not None and arm.meter.moved_between:
        # other traffic moved the counters between samples: per-sample deltas cannot be trusted
        results = [*arm.previous, *(_without_counter_deltas(result) for result in arm.new_results)]
        if acceptance is not None:
            acceptance["server_wide"] = True
    if arm.previous:
        acceptance = _resumed_acceptance(latest_by_key(results), acceptance)
    return results, acceptance, notes


def _build_run(
    arm: _Arm,
    results: list[SampleResult],
    acceptance: dict[str, Any] | None,
    notes: list[str],
    *,
    interrupted: bool,
    elapsed_s: float,
    stop: _Stop,
    client_lag: Mapping[str, Any] | None = None,
) -> Run:
    """The arm's Run (meta from its header plus what the run found), saved to its output when it has one.

    When the journal failed first (`stop.fatal`), a run file that cannot be written either is not an error of
    its own: the journal keeps what it holds.
    """
    final = latest_by_key(results)
    meta = {
        key: value
        for key, value in arm.header.items()
        if key not in {"config", "selected_samples", "sample_ids"}  # prompts_sha256 kept: compare checks it
    }
    meta.update(
        {
            "finished_at": _utc_now(),
            "elapsed_s": elapsed_s,
            "engine": arm.engine.name,
            "server": arm.server,
            "server_description": arm.engine.describe(arm.server),
            "acceptance": acceptance,
            "interrupted": interrupted,
            "warnings": notes,
            "client_lag": dict(client_lag) if client_lag is not None else None,
            "dataset": {"source": arm.prompts.source, "bench": arm.prompts.bench, "skipped_rows": arm.prompts.skipped},
        }
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


@contextlib.contextmanager
def signals_to(stop: _Stop, install: bool) -> Iterator[None]:
    """Route SIGINT and SIGTERM to `stop` while the block runs (when `install`)."""
    loop = asyncio.get_running_loop()
    if install:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.signal)
    try:
        yield
    finally:
        if install:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)


async def execute(
    prompts: PromptSet,
    config: RunConfig,
    *,
    output: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    resume: bool = False,
    force: bool = False,
    install_signal_handlers: bool = True,
) -> tuple[Run, bool]:
    """Run the prompt set; return the run and whether it was interrupted. Results are journalled as they finish.

    The output is locked for one writer for the whole run. A journal that cannot be written (a full
    disk) stops the run like an interrupt: the finished samples are kept and `RunStopped` is raised
    after the run file was written (or could not be).
    """
    progress = progress or SilentProgress()
    arm = _prepare_arm(prompts, config, output, resume=resume, force=force)
    stop = _Stop()
    with contextlib.ExitStack() as held:
        if output is not None:
            held.enter_context(output_lock(output))
        started = time.perf_counter()
        lag = LagMonitor(progress)
        try:
            with signals_to(stop, install_signal_handlers):
                async with Transport(
                    timeout=config.timeout, connections=config.concurrency * len(arm.base_urls),
                    headers=config.request_headers(), max_body_bytes=config.max_response_bytes,
                ) as transport:
                    await _connect_arm(arm, transport, stop)
                    _open_journal(arm, resume=resume)
                    progress.start(len(arm.plan.jobs), config.label or "speedbench")
                    lag.start()
                    try:
                        arm.new_results = await _drive(
                            transport, arm.engine, arm.plan.jobs, arm.settings, config.concurrency, stop, progress,
                            arm.journal, arm.meter, origin=started,
                        )
                    finally:
                        await lag.stop()
                    progress.finish()
                    results, acceptance, notes = await _conclude_arm(
                        arm, transport, progress, stop, lag.notes(arm.new_results)
                    )
        finally:
            _close_journal(arm, stop)
        run = _build_run(
            arm, results, acceptance, notes, interrupted=stop.requested.is_set(),
            elapsed_s=time.perf_counter() - started, stop=stop, client_lag=lag.summary(),
        )
    if stop.fatal is not None:
        raise RunStopped(run, stop.fatal)
    return run, stop.requested.is_set()



def _without_counter_deltas(result: SampleResult) -> SampleResult:
    return replace(result, spec={key: value for key, value in result.spec.items() if key not in COUNTER_KEYS})


def _resumed_acceptance(results: list[SampleResult], acceptance: dict[str, Any] | None) -> dict[str, Any] | None:
    """After a resume the counters cover only the resumed part: rebuild from per-sample deltas, or say so."""
    ok = [result for result in results if result.ok]
    if ok and all("drafts" in result.spec for result in ok):
        return acceptance_summary(
            sum(result.spec["drafts"] for result in ok),
            sum(result.spec.get("draft_tokens", 0.0) for result in ok),
            sum(result.spec.get("accepted", 0.0) for result in ok),
            source="per-sample metrics",
            server_wide=False,
        )
    if acceptance is None:
        return None
    return {**acceptance, "partial": "counters cover only the resumed part of the run", "server_wide": True}


def _acceptance(
    engine: Engine, before: str, after: str, config: RunConfig, servers: int
) -> dict[str, Any] | None:
    counters_before = engine.acceptance_counters(before) if before else None
    counters_after = engine.acceptance_counters(after) if after else None
    if counters_after is not None:
        return counter_acceptance(
            counters_before or {}, counters_after, server_wide=config.concurrency > 1 or servers > 1
        )
    gauges = engine.acceptance_gauges(after) if after else None
    if gauges:
        return {"source": "gauges", **gauges, "server_wide": True}
    return None


async def _warmup(
    transport: Transport, engine: Engine, prompts: PromptSet, settings: RequestSettings, count: int, stop: _Stop
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


async def _drive(
    transport: Transport,
    engine: Engine,
    jobs: Sequence[tuple[Sample, int]],
    settings: Sequence[RequestSettings],
    concurrency: int,
    stop: _Stop,
    progress: Progress,
    journal: Journal | None,
    meter: _SampleMeter | None = None,
    *,
    origin: float | None = None,
    batch: int | None = None,
) -> list[SampleResult]:
    """Run jobs with `concurrency` workers; on a stop request finish in-flight work within a grace period.

    Closed loop: a sample is scheduled when a worker's slot frees (the run's start for the first wave, the
    moment the slot's previous sample finished after that); `origin` is the time its records count from.
    `batch` (interleaved arms) is recorded on every result before it is journalled.
    """
    began = time.perf_counter()
    origin = began if origin is None else origin
    queue: asyncio.Queue[tuple[int, Sample, int]] = asyncio.Queue()
    for index, (sample, repeat) in enumerate(jobs):
        queue.put_nowait((index, sample, repeat))
    results: list[SampleResult] = []

    async def worker() -> None:
        free_at = began
        while not stop.requested.is_set():
            try:
                index, sample, repeat = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            request_settings = settings[index % len(settings)]

            scheduled_at = free_at

            async def send() -> SampleResult:
                return await run_sample(
                    transport, engine, sample, request_settings, repeat=repeat, scheduled_at=scheduled_at,  # noqa: B023
                    origin=origin,
                )

            try:
                result = await (meter.measure(send) if meter is not None else send())
            except Exception as exc:
                result = SampleResult(
                    id=sample.id, category=sample.category, ok=False, turns=len(sample.turns), latency_s=0.0,
                    error=one_line(f"{exc.__class__.__name__}: {exc}"), error_kind="internal", repeat=repeat,
                    sub_category=sample.sub_category,
                )
            free_at = time.perf_counter()
            if batch is not None:
                result = replace(result, batch=batch)
            results.append(result)  # kept in memory first: a journal failure never loses a finished sample
            if journal is not None:
                try:
                    journal.append(result)
                except OSError as exc:  # disk full, I/O error: stop the run, keep what finished
                    stop.fail(exc)
            progress.advance(result)

    tasks = [asyncio.create_task(worker()) for _ in range(min(concurrency, max(1, len(jobs))))]
    # return_exceptions: a cancelled worker must not leave an unretrieved exception on the gathering future
    all_done = asyncio.gather(*tasks, return_exceptions=True)
    stop_wait = asyncio.create_task(stop.requested.wait())
    await asyncio.wait([all_done, stop_wait], return_when=asyncio.FIRST_COMPLETED)
    if stop.requested.is_set() and not all_done.done():
        if stop.fatal is None:
            progress.message(f"speedbench: interrupted; waiting up to {GRACE_PERIOD_S:.0f}s for requests in flight")
        hard_wait = asyncio.create_task(stop.hard.wait())
        await asyncio.wait([all_done, hard_wait], timeout=GRACE_PERIOD_S, return_when=asyncio.FIRST_COMPLETED)
        hard_wait.cancel()
        for task in tasks:
            task.cancel()
    stop_wait.cancel()
    await asyncio.gather(all_done, stop_wait, return_exceptions=True)
    return results


def server_token_counter(
    url: str, timeout: float = 30.0, headers: Mapping[str, str] | None = None
) -> Callable[[Sequence[str]], list[int]] | None:
    """A batch token counter backed by the server's tokenize endpoint (whichever adapter's answers), or None."""
    root = server_root(normalize_base_url(url.split(",")[0]))

    async def count(engine: Engine, texts: Sequence[str]) -> list[int] | None:
        async with Transport(timeout=timeout, connections=1, headers=headers) as transport:
            counts = []
            for text in texts:
                path, body = engine.tokenize_request(text) or ("", {})
                try:
                    response = await transport.post(root + path, json.dumps(body).encode())
                    tokens = engine.token_count(json.loads(response.body)) if response.status == 200 else None
                except (TransportError, ValueError):
                    return None
                if tokens is None:
                    return None
                counts.append(tokens)
            return counts

    engine = next((engine for engine in tokenizing_engines() if asyncio.run(count(engine, ["hello"]))), None)
    if engine is None:
        return None
    path = (engine.tokenize_request("") or ("",))[0]

    def counter(texts: Sequence[str]) -> list[int]:
        counts = asyncio.run(count(engine, texts))
        if counts is None:
            raise BenchError(f"{root}{path} stopped answering while sizing prompts")
        return counts

    return counter


FULL_COLLECTIONS_HELD = 1_000_000_000
"""The collector's third threshold during a run: that many young collections before a full one, i.e. none."""


def run_loop(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """asyncio.run(coroutine) with the objects made before it frozen, its result handed back outside the task.

    On the main thread asyncio.run swaps the SIGINT handler for one that holds the main task, and Python
    builds the repr of that handler (task, result and all) when it is swapped back: for a run's result that
    is every record, 0.3 s of CPU at 512 streamed samples.
    """
    box: list[_T] = []

    async def main() -> None:
        box.append(await coroutine)

    # What exists before the run (modules, prompts, previous runs' records) is moved out of the collector's
    # reach for its duration: a full collection walks all of it, a 15-20 ms pause on a streamed run's
    # loop, and every stream read during it gets merged chunks (one arrival time for several).
    # Full (generation 2) collections are also held back until the run ends: one would walk every record the
    # run has made so far, a pause that grows with the run (the full collection before freezing takes 24-60 ms
    # here), and a pause longer than the gap between chunks merges them. No full collection was seen during a
    # 6 s 64-stream run even before this; the hold is for long runs. Young collections go on, so short-lived
    # cycles (futures, exceptions) are still freed during the run.
    gc.collect()
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], FULL_COLLECTIONS_HELD)
    try:
        asyncio.run(main())
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
    return box[0]


def run_benchmark(
    prompts: PromptSet,
    config: RunConfig,
    *,
    output: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    resume: bool = False,
    force: bool = False,
    install_signal_handlers: bool = True,
) -> tuple[Run, bool]:
    """Synchronous wrapper of `execute`."""
    return run_loop(
        execute(
            prompts,
            config,
            output=output,
            progress=progress,
            resume=resume,
            force=force,
            install_signal_handlers=install_signal_handlers,
        )
    )
