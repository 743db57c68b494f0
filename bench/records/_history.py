"""The history store: one schema-versioned JSON file per commit and comparison, append-only and git-friendly.

A history is a folder. Each point is the comparison of one `bench` output (one workload) at one commit on one
machine, written as `<DIR>/<machine fingerprint>/<workload>/<commit>-<source digest>.json`: two pull requests
that add points add different files and never conflict, and adding the same folder for the same commit again
names the same file (an idempotent no-op). A point holds estimates with their precision (log standard error and
degrees of freedom), never a verdict: change points are computed from the points on every read.

Format history (`schema_version` of a point file):

- 1: speedbench 0.3. `commit`, `branch`, `time`, `added_at`, `workload`, `machine` (name, fingerprint, CPU model,
  cores, engine build, model, model digest), `source` (folder, digest), `harness`, `columns` and `rows` (one list
  per row: category, metric, estimate, low, high at 95%, log_se, df, n; a missing number is null).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bench._errors import BenchError
from bench._inputs import read_input
from bench._types import JsonMapping, JsonObject, JsonValue, is_str_list
from bench.records._lock import open_no_follow

HISTORY_SCHEMA = "speedbench-history-point"
HISTORY_SCHEMA_VERSION = 1

MAX_POINT_BYTES = 16 * 2**20
"""The largest history point file read: a point of thousands of categories is a few hundred KiB."""

HISTORY_METRICS = ("decode", "latency", "accept_rate", "drafted_share")
"""The metrics a point records per category: decode and latency speedups, accept rate, drafted share."""

_COMMIT = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._-]{3,63}$")
_SAFE = re.compile(r"[^0-9A-Za-z._-]+")


@dataclass(frozen=True, slots=True)
class Machine:
    """Where a point was measured: a name for people and a fingerprint that keys the series.

    The fingerprint digests the CPU model, the core count, the engine build and the model digest, so points
    from different machines, engines or models are never one series, and the same machine keeps its key
    across runs (nothing in it changes from run to run: no host name, kernel or time).
    """

    name: str
    fingerprint: str
    cpu_model: str
    cores: int
    engine_build: str
    model: str
    model_digest: str

    def to_dict(self) -> JsonObject:
        """The machine as a JSON object."""
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_mapping(cls, data: JsonValue | JsonMapping, source: str) -> Machine:
        """Read a point file's `machine` object."""
        try:
            if not isinstance(data, Mapping):
                raise TypeError("not an object")
            return cls(name=str(data["name"]), fingerprint=str(data["fingerprint"]),
                       cpu_model=str(data.get("cpu_model", "")), cores=_integer(data.get("cores", 0), "cores"),
                       engine_build=str(data.get("engine_build", "")), model=str(data.get("model", "")),
                       model_digest=str(data.get("model_digest", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise BenchError(f"{source}: machine object is malformed ({exc})") from None


def _integer(value: JsonValue, name: str) -> int:
    """`int(value)` of a number or a numeric text; TypeError naming `name` for any other JSON value."""
    if isinstance(value, int | float | str):
        return int(value)
    raise TypeError(f"{name} {str(value)[:40]!r} is not a number")


def machine_fingerprint(cpu_model: str, cores: int, engine_build: str, model_digest: str) -> str:
    """A 12-hex-digit key of what makes two measurements one series: CPU model, cores, engine build, model."""
    text = json.dumps([cpu_model.strip(), int(cores), engine_build.strip(), model_digest.strip()])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def cpu_model() -> str:
    """This machine's CPU model as /proc/cpuinfo names it (the platform's processor string elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "unknown CPU"


class PointRow(NamedTuple):
    """One category's metric at one point: the estimate, its 95% interval and its precision on the log scale."""

    category: str
    metric: str
    estimate: float
    low: float
    high: float
    log_se: float
    df: float
    n: int



ROW_COLUMNS = PointRow._fields
"""The columns of a point file's `rows`: an object of one list per column, every list one value per row."""
_NUMBERS = ROW_COLUMNS[2:]


@dataclass(frozen=True, slots=True, eq=False)
class PointTable:
    """A point's rows by column (what a point file stores and the analysis reads without a row object each)."""

    category: tuple[str, ...]
    metric: tuple[str, ...]
    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    log_se: np.ndarray
    df: np.ndarray
    n: np.ndarray

    def __len__(self) -> int:
        """The number of rows."""
        return len(self.category)

    @property
    def rows(self) -> tuple[PointRow, ...]:
        """The table as PointRows."""
        columns = [self.category, self.metric, *(getattr(self, name).tolist() for name in _NUMBERS)]
        return tuple(map(PointRow._make, zip(*columns, strict=True)))

    def to_dict(self) -> JsonObject:
        """The columns as a point file's `rows` object (non-finite numbers as null)."""
        return {"category": [*self.category], "metric": [*self.metric],
                **{name: [_significant(value) for value in getattr(self, name).tolist()] for name in _NUMBERS}}


def _significant(value: float) -> float | int | None:
    """A number as a point file stores it: 7 significant digits (far below any estimate's precision), null for
    NaN or infinity."""
    if isinstance(value, int):
        return value
    return float(f"{value:.7g}") if math.isfinite(value) else None


def point_table(rows: Sequence[PointRow]) -> PointTable:
    """PointRows as a table."""
    numbers = {name: np.array([getattr(row, name) for row in rows], dtype=float) for name in _NUMBERS[:-1]}
    return PointTable(category=tuple(row.category for row in rows), metric=tuple(row.metric for row in rows),
                      **numbers, n=np.array([row.n for row in rows], dtype=int))


def _table(columns: JsonValue) -> PointTable:
    """A point file's columnar rows as a table (null numbers as NaN); ValueError when malformed."""
    if not isinstance(columns, Mapping) or set(columns) != set(ROW_COLUMNS):
        raise ValueError(f"rows must be an object of the columns {', '.join(ROW_COLUMNS)}")
    lists = {name: column for name in ROW_COLUMNS if isinstance(column := columns[name], list)}
    count = len(lists.get("category", ()))
    if len(lists) != len(ROW_COLUMNS) or any(len(column) != count for column in lists.values()):
        raise ValueError("every column of rows must be a list of one value per row")
    category, metric = lists["category"], lists["metric"]
    if not (is_str_list(category) and is_str_list(metric)):
        raise ValueError("category and metric must be strings")
    for name in _NUMBERS:
        for value in lists[name]:
            _check_number(name, value)
    numbers = np.array([lists[name] for name in _NUMBERS[:-1]], dtype=float).reshape(len(_NUMBERS) - 1, count)
    return PointTable(category=tuple(category), metric=tuple(metric), **dict(zip(_NUMBERS[:-1], numbers, strict=True)),
                      n=np.asarray(lists["n"], dtype=int))


_LIMITS = {"estimate": (0.0, 1e6), "low": (0.0, 1e6), "high": (0.0, 1e6), "log_se": (0.0, 100.0),
           "df": (0.0, 1e9), "n": (0, 10**9)}
"""Each number's range in a point: a speedup or a rate is not negative and far below a million, a log standard
error below 100, degrees of freedom and sample counts below a billion."""


def _check_number(name: str, value: object) -> None:
    """A point's number as a point file may hold it (null, or a finite number in its column's range), else
    ValueError naming it."""
    if value is None:
        return
    low, high = _LIMITS[name]
    integer = name == "n"
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
        raise ValueError(f"{name} {str(value)[:40]!r} is not {'an integer' if integer else 'a number'}")
    if isinstance(value, int) and len(str(abs(value))) > 15:
        raise ValueError(f"{name} is an integer of {len(str(abs(value)))} digits")
    if not math.isfinite(value) or not low <= value <= high:
        raise ValueError(f"{name} {value!r} is out of range ({low:g} to {high:g})")


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One comparison at one commit: its context, its machine and its rows."""

    commit: str
    branch: str | None
    time: str
    added_at: str
    workload: str
    machine: Machine
    source_folder: str
    source_digest: str
    harness: str
    table: PointTable
    path: str | None = None

    @property
    def rows(self) -> tuple[PointRow, ...]:
        """The point's rows (category x metric)."""
        return self.table.rows

    @property
    def file_name(self) -> str:
        """`<commit>-<source digest>.json`: the same folder for the same commit names the same file."""
        return f"{self.commit}-{self.source_digest[:12]}.json"

    def relative_path(self) -> Path:
        """Where the point lives under a history folder."""
        return Path(self.machine.fingerprint) / safe_name(self.workload) / self.file_name

    def to_dict(self) -> JsonObject:
        """The point file's JSON object."""
        return {
            "schema": HISTORY_SCHEMA, "schema_version": HISTORY_SCHEMA_VERSION, "commit": self.commit,
            "branch": self.branch, "time": self.time, "added_at": self.added_at, "workload": self.workload,
            "machine": self.machine.to_dict(), "source": {"folder": self.source_folder, "digest": self.source_digest},
            "harness": self.harness,
            "rows": self.table.to_dict(),
        }


def safe_name(text: str) -> str:
    """A file-name-safe form of a label (workload names become folder names)."""
    return _SAFE.sub("_", text).strip("._") or "workload"


def check_commit(commit: str) -> str:
    """A commit id as given (a hash or a tag-like name of 4-64 safe characters), or a one-line BenchError."""
    if not _COMMIT.match(commit or ""):
        raise BenchError(f"--commit {commit!r}: not a commit id (4-64 letters, digits, '.', '_' or '-')")
    return commit


def point_from_dict(data: JsonValue, source: str, machines: dict[str, Machine] | None = None) -> HistoryPoint:
    """A point file's object of any known version, as the current one (newer versions refused). `machines` caches
    the machines already read, by their JSON text's fingerprint and name (a history has few)."""
    if not isinstance(data, Mapping) or data.get("schema") != HISTORY_SCHEMA:
        raise BenchError(f"{source}: not a speedbench history point")
    version = data.get("schema_version")
    if not isinstance(version, int) or version < 1:
        raise BenchError(f"{source}: schema_version {version!r} is not a known history version")
    if version > HISTORY_SCHEMA_VERSION:
        raise BenchError(f"{source}: written by a newer speedbench (history schema_version {version} > "
                         f"{HISTORY_SCHEMA_VERSION}); upgrade speedbench")
    try:
        table = _table(data["rows"])
        source_info = data.get("source") or {}
        if not isinstance(source_info, Mapping):
            raise ValueError(f"source {str(source_info)[:40]!r} is not an object")
        branch = data.get("branch")
        if branch is not None and not isinstance(branch, str):
            raise ValueError(f"branch {str(branch)[:40]!r} is not a string")
        time = utc_time(data["time"], "time")
        return HistoryPoint(
            commit=check_commit(str(data["commit"])), branch=branch, time=time,
            added_at=utc_time(data.get("added_at") or data["time"], "added_at"), workload=str(data["workload"]),
            machine=_machine(data["machine"], source, machines), source_folder=str(source_info.get("folder", "")),
            source_digest=str(source_info.get("digest", "")), harness=str(data.get("harness", "")), table=table,
            path=source,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BenchError(f"{source}: malformed history point ({exc})") from None


def utc_time(text: object, name: str) -> str:
    """An ISO 8601 time as UTC seconds (`2026-12-01T00:00:00+00:00`); ValueError naming it when it is not one. A
    time without a zone is UTC. Points are ordered by it, so every reader sees the same order."""
    if not isinstance(text, str) or len(text) > 64:
        raise ValueError(f"{name} {str(text)[:40]!r} is not an ISO 8601 time")
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{name} {text!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).replace(microsecond=0).isoformat()


def _machine(data: JsonValue, source: str, machines: dict[str, Machine] | None) -> Machine:
    if machines is None or not isinstance(data, Mapping):
        return Machine.from_mapping(data, source)
    try:
        key = str(tuple(sorted(data.items())))
    except TypeError:  # keys of mixed types: read it without the cache
        return Machine.from_mapping(data, source)
    known = machines.get(key)
    if known is None:
        known = machines[key] = Machine.from_mapping(data, source)
    return known


def write_points(history: str | os.PathLike[str], points: Sequence[HistoryPoint]) -> list[tuple[Path, bool]]:
    """Add points to a history folder: each (path, written); a point already there is left as it is.

    Every point is checked before any is written, so bad input writes nothing. Files are created, never
    replaced: a history only grows.
    """
    root = Path(history)
    if root.exists() and not root.is_dir():
        raise BenchError(f"--history {root}: exists and is not a folder")
    planned = []
    for point in points:
        target = root / point.relative_path()
        for path in (target.parent.parent, target.parent, target):
            if path.is_symlink():
                raise BenchError(f"{path}: is a symbolic link; speedbench does not write through one")
        planned.append((point, target, target.exists()))
    written = []
    for point, target, exists in planned:
        if not exists:
            target.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps(point.to_dict(), sort_keys=True, allow_nan=False, separators=(",", ":")) + "\n"
            temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            with open_no_follow(temporary, "x") as handle:
                handle.write(text)
            os.replace(temporary, target)
        written.append((target, not exists))
    return written


def load_history(history: str | os.PathLike[str]) -> list[HistoryPoint]:
    """Every point of a history folder, in file order (an empty list for a folder with none yet)."""
    root = Path(history)
    if not root.exists():
        return []
    if not root.is_dir():
        raise BenchError(f"--history {root}: not a folder")
    points = []
    machines: dict[str, Machine] = {}
    for path in _point_files(str(root)):
        try:
            data = json.loads(read_input(path, limit=MAX_POINT_BYTES), parse_constant=_no_constant)
        except RecursionError:
            raise BenchError(f"{path}: not a history point (JSON nested too deeply to read)") from None
        except (OSError, ValueError) as exc:
            raise BenchError(f"{path}: not a readable JSON history point ({str(exc)[:160]})") from None
        points.append(point_from_dict(data, path, machines))
    return points


def _folder(entry: os.DirEntry[str]) -> bool:
    """Whether a history's entry is a machine or workload folder; a link to one is refused (a one-line BenchError):
    a history is written only inside its own folder, and read as written."""
    if entry.is_symlink():
        raise BenchError(f"{entry.path}: is a symbolic link; a history's folders are never links")
    return entry.is_dir(follow_symlinks=False)


def _no_constant(name: str) -> None:
    """JSON's non-standard constants (Infinity, NaN) are no number a point file holds."""
    raise ValueError(f"{name} is not a number a history point holds")


def _point_files(root: str) -> list[str]:
    """Every `<root>/<machine>/<workload>/*.json`, sorted (temporary files of an unfinished write left out)."""
    found = []
    for machine in sorted(entry.path for entry in os.scandir(root) if _folder(entry)):
        for workload in sorted(entry.path for entry in os.scandir(machine) if _folder(entry)):
            found += sorted(entry.path for entry in os.scandir(workload)
                            if entry.name.endswith(".json") and not entry.name.startswith(".")
                            and not entry.is_dir(follow_symlinks=False))
    return found


def digest_files(files: Iterable[Path]) -> str:
    """The sha256 over the bytes of the files (in the given order): a comparison's source digest."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        digest.update(read_input(path))
    return digest.hexdigest()
