"""An open-loop run's jobs and arrival offsets: a seeded schedule over the planned jobs, or a replayed trace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bench._errors import BenchError
from bench.prompts import PromptSet, Sample, Shard
from bench.runner._arrivals import ArrivalSchedule, arrival_schedule, load_trace
from bench.runner._config import RunConfig
from bench.runner._schedule import OpenLoop

Job = tuple[Sample, int]


def arrivals_for(config: RunConfig, count: int) -> ArrivalSchedule:
    """The run's arrival schedule for `count` jobs: from `--trace`, or seeded at `--request-rate`."""
    if config.trace is not None:
        return load_trace(config.trace)
    if config.request_rate is None:
        raise BenchError("an open-loop run needs --request-rate or --trace")
    return arrival_schedule(count, config.request_rate, process=config.arrival, burstiness=config.burstiness,
                            seed=config.seed)


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
    schedule = load_trace(config.trace)
    if len(schedule) >= len(jobs):
        return prompts, None
    if config.repeat > 1:
        raise BenchError(f"--trace {config.trace}: {len(schedule)} arrivals for {len(jobs)} requests (samples x "
                         f"--repeat {config.repeat}); lengthen the trace, or lower --repeat or --limit")
    picked = {sample.id for sample, _ in order_jobs(jobs, schedule)}
    kept = tuple(sample for sample in prompts.samples if sample.id in picked)
    categories = tuple(category for category in prompts.categories if any(s.category == category for s in kept))
    return replace(prompts, samples=kept, categories=categories), (
        f"--trace {config.trace} schedules {len(schedule)} arrivals for {len(prompts.samples)} selected samples: "
        f"running the {len(kept)} it schedules")


def open_loop(config: RunConfig, jobs: Sequence[Job]) -> tuple[list[Job], OpenLoop, ArrivalSchedule]:
    """The jobs in arrival order, the schedule that releases them and the arrivals it was built from."""
    schedule = arrivals_for(config, len(jobs))
    ordered = order_jobs(jobs, schedule)
    return ordered, OpenLoop(schedule.offsets_s[:len(ordered)], config.max_concurrency), schedule


def shard_open_loop(
    config: RunConfig, prompts: PromptSet, shard: Shard, left: Sequence[Job]
) -> tuple[list[Job], OpenLoop]:
    """A shard's jobs still to send (`left`), in the full run's arrival order, each at the full schedule's offset.

    The schedule is drawn over every job of the whole run, as one process would draw it, so the shards of a run
    together offer exactly its arrivals (the same seed, the same offsets, the same prompt at each).
    """
    every = [(sample, repeat) for repeat in range(config.repeat) for sample in prompts.samples]
    ordered, schedule, _ = open_loop(config, every)
    own = {sample.id for sample in shard.select(prompts.samples)}
    wanted = {(sample.id, repeat) for sample, repeat in left}
    picked = [(job, offset) for job, offset in zip(ordered, schedule.offsets_s, strict=True)
              if job[0].id in own and (job[0].id, job[1]) in wanted]
    return [job for job, _ in picked], OpenLoop([offset for _, offset in picked], config.max_concurrency)
