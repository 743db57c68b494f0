"""Run records: immutable results, the versioned run file and its crash-safe JSONL journal.

This module is the only contract between running and analysing. A run file is a JSON object
that is a superset of what llama.cpp's `speed_bench.py --output` writes, so each tool reads the
other's files. Format history (`schema_version`):

- 0: a file written by llama.cpp's `speed_bench.py` (it has no `schema_version`): `config`,
  `selected_samples`, `completed_samples`, `failed_samples`, `summary`, `results`.
- 1: speedbench 0.1. Adds `schema_version`, `harness`, `started_at`, `finished_at`,
  `elapsed_s`, `engine`, `server`, `acceptance`, `warnings`, and per result `repeat`,
  `sub_category`, `outputs`, `reasoning`, `cache_n`, `ttft_s`, `itl_s`, `e2e_s`,
  `client_decode_t_s`, `error_kind`, `retries`, `spec`.

Files of an older version are upgraded on load; unknown newer versions are refused.
The journal (`<output>.jsonl`) holds a header line and one line per finished sample, appended
and flushed as samples finish, so an interrupted run keeps its results and can be resumed.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from bench._errors import BenchError

SCHEMA_VERSION = 1



@dataclass(frozen=True, slots=True)
class SampleResult:
    """One sample's outcome (all its turns), as the reference records it plus speedbench's extras."""

    id: str
    category: str
    ok: bool
    turns: int
    latency_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    finish_reason: str | None = None
    draft_n: int = 0
    draft_n_accepted: int = 0
    prompt_ms: float | None = None
    predicted_ms: float | None = None
    prompt_per_second: float | None = None
    predicted_per_second: float | None = None
    error: str | None = None
    repeat: int = 0
    sub_category: str | None = None
    outputs: tuple[str, ...] = ()
    reasoning: tuple[str, ...] = ()
    cache_n: int | None = None
    ttft_s: float | None = None
    itl_s: tuple[float, ...] = ()
    e2e_s: float | None = None
    client_decode_t_s: float | None = None
    error_kind: str | None = None
    retries: int = 0
    spec: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON-ready dict (tuples serialise as JSON arrays)."""
        out = {name: getattr(self, name) for name in _RESULT_FIELD_NAMES}
        if type(self.spec) is not dict:
            out["spec"] = dict(self.spec)
        return out

    @property
    def key(self) -> tuple[str, int]:
        """The pairing key: sample id and repeat index."""
        return (self.id, self.repeat)


_RESULT_FIELD_NAMES = tuple(f.name for f in fields(SampleResult))
_TUPLE_FIELDS = {"outputs", "reasoning", "itl_s"}


def result_from_dict(data: Mapping[str, Any], source: str = "result") -> SampleResult:
    """Build a SampleResult from a dict, ignoring unknown keys; raise BenchError when it is malformed."""
    if not isinstance(data, Mapping):
        raise BenchError(f"{source}: a result is not a JSON object")
    for key in ("id", "category", "ok"):
        if key not in data:
            raise BenchError(f"{source}: a result lacks {key!r}")
    kwargs: dict[str, Any] = {name: data[name] for name in _RESULT_FIELD_NAMES if name in data}
    for name in _TUPLE_FIELDS.intersection(kwargs):
        value = kwargs[name]
        if value is None:
            del kwargs[name]
        elif not isinstance(value, list):
            raise BenchError(f"{source}: result {data['id']!r} field {name!r} is not a list")
        else:
            kwargs[name] = tuple(value)
    if "spec" in kwargs:
        kwargs["spec"] = dict(kwargs["spec"]) if isinstance(kwargs["spec"], Mapping) else {}
    kwargs["id"] = str(kwargs["id"])
    kwargs["category"] = str(kwargs["category"])
    kwargs["ok"] = bool(kwargs["ok"])
    kwargs.setdefault("turns", 1)
    kwargs.setdefault("latency_s", 0.0)
    for name in ("prompt_tokens", "completion_tokens", "total_tokens", "draft_n", "draft_n_accepted", "turns"):
        if kwargs.get(name) is None:
            kwargs[name] = 0
    for name in ("latency_s", "prompt_ms", "predicted_ms", "prompt_per_second", "predicted_per_second"):
        value = kwargs.get(name)
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
            raise BenchError(f"{source}: result {kwargs['id']!r} field {name!r} is not a number")
    return SampleResult(**kwargs)


