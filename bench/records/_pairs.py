"""The `pairs.json` of a `bench --config` folder: which pair folders it holds, in order, and the report's title.

It names folders and a title, never a result: every verdict is recomputed from the pairs' run files.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from bench._errors import BenchError
from bench._types import JsonValue, is_str_list
from bench.records._layout import PAIRS_FILE
from bench.records._lock import write_text_file

PAIRS_KIND = "speedbench-pairs"
PAIRS_VERSION = 1


@dataclass(frozen=True)
class PairsRecord:
    """What a `pairs.json` says: the pairs' names (their folders), the report's title and the threshold."""

    names: tuple[str, ...]
    title: str | None
    threshold: float


def write_pairs_file(folder: str | os.PathLike[str], names: tuple[str, ...], *, title: str | None,
                     threshold: float) -> Path:
    """Write `<folder>/pairs.json`."""
    path = Path(folder) / PAIRS_FILE
    payload = {"kind": PAIRS_KIND, "version": PAIRS_VERSION, "pairs": list(names), "title": title,
               "threshold": threshold}
    write_text_file(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return path


def read_pairs_file(folder: str | os.PathLike[str]) -> PairsRecord | None:
    """The `pairs.json` of `folder` (None when there is none); a malformed one is a one-line BenchError."""
    path = Path(folder) / PAIRS_FILE
    if not path.is_file():
        return None
    try:
        data: JsonValue = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BenchError(f"{path}: unreadable ({exc})") from None
    record = data if isinstance(data, dict) else {}
    names, title, threshold = record.get("pairs"), record.get("title"), record.get("threshold")
    if (record.get("kind") != PAIRS_KIND
            or not (is_str_list(names) and names and all(name and "/" not in name and name not in (".", "..")
                                                         for name in names))
            or not (title is None or isinstance(title, str))
            or isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 < threshold < 1):
        raise BenchError(f"{path}: not a bench --config record (kind {PAIRS_KIND}, pairs, title, threshold)")
    return PairsRecord(tuple(names), title, float(threshold))


def is_pairs_folder(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a `bench --config` folder (a `pairs.json` in it)."""
    return (Path(path) / PAIRS_FILE).is_file()
