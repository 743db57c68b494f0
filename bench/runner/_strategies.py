"""Run strategies: one typed, serialisable object per way a run releases work, each planning its turns.

- `Concurrent(concurrency)`, `concurrent@8`: one arm, a closed loop of that many workers.
- `OpenArrivals(...)`, `poisson@2.5/s`: one arm, an open loop at a seeded rate (`arrival_seed`) or a replayed trace.
- `LockStep(batch, order_seed)`, `lockstep@8`: arms take turns on batches of `batch` jobs, in a seeded order.
- `Blocks(arrivals, block_size, order_seed)`, `abba:poisson@2.5/s`: arms share one arrival schedule, cut into
  blocks every arm runs in turn (ABBA...), each block's arrivals keeping their gaps; each arm keeps its own clock.

A strategy plans a run (`plan(work)`): the turns in the order they run (which arm, which jobs, released by a
closed loop of C or at offsets), the connections one process needs and what the run files record of it
(`marker`). It splits over worker processes (`split(n)`): each worker's strategy, whose turns are the whole
run's, of which the worker sends its own jobs. `to_dict`/`from_dict` carry it through JSON.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Self

from bench._errors import BenchError
from bench._types import JsonMapping, JsonObject
from bench.prompts import PromptSet, Sample, Shard
from bench.records import Interleaving
from bench.runner._arrivals import (
    ArrivalSchedule,
    arrival_schedule,
    block_offsets,
    block_plan,
    default_block_size,
    load_trace as read_trace,
)
from bench.runner._config import RunConfig
from bench.runner._narrow import (
    number_field,
    object_field,
    optional_number_field,
    optional_text_field,
    optional_whole_field,
    text_field,
    whole_field,
)
from bench.runner._schedule import seeded_order
from bench.runner._worker_count import worker_shares

Job = tuple[Sample, int]
"""A (sample, repeat) to send."""


def job_key(job: Job) -> str:
    """The name of a (sample, repeat) job: `id#repeat`, as seeded orders and resumes read it."""
    return f"{job[0].id}#{job[1]}"


@dataclass(frozen=True)
class Work:
    """What a strategy plans over: the arms' names, the whole run's prompts, this process's slice, what is left."""

    names: tuple[str, ...]
    whole: PromptSet
    own: PromptSet
    repeat: int
    left: Mapping[str, Sequence[Job]]
    """Each arm's jobs still to send (of `own`), in repeat-major order."""
    shard: Shard | None = None
    in_team: bool = False
    """Whether this process is one of a run's worker processes (their turns are the whole run's)."""

    def jobs(self, prompts: PromptSet) -> list[Job]:
        """Every (sample, repeat) of `prompts`: all samples once, then again."""
        return [(sample, repeat) for repeat in range(self.repeat) for sample in prompts.samples]


@dataclass(frozen=True)
class Turn:
    """One arm's part of the release, driven as one: a closed loop of `concurrency`, or each job at its offset."""

    arm: str
    jobs: tuple[Job, ...]
    concurrency: int = 1
    offsets_s: tuple[float, ...] | None = None
    """Open loop: each job's offset (seconds from the turn's start); None: a closed loop."""
    max_concurrency: int | None = None
    batch: int | None = None
    """The lock-step batch or ABBA block index, recorded on every result (None: a single arm's run)."""


@dataclass(frozen=True)
class Plan:
    """A strategy's plan of one run: its turns in order, the connections one process needs, its run-file record."""

    turns: tuple[Turn, ...]
    connections: int
    marker: Interleaving | None = None
    """What each arm's run file records under `interleaved` (the partner arms are added per arm)."""
    own_clock: bool = False
    """Each arm counts time from its own turns only (ABBA blocks); else every record counts from the run's start."""


