"""Joining shard run files (`--shard I/N`) into the one run they are slices of.

A shard's run file carries a `shard` marker: its index and count, and the full run's selected samples and
prompts digest, with its own slice's sample ids in order. Shards merge only when they are the N slices of
one experiment: the same count, full prompts digest and configuration, each index exactly once. The merged
run holds every shard's results in the full schedule's order, its concurrency is the shards' sum (each
shard is a client of its own), its elapsed_s the longest shard's (shards run at once; run files time their
start and end to the second only), and `meta.shards` keeps what each shard recorded about itself.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bench._constants import OVERALL
from bench._errors import BenchError
from bench._types import JsonObject, JsonValue, is_str_list
from bench.records._identity import RunIdentity
from bench.records._meta import RunMeta
from bench.records._results import SampleResult
from bench.records._run import Run
from bench.records._sections import ClientLag, section_object
from bench.records._summary import summarize

SHARD_KEY = "shard"
"""The run-file key of a shard's marker."""


@dataclass(frozen=True, slots=True)
class ShardMarker:
    """What a shard's run file says about its slice: index, count, and the full run's identity."""

    index: int
    count: int
    prompts_sha256: str
    selected_samples: int
    sample_ids: tuple[str, ...]
    ids_sha256: str | None = None
    """A sha256 over the full run's sample ids in schedule order (None in files written before it was kept): the
    slices' ids, put back in order, must hash to it, so an id changed in one shard file is caught without the
    prompt set."""

    @classmethod
    def from_run(cls, run: Run) -> ShardMarker:
        """Read a run's marker; a one-line BenchError when it has none or it is malformed."""
        source = run.path or "a run"
        data = run.meta.get(SHARD_KEY)
        if not isinstance(data, Mapping):
            raise BenchError(f"{source}: not a shard's run file (no shard marker; runs made with --shard I/N have one)")
        index, count, ids = data.get("index"), data.get("count"), data.get("sample_ids")
        digest, selected = data.get("prompts_sha256"), data.get("selected_samples")
        ids_digest = data.get("ids_sha256")
        if not (
            isinstance(index, int) and isinstance(count, int) and 0 <= index < count
            and isinstance(digest, str) and isinstance(selected, int) and is_str_list(ids)
            and (ids_digest is None or isinstance(ids_digest, str))
        ):
            raise BenchError(f"{source}: its shard marker is malformed ({dict(data)!r:.120})")
        return cls(index, count, digest, selected, tuple(ids), ids_digest)

    def to_dict(self) -> JsonObject:
        """The marker as the run file keeps it."""
        marker: JsonObject = {"index": self.index, "count": self.count, "prompts_sha256": self.prompts_sha256,
                              "selected_samples": self.selected_samples, "sample_ids": list(self.sample_ids)}
        if self.ids_sha256 is not None:
            marker["ids_sha256"] = self.ids_sha256
        return marker


def ids_digest(sample_ids: Sequence[str]) -> str:
    """A sha256 over sample ids in order (the full run's schedule, before it is cut into shards)."""
    return hashlib.sha256(json.dumps(list(sample_ids)).encode("utf-8")).hexdigest()


def shard_marker(index: int, count: int, prompts_sha256: str, selected_samples: int,
                 sample_ids: Sequence[str], all_ids: Sequence[str] | None = None) -> JsonObject:
    """The marker a shard's run records under `meta.shard`: the full run's digests and size (`all_ids`: its sample
    ids in schedule order), and its own ids."""
    return ShardMarker(index, count, prompts_sha256, selected_samples, tuple(sample_ids),
                       ids_digest(all_ids) if all_ids is not None else None).to_dict()


SAME_CONFIG_EXCEPT = frozenset({"label"})
"""Config keys shards may differ in (a label only names a file)."""


