"""Throughput, SLO attainment and goodput of a run (the paired A/B of two arms: `_paired_goodput`).

Times count from each request's scheduled arrival (`scheduled_s`), not from when the client sent it: the
record keeps the service latency (`latency_s`, from the send) and the queue wait (`sent_s - scheduled_s`),
and TTFT and end-to-end latency here add the wait back, so a client that fell behind cannot hide the queue it
built (no coordinated omission). A failed request meets no SLO. TPOT has no queue in it.

Intervals:
- attainment: the hull of Wilson's score interval (right for independent requests, and at 0% or 100%), the
  same at the effective number of requests n (1 - r) / (1 + r) (r the lag-1 correlation of the outcomes) and a
  batch-means t-interval over contiguous time batches (right when neighbouring requests share a queue, which
  Wilson's interval ignores); withheld below `MIN_REQUESTS` requests or `MIN_REQUESTS / 2` effective ones.
  Goodput's interval is attainment's times requests per second of the run (its duration taken as fixed).
Coverage of each is checked on synthetic truth in tests/test_goodput.py at the sizes printed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench._constants import OVERALL
from bench._errors import BenchError
from bench.analysis._intervals import t_quantile
from bench.records import Run, SampleResult

MIN_REQUESTS = 20
"""Below this many requests (in a row of the table) no attainment or goodput interval is printed."""
MIN_BLOCKS = 6
"""Below this many blocks no by-block paired interval is printed."""
BATCHES = (5, 10)
"""Fewest and most contiguous time batches of the batch-means attainment interval (at least 10 requests each
when there are at least 50: longer batches carry serial correlation better)."""
FELL_BEHIND = 0.95
"""The client fell behind when it sent at less than this share of the offered rate."""

_SLO_KEYS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2e": "e2e_s"}


@dataclass(frozen=True)
class Slo:
    """Latency targets in seconds; a request is good when it meets every target that is set."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def text(self) -> str:
        """The targets as `--slo` spells them."""
        parts = [f"{name}={getattr(self, attr):g}" for name, attr in _SLO_KEYS.items()
                 if getattr(self, attr) is not None]
        return ",".join(parts)

    @property
    def needs_stream(self) -> bool:
        """Whether a target needs streamed timings (TTFT or TPOT)."""
        return self.ttft_s is not None or self.tpot_s is not None


def parse_slo(text: str) -> Slo:
    """`ttft=0.5,tpot=0.05,e2e=20` (seconds, any subset) as an Slo; a one-line BenchError when malformed."""
    values: dict[str, float] = {}
    for part in (text or "").split(","):
        name, sep, raw = part.strip().partition("=")
        name = name.strip().lower()
        if not sep or name not in _SLO_KEYS:
            raise BenchError(f"--slo: expected name=seconds with name one of ttft, tpot, e2e (got {part.strip()!r})")
        if _SLO_KEYS[name] in values:
            raise BenchError(f"--slo: {name} given twice")
        try:
            value = float(raw)
        except ValueError:
            raise BenchError(f"--slo: {name} must be a number of seconds (got {raw.strip()!r})") from None
        if not math.isfinite(value) or value <= 0:
            raise BenchError(f"--slo: {name} must be a positive number of seconds (got {raw.strip()!r})")
        values[_SLO_KEYS[name]] = value
    return Slo(**values)


@dataclass(frozen=True)
class RequestTiming:
    """One request on the run's clock (seconds since the run's start), its latencies counted from the schedule."""

    id: str
    repeat: int
    category: str
    ok: bool
    scheduled_s: float
    sent_s: float
    first_token_s: float | None
    end_s: float
    ttft_s: float | None
    """From the scheduled arrival to the first token."""
    tpot_s: float | None
    e2e_s: float
    """From the scheduled arrival to the last byte."""
    output_tokens: int
    block: int | None
    decode_t_s: float | None = None
    """Decode rate: llama.cpp's own where the server gave timings, else the reference's per-sample rate."""

    @property
    def queue_wait_s(self) -> float:
        """Seconds between the scheduled arrival and the send."""
        return max(0.0, self.sent_s - self.scheduled_s)

    def meets(self, slo: Slo) -> bool:
        """Whether the request succeeded and met every target of `slo` (a target without a timing is missed)."""
        if not self.ok:
            return False
        checks = ((slo.ttft_s, self.ttft_s), (slo.tpot_s, self.tpot_s), (slo.e2e_s, self.e2e_s))
        return all(value is not None and value <= target for target, value in checks if target is not None)