@dataclass(frozen=True)
class Run:
    """A finished (or interrupted) benchmark run: its configuration, results and summary."""

    config: Mapping[str, Any]
    selected_samples: int
    results: tuple[SampleResult, ...]
    summary: tuple[Mapping[str, Any], ...]
    meta: Mapping[str, Any] = field(default_factory=dict)
    path: str | None = None

    @property
    def completed_samples(self) -> int:
        """How many samples finished successfully."""
        return sum(1 for result in self.results if result.ok)

    @property
    def failed_samples(self) -> int:
        """How many samples failed."""
        return sum(1 for result in self.results if not result.ok)

    @property
    def schema_version(self) -> int:
        """The format version the run was written in (0 for reference files)."""
        return int(self.meta.get("schema_version", SCHEMA_VERSION))

    def to_dict(self) -> dict[str, Any]:
        """The run file as a JSON-ready dict (reference keys plus speedbench's)."""
        payload: dict[str, Any] = dict(self.meta)
        payload.update(
            {
                "schema_version": SCHEMA_VERSION,
                "config": dict(self.config),
                "selected_samples": self.selected_samples,
                "completed_samples": self.completed_samples,
                "failed_samples": self.failed_samples,
                "summary": [dict(row) for row in self.summary],
                "results": [result.to_dict() for result in self.results],
            }
        )
        return payload


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def dumps_run(run: Run) -> str:
    """Serialise a run as the reference does: keys sorted, indent 2 (NaN and infinities as null)."""
    payload = run.to_dict()
    try:
        return json.dumps(payload, indent=2, sort_keys=True, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(payload), indent=2, sort_keys=True, allow_nan=False)


def save_run(run: Run, path: str | os.PathLike[str], *, force: bool = True) -> None:
    """Write a run file atomically (temp file, fsync, rename); refuse to overwrite unless `force`."""
    target = Path(path)
    if target.exists() and not force:
        raise BenchError(f"{target}: exists; pass --force to overwrite it")
    if target.parent and not target.parent.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    payload = run.to_dict()
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            try:
                json.dump(payload, handle, indent=2, sort_keys=True, allow_nan=False)  # streamed: no big string
            except ValueError:  # a NaN or infinity somewhere: write it again with nulls
                handle.seek(0)
                handle.truncate()
                json.dump(_finite(payload), handle, indent=2, sort_keys=True, allow_nan=False)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _upgrade(data: dict[str, Any], source: str) -> dict[str, Any]:
    version = data.get("schema_version", 0)
    if not isinstance(version, int) or version < 0:
        raise BenchError(f"{source}: schema_version {version!r} is not a non-negative integer")
    if version > SCHEMA_VERSION:
        raise BenchError(
            f"{source}: written by a newer speedbench (schema_version {version} > {SCHEMA_VERSION}); upgrade speedbench"
        )
    if version == 0:
        data = dict(data)
        data.setdefault("harness", {"name": "speed_bench.py", "version": None})
        data["schema_version"] = 0
    return data


def run_from_dict(data: Any, source: str) -> Run:
    """Build a Run from a parsed run file of any known version; raise BenchError naming the problem."""
    if not isinstance(data, dict):
        raise BenchError(f"{source}: not a run file (the top level is not a JSON object)")
    data = _upgrade(data, source)
    summary = data.get("summary")
    if not isinstance(summary, list) or not all(isinstance(row, dict) for row in summary):
        raise BenchError(f"{source}: does not contain a summary list")
    results_raw = data.get("results", [])
    if not isinstance(results_raw, list):
        raise BenchError(f"{source}: 'results' is not a list")
    results = tuple(result_from_dict(item, source) for item in results_raw)
    config = data.get("config") or {}
    if not isinstance(config, dict):
        raise BenchError(f"{source}: 'config' is not a JSON object")
    selected = data.get("selected_samples", len(results))
    meta = {
        key: value
        for key, value in data.items()
        if key not in {"config", "selected_samples", "completed_samples", "failed_samples", "summary", "results"}
    }
    return Run(
        config=config,
        selected_samples=int(selected) if isinstance(selected, int) else len(results),
        results=results,
        summary=tuple(summary),
        meta=meta,
        path=source,
    )


