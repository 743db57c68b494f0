"""Server probes (/metrics, info documents, engine choice, tokenizer) and per-sample /metrics metering."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace

from bench._errors import BenchError
from bench._types import JsonObject, JsonValue
from bench.engines import Engine, detect_engine, engine_by_name, engine_from_metrics, tokenizing_engines
from bench.prompts import PromptSet
from bench.records import (
    COUNTER_KEYS,
    POSITION_KEY,
    Acceptance,
    CounterSnapshot,
    SampleResult,
    acceptance_summary,
    position_deltas,
)
from bench.runner._config import RunConfig, normalize_base_url, server_root
from bench.runner._stop import Stop
from bench.runner._transport import Transport, TransportError

PROBE_TIMEOUT_S = 5.0
"""Per-request timeout of the server probes (/metrics, /props, /models)."""


async def get_json(transport: Transport, url: str) -> JsonValue:
    """The JSON document at `url`, None when it cannot be read or is not JSON."""
    body = await get_text(transport, url)
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


async def get_text(transport: Transport, url: str) -> str:
    """The text at `url`, empty when it cannot be read; a TLS failure stops the run at once."""
    try:
        response = await transport.get(url, timeout=PROBE_TIMEOUT_S)
    except TransportError as exc:
        if exc.kind == "tls":  # no request can succeed: say so now rather than after every sample fails
            raise BenchError(str(exc)) from None
        return ""
    return response.body.decode("utf-8", errors="replace") if response.status == 200 else ""


async def choose_engine(
    transport: Transport, config: RunConfig, metrics_text: str, endpoint: str, prompts: PromptSet
) -> Engine:
    """The adapter named by --engine; for `auto`, the one /metrics names, else one untimed 1-token probe decides."""
    if config.engine != "auto":
        return engine_by_name(config.engine)
    found = engine_from_metrics(metrics_text)
    if found is not None or not prompts.samples:
        return found or Engine()
    text = prompts.samples[0].turns[0]
    body: JsonObject = {"max_tokens": 1, **({"model": config.model} if config.model else {})}
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


async def server_info(transport: Transport, engine: Engine, root: str, base_url: str) -> JsonObject:
    """What the server says about itself, by document name: the adapter's info documents and the OpenAI model list."""
    info: JsonObject = {name: engine.trim_info(name, await get_json(transport, root + path))
            for name, path in engine.info_paths().items()}
    info["models"] = await get_json(transport, base_url + "/models")
    return info


class SampleMeter:
    """Scrapes /metrics around each sample (one request in flight) to attribute acceptance counters per sample."""

    def __init__(self, transport: Transport, engine: Engine, metrics_url: str, stop: Stop) -> None:
        self.stop = stop
        self.transport = transport
        self.engine = engine
        self.metrics_url = metrics_url
        self.last_after: CounterSnapshot | None = None
        self.moved_between = False
        self.enabled = True

    async def _counters(self, closing: bool = False) -> CounterSnapshot | None:
        """The engine's acceptance counters now, None when /metrics gives none."""
        text = await self.stop.guard(get_text(self.transport, self.metrics_url), "", closing=closing)
        return self.engine.acceptance_counters(text) if text else None

    async def measure(self, send: Callable[[], Awaitable[SampleResult]]) -> SampleResult:
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
        deltas = self.engine.checked_counter_deltas(before, after)
        if deltas:  # per-position deltas only beside counters that agree with themselves
            deltas.update(position_deltas(before, after))
        return replace(result, spec={**result.spec, **deltas})


def _core(counters: CounterSnapshot) -> tuple[float | None, ...]:
    """The totals of a counter snapshot (drafts, drafted, accepted): what other traffic would move."""
    return counters.get("drafts"), counters.get("draft_tokens"), counters.get("accepted")  # the COUNTER_KEYS


def without_counter_deltas(result: SampleResult) -> SampleResult:
    return replace(result, spec={key: value for key, value in result.spec.items()
                                 if key not in COUNTER_KEYS and not key.startswith(POSITION_KEY)})


def resumed_acceptance(results: list[SampleResult], acceptance: Acceptance | None) -> Acceptance | None:
    """After a resume the counters cover only the resumed part: rebuild from per-sample deltas, or say so."""
    ok = [result for result in results if result.ok]
    if ok and all(result.spec.get("drafts") is not None for result in ok):
        return Acceptance.from_mapping(acceptance_summary(
            _spec_total(ok, "drafts"), _spec_total(ok, "draft_tokens"), _spec_total(ok, "accepted"),
            source="per-sample metrics",
            server_wide=False,
        ))
    if acceptance is None:
        return None
    return replace(acceptance, partial="counters cover only the resumed part of the run", server_wide=True)


def _spec_total(results: Sequence[SampleResult], key: str) -> float:
    """The sum of one `spec` figure over the results that have it."""
    return sum((value for result in results if (value := result.spec.get(key)) is not None), 0.0)


def run_acceptance(
    engine: Engine, before: str, after: str, config: RunConfig, servers: int
) -> Acceptance | None:
    """The run's acceptance from the counters of /metrics before and after it (else its gauges), None without."""
    counters_before = engine.acceptance_counters(before) if before else None
    counters_after = engine.acceptance_counters(after) if after else None
    if counters_after is not None:
        return Acceptance.from_mapping(engine.checked_counter_acceptance(
            counters_before or {}, counters_after, server_wide=config.concurrency > 1 or servers > 1
        ))
    gauges = engine.acceptance_gauges(after) if after else None
    if gauges:
        return Acceptance.from_mapping({"source": "gauges", **gauges, "server_wide": True})
    return None


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