def merge_shards(runs: Sequence[Run], *, vary: frozenset[str] = SAME_CONFIG_EXCEPT, part: str = "shard",
                 allow_missing: bool = False) -> Run:
    """The one run of which `runs` are the N shards; a one-line BenchError when they are not exactly that.

    `vary` names the config keys the parts may differ in; `part` names them in the merged meta (`meta.shards`,
    or `meta.workers` for one run's worker processes) and its warnings. `allow_missing` joins the slices there
    are (a worker that died before it recorded anything), so what the others finished is kept.
    """
    if not runs:
        raise BenchError("merge needs the shard run files to join")
    markers = [ShardMarker.from_run(run) for run in runs]
    first, first_marker = runs[0], markers[0]
    name = lambda run: run.path or "a run"  # noqa: E731
    for run, marker in zip(runs[1:], markers[1:], strict=True):
        _check_same_experiment(first, first_marker, run, marker, name, vary)
    by_index: dict[int, Run] = {}
    for run, marker in zip(runs, markers, strict=True):
        if marker.index in by_index:
            raise BenchError(f"shard {marker.index}/{marker.count} given twice: {name(by_index[marker.index])} and "
                             f"{name(run)}")
        by_index[marker.index] = run
    missing = [f"{index}/{first_marker.count}" for index in range(first_marker.count) if index not in by_index]
    if missing and not allow_missing:
        raise BenchError(f"missing shard(s) {', '.join(missing)} of {first_marker.count}: a merged run must hold "
                         "every slice")
    repeat = first.config.get("repeat")
    repeat = repeat if isinstance(repeat, int) and not isinstance(repeat, bool) and repeat >= 1 else 1
    total = first_marker.selected_samples // repeat
    for run, marker in zip(runs, markers, strict=True):
        expected = len(range(marker.index, total, marker.count))
        if len(marker.sample_ids) != expected:
            raise BenchError(f"{name(run)}: its marker lists {len(marker.sample_ids)} sample ids, but slice "
                             f"{marker.index}/{marker.count} of the run's {total} samples holds {expected}: these "
                             "are not its slice of the prompt set")
    owner: dict[str, int] = {}
    position: dict[str, int] = {}
    for marker in markers:
        for local, sample_id in enumerate(marker.sample_ids):
            if sample_id in owner:
                raise BenchError(f"sample {sample_id!r} is in shards {owner[sample_id]} and {marker.index}: these "
                                 "are not slices of one run")
            owner[sample_id] = marker.index
            position[sample_id] = local * marker.count + marker.index
    _check_ids(markers, position, [name(run) for run in runs], complete=not missing)
    ordered = sorted(markers, key=lambda marker: marker.index)
    results: list[SampleResult] = []
    for marker in ordered:
        run = by_index[marker.index]
        strays = [result.id for result in run.results if owner.get(result.id) != marker.index]
        if strays:
            raise BenchError(f"{name(run)}: holds sample {strays[0]!r}, which is not in its slice")
        results.extend(run.results)
    results.sort(key=lambda result: (result.repeat, position[result.id]))
    done = {(result.id, result.repeat) for result in results}
    unfinished = [(sample_id, index) for index in range(repeat)
                  for sample_id in sorted(owner, key=position.__getitem__) if (sample_id, index) not in done]
    return _merged_run(ordered, by_index, results, first_marker, part, unfinished)


def _check_ids(markers: Sequence[ShardMarker], position: Mapping[str, int], names: Sequence[str], *,
               complete: bool) -> None:
    """Refuse slices whose sample ids, put back in schedule order, are not the run's (an id changed in a file)."""
    digests = {marker.ids_sha256 for marker in markers}
    if digests == {None}:
        return  # shard files written before the ids' digest was kept: only a prompt set can check them
    if len(digests) > 1:
        raise BenchError(f"shards of different runs: {', '.join(names)} record different sample ids for the run")
    if complete and ids_digest(sorted(position, key=position.__getitem__)) != digests.pop():
        raise BenchError(f"{', '.join(names)}: the slices' sample ids do not make up the run they were cut from (an "
                         "id was changed in a shard's file)")