@dataclass(frozen=True)
class Strategy(abc.ABC):
    """How a run releases work: the one interface every strategy implements (each a frozen dataclass)."""

    kind: ClassVar[str]
    comparison: ClassVar[bool] = False
    """Whether it compares two or more arms (else it runs exactly one)."""

    @abc.abstractmethod
    def plan(self, work: Work) -> Plan:
        """The turns of this run, in the order they run."""

    @abc.abstractmethod
    def split(self, workers: int) -> list[Strategy]:
        """Each of `workers` processes' strategy: its share of the concurrency (or cap), the whole run's turns."""

    def title(self, names: Sequence[str]) -> str:
        """How progress names the run."""
        return f"{self} " + " vs ".join(names)

    def to_dict(self) -> JsonObject:
        """The strategy as JSON-safe data (`from_dict` reads it back)."""
        return {"kind": self.kind, **dataclasses.asdict(self)}

    @staticmethod
    def from_dict(data: JsonMapping) -> Strategy:
        """The strategy `to_dict` wrote; a one-line BenchError for an unknown kind or a field it does not have."""
        kinds: dict[str, type[Strategy]] = {kind.kind: kind for kind in (Concurrent, OpenArrivals, LockStep, Blocks)}
        kind = data.get("kind")
        if not isinstance(kind, str) or kind not in kinds:
            raise BenchError(f"unknown run strategy {kind!r}; known: {', '.join(kinds)}")
        return kinds[kind].from_fields(data)

    @classmethod
    def from_fields(cls, data: JsonMapping) -> Self:
        """The strategy of this kind whose fields `data` holds (a field left out keeps its default)."""
        known = {item.name for item in dataclasses.fields(cls)} | {"kind"}
        unknown = sorted(key for key in data if key not in known)
        if unknown:
            raise BenchError(f"a {cls.kind} run strategy has no field {', '.join(map(repr, unknown))}")
        return cls._read(data)

    @classmethod
    @abc.abstractmethod
    def _read(cls, data: JsonMapping) -> Self:
        """The strategy of this kind from its fields (`from_fields` checked that it has no others)."""


@dataclass(frozen=True)
class Concurrent(Strategy):
    """One arm, `concurrency` workers; each takes the next job as soon as its previous one is done."""

    kind: ClassVar[str] = "concurrent"
    concurrency: int = 1

    @classmethod
    def _read(cls, data: JsonMapping) -> Self:
        """Its concurrency."""
        return cls(whole_field(data, "concurrency", cls.concurrency))

    def __str__(self) -> str:
        """`concurrent@8`."""
        return f"{self.kind}@{self.concurrency}"

    def plan(self, work: Work) -> Plan:
        """One turn: the arm's jobs left, by a closed loop of `concurrency`."""
        name = work.names[0]
        return Plan((Turn(name, tuple(work.left[name]), self.concurrency),), self.concurrency)

    def split(self, workers: int) -> list[Strategy]:
        """The concurrency split: C // N each, the first C % N one more."""
        return [Concurrent(share) for share in worker_shares(self.concurrency, workers)]


@dataclass(frozen=True)
class OpenArrivals(Strategy):
    """One arm, an open loop: jobs arrive on a seeded schedule at `rate` (or a replayed `trace`), capped or not."""

    kind: ClassVar[str] = "arrivals"
    rate: float | None = None
    trace: str | None = None
    process: str = "poisson"
    burstiness: float = 1.0
    arrival_seed: int = 0
    max_concurrency: int | None = None

    @classmethod
    def of(cls, config: RunConfig) -> OpenArrivals:
        """The open loop a run's settings ask for."""
        return cls(config.request_rate, config.trace, config.arrival, config.burstiness, config.arrival_seed,
                   config.max_concurrency)

    @classmethod
    def _read(cls, data: JsonMapping) -> Self:
        """Its rate or trace, process, burstiness, seed and cap."""
        return cls(optional_number_field(data, "rate"), optional_text_field(data, "trace"),
                   text_field(data, "process", cls.process), number_field(data, "burstiness", cls.burstiness),
                   whole_field(data, "arrival_seed", cls.arrival_seed), optional_whole_field(data, "max_concurrency"))

    def __str__(self) -> str:
        """`poisson@2.5/s`, `trace@file.jsonl`, with `,max8` for a cap."""
        text = f"trace@{Path(self.trace).name}" if self.trace is not None else f"{self.process}@{self.rate:g}/s"
        return text + (f",max{self.max_concurrency}" if self.max_concurrency else "")

    def schedule(self, count: int) -> ArrivalSchedule:
        """The arrival schedule for `count` jobs: from the trace, or seeded at the rate."""
        if self.trace is not None:
            return read_trace(self.trace)
        if self.rate is None:
            raise BenchError("an open-loop run needs --request-rate or --trace")
        return arrival_schedule(count, self.rate, process=self.process, burstiness=self.burstiness,
                                seed=self.arrival_seed)

    def release(self, jobs: Sequence[Job]) -> tuple[list[Job], ArrivalSchedule]:
        """The jobs in arrival order and the schedule drawn for them."""
        schedule = self.schedule(len(jobs))
        return order_jobs(jobs, schedule), schedule

    def plan(self, work: Work) -> Plan:
        """One turn at the schedule's offsets; a shard sends its own jobs at the whole run's offsets."""
        name = work.names[0]
        left = work.left[name]
        if work.shard is None:
            ordered, schedule = self.release(left)
            offsets = schedule.offsets_s[:len(ordered)]
        else:  # the schedule is drawn over every job of the whole run, as one process would draw it
            every, schedule = self.release(work.jobs(work.whole))
            own = {sample.id for sample in work.own.samples}
            wanted = {(sample.id, repeat) for sample, repeat in left}
            picked = [(job, offset) for job, offset in zip(every, schedule.offsets_s, strict=True)
                      if job[0].id in own and (job[0].id, job[1]) in wanted]
            ordered, offsets = [job for job, _ in picked], tuple(offset for _, offset in picked)
        turn = Turn(name, tuple(ordered), offsets_s=tuple(offsets), max_concurrency=self.max_concurrency)
        return Plan((turn,), self.max_concurrency or max(1, len(ordered)))

    def split(self, workers: int) -> list[Strategy]:
        """The whole run's schedule in every worker; the cap, if any, split like a concurrency."""
        return list(self.shares(workers))

    def shares(self, workers: int) -> list[OpenArrivals]:
        """Each of `workers` processes' open loop: the whole run's schedule, its share of the cap (if any)."""
        if self.max_concurrency is None:
            return [self] * workers
        return [dataclasses.replace(self, max_concurrency=share)
                for share in worker_shares(self.max_concurrency, workers)]