def request_timing(result: SampleResult) -> RequestTiming:
    """A record's request on the run's clock; a record without schedule times counts as sent when due."""
    sent = result.sent_s if result.sent_s is not None else (result.scheduled_s or 0.0)
    scheduled = result.scheduled_s if result.scheduled_s is not None else sent
    scheduled = min(scheduled, sent)
    wait = sent - scheduled
    ttft = None if result.ttft_s is None else result.ttft_s + wait
    return RequestTiming(
        id=result.id, repeat=result.repeat, category=result.category, ok=result.ok, scheduled_s=scheduled,
        sent_s=sent, first_token_s=None if result.ttft_s is None else sent + result.ttft_s,
        end_s=sent + result.latency_s, ttft_s=ttft, tpot_s=result.tpot_s, e2e_s=wait + result.latency_s,
        output_tokens=result.completion_tokens if result.ok else 0, block=result.batch,
        decode_t_s=_decode_rate(result),
    )


def _decode_rate(result: SampleResult) -> float | None:
    """The sample's decode t/s: the server's (n - 1)/t_gen, else its per-sample rate, else the client's."""
    for value in (result.server_decode_t_s, result.predicted_per_second, result.client_decode_t_s):
        if value is not None and value > 0:
            return value
    return None


def request_timings(run: Run) -> tuple[RequestTiming, ...]:
    """Every request of a run (last attempt of each sample and repeat), in order of scheduled arrival."""
    return tuple(sorted((request_timing(result) for result in run.latest), key=lambda r: (r.scheduled_s, r.sent_s)))


@dataclass(frozen=True)
class Throughput:
    """What a run delivered per second, and whether the client kept to its schedule."""

    requests: int
    completed: int
    duration_s: float
    """From the first scheduled arrival to the end of the last request."""
    request_throughput: float
    """Completed requests per second of the run."""
    output_throughput: float
    """Output tokens of completed requests per second of the run."""
    achieved_rate: float | None
    """Requests the client sent per second: (n - 1) over the span from the first send to the last."""
    offered_rate: float | None
    """Requests the schedule offered per second: (n - 1) over the span of the scheduled arrivals."""
    mean_queue_wait_s: float
    max_queue_wait_s: float

    @property
    def fell_behind(self) -> bool:
        """Whether the client sent at under `FELL_BEHIND` of the offered rate."""
        return (self.achieved_rate is not None and self.offered_rate is not None
                and self.achieved_rate < FELL_BEHIND * self.offered_rate)

    def warning(self) -> str | None:
        """A one-line warning when the client fell behind its schedule, else None."""
        if not self.fell_behind:
            return None
        return (f"the client fell behind its schedule: sent {self.achieved_rate:.3g} req/s of the "
                f"{self.offered_rate:.3g} offered (mean queue wait {self.mean_queue_wait_s:.3g} s, max "
                f"{self.max_queue_wait_s:.3g} s); latencies count from the schedule")


def throughput(requests: Sequence[RequestTiming]) -> Throughput:
    """Request and output-token throughput, achieved and offered rate of a run's requests.

    Times count from the first scheduled arrival (a run's clock may start before its schedule does): the
    duration runs to the last end, the offered rate is (n - 1) over the span of the scheduled arrivals and
    the achieved rate (n - 1) over the span of the sends.
    """
    if not requests:
        raise BenchError("no requests to measure throughput over")
    start = min(r.scheduled_s for r in requests)
    duration = max(max(r.end_s for r in requests) - start, 1e-9)
    done = [r for r in requests if r.ok]
    sent_span = max(r.sent_s for r in requests) - min(r.sent_s for r in requests)
    due_span = max(r.scheduled_s for r in requests) - start
    waits = [r.queue_wait_s for r in requests]
    gaps = len(requests) - 1
    return Throughput(
        requests=len(requests), completed=len(done), duration_s=duration,
        request_throughput=len(done) / duration, output_throughput=sum(r.output_tokens for r in done) / duration,
        achieved_rate=gaps / sent_span if gaps and sent_span > 0 else None,
        offered_rate=gaps / due_span if gaps and due_span > 0 else None,
        mean_queue_wait_s=statistics.fmean(waits), max_queue_wait_s=max(waits),
    )


@dataclass(frozen=True)
class Interval:
    """A point estimate with its interval; NaN bounds when withheld, with the reason."""

    point: float
    low: float
    high: float
    withheld: str | None = None

    @property
    def has_interval(self) -> bool:
        """Whether the bounds are printed."""
        return not (math.isnan(self.low) or math.isnan(self.high))


@dataclass(frozen=True)
class AttainmentRow:
    """SLO attainment and goodput of one category (or overall)."""

    category: str
    requests: int
    good: int
    attainment: Interval
    """Share of requests meeting every SLO (failures count as misses)."""
    goodput: Interval
    """Requests meeting every SLO per second of the run."""


