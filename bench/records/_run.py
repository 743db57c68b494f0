"""The run file: a finished or interrupted run, saved atomically and loaded from any known version.

A run file is a JSON object that is a superset of what llama.cpp's `speed_bench.py --output`
writes, so each tool reads the other's files. The format history is in `_schema.py`.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from bench._constants import OVERALL
from bench._errors import BenchError
from bench._inputs import read_input_text
from bench._redact import masked_by_key, redact_tree
from bench._types import JsonMapping, JsonObject, JsonValue
from bench.records._in_flight import Load, run_load
from bench.records._journal import read_journal
from bench.records._json import reference_json
from bench.records._layout import BASELINE, SPECULATIVE, is_journal, run_file
from bench.records._lock import open_no_follow
from bench.records._meta import RecordedSettings, RunMeta, ServerStart
from bench.records._results import (
    MAX_NUMBER,
    SampleResult,
    checked_text,
    latest_by_key,
    redacted_result,
    result_from_dict,
)
from bench.records._schema import LOAD_KEY, SCHEMA_VERSION, upgrade
from bench.records._summary import SUMMARY_KEYS, SummaryRow, summarize


@dataclass(frozen=True)
class Run:
    """A finished (or interrupted) benchmark run: its configuration, results and summary."""

    config: JsonMapping  # the recorded `config` object as written (`settings` reads it typed)
    selected_samples: int
    results: tuple[SampleResult, ...]
    summary: tuple[SummaryRow, ...]  # rows given as mappings are read into SummaryRows
    meta: RunMeta = field(default_factory=lambda: RunMeta(written=frozenset()))  # a mapping is read into one
    path: str | None = None

    def __post_init__(self) -> None:
        """Hold the summary and metadata typed: mappings (a run file's keys) are read once here."""
        if not all(isinstance(row, SummaryRow) for row in self.summary):
            object.__setattr__(self, "summary", tuple(SummaryRow.from_mapping(row) for row in self.summary))
        if not isinstance(self.meta, RunMeta):
            object.__setattr__(self, "meta", RunMeta.from_mapping(self.meta))

    @property
    def info(self) -> RunMeta:
        """The run's metadata, typed (the same object as `meta`)."""
        return self.meta

    @cached_property
    def latest(self) -> tuple[SampleResult, ...]:
        """The last attempt of each (sample, repeat), in first-seen order: what analysis reads (computed once)."""
        return tuple(latest_by_key(self.results))

    @cached_property
    def settings(self) -> RecordedSettings:
        """The run's configuration, typed."""
        return RecordedSettings.from_mapping(self.config)

    @property
    def completed_samples(self) -> int:
        """How many samples finished successfully."""
        return sum(1 for result in self.results if result.ok)

    @property
    def failed_samples(self) -> int:
        """How many samples failed."""
        return sum(1 for result in self.results if not result.ok)

    @cached_property
    def load(self) -> Load:
        """The concurrency asked for and the in-flight mean the run achieved, recomputed from its samples."""
        turn = (self.meta.interleaved or {}).get("turn_jobs")
        return run_load(self.latest, self.settings.concurrency, turn if isinstance(turn, int) else None)

    @property
    def schema_version(self) -> int:
        """The format version the run was written in (0 for reference files)."""
        return self.meta.schema_version

    def to_dict(self) -> JsonObject:
        """The run file as a JSON-ready dict (reference keys plus speedbench's), secrets redacted.

        The metadata, the config and each error are text a server or a user may have put a secret in:
        each passes through `redact_tree` (outputs are the model's text and are kept as they are).
        """
        payload: JsonObject = redact_tree(dict(self.meta))
        payload.update(
            {
                "schema_version": SCHEMA_VERSION,
                "config": redact_tree(masked_options(self.config)),
                "selected_samples": self.selected_samples,
                "completed_samples": self.completed_samples,
                "failed_samples": self.failed_samples,
                "summary": [dict(row) for row in self.summary],
                "results": [redacted_result(result) for result in self.results],
                LOAD_KEY: self.load.to_dict(),
            }
        )
        return payload


def masked_options(config: JsonMapping) -> JsonObject:
    """A recorded config with every secret-named key of its JSON options masked, at any depth."""
    data = dict(config)
    for name in ("extra_inputs", "chat_template_kwargs"):
        if isinstance(data.get(name), dict):
            data[name] = masked_by_key(data[name])
    return data


def dumps_run(run: Run) -> str:
    """Serialise a run as the reference does: keys sorted, indent 2 (NaN and infinities as null)."""
    return reference_json(run.to_dict()).decode("ascii")


def save_run(run: Run, path: str | os.PathLike[str], *, force: bool = True) -> None:
    """Write a run file atomically (temp file, fsync, rename); refuse to overwrite unless `force`."""
    target = Path(path)
    if target.exists() and not force:
        raise BenchError(f"{target}: exists; pass --force to overwrite it")
    if target.parent and not target.parent.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    payload = run.to_dict()
    temp.unlink(missing_ok=True)  # a leftover (or a planted link) is removed, never written through
    try:
        with open_no_follow(temp, "xb") as handle:
            handle.write(reference_json(payload))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def run_from_dict(data: JsonValue, source: str) -> Run:
    """Build a Run from a parsed run file of any known version; raise BenchError naming the problem."""
    if not isinstance(data, dict):
        raise BenchError(f"{source}: not a run file (the top level is not a JSON object)")
    data = upgrade(data, source)
    stored = data.get("summary")
    if not isinstance(stored, list) or not all(isinstance(row, dict) for row in stored):
        raise BenchError(f"{source}: does not contain a summary list")
    summary: Sequence[JsonMapping] = [row for row in stored if isinstance(row, dict)]
    for row in summary:
        check_summary_row(row, source)
    results_raw = data.get("results", [])
    if not isinstance(results_raw, list):
        raise BenchError(f"{source}: 'results' is not a list")
    results = tuple(result_from_dict(item, source) for item in results_raw)
    differs = None
    if results:
        summary, differs = summary_from_results(summary, results, source)
    config = data.get("config") or {}
    if not isinstance(config, dict):
        raise BenchError(f"{source}: 'config' is not a JSON object")
    start = ServerStart.from_mapping(data.get("server_start"))
    if start is not None and start.problem():
        raise BenchError(f"{source}: server_start contradicts itself ({start.problem()}): not a snapshot a server "
                         "could report")
    selected = data.get("selected_samples", len(results))
    meta = {
        key: value
        for key, value in data.items()
        if key not in {"config", "selected_samples", "completed_samples", "failed_samples", "summary", "results"}
    }
    if differs:
        stored_warnings = meta.get("warnings")
        warnings = stored_warnings if isinstance(stored_warnings, list) else []
        meta["warnings"] = [*warnings, f"the stored summary did not match the samples ({differs}): every summary "
                                       "row is recomputed from the samples"]
    return Run(
        config=config,
        selected_samples=int(selected) if isinstance(selected, int) else len(results),
        results=results,
        summary=tuple(SummaryRow.from_mapping(row) for row in summary),
        meta=RunMeta.from_mapping(meta),
        path=source,
    )


SUMMARY_NUMBERS = ("requests", "turns", "failed", "avg_prompt_t_s", "avg_pred_t_s", "avg_latency", "draft_n",
                   "accepted", "accept_rate")
"""Summary row keys that hold a number (or null)."""


def check_summary_row(row: JsonMapping, source: str) -> None:
    """Refuse a summary row whose category is not valid text or whose figures are not numbers in range (or null)."""
    if not isinstance(row.get("category"), str):
        raise BenchError(f"{source}: a summary row's category is {str(row.get('category'))[:80]!r}, not a string")
    checked_text(row["category"], f"{source}: a summary row's category")
    for key in SUMMARY_NUMBERS:
        value = row.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise BenchError(f"{source}: summary row {row['category']!r} field {key!r} is {str(value)[:80]!r}, "
                             "not a number")
        if value is not None and not -MAX_NUMBER < value < MAX_NUMBER and value == value and abs(value) != math.inf:
            raise BenchError(f"{source}: summary row {row['category']!r} field {key!r} is out of range "
                             f"(beyond +-{MAX_NUMBER:g})")


def summary_from_results(
    summary: Sequence[JsonMapping], results: tuple[SampleResult, ...], source: str
) -> tuple[Sequence[JsonMapping], str | None]:
    """The summary its results give, and what of the stored one differed (None when it matches). The reference
    table is read from the summary: checked against the samples, an edited one can never contradict the statistics
    beside it. A matching summary is kept as written (its bytes unchanged); one that differs is recomputed (other
    tools' keys kept). Samples recorded twice are refused."""
    stored = {str(row.get("category")): row for row in summary}
    order = [category for category in stored if category != OVERALL]
    differs = _summary_difference(stored, _quick_rows(results, order, source))
    if differs is None:
        return summary, None
    rows: list[JsonMapping] = []
    for row in summarize(results, order):
        given = stored.get(row.category)
        extra = {key: value for key, value in given.items() if key not in SUMMARY_KEYS} if given is not None else {}
        written = frozenset(SUMMARY_KEYS).intersection(given) if given is not None else frozenset(SUMMARY_KEYS)
        rows.append(replace(row, extra=extra, written=written | {"category"}))
    return rows, differs


def _quick_rows(results: tuple[SampleResult, ...], order: list[str], source: str
                ) -> dict[str, dict[str, float | None]]:
    """Each category's summary figures (and overall's) in one pass, with exactly rounded sums (`math.fsum`): within
    an ulp of `summarize`'s means, at a tenth of its cost on a large run; a sample recorded twice is refused."""
    keys: set[tuple[str, int]] = set()
    columns: dict[str, dict[str, list[float]]] = {category: {} for category in order}
    for result in results:
        if result.key in keys:
            raise BenchError(f"{source}: sample {result.id!r} (repeat {result.repeat}) is recorded twice")
        keys.add(result.key)
        for category in (result.category, OVERALL):
            own = columns.setdefault(category, {})
            if not result.ok:
                own.setdefault("failed", []).append(1.0)
                continue
            for name, value in (("requests", 1.0), ("turns", result.turns), ("avg_latency", result.latency_s),
                                ("avg_prompt_t_s", result.prompt_per_second),
                                ("avg_pred_t_s", result.predicted_per_second), ("draft_n", result.draft_n),
                                ("accepted", result.draft_n_accepted)):
                if value is not None:
                    own.setdefault(name, []).append(float(value))
    columns.setdefault(OVERALL, {})
    rows = {}
    for category, own in columns.items():
        sums = {name: math.fsum(values) for name, values in own.items()}
        means = {name: (sums[name] / len(own[name]) if own.get(name) else None)
                 for name in ("avg_latency", "avg_prompt_t_s", "avg_pred_t_s")}
        drafted, accepted = sums.get("draft_n", 0.0), sums.get("accepted", 0.0)
        rows[category] = {"requests": sums.get("requests", 0.0), "turns": sums.get("turns", 0.0),
                          "failed": sums.get("failed", 0.0), **means, "draft_n": drafted, "accepted": accepted,
                          "accept_rate": accepted / drafted if drafted > 0 else None}
    return rows


def _summary_difference(stored: Mapping[str, JsonMapping], computed: Mapping[str, Mapping[str, float | None]]
                        ) -> str | None:
    """The first way the stored summary differs from the one its samples give, or None."""
    for category, figures in computed.items():
        given = stored.get(category)
        if given is None:
            if figures["requests"] or figures["failed"]:
                return f"it has no row for category {category!r}"
            continue
        for key in SUMMARY_NUMBERS:
            if key in given and not _same_number(given[key], figures[key]):
                return f"row {category!r} {key} {given[key]!r}, its results {figures[key]!r}"
    return None


def _same_number(given: JsonValue, expected: float | None) -> bool:
    """Whether a stored summary figure (a number or null, as `check_summary_row` lets through) is the one
    recomputed (NaN or null as unknown, rounding forgiven)."""
    if isinstance(given, float) and not math.isfinite(given):
        given = None
    if given is None or expected is None:
        return given is None and expected is None
    return isinstance(given, int | float) and math.isclose(float(given), expected, rel_tol=1e-9, abs_tol=1e-9)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector, restoring its state after (a context manager, or a decorator).

    Parsing a run file and building its records, or comparing two runs, makes millions of objects that hold no
    cycles; with the collector on, every burst of allocations sets off a pass over all of them (loading 50,000
    records takes about twice as long with the collector on).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@collector_paused()
def load_run(path: str | os.PathLike[str]) -> Run:
    """Load a run file (speedbench's or the reference's JSON, or a speedbench journal `.jsonl`)."""
    source = str(path)
    if is_journal(source):
        header, journalled = read_journal(source)
        results = latest_by_key(journalled)
        config = header.get("config", {})
        if not isinstance(config, dict):
            raise BenchError(f"{source}: 'config' is not a JSON object")
        selected = header.get("selected_samples", len(results))
        meta = {key: value for key, value in header.items() if key not in {"type", "config", "selected_samples"}}
        summary = summarize(results)
        return Run(
            config=config,
            selected_samples=int(selected) if isinstance(selected, int | float | str) else len(results),
            results=tuple(results),
            summary=tuple(summary),
            meta=RunMeta.from_mapping(meta),
            path=source,
        )
    try:
        text = read_input_text(source)
    except FileNotFoundError:
        raise BenchError(f"{source}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"{source}: cannot be read ({exc.__class__.__name__}: {exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BenchError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise BenchError(f"{source}: not a run file (JSON nested too deeply to read)") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise BenchError(f"{source}: not a run file ({str(exc)[:120]})") from None
    return run_from_dict(data, source)


def load_comparison_folder(path: str | os.PathLike[str]) -> tuple[Run, Run]:
    """Load a comparison folder (`baseline.json` and `speculative.json`, as `speedbench bench` writes them)."""
    folder = Path(path)
    base, spec = run_file(folder, BASELINE), run_file(folder, SPECULATIVE)
    if not base.exists() or not spec.exists():
        raise BenchError(f"{folder}: a comparison folder needs baseline.json and speculative.json")
    return load_run(base), load_run(spec)


def runs_complete(folder: str | os.PathLike[str], arms: Iterable[str]) -> bool:
    """Whether a folder holds a finished run file for every arm (each present, not interrupted, every sample in)."""
    for arm in arms:
        path = run_file(folder, arm)
        if not path.exists():
            return False
        run = load_run(path)
        if run.info.interrupted or len(run.results) < run.selected_samples:
            return False
    return True