@dataclass(frozen=True)
class LockStep(Strategy):
    """Arms take turns on batches of `batch` jobs, in an order seeded by `order_seed` per batch."""

    kind: ClassVar[str] = "lockstep"
    comparison: ClassVar[bool] = True
    batch: int = 1
    order_seed: int = 0
    turn_batches: int = 1
    """Batches of `batch` jobs per turn, run by a closed loop of `batch`: with more than one, the drain at the turn's
    end (the faster arm's requests finishing at a lower batch) is a smaller share of the turn."""

    @classmethod
    def _read(cls, data: JsonMapping) -> Self:
        """Its batch, order seed and batches per turn."""
        return cls(whole_field(data, "batch", cls.batch), whole_field(data, "order_seed", cls.order_seed),
                   whole_field(data, "turn_batches", cls.turn_batches))

    def __str__(self) -> str:
        """`lockstep@8`."""
        return f"{self.kind}@{self.batch}"

    @property
    def turn_jobs(self) -> int:
        """Jobs per turn."""
        return self.batch * max(1, self.turn_batches)

    def turns(self, jobs: Sequence[Job], names: Sequence[str]) -> list[Turn]:
        """(batch, arm) turns in the order they run: each batch's arms in their seeded order."""
        if self.batch < 1:
            raise ValueError(f"batch must be >= 1 (got {self.batch})")
        turns = []
        for index, start in enumerate(range(0, len(jobs), self.turn_jobs)):
            batch = tuple(jobs[start:start + self.turn_jobs])
            for name in seeded_order(self.order_seed, [job_key(job) for job in batch], names):
                turns.append(Turn(name, batch, self.batch, batch=index))
        return turns

    def plan(self, work: Work) -> Plan:
        """Every batch of the run (a worker's: the whole run's), each arm in turn."""
        turns = self.turns(work.jobs(work.whole if work.in_team else work.own), work.names)
        own = {sample.id for sample in work.own.samples}
        connections = max([1, *(min(self.batch, sum(job[0].id in own for job in turn.jobs)) for turn in turns)])
        marker: Interleaving = {"order_seed": self.order_seed, "batch": self.batch}
        if self.turn_jobs != self.batch:
            marker["turn_jobs"] = self.turn_jobs
        return Plan(tuple(turns), connections, marker)

    def split(self, workers: int) -> list[Strategy]:
        """Every worker runs the whole run's batches, sending its own jobs of each."""
        return [self] * workers

    def title(self, names: Sequence[str]) -> str:
        """`interleaved a vs b`."""
        return "interleaved " + " vs ".join(names)


LONG_TURN_BATCHES = 4
"""Batches per lock-step turn where the load matters (tune): the drain at a turn's end, when the faster arm's last
requests run at a lower batch, is then about an eighth of the turn rather than half of it."""


def long_turns(batch: int, order_seed: int) -> LockStep:
    """Lock-step turns of `LONG_TURN_BATCHES` batches at concurrency `batch` (one job a turn at concurrency 1,
    where nothing drains)."""
    return LockStep(batch, order_seed, LONG_TURN_BATCHES if batch > 1 else 1)