def load_run(path: str | os.PathLike[str]) -> Run:
    """Load a run file (speedbench's or the reference's JSON, or a speedbench journal `.jsonl`)."""
    source = str(path)
    if source.endswith(".jsonl"):
        from bench._summary import summarize

        header, journalled = read_journal(source)
        results = latest_by_key(journalled)
        config = header.get("config", {})
        meta = {key: value for key, value in header.items() if key not in {"type", "config", "selected_samples"}}
        summary = summarize(results)
        return Run(
            config=config,
            selected_samples=int(header.get("selected_samples", len(results))),
            results=tuple(results),
            summary=tuple(summary),
            meta=meta,
            path=source,
        )
    try:
        with open(source, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise BenchError(f"{source}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"{source}: cannot be read ({exc.__class__.__name__}: {exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BenchError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    return run_from_dict(data, source)


class Journal:
    """Append-only JSONL journal of a run: a header line, then one line per finished sample."""

    def __init__(self, path: str | os.PathLike[str], header: Mapping[str, Any], *, append: bool = False) -> None:
        """Open the journal; write the header unless appending to an existing journal."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if append:
            _drop_torn_tail(self.path)
        self._handle = open(self.path, "a" if append else "w", encoding="utf-8")
        self._last_sync = time.monotonic()
        if not append:
            self._write_line({"type": "header", "schema_version": SCHEMA_VERSION, **header})
            self.sync()

    def _write_line(self, payload: Mapping[str, Any]) -> None:
        try:
            line = json.dumps(payload, allow_nan=False)
        except ValueError:
            line = json.dumps(_finite(dict(payload)), allow_nan=False)
        self._handle.write(line + "\n")
        self._handle.flush()

    def append(self, result: SampleResult) -> None:
        """Append one finished sample and flush; fsync at most once a second."""
        line = result.to_dict()
        line["type"] = "result"
        self._write_line(line)
        if time.monotonic() - self._last_sync >= 1.0:
            self.sync()

    def sync(self) -> None:
        """Force the journal to disk."""
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._last_sync = time.monotonic()

    def close(self) -> None:
        """Sync and close the journal."""
        if not self._handle.closed:
            self.sync()
            self._handle.close()


def _drop_torn_tail(path: Path) -> None:
    """Cut a journal back to its last complete line, so appended lines never join a torn one."""
    with open(path, "rb+") as handle:
        data = handle.read()
        keep = data.rfind(b"\n") + 1
        if keep < len(data):
            handle.truncate(keep)


def read_journal(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[SampleResult]]:
    """Read a journal; a torn last line (from a crash mid-write) is ignored, other damage is an error."""
    source = str(path)
    try:
        with open(source, encoding="utf-8") as handle:
            lines = handle.read().split("\n")
    except FileNotFoundError:
        raise BenchError(f"{source}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"{source}: cannot be read ({exc})") from None
    header: dict[str, Any] | None = None
    results: list[SampleResult] = []
    last_index = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            if index == last_index:
                break
            raise BenchError(f"{source}: line {index + 1} is not valid JSON") from None
        if not isinstance(item, dict):
            raise BenchError(f"{source}: line {index + 1} is not a JSON object")
        if item.get("type") == "header":
            header = _upgrade(item, source)
        elif item.get("type") == "result":
            results.append(result_from_dict(item, f"{source}:{index + 1}"))
    if header is None:
        raise BenchError(f"{source}: not a speedbench journal (no header line)")
    return header, results


def journal_path(output: str | os.PathLike[str]) -> Path:
    """Where the journal of a run file lives: `<output>.jsonl`."""
    return Path(f"{output}.jsonl")


def latest_by_key(results: Iterable[SampleResult]) -> list[SampleResult]:
    """Keep the last result per (id, repeat), in first-seen order of keys."""
    chosen: dict[tuple[str, int], SampleResult] = {}
    for result in results:
        chosen[result.key] = result
    return list(chosen.values())