def _check_same_experiment(first: Run, first_marker: ShardMarker, run: Run, marker: ShardMarker,
                           name: Callable[[Run], str], vary: frozenset[str]) -> None:
    """Refuse a shard of another experiment than the first one's, naming what differs."""
    where = f"{name(first)} and {name(run)}"
    if marker.count != first_marker.count:
        raise BenchError(f"shards of different runs: {where} split into {first_marker.count} and {marker.count}")
    if marker.prompts_sha256 != first_marker.prompts_sha256 or marker.selected_samples != first_marker.selected_samples:
        raise BenchError(f"shards of different runs: {where} were cut from different prompt sets")
    identity = RunIdentity.of(first.config).resume_mismatches(RunIdentity.of(run.config))
    differing = [mismatch for mismatch in identity if mismatch.key not in vary]
    if differing:
        raise BenchError(f"shards of different runs: {where} differ: {differing[0].message()}")
    keys = sorted((set(first.config) | set(run.config)) - vary)
    for key in keys:
        if first.config.get(key) != run.config.get(key):
            raise BenchError(f"shards of different runs: {where} differ in config {key!r} "
                             f"({first.config.get(key)!r:.60} vs {run.config.get(key)!r:.60})")
    for key in ("engine", "harness"):
        if first.meta.get(key) != run.meta.get(key):
            raise BenchError(f"shards of different runs: {where} differ in {key} "
                             f"({first.meta.get(key)!r:.60} vs {run.meta.get(key)!r:.60})")


def _merged_run(ordered: list[ShardMarker], by_index: Mapping[int, Run], results: list[SampleResult],
                marker: ShardMarker, part: str, missing: Sequence[tuple[str, int]] = ()) -> Run:
    """Build the merged Run: joined results, summed concurrency, meta of the whole plus each shard's own; samples
    of the slices that have no result (`missing`: id, repeat) make it interrupted, and are named."""
    runs = [by_index[item.index] for item in ordered]
    first = runs[0]
    config = dict(first.config)
    config.pop("label", None)
    concurrency = [run.settings.concurrency for run in runs]
    if all(value is not None for value in concurrency):
        config["concurrency"] = sum(value for value in concurrency if value is not None)
    started = [time for run in runs if isinstance(time := run.meta.get("started_at"), str)]
    finished = [time for run in runs if isinstance(time := run.meta.get("finished_at"), str)]
    elapsed = [float(seconds) for run in runs if isinstance(seconds := run.meta.get("elapsed_s"), int | float)]
    warnings: list[JsonValue] = [f"{part} {item.index}/{item.count}: {warning}"
                                 for item, run in zip(ordered, runs, strict=True) for warning in run.info.warnings]
    interrupted = any(run.info.interrupted for run in runs) or bool(missing)
    if missing:
        shown = ", ".join(f"{sample_id}" + (f" (repeat {index})" if index else "") for sample_id, index in missing[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        warnings.append(f"{len(missing)} of the {part}s' {marker.selected_samples} selected samples have no result: "
                        f"{shown}{more}")
    if len(runs) > 1:
        warnings.append(
            f"merged from {len(runs)} {part}s; run-wide acceptance from the servers' counters is not summed "
            f"({part}s that share a server count each other's drafts): per-sample figures and meta.{part}s keep it"
        )
    meta = {key: value for key, value in first.meta.items() if key != "shard"}
    meta.update({
        "started_at": min(started, default=None),
        "finished_at": max(finished, default=None),
        "elapsed_s": max(elapsed, default=None),  # the parts run at once: the longest one's time
        "prompts_sha256": marker.prompts_sha256,
        "interrupted": interrupted,
        "warnings": warnings,
        "client_lag": section_object(_worst_lag(runs)),
        "acceptance": first.meta.get("acceptance") if len(runs) == 1 else None,
        f"{part}s": [
            {"index": item.index, "count": item.count, "path": run.path, "machine": run.meta.get("machine"),
             "started_at": run.meta.get("started_at"), "finished_at": run.meta.get("finished_at"),
             "elapsed_s": run.meta.get("elapsed_s"), "client_lag": run.meta.get("client_lag"),
             "acceptance": run.meta.get("acceptance"), "samples": len(item.sample_ids)}
            for item, run in zip(ordered, runs, strict=True)
        ],
    })
    categories = [row.category for row in first.summary if row.get("category") != OVERALL]
    return Run(
        config=config,
        selected_samples=marker.selected_samples,
        results=tuple(results),
        summary=tuple(summarize(results, categories or None)),
        meta=RunMeta.from_mapping(meta),
        path=None,
    )


def _worst_lag(runs: Sequence[Run]) -> ClientLag | None:
    """The client-lag summary of the shard whose loop lagged most (p99), or None."""
    lags = [run.info.client_lag for run in runs if run.info.client_lag is not None]
    return max(lags, key=lambda lag: lag.get("p99_ms") or 0.0, default=None)