@dataclass(frozen=True)
class Blocks(Strategy):
    """Arms share one arrival schedule, cut into blocks of `block_size` that every arm runs in turn (ABBA...)."""

    kind: ClassVar[str] = "blocks"
    comparison: ClassVar[bool] = True
    arrivals: OpenArrivals = field(default_factory=OpenArrivals)
    block_size: int | None = None
    """Requests per block (None: about five seconds of arrivals)."""
    order_seed: int = 0
    """Seeds which arm runs the first block."""

    @classmethod
    def _read(cls, data: JsonMapping) -> Self:
        """Its open loop (an object of that strategy's fields), block size and order seed."""
        return cls(OpenArrivals.from_fields(object_field(data, "arrivals")), optional_whole_field(data, "block_size"),
                   whole_field(data, "order_seed", cls.order_seed))

    def __str__(self) -> str:
        """`abba:poisson@2.5/s`."""
        return f"abba:{self.arrivals}"

    def plan(self, work: Work) -> Plan:
        """Every block of the whole run's schedule, its arms forward in even blocks and reversed in odd ones."""
        ordered, schedule = self.arrivals.release(work.jobs(work.whole))
        size = self.block_size or default_block_size(self.arrivals.rate)
        blocks = block_plan(len(ordered), size, work.names, self.order_seed)
        turns = [Turn(name, tuple(ordered[block.start:block.stop]), offsets_s=block_offsets(schedule, block),
                      max_concurrency=self.arrivals.max_concurrency, batch=block.index)
                 for block in blocks for name in block.order]
        marker: Interleaving = {"order_seed": self.order_seed, "block_size": size, "blocks": len(blocks),
                                "schedule": "open loop"}
        return Plan(tuple(turns), self.arrivals.max_concurrency or size, marker, own_clock=True)

    def split(self, workers: int) -> list[Strategy]:
        """Every worker runs the whole run's blocks; the cap, if any, split like a concurrency."""
        return [dataclasses.replace(self, arrivals=arrivals) for arrivals in self.arrivals.shares(workers)]

    def title(self, names: Sequence[str]) -> str:
        """`open loop a vs b`."""
        return "open loop " + " vs ".join(names)


def strategy_for(config: RunConfig, *, arms: int = 1, block_size: int | None = None, order_seed: int = 0,
                 ) -> Strategy:
    """The strategy a run's settings ask for: one arm closed or open loop; arms in lock-step or in ABBA blocks,
    their order seeded by `order_seed`."""
    if arms > 1:
        if config.open_loop:
            return Blocks(OpenArrivals.of(config), block_size, order_seed)
        return LockStep(config.concurrency, order_seed)
    return OpenArrivals.of(config) if config.open_loop else Concurrent(config.concurrency)


def order_jobs(jobs: Sequence[Job], schedule: ArrivalSchedule) -> list[Job]:
    """The jobs in arrival order: a trace's prompt ids pick their sample (next unused repeat), others go in order.

    A trace with fewer arrivals than jobs runs only as many jobs as it has arrivals; more arrivals than jobs is
    an error (nothing to send for them).
    """
    if len(schedule) > len(jobs):
        raise BenchError(f"--trace has {len(schedule)} arrivals for {len(jobs)} requests "
                         "(samples x --repeat); raise --repeat or --limit, or shorten the trace")
    if schedule.prompt_ids is None:
        return list(jobs[:len(schedule)])
    unused = list(jobs)
    ordered: list[Job] = []
    for prompt_id in schedule.prompt_ids:
        pick = next((job for job in unused if prompt_id is None or job[0].id == prompt_id), None)
        if pick is None:
            known = prompt_id in {job[0].id for job in jobs}
            raise BenchError(f"--trace asks for prompt {prompt_id!r} " + (
                "more often than samples x --repeat provide" if known else "that the selected prompts do not hold"))
        unused.remove(pick)
        ordered.append(pick)
    return ordered


def fit_trace(prompts: PromptSet, config: RunConfig) -> tuple[PromptSet, str | None]:
    """The samples a `--trace` shorter than the selection schedules, and a notice saying so (None: it fits).

    Said before anything runs, and the run selects only those samples, so it ends finished instead of asking to
    be resumed for arrivals the trace will never hold. With --repeat > 1 a short trace is refused: which repeats
    it leaves out is no selection of samples.
    """
    if config.trace is None:
        return prompts, None
    jobs = [(sample, repeat) for repeat in range(config.repeat) for sample in prompts.samples]
    schedule = read_trace(config.trace)
    if len(schedule) >= len(jobs):
        return prompts, None
    if config.repeat > 1:
        raise BenchError(f"--trace {config.trace}: {len(schedule)} arrivals for {len(jobs)} requests (samples x "
                         f"--repeat {config.repeat}); lengthen the trace, or lower --repeat or --limit")
    picked = {sample.id for sample, _ in order_jobs(jobs, schedule)}
    kept = tuple(sample for sample in prompts.samples if sample.id in picked)
    categories = tuple(category for category in prompts.categories if any(s.category == category for s in kept))
    return dataclasses.replace(prompts, samples=kept, categories=categories), (
        f"--trace {config.trace} schedules {len(schedule)} arrivals for {len(prompts.samples)} selected samples: "
        f"running the {len(kept)} it schedules")