@dataclass(frozen=True)
class Goodput:
    """A run's throughput with its SLO attainment and goodput, overall and per category."""

    slo: Slo
    throughput: Throughput
    rows: tuple[AttainmentRow, ...]
    confidence: float

    @property
    def overall(self) -> AttainmentRow:
        """The row pooling every category."""
        return next(row for row in self.rows if row.category == OVERALL)


def wilson_interval(good: float, n: float, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of a binomial proportion (`good` of `n`; an effective count may be fractional)."""
    if n <= 0:
        return (math.nan, math.nan)
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    share = good / n
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return (max(0.0, centre - half), min(1.0, centre + half))


def batch_means_interval(flags: Sequence[bool], *, confidence: float = 0.95) -> tuple[float, float]:
    """t-interval of a share over contiguous batches of time-ordered outcomes (robust to serial correlation)."""
    values = np.asarray(flags, dtype=float)
    fewest, most = BATCHES
    count = min(values.size // 2, max(fewest, min(most, values.size // 25)))
    if count < 2:
        return (math.nan, math.nan)
    means = np.array([chunk.mean() for chunk in np.array_split(values, count)])
    half = t_quantile(0.5 + confidence / 2, count - 1) * means.std(ddof=1) / math.sqrt(count)
    centre = float(values.mean())
    return (max(0.0, centre - half), min(1.0, centre + half))


def attainment_interval(flags: Sequence[bool], *, confidence: float = 0.95,
                        min_requests: int = MIN_REQUESTS) -> Interval:
    """Share of True among time-ordered outcomes with the hull of Wilson's and the batch-means interval."""
    n = len(flags)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, "no requests")
    point = sum(flags) / n
    if n < min_requests:
        return Interval(point, math.nan, math.nan, f"fewer than {min_requests} requests")
    effective = effective_requests(flags)
    if effective < min_requests / 2:
        return Interval(point, math.nan, math.nan,
                        f"outcomes of neighbouring requests are too alike (about {effective:.0f} independent ones)")
    wilson_low, wilson_high = wilson_interval(sum(flags), n, confidence=confidence)
    # Wilson's interval at the effective number of requests: the AR(1) variance inflation (1 + r) / (1 - r)
    adjusted_low, adjusted_high = wilson_interval(point * effective, effective, confidence=confidence)
    batch_low, batch_high = batch_means_interval(flags, confidence=confidence)
    lows = [value for value in (wilson_low, adjusted_low, batch_low) if not math.isnan(value)]
    highs = [value for value in (wilson_high, adjusted_high, batch_high) if not math.isnan(value)]
    return Interval(point, min(lows), max(highs))


def effective_requests(flags: Sequence[bool]) -> float:
    """Independent-equivalent count of time-ordered outcomes: n (1 - r) / (1 + r), r their lag-1 correlation >= 0."""
    values = np.asarray(flags, dtype=float)
    n = values.size
    centred = values - values.mean()
    denominator = float((centred * centred).sum())
    if n < 3 or denominator == 0:
        return float(n)
    lag1 = max(0.0, min(0.95, float((centred[1:] * centred[:-1]).sum()) / denominator))
    return n * (1 - lag1) / (1 + lag1)


def goodput(run_or_requests: Run | Sequence[RequestTiming], slo: Slo, *, confidence: float = 0.95,
            min_requests: int = MIN_REQUESTS) -> Goodput:
    """SLO attainment and goodput of a run, overall and per category, with the run's throughput."""
    requests = request_timings(run_or_requests) if isinstance(run_or_requests, Run) else tuple(run_or_requests)
    if slo.needs_stream and not any(r.ttft_s is not None for r in requests):
        raise BenchError("--slo ttft/tpot need streamed timings; this run has none (use e2e alone for non-streamed)")
    measured = throughput(requests)
    groups: dict[str, list[RequestTiming]] = {OVERALL: list(requests)}
    for request in requests:
        groups.setdefault(request.category, []).append(request)
    rows = []
    for category, members in groups.items():
        flags = [r.meets(slo) for r in members]
        share = attainment_interval(flags, confidence=confidence, min_requests=min_requests)
        per_second = len(members) / measured.duration_s
        rows.append(AttainmentRow(
            category=category, requests=len(members), good=sum(flags), attainment=share,
            goodput=Interval(share.point * per_second, share.low * per_second, share.high * per_second,
                             share.withheld),
        ))
    ordered = sorted(rows, key=lambda row: (row.category == OVERALL, row.category))
    return Goodput(slo=slo, throughput=measured, rows=tuple(ordered), confidence=confidence)
