"""The history store: one schema-versioned JSON file per commit and comparison, append-only and git-friendly.

A history is a folder. Each point is the comparison of one `bench` output (one workload) at one commit on one
machine, written as `<DIR>/<machine fingerprint>/<workload>/<commit>-<source digest>.json`: two pull requests
that add points add different files and never conflict, and adding the same folder for the same commit again
names the same file (an idempotent no-op). A point holds estimates with their precision (log standard error and
degrees of freedom), never a verdict: change points are computed from the points on every read.

Format history (`schema_version` of a point file):

- 1: speedbench 0.3. `commit`, `branch`, `time`, `added_at`, `workload`, `machine` (name, fingerprint, CPU model,
  cores, engine build, model, model digest), `source` (folder, digest), `harness`, `rows` (category, metric,
  estimate, low, high at 95%, log_se, df, n).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._errors import BenchError
from bench.records._lock import open_no_follow
from bench.records._schema import finite

HISTORY_SCHEMA = "speedbench-history-point"
HISTORY_SCHEMA_VERSION = 1

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

    def to_dict(self) -> dict[str, Any]:
        """The machine as a JSON object."""
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str) -> Machine:
        """Read a point file's `machine` object."""
        try:
            return cls(name=str(data["name"]), fingerprint=str(data["fingerprint"]),
                       cpu_model=str(data.get("cpu_model", "")), cores=int(data.get("cores", 0)),
                       engine_build=str(data.get("engine_build", "")), model=str(data.get("model", "")),
                       model_digest=str(data.get("model_digest", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise BenchError(f"{source}: machine object is malformed ({exc})") from None


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


@dataclass(frozen=True, slots=True)
class PointRow:
    """One category's metric at one point: the estimate, its 95% interval and its precision on the log scale."""

    category: str
    metric: str
    estimate: float
    low: float
    high: float
    log_se: float
    df: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        """The row as a JSON object (non-finite numbers as null)."""
        return finite({name: getattr(self, name) for name in self.__slots__})


def _float(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


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
    rows: tuple[PointRow, ...]
    path: Path | None = None

    @property
    def file_name(self) -> str:
        """`<commit>-<source digest>.json`: the same folder for the same commit names the same file."""
        return f"{self.commit}-{self.source_digest[:12]}.json"

    def relative_path(self) -> Path:
        """Where the point lives under a history folder."""
        return Path(self.machine.fingerprint) / safe_name(self.workload) / self.file_name

    def to_dict(self) -> dict[str, Any]:
        """The point file's JSON object."""
        return {
            "schema": HISTORY_SCHEMA, "schema_version": HISTORY_SCHEMA_VERSION, "commit": self.commit,
            "branch": self.branch, "time": self.time, "added_at": self.added_at, "workload": self.workload,
            "machine": self.machine.to_dict(), "source": {"folder": self.source_folder, "digest": self.source_digest},
            "harness": self.harness, "rows": [row.to_dict() for row in self.rows],
        }


def safe_name(text: str) -> str:
    """A file-name-safe form of a label (workload names become folder names)."""
    return _SAFE.sub("_", text).strip("._") or "workload"


def check_commit(commit: str) -> str:
    """A commit id as given (a hash or a tag-like name of 4-64 safe characters), or a one-line BenchError."""
    if not _COMMIT.match(commit or ""):
        raise BenchError(f"--commit {commit!r}: not a commit id (4-64 letters, digits, '.', '_' or '-')")
    return commit


def point_from_dict(data: Any, source: str) -> HistoryPoint:
    """A point file's object of any known version, as the current one (newer versions refused)."""
    if not isinstance(data, Mapping) or data.get("schema") != HISTORY_SCHEMA:
        raise BenchError(f"{source}: not a speedbench history point")
    version = data.get("schema_version")
    if not isinstance(version, int) or version < 1:
        raise BenchError(f"{source}: schema_version {version!r} is not a known history version")
    if version > HISTORY_SCHEMA_VERSION:
        raise BenchError(f"{source}: written by a newer speedbench (history schema_version {version} > "
                         f"{HISTORY_SCHEMA_VERSION}); upgrade speedbench")
    try:
        rows = tuple(PointRow(category=str(row["category"]), metric=str(row["metric"]),
                              estimate=_float(row.get("estimate")), low=_float(row.get("low")),
                              high=_float(row.get("high")), log_se=_float(row.get("log_se")),
                              df=_float(row.get("df")), n=int(row.get("n") or 0))
                     for row in data["rows"])
        source_info = data.get("source") or {}
        return HistoryPoint(
            commit=check_commit(str(data["commit"])), branch=data.get("branch"), time=str(data["time"]),
            added_at=str(data.get("added_at") or data["time"]), workload=str(data["workload"]),
            machine=Machine.from_mapping(data["machine"], source), source_folder=str(source_info.get("folder", "")),
            source_digest=str(source_info.get("digest", "")), harness=str(data.get("harness", "")), rows=rows,
            path=Path(source),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BenchError(f"{source}: malformed history point ({exc})") from None


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
        if target.is_symlink():
            raise BenchError(f"{target}: is a symbolic link; speedbench does not write through one")
        planned.append((point, target, target.exists()))
    written = []
    for point, target, exists in planned:
        if not exists:
            target.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps(point.to_dict(), indent=1, sort_keys=True, allow_nan=False) + "\n"
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
    for path in sorted(root.glob("*/*/*.json")):
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise BenchError(f"{path}: not a readable JSON history point ({exc})") from None
        points.append(point_from_dict(data, str(path)))
    return points


def digest_files(files: Iterable[Path]) -> str:
    """The sha256 over the bytes of the files (in the given order): a comparison's source digest."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()
